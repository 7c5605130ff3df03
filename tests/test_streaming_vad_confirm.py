"""The streaming VAD confirms speech before it reports it (tests/MUTATION.md, bug 7), on real Silero and real piper
speech.

A 100 ms cut of voiced speech — a cough, a click, a breath — crosses Silero's threshold but is shorter than the
MPE preset's min_speech_ms (250 ms). The scheduler must never see it as speech: `speaking` stays False, no onset
is confirmed, and a take-turn wait is not ended by it as if the model had answered and gone quiet.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.schedule import Ctx, Play, StepScheduler, TakeTurn
from metrics.vad import VAD_PRESETS, SileroVAD, StreamingVAD

SR = 24_000
PARAMS = VAD_PRESETS["mpe"]
COUGH_AT = 0.5  # seconds into the model channel


@pytest.fixture(scope="module")
def utterance(speak) -> np.ndarray:
    return speak("The answer is one hundred fifty minutes.")


@pytest.fixture(scope="module")
def cough(utterance: np.ndarray) -> np.ndarray:
    """The 100 ms cut of the utterance that Silero, hearing it alone at COUGH_AT, is surest is speech."""
    vad = SileroVAD(PARAMS)
    n = int(0.1 * SR)

    def voiced_chunks(start: int) -> float:
        probs = vad.probabilities(model_channel(utterance[start:start + n], total_s=1.0), SR)
        return float(np.sum(probs >= PARAMS.threshold)) + float(probs.sum()) / 100

    best = max(range(0, utterance.size - n, n // 5), key=voiced_chunks)
    return utterance[best:best + n].copy()


def model_channel(burst: np.ndarray, total_s: float = 6.0) -> np.ndarray:
    x = np.zeros(int(total_s * SR), np.float32)
    a = int(COUGH_AT * SR)
    x[a:a + burst.size] = burst
    return x


def test_the_cough_is_voiced_but_short(cough: np.ndarray) -> None:
    """The premise: Silero does call the cut speech (so only the confirmation rule keeps it out)."""
    assert cough.size == int(0.1 * SR)
    probs = SileroVAD(PARAMS).probabilities(model_channel(cough), SR)
    assert (probs >= PARAMS.threshold).sum() >= 2
    assert 0.1 * 1000 < PARAMS.min_speech_ms
    assert SileroVAD(PARAMS).spans(model_channel(cough), SR) == []


@pytest.mark.parametrize("frame", [480, 1920])
def test_streaming_vad_never_reports_an_unconfirmed_burst(cough: np.ndarray, frame: int) -> None:
    """tests/MUTATION.md bug 7: `speaking` must wait for min_speech confirmation; a 100 ms cough never turns it on."""
    sig = model_channel(cough)
    vad = StreamingVAD(PARAMS, sr=SR)
    for i in range(0, sig.size, frame):
        vad.push(sig[i:i + frame])
        assert not vad.speaking, f"speaking at {vad.time_s:.3f} s"
        assert vad.silence_s == math.inf and vad.onsets == [] and not vad.ever_spoke
    assert vad.spans == []


@pytest.mark.parametrize("frame", [480, 1920])
def test_confirmed_speech_is_reported(utterance: np.ndarray, frame: int) -> None:
    """The contrast: the same speech, long enough, is reported speaking within min_speech of its start."""
    sig = model_channel(utterance, total_s=COUGH_AT + utterance.size / SR + 2.0)
    vad = StreamingVAD(PARAMS, sr=SR)
    first = None
    for i in range(0, sig.size, frame):
        vad.push(sig[i:i + frame])
        if vad.speaking and first is None:
            first = vad.time_s
    assert first is not None
    assert COUGH_AT + PARAMS.min_speech_ms / 1000 <= first <= COUGH_AT + PARAMS.min_speech_ms / 1000 + 0.2
    assert len(vad.onsets) == 1 and abs(vad.onsets[0] - COUGH_AT) <= 0.1


def run_take_turn(model: np.ndarray, frame: int, endpoint_s: float = 1.5, timeout_s: float = 3.0) -> int:
    """The orchestrator's loop: fill the user frame from the VAD state, then push the model's frame."""
    vad = StreamingVAD(PARAMS, sr=SR)
    ctx = Ctx(sample=0, sr=SR, model=vad)
    sched = StepScheduler([TakeTurn(endpoint_s=endpoint_s, timeout_s=timeout_s, cap_s=20.0),
                           Play("next", "N1", np.full(SR, 0.1, np.float32))])
    while not sched.done:
        pos = ctx.sample
        sched.fill(frame, ctx)
        for cue in ctx.cues:
            if cue.kind == "clip_start":
                return cue.sample
        ctx.cues = []
        vad.push(model[pos:pos + frame] if pos + frame <= model.size else np.zeros(frame, np.float32))
    raise AssertionError("the plan ended without playing the next clip")


@pytest.mark.parametrize("frame", [480, 1920])
def test_a_cough_does_not_end_a_take_turn_wait(cough: np.ndarray, frame: int) -> None:
    """tests/MUTATION.md bug 7: after a 100 ms cough the wait runs to its timeout, as for a silent model."""
    timeout = frame * math.ceil(3 * SR / frame)  # 3.0 s, on the first frame boundary at or after it
    assert run_take_turn(model_channel(cough), frame) == timeout
    assert run_take_turn(np.zeros(6 * SR, np.float32), frame) == timeout


@pytest.mark.parametrize("frame", [480, 1920])
def test_an_answer_ends_a_take_turn_wait_at_its_endpoint(utterance: np.ndarray, frame: int) -> None:
    model = model_channel(utterance, total_s=10.0)
    end_s = COUGH_AT + utterance.size / SR
    started = run_take_turn(model, frame, timeout_s=1.0) / SR
    # After the answer's last voiced chunk plus 1.5 s of confirmed silence (piper's trailing quiet, the VAD's
    # chunk grid and the frame make up the slack), well past the 1.0 s timeout it would otherwise have hit.
    assert end_s + 1.5 - 0.5 <= started <= end_s + 1.5 + 0.2
