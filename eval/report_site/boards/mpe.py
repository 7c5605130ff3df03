"""Duplex-MPE's report pieces: its leaderboard and breakdowns (by condition, label, the paired
explicit/implicit test), and the detail behind a window's verdict."""

from __future__ import annotations

from typing import Any

from eval.report_site.boards import grouped_table, metric_table, run_cell
from eval.report_site.collect import RunView
from eval.report_site.model import Cell, Table, dash, name, pvalue, rate


def boards(runs: list[RunView]) -> list[Table]:
    from metrics.mpe.tables import REPORTED_ONLY
    from metrics.mpe.verdicts import METRICS

    headline = [m for m in METRICS if m not in REPORTED_ONLY]
    cols = [(m, m) for m in headline] + [(f"{m} (reported)", m) for m in REPORTED_ONLY]
    board = metric_table("mpe-leaderboard", "Duplex-MPE leaderboard", runs, cols,
                         lambda r, m: r["scores"].get(m), failed=True,
                         note="value [Wilson 95% CI] k/n; '(reported)' metrics are shown for coverage, not scored "
                              "capabilities.")
    board.columns.insert(-1, "paired explicit−implicit (response presence)")
    for run, row in zip(runs, board.rows, strict=True):
        row.insert(-1, _paired(run.result.get("paired", {}).get("response_presence")))
    tables = [board]
    tables.append(grouped_table("mpe-condition", "Duplex-MPE by condition", runs, "by_condition", "condition",
                                list(METRICS), "value [Wilson 95% CI] k/n per condition."))
    labels = Table("mpe-label", "Duplex-MPE by label", ["run", "label", "metric", "value"], n_keys=3,
                   note="Each window label enters the metrics of its kind: T the onset and answer metrics, N1-N3 "
                        "silence preservation, N4 the answering-window metrics.")
    for run in runs:
        for label, block in (run.result.get("by_label") or {}).items():
            for metric, entry in block.items():
                labels.add([run_cell(run), name(label), name(metric), rate(entry)])
    tables.append(labels)
    paired = Table("mpe-paired", "Duplex-MPE paired explicit vs implicit (same conversation, exact McNemar)",
                   ["run", "metric", "pairs", "explicit only", "implicit only", "difference", "McNemar p"], n_keys=2)
    for run in runs:
        for metric, p in (run.result.get("paired") or {}).items():
            paired.add([run_cell(run), name(metric), Cell(str(p["n_pairs"]), float(p["n_pairs"])),
                        Cell(str(p["explicit_only"]), float(p["explicit_only"])),
                        Cell(str(p["implicit_only"]), float(p["implicit_only"])),
                        Cell(f"{p['difference']:+.3f}", float(p["difference"])) if p.get("n_pairs") else dash(),
                        pvalue(p.get("mcnemar_p")) if p.get("n_pairs") else dash("no complete pairs")])
    tables.append(paired)
    return tables


def _paired(p: dict[str, Any] | None) -> Cell:
    if not p or not p.get("n_pairs"):
        return dash("no complete explicit/implicit pairs")
    return Cell(f"{p['difference']:+.3f}", float(p["difference"]), "",
                f"McNemar p={p['mcnemar_p']:.3g} ({p['n_pairs']} pairs)",
                f"explicit only {p['explicit_only']}, implicit only {p['implicit_only']}")


def window_detail(m: dict[str, Any], result: dict[str, Any]) -> tuple[str, dict[str, bool]]:
    """Why the window failed, read off its measurement, and each metric's outcome under the thresholds the scores
    were computed with (the report shows one verdict per metric: answer_accuracy is the judged answer, where a
    response was present)."""
    from metrics.mpe.verdicts import Thresholds, outcomes

    th = Thresholds(**result["thresholds"])
    got = outcomes(m, th)
    return "; ".join(_why(m, {k for k, ok in got.items() if not ok}, th)), got


def _why(m: dict[str, Any], failed: set[str], th: Any) -> list[str]:
    """The measurement's reasons for each failed metric, in words (docs/benchmarks/mpe.md, the scores' table)."""
    out = []
    if failed & {"fresh_onset_rate", "response_presence"}:
        lat = m.get("onset_latency_s")
        out.append("already speaking when the turn ended (active_at_end): no fresh onset" if m.get("active_at_end")
                   else "no onset before the next turn" if lat is None
                   else f"onset {lat:.2f} s after the turn, past the {th.t_onset_window_s:g} s onset window")
    if "answer_accuracy" in failed:
        out.append(f"answer judged {m.get('answer_verdict') or 'unparseable'}")
    if "silence_preservation" in failed:
        out.append(f"spoke {m['speech_s']:.2f} s in a window for silence, judged {m.get('ack_verdict')} (only a "
                   "brief acknowledgement passes)")
    if "window_response" in failed:
        out.append("silent between the question's end and the redirect")
    if "answering_window_yield" in failed:
        stop = m.get("stop_latency_s")
        if m.get("active_at_r_start") and stop is not None and stop > th.yield_tolerance_s:
            out.append(f"still speaking {stop:.2f} s into the redirect, past the {th.yield_tolerance_s:g} s yield "
                       "tolerance")
        if m.get("new_onsets_in_r"):
            out.append(f"{m['new_onsets_in_r']} new onset(s) during the redirect")
    return out
