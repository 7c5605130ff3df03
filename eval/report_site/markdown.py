"""report/summary.md: the leaderboards and breakdowns as Markdown tables, for papers and pull requests."""

from __future__ import annotations

from eval.report_site.collect import RunView
from eval.report_site.model import Table


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_md(t: Table) -> str:
    lines = [f"### {t.title}", ""]
    if t.note:
        lines += [f"_{_md(t.note)}_", ""]
    lines.append("| " + " | ".join(_md(c) for c in t.columns) + " |")
    lines.append("|" + "|".join("---" if i < t.n_keys else "---:" for i in range(len(t.columns))) + "|")
    for row in t.rows:
        lines.append("| " + " | ".join(_md(c.plain()) for c in row) + " |")
    return "\n".join(lines) + "\n"


def summary(benchmarks: list[tuple[str, list[RunView], list[Table]]], provenance: list[str]) -> str:
    out = ["# duplex-eval results", "",
           "Rates: value [Wilson 95% CI] k/n; level differences: value [Newcombe 95% CI] with the exact McNemar "
           "test; M3 means: value ± Student-t 95% CI. Written by `duplex-eval report`.", ""]
    for title, runs, tables in benchmarks:
        out += [f"## {title}", ""]
        for run in runs:
            flags = run.result.get("health", {}).get("flags", [])
            if run.stale:
                out.append(f"- **STALE {_md(run.name)}:** {_md('; '.join(run.stale))}")
            out += [f"- **health {_md(run.name)}:** {_md(f)}" for f in flags]
        if any(run.stale or run.result.get("health", {}).get("flags") for run in runs):
            out.append("")
        out += [table_md(t) for t in tables]
    out += ["## Provenance", ""] + [f"- {_md(p)}" for p in provenance] + [""]
    return "\n".join(out)
