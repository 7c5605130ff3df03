"""Live feasibility (docs/scale.md): could the model have held a live call on the hardware it ran on?

A run steps the model on a virtual clock, as fast as it can: the recording says nothing about whether each step
kept up with the audio. So the runner times every call of the agent's `step` / `step_batch` (compute only, never
the harness around it) and each episode stores a compact record of those times (`step_time_record`, the rec.json
field `compute`). A run's episodes are merged exactly (`run_feasibility`): counts and sums add up, the histogram
bins are fixed and log-spaced (`BINS_PER_DECADE` per decade), and the steps over the frame budget are counted
exactly. A live call needs every frame computed within its own duration: the run is flagged when p99 of the step
time exceeds the frame duration, decided from the exact count (more than 1 % of the steps over budget), so the
flag never depends on a bin edge. p99 hides a rare long step, and a caller hears every one of them as a gap: a step
longer than `STALL_MS` (a stall; each episode's exact `max_ms` says whether it had one) also rules a live call out,
and a shorter step over the frame is named with the playback buffer that would absorb it. A batched run steps B
calls at once: its step time is the time of the whole batch, and the verdict holds for B concurrent calls.

Quantiles are nearest-rank (the smallest time at least a share q of the steps took no longer than): exact in an
episode's record, within half a bin (about 3 %) at run level, where they are read from the merged histogram.

A served model (moshi-server, openai-realtime, vllm-omni-duplex) computes on its server, paced in wall-clock time,
so the client's step times say nothing about it. Its session is measured from the client instead (`SessionPace`,
rec.json `compute.session`): when each piece of the model's audio arrived against the audio it carried (the
server's real-time factor and how far behind real time its stream fell) and at how many of the steps the model's
audio was due and none had arrived (underruns: what a caller hears as a gap). A session is live when at most 1 %
of those steps starved, the share the step-time verdict allows, and no run of consecutive starved steps lasted
longer than `STALL_MS` (its longest gap, `gap_max_ms`); `run_feasibility` adds them up over the run
(`sessions`). With N concurrent sessions (`vllm-omni-duplex sessions=N`) each episode records its own session, so
one slow session shows in its own episodes and not in the others'.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

from dataset_builder.episode import Episode

BINS_PER_DECADE = 40  # log-spaced histogram bins: each about 5.9 % wide
LOWEST_MS = 1e-3  # bin 0 holds everything up to 1 microsecond
LIVE_QUANTILE = 0.99  # the step time a live call must keep within the frame duration
STALL_MS = 1000.0  # a step longer than this is a stall: a second of silence mid-call, which no live call survives
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


class SessionPace:
    """One served session's live feasibility as its client saw it (rec.json `compute.session`).

    The adapter calls `arrived` for every piece of model audio it keeps (from its websocket thread) and `step` for
    every step at which the model's audio was due (from the stepping thread), both under its session lock. A stream
    is one continuous run of model audio (moshi's whole session; a Realtime response): within it, the wall time
    from its first piece to each later one, against the audio that came before that piece, says whether the
    server kept pace with playback from the first piece on.
    """

    def __init__(self, sample_rate: int, frame_size: int) -> None:
        self.sample_rate, self.frame_size = sample_rate, frame_size
        self.frames = 0  # steps at which model audio was due
        self.underruns = 0  # of those, steps at which none had arrived: the server behind real time
        self.longest_gap = 0  # the most consecutive starved steps: the longest gap a caller heard
        self._gap = 0
        self.chunks = 0  # pieces timed (each after the first of its stream)
        self.audio = 0  # samples in those pieces
        self.wall_s = 0.0  # wall time from each stream's first piece to its last
        self.late_s = 0.0  # the most a stream's piece arrived after playback from its first piece needed it
        self.max_queued = 0  # the most model audio ever waiting to be played, in samples
        self._streams: dict[str, tuple[float, int, float]] = {}  # stream -> (first arrival, samples so far, last)

    def arrived(self, stream: str, samples: int, queued: int, t: float | None = None) -> None:
        """`samples` of model audio of `stream` arrived at `t` (perf_counter seconds; now when None), leaving
        `queued` samples waiting to be played."""
        t = time.perf_counter() if t is None else t
        self.max_queued = max(self.max_queued, queued)
        first = self._streams.get(stream)
        if first is None:
            self._streams[stream] = (t, samples, t)
            return
        t0, before, last = first
        self.chunks += 1
        self.audio += samples
        self.wall_s += t - last
        self.late_s = max(self.late_s, (t - t0) - before / self.sample_rate)
        self._streams[stream] = (t0, before + samples, t)

    def step(self, starved: bool) -> None:
        """A step at which the model's audio was due; `starved` when none of it had arrived."""
        self.frames += 1
        self.underruns += int(starved)
        self._gap = self._gap + 1 if starved else 0
        self.longest_gap = max(self.longest_gap, self._gap)

    def record(self) -> dict[str, Any]:
        """The rec.json `compute.session` record: counts, the server's real-time factor (wall time per second of
        audio it delivered: below 1 ahead of real time, above 1 behind; None when no piece was timed), the most
        its stream fell behind, its longest gap, and the verdict."""
        sr = self.sample_rate
        audio_ms = self.audio * 1000 / sr
        gap_ms = self.longest_gap * self.frame_size * 1000 / sr
        return {"frames": self.frames, "underruns": self.underruns, "frame_ms": _round4(self.frame_size * 1000 / sr),
                "chunks": self.chunks, "audio_ms": _round4(audio_ms), "wall_ms": _round4(self.wall_s * 1000),
                "rtf": round(self.wall_s * 1000 / audio_ms, 6) if audio_ms else None,
                "late_max_ms": _round4(self.late_s * 1000), "max_queued_ms": _round4(self.max_queued * 1000 / sr),
                "gap_max_ms": _round4(gap_ms), "live": _starved_ok(self.underruns, self.frames) and gap_ms <= STALL_MS}


def _starved_ok(underruns: int, frames: int) -> bool:
    """At most 1 % of the due steps starved: the share the step-time verdict allows over the frame."""
    return underruns <= (1 - LIVE_QUANTILE) * frames


def merge_sessions(records: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Episodes' `compute.session` records added up over a run; None when there are none. `stalled` counts the
    episodes whose longest gap exceeds STALL_MS (records written before gaps were timed have none)."""
    recs = [r for r in records if r]
    if not recs:
        return None
    frames, underruns = sum(r["frames"] for r in recs), sum(r["underruns"] for r in recs)
    audio_ms, wall_ms = sum(r["audio_ms"] for r in recs), sum(r["wall_ms"] for r in recs)
    rtfs = [r["rtf"] for r in recs if r.get("rtf") is not None]
    behind = sum(not r["live"] for r in recs)
    return {"episodes": len(recs), "frames": frames, "underruns": underruns, "behind": behind,
            "rtf": round(wall_ms / audio_ms, 6) if audio_ms else None, "rtf_max": max(rtfs) if rtfs else None,
            "late_max_ms": max(r["late_max_ms"] for r in recs),
            "gap_max_ms": max(r.get("gap_max_ms", 0.0) for r in recs),
            "stalled": sum(r.get("gap_max_ms", 0.0) > STALL_MS for r in recs), "live": behind == 0}


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
    `stalled_episodes` counts the episodes whose longest step exceeds STALL_MS."""
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
            "mean_ms": _round4(total / n), "over_frame": sum(r["over_frame"] for r in recs),
            "stalled_episodes": sum(r["max_ms"] > STALL_MS for r in recs)}


def run_feasibility(episodes: Iterable[Episode]) -> dict[str, Any] | None:
    """Per (frame duration, batch size) of a run's episodes: merged step times, real-time factors and the verdict;
    None when no episode has step times.

    `live` is False when more than 1 % of the steps took longer than the frame (p99 over the frame duration) or
    when any step took longer than STALL_MS (`longest_case` names the episode of the longest step). Ok episodes
    without a `compute` record (written by a version that did not time steps) are counted apart.
    """
    groups: dict[tuple[float, int], list[dict[str, Any]]] = {}
    longest: dict[tuple[float, int], tuple[float, str]] = {}
    sessions: list[dict[str, Any]] = []
    untimed = 0
    for ep in episodes:
        rec = ep.compute
        if not rec or not rec.get("steps"):
            untimed += ep.status == "ok"
            continue
        key = (rec["frame_ms"], rec["batch_size"])
        groups.setdefault(key, []).append(rec)
        if rec["max_ms"] > longest.get(key, (-1.0, ""))[0]:
            longest[key] = (rec["max_ms"], ep.case_id)
        if rec.get("session"):
            sessions.append(rec["session"])
    out = []
    for (frame_ms, batch), recs in sorted(groups.items()):
        merged = merge_records(recs)
        assert merged is not None
        p99_live = merged["over_frame"] <= (1 - LIVE_QUANTILE) * merged["steps"]
        out.append({"frame_ms": frame_ms, "batch_size": batch, **merged,
                    "rtf_p50": round(merged["p50_ms"] / frame_ms, 6), "rtf_p99": round(merged["p99_ms"] / frame_ms, 6),
                    "longest_case": longest[(frame_ms, batch)][1], "p99_live": p99_live,
                    "live": p99_live and not merged["stalled_episodes"]})
    if not out:
        return None
    served = merge_sessions(sessions)
    if served is None:
        return {"groups": out, "untimed_episodes": untimed, "live": all(g["live"] for g in out)}
    # A served model: the verdict is its sessions' (the client's own steps are part of it too, for completeness).
    return {"groups": out, "sessions": served, "untimed_episodes": untimed,
            "live": served["live"] and all(g["live"] for g in out)}


def _verdict(g: dict[str, Any]) -> str:
    """A group's verdict with its reasons: p99 over the frame, a stall, or the buffer its longest step needs."""
    why = []
    if not g.get("p99_live", g["live"]):
        why.append(f"p99 over the frame duration ({g['over_frame']}/{g['steps']} steps late)")
    stalled = g.get("stalled_episodes", int(g["max_ms"] > STALL_MS))
    if stalled:
        why.append(f"a stall of {g['max_ms'] / 1000:.3g} s (its longest step, in {g.get('longest_case', '?')}; "
                   f"{stalled}/{g['episodes']} episodes had a step over {STALL_MS / 1000:g} s, a gap the caller "
                   "hears)")
    if why:
        return " and ".join(why) + ": could NOT have held a live call on this hardware"
    if g["max_ms"] > g["frame_ms"]:
        return (f"could have held a live call on this hardware, with {g['max_ms'] - g['frame_ms']:.3g} ms of "
                f"audio buffered (its longest step took {g['max_ms'] / g['frame_ms']:.3g} frames)")
    return "could have held a live call on this hardware"


def _served_line(served: dict[str, Any]) -> str:
    """The served sessions' line: the server's pace, starved frames and the longest gap, and the verdict."""
    rtf = "no audio timed" if served["rtf"] is None else (
        f"real-time factor {served['rtf']:.3g}, worst episode {served['rtf_max']:.3g}")
    gap = served.get("gap_max_ms", 0.0)
    stalled = served.get("stalled", 0)
    verdict = ("the server kept up with every session" if served["live"] else
               f"{served['behind']} of {served['episodes']} episodes' sessions fell behind real time"
               + (f" ({stalled} with a stall: playback starved for over {STALL_MS / 1000:g} s at once)"
                  if stalled else "") + ": the server could NOT have held every call live")
    return (f"served sessions: the server's audio arrived at {rtf} (wall time per second of audio), at most "
            f"{served['late_max_ms']:.4g} ms behind real time; playback starved in {served['underruns']}/"
            f"{served['frames']} due frames, the longest gap {gap:.4g} ms: {verdict}")


def feasibility_lines(feas: dict[str, Any] | None) -> list[str]:
    """What `score` prints about live feasibility: one line per frame duration and batch size, and one for a served
    model's sessions (then the step times are the client's own)."""
    if not feas:
        return []
    lines = []
    served = feas.get("sessions")
    for g in feas["groups"]:
        calls = "one call" if g["batch_size"] == 1 else f"{g['batch_size']} calls at once (batched)"
        head = (f"{'client ' if served else ''}step time p50 {g['p50_ms']:.3g} ms, p99 {g['p99_ms']:.3g} ms, "
                f"max {g['max_ms']:.3g} ms per "
                f"{g['frame_ms']:g} ms frame (real-time factor p50 {g['rtf_p50']:.3g}, p99 {g['rtf_p99']:.3g}; "
                f"{g['steps']} steps of {g['episodes']} episodes, {calls})")
        lines.append(f"{head}: {_verdict(g)}")
    if served:
        lines.append(_served_line(served))
    if feas.get("untimed_episodes"):
        lines.append(f"{feas['untimed_episodes']} episode(s) without step times (recorded by a version that did not "
                     "time steps)")
    return lines
