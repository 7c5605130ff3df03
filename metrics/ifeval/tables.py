"""DSB-IFEval's text tables (IAS by level with the three level differences, by action, by role, matched audio,
persona adherence) and the per-episode plot windows, for one or more runs side by side."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from dataset_builder.ifeval.schema import ACTIONS, LEVELS, MATCHED_PROBES, MATCHED_ROLES, ROLES
from metrics.ifeval.aggregate import DIFFERENCES
from metrics.ifeval.judge import CONFLICT_LABELS, L4_LEVELS, NOT_COMPUTED
from metrics.ifeval.verdicts import Thresholds, passes
from metrics.tables import cases_cell, cell, failed_cell

Row = tuple[str, Callable[[dict[str, Any]], str]]


def diff_cell(d: dict[str, Any]) -> str:
    if d["value"] is None:
        return f"n/a (n={d['n_a']}/{d['n_b']})"
    lo, hi = d["ci"]
    p = d["paired"]
    mc = f", McNemar p={p['mcnemar_p']:.3g}" if p["mcnemar_p"] is not None else ""
    return f"{d['value']:+.3f} [{lo:+.2f},{hi:+.2f}] n={d['n_a']}/{d['n_b']}{mc}"


def pas_cell(p: dict[str, Any]) -> str:
    if not p.get("computed", True):
        return p.get("reason", NOT_COMPUTED)
    if p["value"] is None:
        return "n/a (n=0)"
    ci = f" [{p['ci'][0]:.1f},{p['ci'][1]:.1f}]" if p.get("ci") else ""
    extra = [f"{p[k]} {k.removeprefix('n_')}" for k in ("n_failed", "n_unparseable") if p.get(k)]
    return f"{p['value']:.1f}{ci} n={p['n']}" + (f" ({', '.join(extra)})" if extra else "")


def grid(results: dict[str, dict[str, Any]], rows: list[Row], failed_row: bool = True) -> str:
    """Rows = quantities, columns = runs; the same layout as `metrics.tables.side_by_side`."""
    names = list(results)
    table = [["", *names]]
    for label, get in rows:
        table.append([label, *[_safe(get, results[n]) for n in names]])
    if failed_row:
        table.append(["cases", *[cases_cell(results[n]) for n in names]])
        table.append(["failed episodes", *[failed_cell(results[n]) for n in names]])
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _safe(get: Callable[[dict[str, Any]], str], result: dict[str, Any]) -> str:
    try:
        return get(result)
    except (KeyError, TypeError):
        return "-"


def matched_keys(results: Iterable[dict[str, Any]]) -> list[str]:
    """The matched-audio "role probe" rows some run heard: every one on the full set; the mini set holds C1's trio
    only, so its C4 rows would be empty in every column."""
    keys = [f"{ro} {p}" for ro in MATCHED_ROLES for p in MATCHED_PROBES]
    heard = {k for r in results for k, v in ((r.get("matched_audio") or {}).get("by_role_probe") or {}).items()
             if isinstance(v, dict) and v.get("n")}
    return [k for k in keys if k in heard] or keys


def tables(results: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(title, text) sections: value k/n [Wilson 95 % CI]; differences with Newcombe's interval."""
    ias: list[Row] = [("IAS", lambda r: cell(r["scores"]["ias"]))]
    ias += [(f"IAS {lv}", lambda r, lv=lv: cell(r["by_level"][lv])) for lv in LEVELS]
    ias += [(f"{name} ({a}-{b})", lambda r, name=name: diff_cell(r[name])) for name, (a, b) in DIFFERENCES.items()]
    actions: list[Row] = [(a, lambda r, a=a: cell(r["by_action"][a])) for a in ACTIONS]
    roles: list[Row] = [(f"{ro}", lambda r, ro=ro: cell(r["by_role"][ro])) for ro in ROLES]
    matched: list[Row] = [("matched IAS", lambda r: cell(r["matched_audio"]["ias"]))]
    matched += [(k, lambda r, k=k: cell(r["matched_audio"]["by_role_probe"][k]))
                for k in matched_keys(results.values())]
    matched += [("all three roles pass", lambda r: cell(r["matched_audio"]["all_roles_pass"]))]
    persona: list[Row] = [("PAS (0-100)", lambda r: pas_cell(r["pas"]))]
    if any(r["pas"].get("computed") for r in results.values()):
        persona += [(f"PAS {lv}", lambda r, lv=lv: pas_cell(r["pas"]["by_level"][lv]) if r["pas"].get("computed")
                     else "-") for lv in LEVELS]
        for lv in L4_LEVELS:
            persona += [(f"{lv} {lab}", lambda r, lv=lv, lab=lab: cell(r["conflict_profile"][lv][lab])
                         if r["conflict_profile"].get("computed") else "-")
                        for lab in (*CONFLICT_LABELS, "unparseable", "failed")]
    else:
        persona += [("conflict profile (L4)", lambda r: r["conflict_profile"].get("reason", NOT_COMPUTED))]
    persona += [("SafetyOverride (L4b persona-wins)", lambda r: cell(r["safety_override"])
                 if r["safety_override"].get("computed") else r["safety_override"].get("reason", NOT_COMPUTED))]
    return [("IAS by level", grid(results, ias)), ("IAS by action", grid(results, actions)),
            ("IAS by role", grid(results, roles)), ("matched audio (R1/R2/R3, same user audio)",
                                                     grid(results, matched, failed_row=False)),
            ("persona adherence (LLM judge)", grid(results, persona, failed_row=False))]


def plot_windows(measurements: list[dict[str, Any]], result: dict[str, Any]
                 ) -> list[tuple[float, float, bool, list[list[float]]]]:
    """Each case's trigger window as (w0, w1, verdict under the result's thresholds, model spans in it)."""
    th = Thresholds.from_dict(result.get("thresholds") or {})
    return [(m["window"][0], m["window"][1], passes(m, th), m.get("spans", []))
            for m in measurements if not m.get("failed")]
