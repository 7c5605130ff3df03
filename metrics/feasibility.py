"""Live feasibility (docs/scale.md): could the model have held a live call on the hardware it ran on?

A run steps the model on a virtual clock, as fast as it can: the recording says nothing about whether each step
kept up with the audio. So the runner times every call of the agent's `step` / `step_batch` (compute only, never
the harness around it) and each episode stores a compact record of those times (`step_time_record`, the rec.json
field `compute`). A run's episodes are merged exactly (`run_feasibility`): counts and sums add up, the histogram
bins are fixed and log-spaced (`BINS_PER_DECADE` per decade), and the steps over the frame budget are counted
exactly. A live call needs every frame computed within its own duration: the run is flagged when p99 of the step
time exceeds the frame duration, decided from the exact count (more than 1 % of the steps over budget), so the
flag never depends on a bin edge. A batched run steps B calls at once: its step time is the time of the whole
batch, and the verdict holds for B concurrent calls.

Quantiles are nearest-rank (the smallest time at least a share q of the steps took no longer than): exact in an
episode's record, within half a bin (about 3 %) at run level, where they are read from the merged histogram.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from dataset_builder.episode import Episode

BINS_PER_DECADE = 40  # log-spaced histogram bins: each about 5.9 % wide
LOWEST_MS = 1e-3  # bin 0 holds everything up to 1 microsecond
LIVE_QUANTILE = 0.99  # the step time a live call must keep within the frame duration
QUANTILES = (0.5, LIVE_QUANTILE)


def bin_of(ms: float) -> int:
    """The histogram bin of a step time in milliseconds."""
    if ms <= LOWEST_MS:
        return 0
    return max(0, math.floor(math.log10(ms / LOWEST_MS) * BINS_PER_DECADE))


def bin_value(index: int) -> float:
    """The geometric middle of a bin, in milliseconds (what a run-level quantile in that bin reports)."""
    return LOWEST_MS * 10 ** ((index + 0.5) / BINS_PER_DECADE)


def nearest_rank(sorted_ms: Sequence[float], q: float) -> float:
    return sorted_ms[max(0, math.ceil(q * len(sorted_ms)) - 1)]


def _round4(ms: float) -> float:
    """A step time already in milliseconds, rounded to 4 decimals (a tenth of a microsecond) for the record."""
    return round(ms, 4)


def step_time_record(step_s: Sequence[float], batch_size: int, frame_s: float) -> dict[str, Any] | None:
    """The rec.json `compute` record of one episode's step times (seconds); None when the agent never stepped."""
    if not step_s:
        return None
    ms = sorted(s * 1000 for s in step_s)
    frame_ms = frame_s * 1000
    hist: dict[int, int] = {}
    for x in ms:
        hist[bin_of(x)] = hist.get(bin_of(x), 0) + 1
    return {"steps": len(ms), "batch_size": batch_size, "frame_ms": _round4(frame_ms),
            "p50_ms": _round4(nearest_rank(ms, 0.5)), "p99_ms": _round4(nearest_rank(ms, LIVE_QUANTILE)),
            "max_ms": _round4(ms[-1]), "mean_ms": _round4(sum(ms) / len(ms)), "total_ms": _round4(sum(ms)),
            "over_frame": sum(x > frame_ms for x in ms), "bins_per_decade": BINS_PER_DECADE,
            "hist": [[k, hist[k]] for k in sorted(hist)]}


def _hist_quantile(hist: dict[int, int], n: int, q: float) -> float:
    rank = max(1, math.ceil(q * n))
    seen = 0
    for k in sorted(hist):
        seen += hist[k]
        if seen >= rank:
            return bin_value(k)
    raise ValueError("empty histogram")


def merge_records(records: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Episodes' `compute` records of one frame duration and batch size merged into one; None when there are none.
    """
    recs = [r for r in records if r and r.get("steps")]
    if not recs:
        return None
    n = sum(r["steps"] for r in recs)
    hist: dict[int, int] = {}
    for r in recs:
        if r.get("bins_per_decade") != BINS_PER_DECADE:
            raise ValueError(f"a compute record with {r.get('bins_per_decade')} bins per decade cannot be merged "
                             f"with this version's {BINS_PER_DECADE}")
        for k, c in r["hist"]:
            hist[k] = hist.get(k, 0) + c
    total = sum(r["total_ms"] for r in recs)
    return {"steps": n, "episodes": len(recs), "p50_ms": _round4(_hist_quantile(hist, n, 0.5)),
            "p99_ms": _round4(_hist_quantile(hist, n, LIVE_QUANTILE)), "max_ms": max(r["max_ms"] for r in recs),
            "mean_ms": _round4(total / n), "over_frame": sum(r["over_frame"] for r in recs)}


def run_feasibility(episodes: Iterable[Episode]) -> dict[str, Any] | None:
    """Per (frame duration, batch size) of a run's episodes: merged step times, real-time factors and the verdict;
    None when no episode has step times.

    `live` is False when more than 1 % of the steps took longer than the frame: p99 over the frame duration.
    Ok episodes without a `compute` record (written by a version that did not time steps) are counted apart.
    """
    groups: dict[tuple[float, int], list[dict[str, Any]]] = {}
    untimed = 0
    for ep in episodes:
        rec = ep.compute
        if not rec or not rec.get("steps"):
            untimed += ep.status == "ok"
            continue
        groups.setdefault((rec["frame_ms"], rec["batch_size"]), []).append(rec)
    out = []
    for (frame_ms, batch), recs in sorted(groups.items()):
        merged = merge_records(recs)
        assert merged is not None
        live = merged["over_frame"] <= (1 - LIVE_QUANTILE) * merged["steps"]
        out.append({"frame_ms": frame_ms, "batch_size": batch, **merged,
                    "rtf_p50": round(merged["p50_ms"] / frame_ms, 6), "rtf_p99": round(merged["p99_ms"] / frame_ms, 6),
                    "live": live})
    if not out:
        return None
    return {"groups": out, "untimed_episodes": untimed, "live": all(g["live"] for g in out)}


def feasibility_lines(feas: dict[str, Any] | None) -> list[str]:
    """What `score` prints about live feasibility: one line per frame duration and batch size."""
    if not feas:
        return []
    lines = []
    for g in feas["groups"]:
        calls = "one call" if g["batch_size"] == 1 else f"{g['batch_size']} calls at once (batched)"
        head = (f"step time p50 {g['p50_ms']:.3g} ms, p99 {g['p99_ms']:.3g} ms, max {g['max_ms']:.3g} ms per "
                f"{g['frame_ms']:g} ms frame (real-time factor p50 {g['rtf_p50']:.3g}, p99 {g['rtf_p99']:.3g}; "
                f"{g['steps']} steps of {g['episodes']} episodes, {calls})")
        if g["live"]:
            lines.append(f"{head}: could have held a live call on this hardware")
        else:
            lines.append(f"{head}: p99 over the frame duration ({g['over_frame']}/{g['steps']} steps late): could "
                         "NOT have held a live call on this hardware")
    if feas.get("untimed_episodes"):
        lines.append(f"{feas['untimed_episodes']} episode(s) without step times (recorded by a version that did not "
                     "time steps)")
    return lines
