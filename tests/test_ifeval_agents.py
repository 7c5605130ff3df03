"""The reference agents' DSB-IFEval parts, piece by piece (the whole chain is tests/test_ifeval_e2e.py)."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.base import tighten
from adapters.cascade_policy import ACKNOWLEDGE, TurnPolicy
from adapters.oracle_ifeval import HOLDING, IFEvalOracleScript, spaced_digits
from adapters.protocol import TimelineCue
from dataset_builder.audio import SESSION_SR, seconds_to_samples
from dataset_builder.rules.readback import coverage
from metrics.vad import VAD_PRESETS, SileroVAD
from tests.test_ifeval_plan import barge_item, make_item, pause_item

SR = SESSION_SR


def test_tightened_speech_is_one_vad_utterance(speak) -> None:
    """A pause inside an utterance longer than the IFEval VAD bridges (spans merged within 0.3 s, after Silero's
    padding and its 90 ms silence rule) splits it; the oracle talking on over a barge-in must not look as if it
    stopped, so its inner pauses are shortened. Two of its sentences with half a second between them stand for
    piper's longest sentence pauses."""
    raw = np.concatenate([speak(HOLDING[0]), np.zeros(SR // 2, np.float32), speak(HOLDING[1])])
    vad = SileroVAD(VAD_PRESETS["ifeval"])
    assert len(vad.spans(raw, SR)) >= 2
    tight = tighten(raw, SR)
    spans = vad.spans(tight, SR)
    assert len(spans) == 1 and spans[0].start_s < 0.05 and len(tight) < len(raw)


def test_spaced_digits_keep_the_readback_tokens() -> None:
    target = "4172 Maple Street, apartment 3B"
    assert spaced_digits(target) == "4 1 7 2 Maple Street, apartment 3B"
    assert coverage(target, spaced_digits(target)) == 1.0


@pytest.mark.parametrize("heard, said", [
    ("My number is five five five, two oh one, four eight seven three.",
     "Let me read that back: 5 5 5, 2 0 1, 4 8 7 3."),
    ("I just feel so tired all the time.", ACKNOWLEDGE),
    ("", None),
    (" ... ", None),
])
def test_cascade_one_to_one_policy(heard: str, said: str | None) -> None:
    assert TurnPolicy().hear(heard) == said


def _script(item, speak) -> IFEvalOracleScript:
    return IFEvalOracleScript(item, speak, SR, answer_delay_s=0.3, stop_delay_s=0.0)


def test_oracle_takes_the_turn_at_the_pause(speak) -> None:
    item, _ = pause_item(speak=speak)
    script = _script(item, speak)
    t1_end, t2_start = seconds_to_samples(5.0), seconds_to_samples(9.0)
    (at, what, audio, text), = script.on_cue(TimelineCue("clip_end", "t1", t1_end))
    assert (at, what) == (t1_end + seconds_to_samples(0.3), "say") and text
    (at, what, audio, text), = script.on_cue(TimelineCue("clip_start", "t2", t2_start))
    w0 = item.timed.window(item.case)[0]
    assert at == t2_start + seconds_to_samples(w0) + seconds_to_samples(0.3) and what == "say"
    assert audio is not None and len(audio) / SR < 1.2 - 0.3  # fits in a 1.2 s chunk gap after the delay


def test_oracle_yields_at_a_barge_in_it_has_talked_long_enough_for(speak) -> None:
    item, _ = barge_item(speak=speak)
    script = _script(item, speak)
    (_, _, holding, _), = script.on_cue(TimelineCue("clip_end", "t1", 0))
    assert len(holding) / SR >= 3.0 + 3.0 + 1.0  # the offset, the 3.0 s barge window, and a margin
    assert script.on_cue(TimelineCue("clip_start", "t2", seconds_to_samples(3.4))) == [
        (seconds_to_samples(3.4), "stop", None, None)]


def test_oracle_backchannels_once_after_the_check_and_reads_back_at_the_end(speak) -> None:
    item, _ = make_item("R5", "C4", "So the answer is here <check:you with me?> <pause:1.5s> and then it doubles.",
                        "BACKCHANNEL", "check", speak=speak)
    script = _script(item, speak)
    (at, _, audio, text), = script.on_cue(TimelineCue("clip_start", "t2", 0))
    check_end = next(s.end_s for s in item.timed.timings["t2"] if s.mark == "check")
    assert at == seconds_to_samples(check_end) + seconds_to_samples(0.3)
    assert text == "Mm-hmm." and len(audio) / SR < 1.0 - 0.3  # shorter than the ceiling, inside the 1.5 s pause
    (_, _, _, closing), = script.on_cue(TimelineCue("clip_end", "t2", seconds_to_samples(8.0)))
    assert closing and "read that back" not in closing


def test_oracle_stays_silent_through_a_listen_turn(speak) -> None:
    item, _ = make_item("R5", "C1", "I think the next step <pause:3.5s> is to divide both sides by two.", "LISTEN",
                        "pause", speak=speak)
    assert _script(item, speak).on_cue(TimelineCue("clip_start", "t2", 0)) == []
