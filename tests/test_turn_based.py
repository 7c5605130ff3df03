"""`turn-based` with a tiny half-duplex inner model defined here, through the real plan and orchestrator.

`FixedReply` hears each user turn at 16 kHz and answers only a turn of at least `min_turn_s` (with the 0.5 s before
the onset and the quiet that ended it) with a fixed piper reply and its text. Checked: the reply lands sample for
sample once, from the frame after the one that ended the turn (end-of-turn by the real Silero VAD; the one timing
rule of docs/adding-a-model.md), with its text on that frame;
the model heard the turn at its own rate; every parameter is in rec.json; a user speaking over the reply stops it
after the reaction time, and with barge-in off the reply plays out (check-adapter: tests/test_check_adapter.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters.registry import adapter_target
from adapters.turn_based import Reply, TurnBasedAgent
from dataset_builder.audio import SESSION_SR, to_pcm16
from dataset_builder.errors import UsageError
from eval.orchestrator import RunOptions, run_episode
from eval.plans.mpe import plan
from tests.test_openai_realtime import ANSWER, FAST, LONG_ANSWER, N4_TURNS, T_TURNS, channels

INNER = "tests.test_turn_based:FixedReply"
FRAME = 1920


class FixedReply:
    """A half-duplex model: a fixed spoken reply to any turn at least `min_turn_s` long."""

    sample_rate = 16_000
    capabilities = frozenset({"text_output"})
    version = "fixed-reply"

    def __init__(self, text: str = ANSWER, min_turn_s: float = 3.0) -> None:
        from dataset_builder.tts.piper_backend import PiperTTS

        tts = PiperTTS()
        self.text, self.min_turn_s = text, min_turn_s
        self.audio = tts.synthesize(text, tts.assistant_voice)  # 24 kHz
        self.heard: list[tuple[int, int]] = []  # (samples, rate) of each turn

    def describe(self) -> dict[str, Any]:
        return {"text": self.text, "min_turn_s": self.min_turn_s}

    def reply(self, audio: np.ndarray, sr: int) -> Reply | None:
        self.heard.append((audio.size, sr))
        return Reply(self.audio, 24_000, self.text) if audio.size >= self.min_turn_s * sr else None


@pytest.fixture(scope="module")
def t_case(piper):
    from tests.test_orchestrator import make_case

    return make_case(piper, T_TURNS, "tb-t")


@pytest.fixture(scope="module")
def n4_case(piper):
    from tests.test_orchestrator import make_case

    return make_case(piper, N4_TURNS, "tb-n4")


# The reply is heard from the frame after the one that ended the turn, ~0.9 s after T ends: a window of 1.5 s for
# its onset, so the plan waits for it.
WAITS = replace(FAST, t_onset_window_s=1.5)


def run(agent: TurnBasedAgent, t_case, out: Path, protocol=WAITS):
    case, audio = t_case
    ep_plan = plan(case, audio, protocol, SESSION_SR)
    try:
        return ep_plan, run_episode(agent, case, ep_plan, out, options=RunOptions(step_timeout_s=30.0))
    finally:
        agent.close()


def test_reply_lands_once_after_the_turn_with_its_text(t_case, speak, tmp_path: Path) -> None:
    agent = TurnBasedAgent(inner=INNER, end_of_turn_s=0.6)
    ep_plan, ep = run(agent, t_case, tmp_path)
    assert ep.status == "ok", ep.failure
    _, model = channels(tmp_path, t_case[0].case_id)
    expected = to_pcm16(speak(ANSWER))
    onset = int(np.flatnonzero(model)[0]) - int(np.flatnonzero(expected)[0])
    assert onset % FRAME == 0  # from a frame boundary: the step after the one that ended the turn
    assert np.array_equal(model[onset:onset + expected.size], expected)
    assert not model[onset + expected.size:].any()
    t_clip = next(e for e in ep.timeline if e.turn_id == "t01")
    # End of turn: 0.6 s of quiet as the VAD hears it (its speech ends a little after the clip, within its 300 ms
    # merge hang-over), rounded up to a frame, and the reply heard from the next frame on.
    assert t_clip.end_s + 0.6 + FRAME / SESSION_SR <= onset / SESSION_SR <= t_clip.end_s + 0.9 + 2 * FRAME / SESSION_SR
    assert ep.model_text == [[round(onset / SESSION_SR, 3), ANSWER]]
    heard = agent.model.heard
    assert all(sr == 16_000 for _, sr in heard) and len(heard) >= 2  # the VAD's turns: preamble, ..., T, ...
    assert sum(n >= 3.0 * 16_000 for n, _ in heard) == 1
    runtime = json.loads((tmp_path / f"{t_case[0].case_id}.rec.json").read_text())["adapter"]["runtime"]
    assert runtime == {"inner": INNER, "inner_args": {}, "inner_describe": {"text": ANSWER, "min_turn_s": 3.0},
                       "inner_sample_rate": 16_000, "end_of_turn_s": 0.6, "barge_in_stop_s": 0.4,
                       "response_delay_s": 0.0, "preroll_s": 0.5, "vad": {"min_speech_ms": 150, "merge_gap_ms": 300}}
    assert ep.adapter["version"] == "1/fixed-reply" and ep.adapter["capabilities"] == ["text_output"]


def test_barge_in_stops_the_reply_after_the_reaction_time(n4_case, speak, tmp_path: Path) -> None:
    """N4R starts 1.6 s after N4Q, about 0.7 s into the reply to N4Q: the reply stops once N4R has held the floor
    for 0.4 s; with barge-in off (a negative reaction time) the whole reply plays over N4R."""
    # 2.5 s: the turn the VAD hears for N4Q (0.5 s before its onset, 1.6 s of speech, the quiet that ends it).
    args, protocol = {"text": LONG_ANSWER, "min_turn_s": 2.5}, replace(WAITS, n4_answer_window_s=1.6)
    agent = TurnBasedAgent(inner=INNER, inner_args=args, barge_in_stop_s=0.4)
    _, ep = run(agent, n4_case, tmp_path / "stop", protocol)
    _, ep_off = run(TurnBasedAgent(inner=INNER, inner_args=args, barge_in_stop_s=-1), n4_case, tmp_path / "off",
                    protocol)
    assert ep.status == ep_off.status == "ok", (ep.failure, ep_off.failure)
    expected = to_pcm16(speak(LONG_ANSWER))
    q_end = round(next(e for e in ep.timeline if e.turn_id == "t02").end_s * SESSION_SR)
    r_start = next(e for e in ep.timeline if e.turn_id == "t03").start_s
    _, model = channels(tmp_path / "stop", n4_case[0].case_id)
    _, model_off = channels(tmp_path / "off", n4_case[0].case_id)
    # The answer to N4Q (the plan waited for the answer to T to end before going on).
    onset = q_end + int(np.flatnonzero(model_off[q_end:])[0]) - int(np.flatnonzero(expected)[0])
    assert onset / SESSION_SR < r_start
    assert np.array_equal(model_off[onset:onset + expected.size], expected)  # played out over N4R
    last = onset + int(np.flatnonzero(model[onset:])[-1])
    cut = (last // FRAME + 1) * FRAME  # the reply stops at a frame boundary
    assert np.array_equal(model[onset:cut], expected[:cut - onset]) and cut - onset < expected.size
    # The VAD confirms N4R (150 ms minimum speech), then the user must hold the floor 0.4 s.
    assert r_start + 0.4 <= cut / SESSION_SR <= r_start + 0.4 + 0.15 + 3 * FRAME / SESSION_SR, cut / SESSION_SR
    assert [t for _, t in ep.model_text] == [LONG_ANSWER, LONG_ANSWER]  # stamped when each reply started


def test_a_reply_is_heard_from_the_frame_after_the_turn_ends(speak) -> None:
    """The one timing rule (docs/adding-a-model.md): the step whose input ends the turn calls the model, and its
    own output is still silent; the reply starts on the next frame, with its text."""
    agent = TurnBasedAgent(inner=INNER, inner_args={"min_turn_s": 0.5}, end_of_turn_s=0.6)
    agent.reset(None, 0)
    user = np.concatenate([speak("Could you tell me what time it is?"), np.zeros(2 * SESSION_SR, np.float32)])
    user = np.pad(user, (0, -user.size % FRAME))
    frames = [agent.step(user[i:i + FRAME]) for i in range(0, user.size, FRAME)]
    agent.close()
    called = len(agent.model.heard)
    assert called == 1
    loud = [i for i, f in enumerate(frames) if f.audio.any()]
    first = loud[0]
    assert not frames[first - 1].audio.any() and frames[first].text == ANSWER
    # Replay up to the frame before the reply: the model was called in that frame's step, not earlier.
    again = TurnBasedAgent(inner=INNER, inner_args={"min_turn_s": 0.5}, end_of_turn_s=0.6)
    again.reset(None, 0)
    for i in range(first - 1):
        again.step(user[i * FRAME:(i + 1) * FRAME])
    assert again.model.heard == []
    again.step(user[(first - 1) * FRAME:first * FRAME])
    assert len(again.model.heard) == 1
    again.close()


def _two_turns_over_one_reply(speak, barge_in_stop_s: float) -> tuple[list[Any], int]:
    """A question, then, while the (long) reply to it still plays, a second short question: the frames played and
    how many turns the model answered."""
    agent = TurnBasedAgent(inner=INNER, inner_args={"text": LONG_ANSWER, "min_turn_s": 0.5}, end_of_turn_s=0.6,
                           barge_in_stop_s=barge_in_stop_s)
    agent.reset(None, 0)
    user = np.concatenate([speak("What is the weather like?"), np.zeros(SESSION_SR, np.float32), speak("Thanks."),
                           np.zeros(12 * SESSION_SR, np.float32)])
    user = np.pad(user, (0, -user.size % FRAME))
    frames = [agent.step(user[i:i + FRAME]) for i in range(0, user.size, FRAME)]
    agent.close()
    return frames, len(agent.model.heard)


def test_without_barge_in_a_reply_that_comes_while_one_plays_is_queued_after_it(speak) -> None:
    """DSB-IFEval's harness never suppresses model output (D.2) and places it at max(now, end of what is queued)
    (D.3): the reply to the second turn follows the first sample for sample; with barge-in on it is lost."""
    expected = speak(LONG_ANSWER)
    frames, answered = _two_turns_over_one_reply(speak, -1.0)
    assert answered == 2  # "Thanks." ended while the first reply played (not cut: barge-in off)
    model = np.concatenate([f.audio for f in frames])
    first = int(np.flatnonzero(model)[0]) - int(np.flatnonzero(expected)[0])
    assert np.array_equal(model[first:first + 2 * expected.size], np.concatenate([expected, expected]))
    assert not model[first + 2 * expected.size:].any()
    stamped = [i for i, f in enumerate(frames) if f.text]
    assert [frames[i].text for i in stamped] == [LONG_ANSWER, LONG_ANSWER]
    assert stamped[1] == (first + expected.size) // FRAME  # the second text where its audio starts
    frames_on, answered_on = _two_turns_over_one_reply(speak, 5.0)  # barge-in on, "Thanks." too short to stop it
    assert answered_on == 2
    model_on = np.concatenate([f.audio for f in frames_on])
    assert np.array_equal(model_on[first:first + expected.size], expected)
    assert not model_on[first + expected.size:].any()


def test_arguments_and_registry() -> None:
    assert adapter_target("turn-based") == "adapters.turn_based:TurnBasedAgent"
    with pytest.raises(UsageError, match="name the half-duplex model"):
        TurnBasedAgent()
    with pytest.raises(UsageError, match="'module:Class'"):
        TurnBasedAgent(inner="nocolon")
    with pytest.raises(UsageError, match="cannot load inner model"):
        TurnBasedAgent(inner="tests.test_turn_based:Missing")
    with pytest.raises(UsageError, match="not a SpeechModel"):
        TurnBasedAgent(inner="tests.test_turn_based:NotAModel")
    with pytest.raises(UsageError, match="inner_args is not JSON"):
        TurnBasedAgent(inner=INNER, inner_args="{x")


class NotAModel:
    pass
