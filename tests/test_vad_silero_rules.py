"""DSB-IFEval's VAD rules (`VADParams(rules="silero")`: silero-vad 6.2.3's `get_speech_timestamps` segmentation,
then the 0.3 s merge; App. E.2) on chunk probabilities alone: no model and no torch, so they run against every
mutant (`make mutate`).

The library's own answers are pinned as digests of what `get_speech_timestamps` gives on fixed probability runs
(tests/test_vad_silero.py computes them from the library live and checks the same digests, and compares on real
speech); the rest are hand-worked known answers on the 32 ms chunk grid (512 samples at 16 kHz; the library's
default 30 ms padding is 480 samples, 90 ms of minimum speech or silence 1440).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from dataset_builder.audio import VAD_SR
from metrics.vad import CHUNK, VAD_PRESETS, VADParams, merge_samples, silero_pad, span_tracker, spans_from_probs

IFEVAL = VAD_PRESETS["ifeval"]
ON, OFF = [0.9], [0.0]


def probability_runs(seed: int, count: int) -> Iterator[tuple[np.ndarray, int]]:
    """Runs of speech-like and pause-like probabilities (switching 15 % of chunks), values straddling both
    thresholds; the signal's last chunk is partial in most."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(1, 400))
        state = bool(rng.random() < 0.5)
        out = []
        for _ in range(n):
            if rng.random() < 0.15:
                state = not state
            out.append(rng.uniform(0.3, 1.0) if state else rng.uniform(0.0, 0.55))
        yield np.array(out, np.float32), n * CHUNK - int(rng.integers(0, CHUNK))


def ours(probs: np.ndarray, n_samples: int, params: VADParams) -> list[tuple[int, int]]:
    """Our spans in 16 kHz samples (exact: every boundary is on the sample grid)."""
    return [(round(s.start_s * VAD_SR), round(s.end_s * VAD_SR)) for s in spans_from_probs(probs, n_samples, params)]


def digest(spans_per_run: list[list[tuple[int, int]]]) -> str:
    return hashlib.sha256(json.dumps([[list(s) for s in r] for r in spans_per_run]).encode()).hexdigest()


# name -> (changes to the DSB-IFEval preset, seed, runs): the settings --param can move (min speech/silence,
# padding, merge), each on its own fixed runs.
SETTINGS: dict[str, tuple[dict[str, int], int, int]] = {
    "ifeval": ({}, 7, 600),
    "no min silence": ({"min_silence_ms": 0}, 11, 150),
    "no merge": ({"merge_gap_ms": 0}, 11, 150),
    "pad 100 ms": ({"speech_pad_ms": 100}, 11, 150),
    "no pad, 250/100 ms": ({"speech_pad_ms": 0, "min_speech_ms": 250, "min_silence_ms": 100}, 11, 150),
    "bare": ({"merge_gap_ms": 0, "min_silence_ms": 0, "min_speech_ms": 20}, 11, 150),
}
# digest(library spans on probability_runs(seed, runs)) per setting, from silero-vad 6.2.3 (test_vad_silero.py).
LIBRARY_DIGESTS = {
    "ifeval": "14698ba5de85addf13efed897ad76f498f96d475596eb4af7ffe3212f172c4d5",
    "no min silence": "5583fe9d8a6e29fcb4c7b2e7b4762554bf6b3ee520db53df5122dfc3668310d6",
    "no merge": "501753c7c4cd8910027233ddc691eabb275980ccf22d1b78f5778d5cfbcc6954",
    "pad 100 ms": "569b7cef48e5ba5310dea36a99373dea22aee36d40c1f26807eed3de709a1459",
    "no pad, 250/100 ms": "318dd491595a6b6acdea5b384a7c1544b9156c735a56214475f1c316fb6dfdd4",
    "bare": "b6c144368161918d0666180de54bf848f3fcbccf5383e51b8fa1f4745bec5afb",
}


def setting(name: str) -> tuple[VADParams, list[tuple[np.ndarray, int]]]:
    change, seed, runs = SETTINGS[name]
    return replace(IFEVAL, **change), list(probability_runs(seed, runs))


def test_known_answers() -> None:
    """The two rules where the project's differ, and the end of the signal."""
    # speech ends after 4 low chunks (3 * 512 >= 1440 samples of silence counted from the first), not 3:
    # a 3-chunk dip inside speech does not split it
    p = np.array(OFF * 5 + ON * 10 + OFF * 3 + ON * 10 + OFF * 30, np.float32)
    assert ours(p, p.size * CHUNK, replace(IFEVAL, merge_gap_ms=0)) == [(5 * 512 - 480, 28 * 512 + 480)]
    # a 4-chunk dip does split it (no merge here)
    p = np.array(OFF * 5 + ON * 10 + OFF * 4 + ON * 10 + OFF * 30, np.float32)
    assert ours(p, p.size * CHUNK, replace(IFEVAL, merge_gap_ms=0)) == [(5 * 512 - 480, 15 * 512 + 480),
                                                                         (19 * 512 - 480, 29 * 512 + 480)]
    # a 2-chunk (64 ms) segment is dropped before the merge, so it cannot bridge two spans 0.3 s apart
    p = np.array(OFF * 5 + ON * 10 + OFF * 8 + ON * 2 + OFF * 8 + ON * 10 + OFF * 30, np.float32)
    assert ours(p, p.size * CHUNK, IFEVAL) == [(5 * 512 - 480, 15 * 512 + 480), (33 * 512 - 480, 43 * 512 + 480)]
    # a 3-chunk (96 ms) segment is kept and does bridge them
    p = np.array(OFF * 5 + ON * 10 + OFF * 8 + ON * 3 + OFF * 8 + ON * 10 + OFF * 30, np.float32)
    assert ours(p, p.size * CHUNK, IFEVAL) == [(5 * 512 - 480, 44 * 512 + 480)]
    # speech still in its min-silence wait when the signal ends runs to the end (the library's last-segment rule)
    p = np.array(OFF * 5 + ON * 10 + OFF * 2, np.float32)
    assert ours(p, p.size * CHUNK - 100, IFEVAL) == [(5 * 512 - 480, 17 * 512 - 100)]
    # ... but only if it is longer than the minimum speech: 2 chunks + 100 samples is 1124 <= 1440
    p = np.array(OFF * 5 + ON * 3, np.float32)
    assert ours(p, p.size * CHUNK - 412, IFEVAL) == []
    assert ours(p, p.size * CHUNK, IFEVAL) == [(5 * 512 - 480, 8 * 512)]  # 1536 > 1440: kept, clipped to the end
    # the edge: open speech of exactly 1440 samples at the end is not longer than the minimum; one more sample is
    assert ours(p, 5 * 512 + 1440, IFEVAL) == []
    assert ours(p, 5 * 512 + 1441, IFEVAL) == [(5 * 512 - 480, 5 * 512 + 1441)]
    # speech from the first chunk: the pad is clipped at 0
    p = np.array(ON * 10 + OFF * 10, np.float32)
    assert ours(p, p.size * CHUNK, IFEVAL) == [(0, 10 * 512 + 480)]


@pytest.mark.parametrize("p, kept", [(0.5, True), (0.49, False)])
def test_speech_starts_at_the_threshold(p: float, kept: bool) -> None:
    probs = np.array(OFF * 5 + [p] * 10 + OFF * 10, np.float32)
    assert ours(probs, probs.size * CHUNK, IFEVAL) == ([(5 * 512 - 480, 15 * 512 + 480)] if kept else [])


@pytest.mark.parametrize("dip, split", [(0.35, False), (0.3499, True)])
def test_speech_ends_below_the_negative_threshold(dip: float, split: bool) -> None:
    """0.35 (the library's neg_threshold, 0.5 - 0.15) is not silence; below it is. In float64: no float32 equals
    0.35, so the edge itself is only reachable in double precision."""
    probs = np.array(OFF * 5 + ON * 10 + [dip] * 6 + ON * 10 + OFF * 10, np.float64)
    got = ours(probs, probs.size * CHUNK, replace(IFEVAL, merge_gap_ms=0))
    assert got == ([(5 * 512 - 480, 15 * 512 + 480), (21 * 512 - 480, 31 * 512 + 480)] if split
                   else [(5 * 512 - 480, 31 * 512 + 480)])


@pytest.mark.parametrize("ms, spans", [
    (95, [(5 * 512 - 480, 8 * 512 + 480)]),  # 3 chunks = 1536 samples > 95 ms (1520)
    (96, []),  # 1536 is not more than 96 ms (1536): the library keeps only segments longer than the minimum
])
def test_minimum_speech_is_strict(ms: int, spans: list[tuple[int, int]]) -> None:
    probs = np.array(OFF * 5 + ON * 3 + OFF * 10, np.float32)
    assert ours(probs, probs.size * CHUNK, replace(IFEVAL, min_speech_ms=ms)) == spans


@pytest.mark.parametrize("gap_chunks, spans", [
    (11, [(5 * 512 - 480, 36 * 512 + 480)]),  # padded gap 11 * 512 - 960 = 4672 < 4800: one span
    (12, [(5 * 512 - 480, 15 * 512 + 480), (27 * 512 - 480, 37 * 512 + 480)]),  # 5184: two
])
def test_the_merge_edge(gap_chunks: int, spans: list[tuple[int, int]]) -> None:
    probs = np.array(OFF * 5 + ON * 10 + OFF * gap_chunks + ON * 10 + OFF * 20, np.float32)
    assert ours(probs, probs.size * CHUNK, IFEVAL) == spans


def test_silero_pad() -> None:
    # the first start and the last end widened; ends clipped to the signal
    assert silero_pad([(1000, 2000)], 480, 5000) == [(520, 2480)]
    assert silero_pad([(100, 4800)], 480, 5000) == [(0, 5000)]
    assert silero_pad([(100, 4800)], 480, None) == [(0, 5280)]  # a stream's end is not known yet
    # neighbours 1000 apart (>= 2 * 480) each take the full pad
    assert silero_pad([(1000, 2000), (3000, 4000)], 480, 9000) == [(520, 2480), (2520, 4480)]
    # neighbours 500 apart split the gap: 250 each
    assert silero_pad([(1000, 2000), (2500, 4000)], 480, 9000) == [(520, 2250), (2250, 4480)]
    # an odd gap: the earlier end takes the floor half, the later start gives up the same
    assert silero_pad([(1000, 2000), (2501, 4000), (4100, 5000)], 480, 9000) == [(520, 2250), (2251, 4050),
                                                                                  (4050, 5480)]
    assert silero_pad([], 480, 9000) == []


def test_merge_samples() -> None:
    assert merge_samples([(0, 100), (150, 200)], 50) == [(0, 100), (150, 200)]  # a gap of exactly 50 stays
    assert merge_samples([(0, 100), (150, 200)], 51) == [(0, 200)]
    assert merge_samples([(0, 100), (150, 200), (260, 300)], 60) == [(0, 200), (260, 300)]
    assert merge_samples([(0, 100), (150, 200), (250, 300)], 60) == [(0, 300)]
    assert merge_samples([(0, 100), (100, 200)], 0) == [(0, 100), (100, 200)]  # no merge at all with gap 0
    assert merge_samples([], 60) == []


def state_after_each_chunk(probs: list[float], params: VADParams) -> list[tuple[Any, ...]]:
    t = span_tracker(params)
    rows = []
    for p in probs:
        t.step(p)
        rows.append((t.speaking, t.speech_now, t.last_speech_end(), len(t.onsets), list(t.done)))
    return rows


def test_streaming_known_answers() -> None:
    """Chunk by chunk (the scheduler's view): speech starting at chunk 5 is confirmed once it is longer than 90 ms
    (after chunk 7: 3 chunks, 1536 samples), its onset is the padded start; it stops being speech at the first low
    chunk, and its span is final once no later segment could still join it (0.3 s merge + both pads)."""
    t = span_tracker(IFEVAL)
    probs = OFF * 5 + ON * 10 + OFF * 20
    rows = state_after_each_chunk(probs, IFEVAL)
    for p in probs:
        t.step(p)
    assert t.onsets == [5 * 512 - 480]
    assert rows[6] == (False, False, None, 0, [])  # 2 chunks: not yet
    assert rows[7] == (True, True, 8 * 512 + 480, 1, [])
    assert rows[14] == (True, True, 15 * 512 + 480, 1, [])
    assert rows[15] == (True, False, 15 * 512 + 480, 1, [])  # the first low chunk: silence wait, span open
    assert rows[18] == (True, False, 15 * 512 + 480, 1, [])  # segment closed (4 low chunks), merge hang-over
    # final once a segment starting now would begin at least 4800 + 960 samples after the segment's end (15*512)
    last_open = max(k for k, r in enumerate(rows) if r[0])
    assert (last_open + 1 + 1) * 512 - 15 * 512 >= 4800 + 960 > (last_open + 1) * 512 - 15 * 512
    assert rows[-1] == (False, False, 15 * 512 + 480, 1, [(5 * 512 - 480, 15 * 512 + 480)])
    assert t.done == [(5 * 512 - 480, 15 * 512 + 480)]
    # the end of the signal in the middle of speech: the span runs to the end, and nothing is speaking after it
    t = span_tracker(IFEVAL)
    for p in OFF * 5 + ON * 10:
        t.step(p)
    assert t.speaking and t.speech_now
    t.finish(15 * 512)
    assert (t.speaking, t.speech_now) == (False, False)
    assert t.done == [(5 * 512 - 480, 15 * 512)]


def test_streaming_onset_of_a_segment_joining_the_open_span_is_not_new() -> None:
    """A second segment inside the merge reach joins the open span: no second onset, one span."""
    probs = OFF * 5 + ON * 10 + OFF * 6 + ON * 10 + OFF * 30
    t = span_tracker(IFEVAL)
    for p in probs:
        t.step(p)
    assert t.onsets == [5 * 512 - 480] and t.done == [(5 * 512 - 480, 31 * 512 + 480)]
    # far apart: two onsets, the second padded, and the first span final before the second starts
    probs = OFF * 5 + ON * 10 + OFF * 20 + ON * 10 + OFF * 30
    t = span_tracker(IFEVAL)
    for p in probs:
        t.step(p)
    assert t.onsets == [5 * 512 - 480, 35 * 512 - 480]
    assert t.done == [(5 * 512 - 480, 15 * 512 + 480), (35 * 512 - 480, 45 * 512 + 480)]


# Settings the streaming rules must agree with the offline ones under, besides the preset: no merge with segments
# closer than both pads (the onset splits the gap, silero's rule), and a merge reach on the chunk grid (320 ms, no
# pad: a segment starting exactly 10 chunks after a kept one's end starts a new span; min speech under one chunk,
# so it is confirmed in the chunk it starts).
STREAMING = {"ifeval": {}, "no merge": {"merge_gap_ms": 0},
             "close, no merge": {"merge_gap_ms": 0, "min_silence_ms": 0, "min_speech_ms": 20, "speech_pad_ms": 100},
             "reach on the grid": {"merge_gap_ms": 320, "min_silence_ms": 0, "min_speech_ms": 20, "speech_pad_ms": 0}}


def test_a_segment_exactly_the_merge_reach_away_starts_a_new_span() -> None:
    """Merge 320 ms with no pad: a gap of 10 chunks (5120 samples) is not under the merge gap, so the second
    segment is a span of its own with its own onset; 9 chunks join."""
    params = replace(IFEVAL, **STREAMING["reach on the grid"])
    for gap, onsets, done in ((10, [5 * 512, 18 * 512], [(5 * 512, 8 * 512), (18 * 512, 21 * 512)]),
                              (9, [5 * 512], [(5 * 512, 20 * 512)])):
        t = span_tracker(params)
        for p in OFF * 5 + ON * 3 + OFF * gap + ON * 3 + OFF * 30:
            t.step(p)
        assert (t.onsets, t.done) == (onsets, done), gap


def test_a_span_is_final_the_chunk_the_merge_reach_is_reached() -> None:
    """The same reach on the grid with 90 ms of minimum speech (a segment confirmed in its third chunk): the first
    span stops speaking after chunk 17, when a segment could start no earlier than 10 chunks after its end (chunk
    8), not when the next segment is confirmed (chunk 20)."""
    params = replace(IFEVAL, **{**STREAMING["reach on the grid"], "min_speech_ms": 90})
    rows = state_after_each_chunk(OFF * 5 + ON * 3 + OFF * 10 + ON * 3 + OFF * 30, params)
    assert [r[0] for r in rows[15:21]] == [True, True, False, False, False, True]
    assert rows[17][4] == [(5 * 512, 8 * 512)] and rows[20][3] == 2


# A silence is timed from its first low chunk to the chunk being read (32 chunks apart in a dip of 33); a gap from
# one segment's end to the next one's start (32 chunks in a dip of 32).
@pytest.mark.parametrize(("setting", "dip"), [("min_silence_ms", 33), ("merge_gap_ms", 32)])
def test_a_long_setting_just_past_a_chunk_edge(setting: str, dip: int) -> None:
    """1,025 ms is 16,400 samples, 16 past the edge of chunk 32: 32 chunks (16,384 samples) neither end a segment
    under that minimum silence nor keep two apart under that merge gap; one chunk more does both."""
    change = {"min_silence_ms": 0, "merge_gap_ms": 0, "min_speech_ms": 20, "speech_pad_ms": 0, setting: 1025}
    params = replace(IFEVAL, **change)
    for k, spans in ((dip, [(5 * 512, (8 + dip + 3) * 512)]),
                     (dip + 1, [(5 * 512, 8 * 512), ((8 + dip + 1) * 512, (8 + dip + 4) * 512)])):
        probs = OFF * 5 + ON * 3 + OFF * k + ON * 3 + OFF * 40
        assert ours(np.array(probs), len(probs) * CHUNK, params) == spans, k


def test_the_rules_choose_the_tracker() -> None:
    """Two 64 ms bursts 128 ms apart: silero-vad drops each (90 ms or less) before the merge; the project's rules
    merge them first and keep the span, 256 ms of unpadded speech."""
    probs, n = OFF * 5 + ON * 2 + OFF * 4 + ON * 2 + OFF * 30, 43 * CHUNK
    assert ours(np.array(probs), n, IFEVAL) == []
    assert ours(np.array(probs), n, replace(IFEVAL, rules="project")) == [(5 * 512 - 480, 13 * 512 + 480)]


# --- the runs over many sequences last: the hand-worked answers above fail first and fast on a broken rule ---


@pytest.mark.parametrize("name", sorted(STREAMING))
def test_streaming_agrees_with_the_final_spans(name: str) -> None:
    """Chunk by chunk (no end of signal): finalized spans are a prefix of the offline ones and the confirmed onsets
    are the offline spans' starts; only speech open at the very end may be added by `finish`."""
    params = replace(IFEVAL, **STREAMING[name])
    for probs, _ in probability_runs(3, 300):
        n = probs.size * CHUNK
        t = span_tracker(params)
        for p in probs:
            t.step(float(p))
        streamed, onsets = list(t.done), list(t.onsets)
        final = ours(probs, n, params)
        assert streamed == final[: len(streamed)]
        starts = [a for a, _ in final]
        assert onsets in (starts, starts[:-1]), (onsets, starts)


def test_streaming_state_pinned() -> None:
    """The streaming state after every chunk (speaking, speech now, last speech end, onsets, the final spans so far)
    on 300 fixed runs, under the preset, with 100 ms padding, no merge, and no merge or minimum silence with 100 ms
    padding (segments closer than both pads: each confirmation must close the span before), equals (by digest) what
    it was when test_streaming_agrees_with_the_final_spans and the library comparisons held."""
    changes = {"ifeval": {}, "pad 100 ms": {"speech_pad_ms": 100}, "no merge": {"merge_gap_ms": 0},
               "close, no merge": {"merge_gap_ms": 0, "min_silence_ms": 0, "min_speech_ms": 20, "speech_pad_ms": 100}}
    pinned = {"ifeval": "acc91f601ca80f63f5620f8d77878f10545e3941787096acc7376c710e2ff213",
              "pad 100 ms": "c697001ec7e4dd0827106efbcccd7b4219407046d2d5dac35b4d7ff68163f66f",
              "no merge": "b06cce980ea165d3405006307600d2154649b0d4d776be1e7576b8c3c206ef9c",
              "close, no merge": "a9d2419ad25671d664d8f61452e7dd8991a055d9b5a8ccbba6d677d75c4c9cf1"}
    for name, change in changes.items():
        params = replace(IFEVAL, **change)
        h = hashlib.sha256()
        for probs, _ in probability_runs(20240611, 300):
            h.update(json.dumps(state_after_each_chunk([float(p) for p in probs], params)).encode())
        assert h.hexdigest() == pinned[name], name


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_spans_equal_the_pinned_library_answers(name: str) -> None:
    params, runs = setting(name)
    assert digest([ours(p, n, params) for p, n in runs]) == LIBRARY_DIGESTS[name]
