"""DSB-IFEval's VAD rules are silero-vad's own (App. E.2): our spans equal the library's `get_speech_timestamps` with
min speech 90 ms and min silence 90 ms, its other defaults, then the 0.3 s merge — on the same probabilities and
on real piper speech. Duplex-MPE's and M3's rules are unchanged (pinned on a fixed set of probability sequences).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
import torch
from silero_vad.utils_vad import get_speech_timestamps

from dataset_builder.audio import VAD_SR, resample
from metrics.m3.extract import EVENTS_VAD
from metrics.vad import CHUNK, VAD_PRESETS, SileroVAD, VADParams, merge_samples, span_tracker, spans_from_probs

IFEVAL = VAD_PRESETS["ifeval"]


class _Probs:
    """A stand-in for the Silero model inside the library's own function: it answers the given probabilities,
    so `get_speech_timestamps` runs its real segmentation on exactly what our tracker sees."""

    def __init__(self, probs: np.ndarray) -> None:
        self.probs = probs
        self.k = 0

    def reset_states(self) -> None:
        self.k = 0

    def __call__(self, chunk: torch.Tensor, sr: int) -> torch.Tensor:
        p = torch.tensor(self.probs[self.k], dtype=torch.float32)
        self.k += 1
        return p


def _library(probs: np.ndarray, n_samples: int, params: VADParams) -> list[tuple[int, int]]:
    """silero-vad's get_speech_timestamps (defaults but min speech/silence and padding), then the merge."""
    segs = get_speech_timestamps(torch.zeros(n_samples), _Probs(probs), threshold=params.threshold,
                                 min_speech_duration_ms=params.min_speech_ms,
                                 min_silence_duration_ms=params.min_silence_ms, speech_pad_ms=params.speech_pad_ms)
    return merge_samples([(s["start"], s["end"]) for s in segs], params.merge_gap_ms * VAD_SR // 1000)


def _ours(probs: np.ndarray, n_samples: int, params: VADParams) -> list[tuple[int, int]]:
    return [(round(s.start_s * VAD_SR), round(s.end_s * VAD_SR)) for s in spans_from_probs(probs, n_samples, params)]


def _sequences(seed: int, count: int) -> Iterator[tuple[np.ndarray, int]]:
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


def test_ifeval_uses_the_library_rules() -> None:
    assert IFEVAL.rules == "silero" and VAD_PRESETS["mpe"].rules == VAD_PRESETS["m3"].rules == "project"
    assert IFEVAL.neg_threshold == max(IFEVAL.threshold - 0.15, 0.01)  # the library's default neg_threshold
    with pytest.raises(ValueError, match="rules"):
        VADParams(rules="webrtc")


def test_spans_equal_the_library_on_random_probabilities() -> None:
    same = sum(_ours(p, n, IFEVAL) == _library(p, n, IFEVAL) for p, n in _sequences(7, 600))
    assert same == 600


@pytest.mark.parametrize("change", [{"min_silence_ms": 0}, {"merge_gap_ms": 0}, {"speech_pad_ms": 100},
                                    {"speech_pad_ms": 0, "min_speech_ms": 250, "min_silence_ms": 100},
                                    {"merge_gap_ms": 0, "min_silence_ms": 0, "min_speech_ms": 20}])
def test_spans_equal_the_library_under_other_settings(change: dict[str, int]) -> None:
    """--param may move min speech/silence, padding and the merge: the rules stay the library's."""
    params = replace(IFEVAL, **change)
    same = sum(_ours(p, n, params) == _library(p, n, params) for p, n in _sequences(11, 150))
    assert same == 150


def test_known_answers() -> None:
    """The two rules where the project's differ, on the 32 ms grid (512 samples, padding 480)."""
    on, off = [0.9], [0.0]
    # speech ends after 4 low chunks (3 * 512 >= 1440 samples of silence counted from the first), not 3:
    # a 3-chunk dip inside speech does not split it
    p = np.array(off * 5 + on * 10 + off * 3 + on * 10 + off * 30, np.float32)
    assert _ours(p, p.size * CHUNK, replace(IFEVAL, merge_gap_ms=0)) == [(5 * 512 - 480, 28 * 512 + 480)]
    # a 2-chunk (64 ms) segment is dropped before the merge, so it cannot bridge two spans 0.3 s apart
    p = np.array(off * 5 + on * 10 + off * 8 + on * 2 + off * 8 + on * 10 + off * 30, np.float32)
    assert _ours(p, p.size * CHUNK, IFEVAL) == [(5 * 512 - 480, 15 * 512 + 480), (33 * 512 - 480, 43 * 512 + 480)]
    # a 3-chunk (96 ms) segment is kept and does bridge them
    p = np.array(off * 5 + on * 10 + off * 8 + on * 3 + off * 8 + on * 10 + off * 30, np.float32)
    assert _ours(p, p.size * CHUNK, IFEVAL) == [(5 * 512 - 480, 44 * 512 + 480)]
    # speech still in its min-silence wait when the signal ends runs to the end (the library's last-segment rule)
    p = np.array(off * 5 + on * 10 + off * 2, np.float32)
    assert _ours(p, p.size * CHUNK - 100, IFEVAL) == [(5 * 512 - 480, 17 * 512 - 100)]


def test_streaming_agrees_with_the_final_spans() -> None:
    """Chunk by chunk (the scheduler's view, no end of signal): finalized spans are a prefix of the offline ones and
    each confirmed onset is an offline span's start; only speech open at the very end may be added by `finish`."""
    for probs, _ in _sequences(3, 300):
        n = probs.size * CHUNK
        t = span_tracker(IFEVAL)
        for p in probs:
            t.step(float(p))
        streamed, onsets = list(t.done), list(t.onsets)
        final = [(round(s.start_s * VAD_SR), round(s.end_s * VAD_SR)) for s in spans_from_probs(probs, n, IFEVAL)]
        assert streamed == final[: len(streamed)]
        starts = [a for a, _ in final]
        assert onsets in (starts, starts[:-1]), (onsets, starts)


def test_project_rules_unchanged() -> None:
    """Duplex-MPE's, M3's and M3's event VAD: spans and the streaming state after every chunk, on 300 fixed
    sequences, equal (by digest) what the tracker gave before the "silero" rules were added."""
    pinned = {"mpe": "0f0d7a7b3daacaf806a333b5aaa64dd158996b27c5f7f6c29133217905562f45",
              "m3": "8759fae19d6893faadefd971f274dbcd91406c0887a1ec38c6f3ad0d9ea9d3bd",
              "m3_events": "1667aa7500d480ba506e66ccf82992589de7dfc810e04c75a63445a307f18f27"}
    data = list(_sequences(20240611, 300))
    for name, params in {"mpe": VAD_PRESETS["mpe"], "m3": VAD_PRESETS["m3"], "m3_events": EVENTS_VAD}.items():
        h = hashlib.sha256()
        for probs, n in data:
            t = span_tracker(params)
            rows = []
            for p in probs:
                t.step(float(p))
                rows.append((t.speaking, t.speech_now, t.last_speech_end(), len(t.onsets), len(t.done)))
            t.finish(n)
            h.update(json.dumps((rows, t.done, t.onsets)).encode())
        assert h.hexdigest() == pinned[name], name


# --- real speech ---------------------------------------------------------------------------------------------

SR = 24_000


@pytest.fixture(scope="module")
def pauses(speak) -> np.ndarray:
    """Real piper speech with pauses around the rules' edges (90 ms min silence, 0.3 s merge) and a 80 ms cut."""
    a = speak("Let me check the dosage you mentioned.")
    b = speak("Two tablets, twice a day.")
    c = speak("Is that right?")
    parts = [np.zeros(int(0.7 * SR)), a, np.zeros(int(0.1 * SR)), b, np.zeros(int(0.6 * SR)), c,
             np.zeros(int(0.25 * SR)), a[int(0.4 * SR):int(0.48 * SR)], np.zeros(int(0.25 * SR)), b,
             np.zeros(int(1.2 * SR)), c[: int(0.6 * SR)]]  # ends mid-speech
    return np.concatenate(parts).astype(np.float32)


def test_spans_equal_the_library_on_real_speech(pauses: np.ndarray) -> None:
    """The library run end to end on the same 16 kHz samples (its own model calls) gives our spans exactly."""
    import silero_vad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = silero_vad.load_silero_vad(onnx=True)
    x16 = resample(pauses, SR, VAD_SR)
    segs = get_speech_timestamps(torch.from_numpy(x16), model, min_speech_duration_ms=90, min_silence_duration_ms=90)
    want = merge_samples([(s["start"], s["end"]) for s in segs], 300 * VAD_SR // 1000)
    got = [(round(s.start_s * VAD_SR), round(s.end_s * VAD_SR)) for s in SileroVAD(IFEVAL).spans(x16, VAD_SR)]
    assert got == want
    assert len(want) >= 3, want


def test_digital_silence_reuses_the_models_own_output(pauses: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the library's rules every chunk reaches the model, silence too; a silent channel takes the model's
    output on zeros from the per-process prefix (metrics/vad.py, `_ZERO_PROBS`): probabilities, spans and the
    streamed state after the silence are exactly what running the model on every chunk gives."""
    import metrics.vad as vad

    x16 = resample(pauses, SR, VAD_SR)
    silent = [np.zeros(n, np.float32) for n in (300 * CHUNK + 7, 41 * CHUNK, 600 * CHUNK - 5)]
    # The signals as fed to a model that sees every chunk: nothing memoised, no zero prefix kept.
    monkeypatch.setattr(vad, "_PROBS_MEMO", {})
    monkeypatch.setattr(vad, "_ZERO_PROBS", [])
    monkeypatch.setattr(vad, "_ZERO_STATES", [])
    monkeypatch.setattr(vad, "_ZERO_RUN_MAX", 0)
    runs = [SileroVAD(IFEVAL)._compute_probs16(x) for x in (*silent, x16)]
    assert not vad._ZERO_PROBS and runs[0][0] != runs[0][-1]  # its state never settles: not a constant
    monkeypatch.setattr(vad, "_ZERO_RUN_MAX", 400)  # the longest silence outgrows the prefix
    session = vad._silero_session()
    calls: list[int] = []

    class Counted:
        def run(self, *args: object) -> object:
            calls.append(1)
            return session.run(*args)

    monkeypatch.setattr(vad, "_silero_session", lambda: Counted())
    n_calls = []
    for x, want in zip((*silent, x16), runs, strict=True):
        calls.clear()
        assert np.array_equal(SileroVAD(IFEVAL)._compute_probs16(x), want)
        n_calls.append(len(calls))
    # 301 chunks kept; none run for 41; 600 run past the 301 known, keeping up to 400; the 21 whole chunks of the
    # recording's opening 0.7 s of silence come from the prefix
    assert n_calls[:3] == [301, 0, 299] and len(vad._ZERO_PROBS) == 400
    assert n_calls[3] == runs[3].size - 21, n_calls
    streamed = vad.StreamingVAD(IFEVAL, sr=VAD_SR)  # a live channel: same spans, chunk by chunk
    for k in range(0, x16.size, 4000):
        streamed.push(x16[k : k + 4000])
    assert streamed.spans
    assert [(s.start_s, s.end_s) for s in streamed.spans] == [
        (s.start_s, s.end_s) for s in spans_from_probs(runs[-1], x16.size, IFEVAL)][: len(streamed.spans)]
