"""Plain-text score tables: one adapter, or several side by side."""

from __future__ import annotations

from typing import Any

from metrics.mpe.verdicts import METRICS

REPORTED_ONLY = {"response_presence", "window_response"}  # shown for coverage, not scored capabilities


def cell(entry: dict[str, Any]) -> str:
    if entry["value"] is None:
        return "n/a (n=0)"
    lo, hi = entry["ci"]
    return f"{entry['value']:.3f} {entry['k']}/{entry['n']} [{lo:.2f},{hi:.2f}]"


def side_by_side(results: dict[str, dict[str, Any]], section: str = "scores", key: str | None = None) -> str:
    """Rows = metrics, columns = runs; `section`/`key` pick e.g. by_condition/explicit."""
    names = list(results)
    rows = [["metric", *names]]
    for metric in METRICS:
        label = metric + (" (reported)" if metric in REPORTED_ONLY else "")
        cells = []
        for name in names:
            block = results[name][section]
            block = block[key] if key else block
            cells.append(cell(block[metric]))
        rows.append([label, *cells])
    rows.append(["failed episodes", *[str(results[n]["n_failed"]) for n in names]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def paired_line(result: dict[str, Any]) -> str:
    p = result["paired"]["response_presence"]
    if not p["n_pairs"]:
        return "paired explicit-implicit response presence: no complete pairs"
    return (f"paired explicit-implicit response presence: diff={p['difference']:+.3f} over {p['n_pairs']} pairs "
            f"(explicit-only {p['explicit_only']}, implicit-only {p['implicit_only']}, "
            f"exact McNemar p={p['mcnemar_p']:.3g})")


def provenance(result: dict[str, Any]) -> str:
    judge = result["judge"]
    kind = "heuristic" if judge["heuristic"] else "model"
    return f"ASR: {result['asr']}  judge: {judge['name']} ({kind})  thresholds: {result['thresholds']}"
