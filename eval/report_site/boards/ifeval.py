"""DSB-IFEval's report pieces: its leaderboard and breakdowns (by level, level differences, action, role,
matched audio), and the detail behind a window's verdict."""

from __future__ import annotations

from typing import Any

from eval.report_site.boards import failed_episodes, metric_table, run_cell
from eval.report_site.collect import RunView
from eval.report_site.model import Cell, Table, dash, difference, name, pvalue, rate


def boards(runs: list[RunView]) -> list[Table]:
    from dataset_builder.ifeval.schema import ACTIONS, LEVELS, ROLES
    from metrics.ifeval.aggregate import DIFFERENCES
    from metrics.ifeval.tables import matched_keys, pas_cell

    def pas(p: dict[str, Any]) -> Cell:
        if not p or not p.get("computed", True) or p.get("value") is None:
            return dash(pas_cell(p) if p else "not in these scores")
        return Cell(f"{p['value']:.1f}", float(p["value"]), f"[{p['ci'][0]:.1f},{p['ci'][1]:.1f}]" if p.get("ci")
                    else "", f"n={p['n']}")

    cols: list[tuple[str, str]] = [("IAS", "ias")]
    cols += [(f"{n} ({a}−{b})", n) for n, (a, b) in DIFFERENCES.items()]
    cols += [("matched IAS", "matched"), ("all three roles pass", "all_roles")]

    def get(r: dict[str, Any], key: str) -> Any:
        if key == "ias":
            return r["scores"]["ias"]
        if key == "matched":
            return r["matched_audio"]["ias"]
        if key == "all_roles":
            return r["matched_audio"]["all_roles_pass"]
        return r[key]

    board = Table("ifeval-leaderboard", "DSB-IFEval leaderboard",
                  ["run", *[c for c, _ in cols], "PAS (0-100)", "failed episodes"],
                  note="IAS: value [Wilson 95% CI] k/n. Level differences (Entailment Gap = IAS L1 − IAS L2, "
                       "Redundancy Gain, Role Tax): value [Newcombe 95% CI], with the exact McNemar test over "
                       "conversations scored at both levels (same user audio). PAS needs an LLM judge.")
    for run in runs:
        r = run.result
        cells = []
        for _, key in cols:
            try:
                cells.append(difference(get(r, key)) if key in DIFFERENCES else rate(get(r, key)))
            except (KeyError, TypeError):
                cells.append(dash("not in these scores"))
        board.add([run_cell(run), *cells, pas(r.get("pas", {})), failed_episodes(r)])
    tables = [board]
    tables.append(metric_table("ifeval-level", "DSB-IFEval IAS by level", runs, [(lv, lv) for lv in LEVELS],
                               lambda r, k: r["by_level"].get(k)))
    diffs = Table("ifeval-differences", "DSB-IFEval level differences (Entailment Gap and the others)",
                  ["run", "difference", "value", "levels", "pairs", "a only", "b only", "McNemar p"], n_keys=2,
                  note="value [Newcombe 95% CI]; paired counts over conversations scored at both levels.")
    for run in runs:
        for key, (a, b) in DIFFERENCES.items():
            d = run.result.get(key)
            if not d:
                continue
            p = d.get("paired") or {}
            diffs.add([run_cell(run), name(key), difference(d), name(f"{a} vs {b}"),
                       Cell(str(p.get("n_pairs", 0)), float(p.get("n_pairs", 0))),
                       Cell(str(p.get("a_only", 0)), float(p.get("a_only", 0))),
                       Cell(str(p.get("b_only", 0)), float(p.get("b_only", 0))), pvalue(p.get("mcnemar_p"))])
    tables.append(diffs)
    tables.append(metric_table("ifeval-action", "DSB-IFEval IAS by action", runs, [(a, a) for a in ACTIONS],
                               lambda r, k: r["by_action"].get(k)))
    tables.append(metric_table("ifeval-role", "DSB-IFEval IAS by role", runs, [(ro, ro) for ro in ROLES],
                               lambda r, k: r["by_role"].get(k)))
    keys = matched_keys(run.result for run in runs)
    tables.append(metric_table("ifeval-matched", "DSB-IFEval matched audio (R1/R2/R3 on the same user audio)",
                               runs, [(k, k) for k in keys], lambda r, k: r["matched_audio"]["by_role_probe"].get(k)))
    return tables


def window_detail(m: dict[str, Any], result: dict[str, Any]) -> str:
    """The expected action, what the VAD heard, the onset and the readback's coverage."""
    parts = [f"expected {m.get('expected_action')}", f"VAD: {m.get('vad_label')}"]
    if m.get("genuine_onset_s") is not None:
        parts.append(f"onset {m['genuine_onset_s']:.2f} s")
    if m.get("readback"):
        parts.append(f"readback coverage {m['readback'].get('coverage')}")
    return ", ".join(parts)
