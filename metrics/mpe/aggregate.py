"""Duplex-MPE aggregation: window verdicts -> rates with Wilson intervals, per condition and label, and the paired
explicit-vs-implicit test (docs/benchmarks/mpe.md). Pure functions of stored measurements and thresholds: `duplex-eval
score`, the evaluate module and the transcript-conditioned reference all use them, so every path gives one number.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from metrics.mpe.verdicts import METRICS, Thresholds, outcomes
from metrics.stats import mcnemar_exact, summarise

LABEL_GROUPS = {"T": ("fresh_onset_rate", "response_presence", "answer_accuracy"),
                "N1": ("silence_preservation",), "N2": ("silence_preservation",),
                "N3": ("silence_preservation",), "N4": ("window_response", "answering_window_yield")}


def aggregate(measurements: list[dict[str, Any]], th: Thresholds) -> dict[str, Any]:
    per: dict[tuple[str, str, str], list[bool]] = defaultdict(list)  # (condition, label, metric)
    for m in measurements:
        for metric, ok in outcomes(m, th).items():
            per[(m["condition"], m["label"], metric)].append(ok)

    def pick(cond: str | None = None, label: str | None = None) -> dict[str, Any]:
        return {metric: summarise([ok for (c, lab, mt), oks in per.items() for ok in oks
                                   if mt == metric and cond in (None, c) and label in (None, lab)])
                for metric in METRICS}

    conditions = sorted({m["condition"] for m in measurements})
    by_label = {lab: {mt: pick(label=lab)[mt] for mt in metrics} for lab, metrics in LABEL_GROUPS.items()}
    return {"scores": pick(), "by_condition": {c: pick(cond=c) for c in conditions}, "by_label": by_label,
            "paired": paired_tests(measurements, th)}


def paired_summary(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """(explicit, implicit) outcomes of complete pairs -> rate difference and exact McNemar p."""
    b = sum(1 for e, i in pairs if e and not i)
    c = sum(1 for e, i in pairs if i and not e)
    n = len(pairs)
    return {"n_pairs": n, "explicit_only": b, "implicit_only": c,
            "difference": (sum(e for e, _ in pairs) - sum(i for _, i in pairs)) / n if n else None,
            "mcnemar_p": mcnemar_exact(b, c) if n else None}


def paired_tests(measurements: list[dict[str, Any]], th: Thresholds) -> dict[str, Any]:
    """Explicit vs implicit on the same scenario: rate difference and exact McNemar on discordant pairs."""
    by_pair: dict[str, dict[str, dict[str, bool]]] = defaultdict(dict)
    for m in measurements:
        if m["kind"] == "T":
            by_pair[m["pair_id"]][m["condition"]] = outcomes(m, th)
    out: dict[str, Any] = {}
    for metric in ("response_presence", "fresh_onset_rate"):
        out[metric] = paired_summary([(p["explicit"][metric], p["implicit"][metric]) for p in by_pair.values()
                                      if "explicit" in p and "implicit" in p])
    return out


