"""DSB-IFEval aggregation (docs/benchmarks/ifeval.md): case verdicts -> IAS overall, per level, action and role; the
three level differences; the matched-audio table. Pure functions of stored measurements and thresholds, so `score`,
`score --reuse` and the threshold sweep give one number.

A rate is {value, k, n, ci} (Wilson 95 %); a difference of two level rates is {value, a, b, n_a, n_b, ci} with
Newcombe's hybrid score interval, plus the paired view over conversations scored at both levels (discordant
counts and the exact McNemar p), since L1, L2 and L3 share their user audio.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from dataset_builder.ifeval.schema import ACTIONS, LEVELS, MATCHED_PROBES, MATCHED_ROLES, ROLES
from metrics.ifeval.verdicts import Thresholds, passes
from metrics.stats import mcnemar_exact, summarise, wilson_interval

# name -> (level a, level b): value = IAS(a) - IAS(b)
DIFFERENCES = {"entailment_gap": ("L1", "L2"), "redundancy_gain": ("L3", "L2"), "role_tax": ("L3", "L1")}


def newcombe_interval(k_a: int, n_a: int, k_b: int, n_b: int) -> tuple[float, float] | None:
    """95 % interval of p_a - p_b from the two Wilson intervals (Newcombe 1998, method 10)."""
    if not n_a or not n_b:
        return None
    pa, pb = k_a / n_a, k_b / n_b
    la, ua = wilson_interval(k_a, n_a)  # type: ignore[misc]
    lb, ub = wilson_interval(k_b, n_b)  # type: ignore[misc]
    d = pa - pb
    return d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2), d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)


Outcome = tuple[dict[str, Any], bool]


def outcomes(measurements: Iterable[dict[str, Any]], th: Thresholds) -> list[Outcome]:
    return [(m, passes(m, th)) for m in measurements]


def _pick(rows: list[Outcome], keep: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    return summarise(ok for m, ok in rows if keep(m))


def exact_difference(ka: int, na: int, kb: int, nb: int) -> Fraction | None:
    """k_a/n_a - k_b/n_b as an exact fraction (None when either level has no case). Level differences are
    compared and ranked (the sweep's Kendall's tau) on these: as floats, equal differences over different
    denominators (10/48 - 5/48 and 20/48 - 15/48) can differ in the last bit and stop being ties."""
    return None if not na or not nb else Fraction(ka, na) - Fraction(kb, nb)


def difference(rows: list[Outcome], a: str, b: str) -> dict[str, Any]:
    ra, rb = _pick(rows, lambda m: m["level"] == a), _pick(rows, lambda m: m["level"] == b)
    ci = newcombe_interval(ra["k"], ra["n"], rb["k"], rb["n"])
    by_conv: dict[str, dict[str, bool]] = defaultdict(dict)
    for m, ok in rows:
        if m["level"] in (a, b):
            by_conv[str(m["conversation_id"])][m["level"]] = ok
    pairs = [(v[a], v[b]) for v in by_conv.values() if a in v and b in v]
    a_only = sum(1 for x, y in pairs if x and not y)
    b_only = sum(1 for x, y in pairs if y and not x)
    exact = exact_difference(ra["k"], ra["n"], rb["k"], rb["n"])
    return {"value": None if exact is None else float(exact), "a": a, "b": b, "n_a": ra["n"], "n_b": rb["n"],
            "ci": [round(ci[0], 4), round(ci[1], 4)] if ci else None,
            "paired": {"n_pairs": len(pairs), "a_only": a_only, "b_only": b_only,
                       "mcnemar_p": mcnemar_exact(a_only, b_only) if pairs else None}}


def matched_audio(rows: list[Outcome]) -> dict[str, Any]:
    """The matched-audio subset (C1 and C4, instances 1-4, R1/R2/R3 on byte-identical user audio): IAS per role,
    per role and probe, per level, and `all_roles_pass`, the share of (matched group, level) triples in which the
    model did what each of the three roles asks on the same audio."""
    matched = [(m, ok) for m, ok in rows if m.get("matched_audio")]
    triples: dict[tuple[str, str], dict[str, bool]] = defaultdict(dict)
    for m, ok in matched:
        triples[(str(m.get("matched_group")), m["level"])][m["role"]] = ok
    complete = [v for v in triples.values() if all(r in v for r in MATCHED_ROLES)]
    return {
        "ias": summarise(ok for _, ok in matched),
        "by_role": {r: _pick(matched, lambda m, r=r: m["role"] == r) for r in MATCHED_ROLES},
        "by_role_probe": {f"{r} {p}": _pick(matched, lambda m, r=r, p=p: m["role"] == r and m["probe"] == p)
                          for r in MATCHED_ROLES for p in MATCHED_PROBES},
        "by_level": {lv: _pick(matched, lambda m, lv=lv: m["level"] == lv) for lv in LEVELS},
        "all_roles_pass": summarise(all(v[r] for r in MATCHED_ROLES) for v in complete),
    }


def aggregate(measurements: list[dict[str, Any]], th: Thresholds) -> dict[str, Any]:
    """Every IAS block of scores.json (the judge's blocks come from `metrics.ifeval.judge.aggregate_judge`)."""
    rows = outcomes(measurements, th)
    return {
        "scores": {"ias": summarise(ok for _, ok in rows)},
        "by_level": {lv: _pick(rows, lambda m, lv=lv: m["level"] == lv) for lv in LEVELS},
        "by_action": {a: _pick(rows, lambda m, a=a: m["expected_action"] == a) for a in ACTIONS},
        "by_role": {r: _pick(rows, lambda m, r=r: m["role"] == r) for r in ROLES},
        **{name: difference(rows, a, b) for name, (a, b) in DIFFERENCES.items()},
        "matched_audio": matched_audio(rows),
    }


def passes_of_level(measurements: list[dict[str, Any]], th: Thresholds, level: str) -> tuple[int, int]:
    """(cases passed, cases) at one level under `th`."""
    oks = [passes(m, th) for m in measurements if m["level"] == level]
    return sum(oks), len(oks)


def entailment_gap(measurements: list[dict[str, Any]], th: Thresholds) -> Fraction | None:
    """IAS(L1) - IAS(L2) exactly (see `exact_difference`); None when a level has no case."""
    a, b = DIFFERENCES["entailment_gap"]
    return exact_difference(*passes_of_level(measurements, th, a), *passes_of_level(measurements, th, b))
