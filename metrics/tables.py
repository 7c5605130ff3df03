"""Plain-text score tables shared by every benchmark: one run, or several side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metrics.episodes import coverage


def cell(entry: dict[str, Any]) -> str:
    if entry["value"] is None:
        return "n/a (n=0)"
    lo, hi = entry["ci"]
    return f"{entry['value']:.3f} {entry['k']}/{entry['n']} [{lo:.2f},{hi:.2f}]"


def failed_cell(result: dict[str, Any]) -> str:
    """How many episodes failed, and in how many windows they count as failures (SPEC: failure is a result)."""
    n = result["n_failed"]
    if not n:
        return "0"
    entries = result.get("failed_episodes", [])
    windows = sum(f.get("windows") or 0 for f in entries)
    uncounted = sum(1 for f in entries if f.get("windows") is None)
    return f"{n} ({windows} windows counted as failed" + (f"; {uncounted} NOT counted" if uncounted else "") + ")"


def cases_cell(result: Mapping[str, Any]) -> str:
    """How many of the dataset's cases the scores cover, marked when the run is partial."""
    cov = coverage_of(result)
    shown = f"{cov['n_cases']} of {cov['n_dataset_cases']}" if cov["n_dataset_cases"] else f"{cov['n_cases']} of ?"
    return shown + (f" PARTIAL ({cov['selection']})" if cov["partial"] and cov["selection"] else
                    " PARTIAL" if cov["partial"] else "")


def side_by_side(results: dict[str, dict[str, Any]], metrics: Sequence[str], reported: Sequence[str] = (),
                 section: str = "scores", key: str | None = None) -> str:
    """Rows = metrics, columns = runs; `section`/`key` pick e.g. by_condition/explicit. A metric in `reported`
    is shown for coverage, marked "(reported)": it is not a scored capability."""
    names = list(results)
    rows = [["metric", *names]]
    for metric in metrics:
        label = metric + (" (reported)" if metric in reported else "")
        cells = []
        for name in names:
            block = results[name][section]
            block = block.get(key, {}) if key else block
            cells.append(cell(block[metric]) if metric in block else "-")
        rows.append([label, *cells])
    rows.append(["cases", *[cases_cell(results[n]) for n in names]])
    rows.append(["failed episodes", *[failed_cell(results[n]) for n in names]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def coverage_of(result: Mapping[str, Any]) -> dict[str, Any]:
    """What a scores file covers (`metrics.episodes.coverage`): its own block, or, for a file written before scores
    recorded one, the same from its episode and dataset counts."""
    block = result.get("coverage")
    if isinstance(block, Mapping):
        return dict(block)
    return coverage(int(result.get("n_episodes") or 0), result.get("n_dataset_cases"))


def provenance(result: dict[str, Any]) -> str:
    judge = result["judge"]
    kind = "heuristic" if judge["heuristic"] else "model"
    unparseable = sum(result.get("unparseable_verdicts", {}).values())
    if unparseable:
        kind += f", {unparseable} unparseable verdict{'s' if unparseable != 1 else ''} counted as failures"
    return (f"coverage: {coverage_of(result)['text']}  ASR: {result['asr']}  judge: {judge['name']} ({kind})  "
            f"thresholds: {result['thresholds']}")
