"""Leaderboards and breakdowns per benchmark, as `Table`s built from the scores files alone: each run is a row,
each number keeps the interval and count its scorer gave it (Wilson for rates, Newcombe for level differences,
Student-t for M3's means), and the paired tests sit beside the numbers they test.

A benchmark without its own builder here still gets a leaderboard: every `{value, n, ...}` entry of its
`scores` block, one column each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eval.report_site.collect import RunView
from eval.report_site.model import Cell, Table, dash, difference, mean, name, pvalue, rate

Builder = Callable[[list[RunView]], list[Table]]


def _failed(result: dict[str, Any]) -> Cell:
    from metrics.tables import failed_cell

    n = int(result.get("n_failed") or 0)
    return Cell(failed_cell(result), float(n))


def _run(run: RunView) -> Cell:
    return name(run.name, href=f"#run-{run.slug}")


def _metric_table(key: str, title: str, runs: list[RunView], metrics: list[tuple[str, str]],
                  get: Callable[[dict[str, Any], str], Any], cell: Callable[[Any], Cell] = rate,
                  note: str = "", failed: bool = False) -> Table:
    cols = ["run", *[label for label, _ in metrics]] + (["failed episodes"] if failed else [])
    t = Table(key, title, cols, note=note)
    for run in runs:
        row = [_run(run)]
        for _, metric in metrics:
            try:
                row.append(cell(get(run.result, metric)))
            except (KeyError, TypeError):
                row.append(dash("not in these scores"))
        t.add(row + ([_failed(run.result)] if failed else []))
    return t


def _grouped_table(key: str, title: str, runs: list[RunView], section: str, group_name: str,
                   metrics: list[str], note: str = "") -> Table:
    """Rows = (run, group) for a `{group: {metric: entry}}` block (MPE's by_condition)."""
    t = Table(key, title, ["run", group_name, *metrics], note=note, n_keys=2)
    for run in runs:
        for group, block in (run.result.get(section) or {}).items():
            t.add([_run(run), name(group), *[rate(block.get(m)) for m in metrics]])
    return t


# ---- Duplex-MPE ---------------------------------------------------------------------------------------------

def mpe(runs: list[RunView]) -> list[Table]:
    from metrics.mpe.tables import REPORTED_ONLY
    from metrics.mpe.verdicts import METRICS

    headline = [m for m in METRICS if m not in REPORTED_ONLY]
    cols = [(m, m) for m in headline] + [(f"{m} (reported)", m) for m in REPORTED_ONLY]
    board = _metric_table("mpe-leaderboard", "Duplex-MPE leaderboard", runs, cols,
                          lambda r, m: r["scores"].get(m), failed=True,
                          note="value [Wilson 95% CI] k/n; '(reported)' metrics are shown for coverage, not scored "
                               "capabilities.")
    board.columns.insert(-1, "paired explicit−implicit (response presence)")
    for run, row in zip(runs, board.rows, strict=True):
        row.insert(-1, _paired(run.result.get("paired", {}).get("response_presence")))
    tables = [board]
    tables.append(_grouped_table("mpe-condition", "Duplex-MPE by condition", runs, "by_condition", "condition",
                                 list(METRICS), "value [Wilson 95% CI] k/n per condition."))
    labels = Table("mpe-label", "Duplex-MPE by label", ["run", "label", "metric", "value"], n_keys=3,
                   note="Each window label enters the metrics of its kind: T the onset and answer metrics, N1-N3 "
                        "silence preservation, N4 the answering-window metrics.")
    for run in runs:
        for label, block in (run.result.get("by_label") or {}).items():
            for metric, entry in block.items():
                labels.add([_run(run), name(label), name(metric), rate(entry)])
    tables.append(labels)
    paired = Table("mpe-paired", "Duplex-MPE paired explicit vs implicit (same conversation, exact McNemar)",
                   ["run", "metric", "pairs", "explicit only", "implicit only", "difference", "McNemar p"], n_keys=2)
    for run in runs:
        for metric, p in (run.result.get("paired") or {}).items():
            paired.add([_run(run), name(metric), Cell(str(p["n_pairs"]), float(p["n_pairs"])),
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


# ---- DSB-IFEval ---------------------------------------------------------------------------------------------

def ifeval(runs: list[RunView]) -> list[Table]:
    from dataset_builder.ifeval.schema import ACTIONS, LEVELS, MATCHED_PROBES, MATCHED_ROLES, ROLES
    from metrics.ifeval.aggregate import DIFFERENCES
    from metrics.ifeval.tables import pas_cell

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
        board.add([_run(run), *cells, pas(r.get("pas", {})), _failed(r)])
    tables = [board]
    tables.append(_metric_table("ifeval-level", "DSB-IFEval IAS by level", runs, [(lv, lv) for lv in LEVELS],
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
            diffs.add([_run(run), name(key), difference(d), name(f"{a} vs {b}"),
                       Cell(str(p.get("n_pairs", 0)), float(p.get("n_pairs", 0))),
                       Cell(str(p.get("a_only", 0)), float(p.get("a_only", 0))),
                       Cell(str(p.get("b_only", 0)), float(p.get("b_only", 0))), pvalue(p.get("mcnemar_p"))])
    tables.append(diffs)
    tables.append(_metric_table("ifeval-action", "DSB-IFEval IAS by action", runs, [(a, a) for a in ACTIONS],
                                lambda r, k: r["by_action"].get(k)))
    tables.append(_metric_table("ifeval-role", "DSB-IFEval IAS by role", runs, [(ro, ro) for ro in ROLES],
                                lambda r, k: r["by_role"].get(k)))
    keys = [f"{ro} {p}" for ro in MATCHED_ROLES for p in MATCHED_PROBES]
    tables.append(_metric_table("ifeval-matched", "DSB-IFEval matched audio (R1/R2/R3 on the same user audio)",
                                runs, [(k, k) for k in keys], lambda r, k: r["matched_audio"]["by_role_probe"].get(k)))
    return tables


# ---- M3-DuplexBench -----------------------------------------------------------------------------------------

def m3(runs: list[RunView]) -> list[Table]:
    from dataset_builder.m3.schema import CONDITIONS
    from metrics.m3.aggregate import KEYS
    from metrics.m3.tables import HEADERS, REPRESENTATIVE, lang_domains

    heads = [HEADERS[k] for k in KEYS]
    board = Table("m3-leaderboard", f"M3-DuplexBench leaderboard ({REPRESENTATIVE})",
                  ["run", "language", "domain", *heads], n_keys=3,
                  note="The paper's representative row: the mean of the None and Full values (Full alone where "
                       "None has none; none without Full). ↑ higher is better, ↓ lower. No interval (paper §V-B); "
                       "the per-condition table below has them.")
    cond = Table("m3-condition", "M3-DuplexBench by language, domain and condition",
                 ["run", "language", "domain", "condition", *heads, "skipped"], n_keys=4,
                 note="Rates: value [Wilson 95% CI]; means (latencies in s, content scores): value ± Student-t 95% "
                      "CI; n per cell; hover a cell for undefined, censored, failed and dropped counts.")
    for run in runs:
        r = run.result
        skipped = (r.get("skipped") or {}).get("by_group", {})
        for ld in lang_domains(r):
            lang, domain = ld.split("_", 1)
            rep = (r.get("representative") or {}).get(ld)
            if rep:
                board.add([_run(run), name(lang), name(domain),
                           *[Cell(f"{rep[k]['value']:.3f}", float(rep[k]["value"]),
                                  title="from " + "&".join(rep[k].get("from", [])))
                             if rep[k].get("value") is not None else dash(rep[k].get("reason", "no value"))
                             for k in KEYS]])
            for c in CONDITIONS:
                group = f"{ld}_{c}"
                block = (r.get("scores") or {}).get(group)
                if block is None and not skipped.get(group):
                    continue
                n_skip = int(skipped.get(group, 0))
                cond.add([_run(run), name(lang), name(domain), name(c),
                          *[mean(block.get(k)) if block else dash("all skipped") for k in KEYS],
                          Cell(str(n_skip), float(n_skip))])
    return [board, cond]


# ---- any other benchmark --------------------------------------------------------------------------------------

def generic(runs: list[RunView]) -> list[Table]:
    metrics = sorted({m for run in runs for m, e in (run.result.get("scores") or {}).items()
                      if isinstance(e, dict) and "n" in e})
    title = runs[0].bench.title
    return [_metric_table(f"{runs[0].bench.name}-leaderboard", f"{title} leaderboard", runs,
                          [(m, m) for m in metrics], lambda r, m: r["scores"].get(m), cell=mean, failed=True)]


BUILDERS: dict[str, Builder] = {"mpe": mpe, "ifeval": ifeval, "m3": m3}


def tables_for(runs: list[RunView]) -> list[Table]:
    """The leaderboard (first) and breakdowns of runs of one benchmark."""
    return BUILDERS.get(runs[0].bench.name, generic)(runs)
