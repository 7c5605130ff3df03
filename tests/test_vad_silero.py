"""DSB-IFEval's VAD rules are silero-vad's own (App. E.2): our spans equal the library's `get_speech_timestamps` with
min speech 90 ms and min silence 90 ms, its other defaults, then the 0.3 s merge — on the same probabilities (whose
library answers tests/test_vad_silero_rules.py pins, for the fast suite and mutation testing) and on real piper
speech. Duplex-MPE's and M3's rules are unchanged (pinned on a fixed set of probability sequences).
"""

from __future__ import annotations

import hashlib
import json
import warnings

import numpy as np
import pytest
import torch
from silero_vad.utils_vad import get_speech_timestamps

from dataset_builder.audio import VAD_SR, resample
from metrics.m3.extract import EVENTS_VAD
from metrics.vad import CHUNK, VAD_PRESETS, SileroVAD, VADParams, merge_samples, span_tracker, spans_from_probs
from tests.test_vad_silero_rules import LIBRARY_DIGESTS, SETTINGS, digest, ours, probability_runs, setting

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


def test_ifeval_uses_the_library_rules() -> None:
    assert IFEVAL.rules == "silero" and VAD_PRESETS["mpe"].rules == VAD_PRESETS["m3"].rules == "project"
    assert IFEVAL.neg_threshold == max(IFEVAL.threshold - 0.15, 0.01)  # the library's default neg_threshold
    with pytest.raises(ValueError, match="rules"):
        VADParams(rules="webrtc")


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_spans_equal_the_library_on_random_probabilities(name: str) -> None:
    """--param may move min speech/silence, padding and the merge: the rules stay the library's, run by run; and
    the library's answers are the ones tests/test_vad_silero_rules.py pins."""
    params, runs = setting(name)
    library = [_library(p, n, params) for p, n in runs]
    assert sum(ours(p, n, params) == want for (p, n), want in zip(runs, library, strict=True)) == len(runs)
    assert digest(library) == LIBRARY_DIGESTS[name]


def test_project_rules_unchanged() -> None:
    """Duplex-MPE's, M3's and M3's event VAD: spans and the streaming state after every chunk, on 300 fixed
    sequences, equal (by digest) what the tracker gave before the "silero" rules were added."""
    pinned = {"mpe": "0f0d7a7b3daacaf806a333b5aaa64dd158996b27c5f7f6c29133217905562f45",
              "m3": "8759fae19d6893faadefd971f274dbcd91406c0887a1ec38c6f3ad0d9ea9d3bd",
              "m3_events": "1667aa7500d480ba506e66ccf82992589de7dfc810e04c75a63445a307f18f27"}
    data = list(probability_runs(20240611, 300))
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
