"""Duplex-MPE's text tables: overall, per condition, and the paired explicit-vs-implicit test per run."""

from __future__ import annotations

from typing import Any

from metrics.mpe.verdicts import METRICS, Thresholds, outcomes
from metrics.tables import side_by_side

REPORTED_ONLY = ("response_presence", "window_response")  # shown for coverage, not scored capabilities
CONDITIONS = ("explicit", "implicit")


def paired_line(result: dict[str, Any]) -> str:
    p = result["paired"]["response_presence"]
    if not p["n_pairs"]:
        return "paired explicit-implicit response presence: no complete pairs"
    return (f"paired explicit-implicit response presence: diff={p['difference']:+.3f} over {p['n_pairs']} pairs "
            f"(explicit-only {p['explicit_only']}, implicit-only {p['implicit_only']}, "
            f"exact McNemar p={p['mcnemar_p']:.3g})")


def tables(results: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(title, text) sections for one or more runs side by side (value k/n [Wilson 95% CI])."""
    sections = [("overall", side_by_side(results, METRICS, REPORTED_ONLY))]
    for cond in CONDITIONS:
        if any(cond in r["by_condition"] for r in results.values()):
            sections.append((cond, side_by_side(results, METRICS, REPORTED_ONLY, "by_condition", cond)))
    sections.append(("paired", "\n".join(f"{name}: {paired_line(r)}" for name, r in results.items())))
    return sections


def plot_windows(measurements: list[dict[str, Any]], result: dict[str, Any]
                 ) -> list[tuple[float, float, bool, list[list[float]]]]:
    """Each scored window of one episode as (start, end, all verdicts ok, model spans) under the result's
    thresholds: T's onset window, an N1-N3 turn's window, an N4 answering window through N4R."""
    th = Thresholds(**result["thresholds"])
    out = []
    for m in measurements:
        if m.get("failed"):
            continue
        if m["kind"] == "T":
            a, b = m["t_end_s"], m["t_end_s"] + th.t_onset_window_s
        elif m["kind"] == "silence":
            a, b = m["window"]
        else:
            a, b = m["q_end_s"], m["r_end_s"]
        out.append((a, b, all(outcomes(m, th).values()), m.get("response_spans", []) + m.get("spans", [])))
    return out
