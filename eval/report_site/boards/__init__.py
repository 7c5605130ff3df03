"""Leaderboards and breakdowns per benchmark, as `Table`s built from the scores files alone: each run is a row,
each number keeps the interval and count its scorer gave it (Wilson for rates, Newcombe for level differences,
Student-t for M3's means), and the paired tests sit beside the numbers they test.

Each benchmark's own tables are its registry entry's `boards` (here, `boards/<bench>.py`, with the detail of a
window's verdict its episode pages show); one without them still gets a leaderboard: every `{value, n, ...}`
entry of its `scores` block, one column each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eval.report_site.collect import RunView
from eval.report_site.model import Cell, Table, dash, mean, name, rate

Builder = Callable[[list[RunView]], list[Table]]


def failed_episodes(result: dict[str, Any]) -> Cell:
    from metrics.tables import failed_cell

    n = int(result.get("n_failed") or 0)
    return Cell(failed_cell(result), float(n))


def run_cell(run: RunView) -> Cell:
    return name(run.name, href=f"#run-{run.slug}")


def metric_table(key: str, title: str, runs: list[RunView], metrics: list[tuple[str, str]],
                 get: Callable[[dict[str, Any], str], Any], cell: Callable[[Any], Cell] = rate,
                 note: str = "", failed: bool = False) -> Table:
    cols = ["run", *[label for label, _ in metrics]] + (["failed episodes"] if failed else [])
    t = Table(key, title, cols, note=note)
    for run in runs:
        row = [run_cell(run)]
        for _, metric in metrics:
            try:
                row.append(cell(get(run.result, metric)))
            except (KeyError, TypeError):
                row.append(dash("not in these scores"))
        t.add(row + ([failed_episodes(run.result)] if failed else []))
    return t


def grouped_table(key: str, title: str, runs: list[RunView], section: str, group_name: str,
                  metrics: list[str], note: str = "") -> Table:
    """Rows = (run, group) for a `{group: {metric: entry}}` block (MPE's by_condition)."""
    t = Table(key, title, ["run", group_name, *metrics], note=note, n_keys=2)
    for run in runs:
        for group, block in (run.result.get(section) or {}).items():
            t.add([run_cell(run), name(group), *[rate(block.get(m)) for m in metrics]])
    return t


# ---- any other benchmark --------------------------------------------------------------------------------------

def generic(runs: list[RunView]) -> list[Table]:
    metrics = sorted({m for run in runs for m, e in (run.result.get("scores") or {}).items()
                      if isinstance(e, dict) and "n" in e})
    title = runs[0].bench.title
    return [metric_table(f"{runs[0].bench.name}-leaderboard", f"{title} leaderboard", runs,
                         [(m, m) for m in metrics], lambda r, m: r["scores"].get(m), cell=mean, failed=True)]


def tables_for(runs: list[RunView]) -> list[Table]:
    """The leaderboard (first) and breakdowns of runs of one benchmark."""
    bench = runs[0].bench
    builder: Builder = bench.function("boards") if bench.boards else generic
    return builder(runs)
