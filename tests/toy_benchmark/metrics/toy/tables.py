"""The toy's text table and plot windows."""

from __future__ import annotations

from typing import Any

from metrics.toy.score import answered

from metrics.tables import side_by_side


def tables(results: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """value k/n [Wilson 95 % CI] of each run, side by side."""
    return [("answered within the window", side_by_side(results, ["answered"]))]


def plot_windows(measurements: list[dict[str, Any]], result: dict[str, Any]
                 ) -> list[tuple[float, float, bool, list[list[float]]]]:
    return [(m["window"][0], m["window"][1], answered(m), m["spans"]) for m in measurements if not m.get("failed")]
