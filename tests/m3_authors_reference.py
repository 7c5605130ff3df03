"""Our reference of the M3-DuplexBench authors' timing evaluation, written here from the description of their
`evaluation/dimensions/timing.py` and `evaluation/run_evaluation.py` (metrics/m3/rules.py lists how they differ
from the paper), and reading nothing but an `export m3` folder: `{condition}/metadata.jsonl` and the ASR JSON each
row points to. It shares no code with metrics/m3, so a test can hold our `rules=authors` scores against it.

Per episode, on the model channel's segments (times relative to `input_start`; s = event_start − input_start):
- TURN_SHIFT ("smooth_turn_taking"): segments ending after s and starting at or after s − 0.4 are candidates (no
  backchannel filter: their SHIFT evaluator allows short utterances); the one whose start is closest to s (the
  earlier on a tie) is the takeover: "tor ↑" 1 and "latency ↓" its start − s; none: "tor ↑" 0, no latency.
- TURN_HOLD ("pause_handling"), the pause (s, t): segments overlapping it that are not backchannels (a segment
  shorter than 1.0 s with fewer than 4 chunks is one) are takeovers: "tor ↓" 1, "latency ↑" the earliest start − s.
  None: "tor ↓" 0 and "latency ↑" the first segment start at or after t, minus s, else input_end − event_start.
- BC / BARGE_IN: the earliest segment starting before s + 0.5 s; "stop_latency" its end − s; none: no value.
Summary: per (event type, metric), the mean and the count of the values that are not None (their
`aggregate_results`), over one metadata file.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

MAX_OVERLAP = 0.4
BC_SECONDS, BC_WORDS = 1.0, 4
SHORT_PAUSE = 0.5

# our scores.json key -> their (event type, metric)
CELLS = {
    "shift_tor": ("TURN_SHIFT", "tor ↑"),
    "shift_latency": ("TURN_SHIFT", "latency ↓"),
    "pause_tor": ("TURN_HOLD", "tor ↓"),
    "pause_latency": ("TURN_HOLD", "latency ↑"),
    "bc_stop_latency": ("BC", "stop_latency ↑"),
    "barge_in_stop_latency": ("BARGE_IN", "stop_latency ↓"),
}


def _model_segments(transcript: dict[str, Any]) -> list[tuple[float, float, int]]:
    """(start, end, number of chunks) of channel 1, in the transcript's order."""
    return [(float(seg["timestamp"][0]), float(seg["timestamp"][1]), len(seg.get("chunks", [])))
            for seg in transcript.get("segments", []) if int(seg["channel"]) == 1]


def evaluate(meta: dict[str, Any], transcript: dict[str, Any]) -> dict[str, float | int | None]:
    """Their metrics of one episode."""
    segs = _model_segments(transcript)
    s = float(meta["event_start"]) - float(meta["input_start"])
    kind = meta["event_type"]
    if kind == "TURN_SHIFT":
        best: tuple[float, float] | None = None
        for a, b, _ in segs:
            if b <= s or a < s - MAX_OVERLAP:
                continue
            if best is None or abs(a - s) < abs(best[0] - s):
                best = (a, b)
        return {"tor ↑": 0, "latency ↓": None} if best is None else {"tor ↑": 1, "latency ↓": best[0] - s}
    if kind == "TURN_HOLD":
        t = float(meta["event_end"]) - float(meta["input_start"])
        turns = sorted(a for a, b, n in segs if b > s and a < t and not (b - a < BC_SECONDS and n < BC_WORDS))
        if turns:
            return {"tor ↓": 1, "latency ↑": turns[0] - s}
        later = [a for a, _, _ in segs if a >= t]
        fallback = min(later) - s if later else float(meta["input_end"]) - float(meta["event_start"])
        return {"tor ↓": 0, "latency ↑": fallback}
    early = [(a, b) for a, b, _ in segs if a < s + SHORT_PAUSE]
    stop = min(early)[1] - s if early else None
    return {"stop_latency ↑" if kind == "BC" else "stop_latency ↓": stop}


def summary(metadata_path: Path) -> dict[tuple[str, str], tuple[float, int]]:
    """(event type, metric) -> (mean, n) over the rows of one metadata.jsonl, as their summary reports it."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for line in Path(metadata_path).read_text().splitlines():
        meta = json.loads(line)
        transcript = json.loads(Path(meta["output_asr_path"]).read_text())
        for metric, v in evaluate(meta, transcript).items():
            if v is not None:
                values[(meta["event_type"], metric)].append(float(v))
    return {key: (sum(vs) / len(vs), len(vs)) for key, vs in values.items()}


def cells(metadata_path: Path) -> dict[str, tuple[float | None, int]]:
    """Their summary of one condition folder as our six timing cells: key -> (value, n); (None, 0) where their
    summary has no row."""
    got = summary(metadata_path)
    return {key: got.get(cell, (None, 0)) for key, cell in CELLS.items()}
