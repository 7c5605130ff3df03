"""The report's tables as data: cells that know their number, its interval and its count, so one table renders
as a sortable HTML table, a Markdown table for summary.md, and can be checked against scores.json."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cell:
    text: str  # the headline: a value, a name, a verdict
    value: float | None = None  # the number behind `text` (sorting, and the browser test's check)
    ci: str = ""  # "[0.83,0.99]" or "±0.025"
    count: str = ""  # "38/40" or "n=40"
    title: str = ""  # tooltip: what else the scores say (McNemar p, discordant pairs, undefined latencies)
    href: str = ""  # link target, relative to the page
    cls: str = ""  # css class (e.g. "bad" for a failed verdict)

    def plain(self) -> str:
        """One line for Markdown and text: value [ci] count."""
        return " ".join(p for p in (self.text, self.ci, self.count) if p)


@dataclass
class Table:
    key: str  # unique id on its page (anchors, tests)
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    note: str = ""  # what the numbers are (interval kinds, tests)
    n_keys: int = 1  # leading columns that name the row (run, group); the rest are measured values

    def add(self, row: list[Cell]) -> None:
        if len(row) != len(self.columns):
            raise ValueError(f"table {self.key}: row of {len(row)} cells for {len(self.columns)} columns")
        self.rows.append(row)


def name(text: Any, href: str = "") -> Cell:
    return Cell(str(text), href=href)


def dash(reason: str = "") -> Cell:
    return Cell("–", title=reason)


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def rate(entry: dict[str, Any] | None) -> Cell:
    """A rate {value, k, n, ci} as `0.950 [0.83,0.99] 38/40` (Wilson 95 %), the way the text tables give it."""
    if not entry:
        return dash("not in these scores")
    if entry.get("computed") is False:
        return dash(str(entry.get("reason") or "not computed"))
    count = f"{entry['k']}/{entry['n']}" if "k" in entry else f"n={entry.get('n', 0)}"
    if entry.get("value") is None:
        return Cell("n/a", count=count, title="no denominator")
    ci = entry.get("ci")
    return Cell(f"{entry['value']:.3f}", _num(entry["value"]), f"[{ci[0]:.2f},{ci[1]:.2f}]" if ci else "", count)


def mean(entry: dict[str, Any] | None, unit: str = "") -> Cell:
    """A mean with its Student-t interval as `0.675 ±0.025 n=40`, or a rate with its Wilson interval as
    `0.950 [0.83,0.99] n=40` (M3's blocks say which by their `interval`, or by the interval's symmetry)."""
    if not entry:
        return dash("not in these scores")
    if entry.get("computed") is False:
        return dash(str(entry.get("reason") or "not computed"))
    extra = [f"{k.removeprefix('n_')} {entry[k]}" for k in sorted(entry) if k.startswith("n_") and entry[k]]
    count = f"k={entry['k']} n={entry['n']}" if "k" in entry else f"n={entry.get('n', 0)}"
    title = ", ".join(extra)
    if entry.get("value") is None:
        return Cell("n/a", count=count, title=title or "no defined value")
    v = float(entry["value"])
    ci = entry.get("ci")
    if not ci:
        text_ci = ""
    elif entry.get("interval") == "student-t-95" or abs((v - ci[0]) - (ci[1] - v)) < 5e-4:
        text_ci = f"±{ci[1] - v:.3f}"
    else:
        text_ci = f"[{ci[0]:.2f},{ci[1]:.2f}]"
    return Cell(f"{v:.3f}{unit}", v, text_ci, count, title)


def difference(d: dict[str, Any] | None) -> Cell:
    """A level difference {value, ci, n_a, n_b, paired} as `+0.125 [-0.05,+0.29] n=48/48`, McNemar in the title
    and the count."""
    if not d:
        return dash("not in these scores")
    count = f"n={d.get('n_a')}/{d.get('n_b')}"
    p = d.get("paired") or {}
    mc = p.get("mcnemar_p")
    title = (f"paired over {p.get('n_pairs')} conversations: {d.get('a')} only {p.get('a_only')}, "
             f"{d.get('b')} only {p.get('b_only')}, exact McNemar p={mc:.3g}") if mc is not None else ""
    if d.get("value") is None:
        return Cell("n/a", count=count, title=title)
    ci = d.get("ci")
    text_ci = f"[{ci[0]:+.2f},{ci[1]:+.2f}]" if ci else ""
    return Cell(f"{d['value']:+.3f}", _num(d["value"]), text_ci,
                count + (f" McNemar p={mc:.3g}" if mc is not None else ""), title)


def number(x: Any, fmt: str = "{:.3f}", title: str = "") -> Cell:
    v = _num(x)
    if v is None:
        return dash(title or "none")
    return Cell(fmt.format(v), v, title=title)


def pvalue(p: Any) -> Cell:
    v = _num(p)
    return dash("no pairs") if v is None else Cell(f"{v:.3g}", v)
