"""The toy's report pieces: its leaderboard and the detail behind a window's verdict."""

from __future__ import annotations

from typing import Any

from eval.report_site.boards import metric_table
from eval.report_site.collect import RunView
from eval.report_site.model import Table


def boards(runs: list[RunView]) -> list[Table]:
    return [metric_table("toy-leaderboard", "Toy leaderboard", runs, [("answered", "answered")],
                         lambda r, m: r["scores"][m], note="answered: value [Wilson 95% CI] k/n", failed=True)]


def window_detail(m: dict[str, Any], result: dict[str, Any]) -> str:
    if m["onset_s"] is None:
        return "no model speech began in the window"
    return f"model speech began {m['onset_s'] - m['window'][0]:.2f} s after the question"
