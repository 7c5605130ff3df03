"""The DSB-IFEval user-stream plan (docs/benchmarks/ifeval.md, App. D) on hand-built cases.

Against a scripted model whose speech times are known exactly, the step sequence is checked for each rule:
take-turn after the model's 1.5 s silence but never before the 3.0 s inter-turn gap, barge-in at model onset +
3.0 s (C3) / 2.0 s (R8_B) with the clip played whole, the trailing 5.0 s extended while the model answers. Then
the real orchestrator with the real streaming VAD: the system prompt reaches `reset`, rec.json carries the gold of
DESIGN.md and what decided turn 2's start, and a barge-in lands 3.0 s after the model's measured onset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR, read_wav, seconds_to_samples
from dataset_builder.benchmark_params import IFEvalProtocol
from dataset_builder.ifeval.schema import (
    Conversation,
    IFEvalCase,
    IFEvalItem,
    SegmentTiming,
    TimedConversation,
    UserTurn,
    case_id,
    conversation_id,
    parse_markup,
    verifier_params,
)
from eval.orchestrator import run_episode
from eval.plans.ifeval import plan
from eval.schedule import Ctx, StepScheduler
from metrics.vad import SileroVAD, vad_of
from tests.fake_agents import CueTalkerAgent
from tests.test_schedule import ScriptedModel

SR = SESSION_SR
FRAME = 480  # 20 ms: every wait decides on a frame boundary, so times are checked to one frame
TOL = FRAME / SR
P = IFEvalProtocol()
GOLD_KEYS = {  # DESIGN.md, "rec.json gold"
    "conversation_id", "role", "probe", "instance", "level", "expected_action", "base_action", "event",
    "resolution_target", "verifier", "window_anchor", "window_rel_s", "turn2_mode", "barge_in_after_s",
    "turn2_segments", "readback_target", "matched_audio", "matched_group", "persona", "contradiction", "user_text"}

T1 = "Hi, I would like to order some food for my family, we are all really hungry tonight."
T2_PAUSE = "So for the kids we want <pause:3.5s> two cheeseburgers with no pickles."
T2_BARGE = "<barge_in:Sorry, can I stop you there, I forgot to say he is on blood thinners.>"
PERSONA = "Twelve years on a busy emergency floor taught you which details matter."


def _speech_of(text: str, speak: Any) -> np.ndarray:
    return speak(text) if speak else np.full(int(0.06 * len(text) * SR), 0.1, np.float32)


def make_item(role: str, probe: str, t2: str, action: str, event: str, level: str = "L2",
              barge_in_after_s: float | None = None, speak: Any = None) -> tuple[IFEvalItem, np.ndarray]:
    """A valid case and its nominal audio (t1, 3.0 s, t2, 5.0 s): speech from `speak`, else a constant tone."""
    turns, timings, clips = [], {}, {}
    for tid, markup in (("t1", T1), ("t2", t2)):
        segments, barge = parse_markup(markup)
        turns.append(UserTurn(tid, markup, segments, "barge_in" if barge else "take_turn"))
        pos, audio = 0, []
        for seg in segments:
            a = _speech_of(seg.text, speak) if seg.kind == "speech" else np.zeros(
                seconds_to_samples(seg.duration_s), np.float32)
            audio.append(a)
        timings[tid] = []
        for seg, a in zip(segments, audio, strict=True):
            timings[tid].append(SegmentTiming(seg.kind, seg.mark, round(pos / SR, 3), round((pos + len(a)) / SR, 3)))
            pos += len(a)
        clips[tid] = np.concatenate(audio)
    conv = Conversation(conversation_id(role, probe, 1), role, probe, 1, seed=0, voice="v", turns=turns,
                        base_action=action, base_event=event, barge_in_after_s=barge_in_after_s)
    conv.validate()
    prompt = "" if level == "L0" else PERSONA
    case = IFEvalCase(case_id(role, probe, 1, level), conv.conversation_id, role, probe, 1, level, prompt, action,
                      action, event, "", "", 0, verifier_params(action, role), False, "", "role-target",
                      f"hand-made case: {action} at the {event}")
    case.validate()
    gap, tail = np.zeros(seconds_to_samples(3.0), np.float32), np.zeros(seconds_to_samples(5.0), np.float32)
    nominal = np.concatenate([clips["t1"], gap, clips["t2"], tail])
    n1 = len(clips["t1"])
    spans = {"t1": (0.0, n1 / SR), "t2": ((n1 + len(gap)) / SR, (n1 + len(gap) + len(clips["t2"])) / SR)}
    item = IFEvalItem(case, TimedConversation(conv, timings), spans, PERSONA, "test")
    return item, nominal


def pause_item(**kw: Any) -> tuple[IFEvalItem, np.ndarray]:
    return make_item("R6", "C1", T2_PAUSE, "TAKE_TURN", "pause", **kw)


def barge_item(probe: str = "C3", after: float = 3.0, **kw: Any) -> tuple[IFEvalItem, np.ndarray]:
    role = "R8" if probe == "R8_B" else "R1"
    return make_item(role, probe, T2_BARGE, "YIELD" if role == "R1" else "ACCEPT_OVERLAP", "barge",
                     barge_in_after_s=after, **kw)


def drive(item: IFEvalItem, audio: np.ndarray, spans: list[tuple[float, float]], protocol: IFEvalProtocol = P
          ) -> tuple[dict[str, tuple[float, float]], np.ndarray, dict[str, Any]]:
    """Run the plan's steps against a scripted model: clip (start, end) times, the user stream, the gold."""
    ep = plan(item, audio, protocol, SR)
    ref: list[Ctx] = []
    ctx = Ctx(sample=0, sr=SR, model=ScriptedModel(ref, spans))
    ref.append(ctx)
    sched = StepScheduler(ep.steps)
    out, starts, clips = [], {}, {}
    while not sched.done and ctx.sample < 120 * SR:
        out.append(sched.fill(FRAME, ctx))
        for cue in ctx.cues:
            if cue.kind == "clip_start":
                starts[cue.turn_id] = cue.sample / SR
            else:
                clips[cue.turn_id] = (starts[cue.turn_id], cue.sample / SR)
        ctx.cues = []
    stream = np.concatenate(out)
    # StepScheduler pads the last frame with silence once the plan is done: the plan's own end is ctx.sample
    # minus that padding, i.e. where the last frame's trailing silence began.
    return clips, stream, ep.gold


def assert_at(obtained: float, expected: float) -> None:
    """A wait ends on the first frame boundary at or after the time its rule names (float noise aside)."""
    assert expected - 1e-6 <= obtained <= expected + TOL + 1e-6, (obtained, expected)


def t1_end(item: IFEvalItem) -> float:
    return item.clips["t1"][1]


def test_a_silent_model_hears_exactly_the_nominal_audio() -> None:
    item, audio = pause_item()
    clips, stream, gold = drive(item, audio, spans=[])
    assert clips["t2"][0] == pytest.approx(t1_end(item) + 3.0, abs=1 / SR)
    assert np.array_equal(stream[:len(audio)], audio)
    assert not stream[len(audio):].any() and len(stream) - len(audio) <= FRAME  # then at most one frame of padding
    assert gold["t2_start"]["cause"] == "gap"


@pytest.mark.parametrize("model, expected, cause", [
    ((0.5, 4.0), 4.0 + 1.5, "endpoint"),  # answers turn 1: turn 2 after 1.5 s of its silence
    ((0.3, 0.9), 3.0, "gap"),  # a short answer: never before the 3.0 s inter-turn gap...
    ((0.3, 2.0), 2.0 + 1.5, "endpoint"),  # ...and still 1.5 s after it stops when that is later
    ((0.5, 60.0), 20.0, "cap"),  # never stops: response_cap_s after turn 1
    ((-1.0, 2.5), 2.5 + 1.5, "endpoint"),  # already talking over the end of turn 1
])
def test_take_turn_turn_2_waits_for_the_model_and_the_gap(model: tuple[float, float], expected: float,
                                                          cause: str) -> None:
    item, audio = pause_item()
    e1 = t1_end(item)
    clips, stream, gold = drive(item, audio, spans=[(e1 + model[0], e1 + model[1])])
    assert_at(clips["t2"][0], e1 + expected)
    assert gold["t2_start"]["cause"] == cause
    assert gold["t2_start"]["at_s"] == pytest.approx(clips["t2"][0], abs=1e-3)


def test_protocol_overrides_change_the_waits() -> None:
    item, audio = pause_item()
    e1 = t1_end(item)
    slow = P.override(["inter_turn_gap_s=6", "endpoint_s=0.5", "trailing_s=2"])
    clips, stream, _ = drive(item, audio, spans=[(e1 + 0.5, e1 + 1.0)], protocol=slow)
    assert clips["t2"][0] == pytest.approx(e1 + 6.0, abs=1 / SR)
    clips, _, _ = drive(item, audio, spans=[(e1 + 0.5, e1 + 7.0)], protocol=slow)
    assert_at(clips["t2"][0], e1 + 7.5)


@pytest.mark.parametrize("probe, after", [("C3", 3.0), ("R8_B", 2.0)])
def test_barge_in_lands_at_model_onset_plus_the_offset_and_plays_whole(probe: str, after: float) -> None:
    item, audio = barge_item(probe, after)
    e1 = t1_end(item)
    onset = e1 + 0.7
    clips, stream, gold = drive(item, audio, spans=[(onset, e1 + 30.0)])
    start, end = clips["t2"]
    assert_at(start, onset + after)
    a, b = item.clips["t2"]
    clip = audio[seconds_to_samples(a):seconds_to_samples(b)]
    at = seconds_to_samples(start)
    assert end - start == pytest.approx(len(clip) / SR, abs=1 / SR)  # the user never pauses for the model
    assert np.array_equal(stream[at:at + len(clip)], clip)
    assert gold["t2_start"] == {"at_s": round(start, 3), "cause": "model_onset", "model_onset_s": round(onset, 3)}
    assert gold["turn2_mode"] == "barge_in" and gold["barge_in_after_s"] == after


def test_barge_in_times_out_when_the_model_never_speaks() -> None:
    item, audio = barge_item()
    clips, _, gold = drive(item, audio, spans=[])
    assert_at(clips["t2"][0], t1_end(item) + P.barge_in_timeout_s)
    assert gold["t2_start"]["cause"] == "timeout" and gold["t2_start"]["model_onset_s"] is None


def test_barge_in_over_a_model_already_talking_times_from_that_utterance() -> None:
    item, audio = barge_item()
    e1 = t1_end(item)
    clips, _, _ = drive(item, audio, spans=[(e1 - 1.0, e1 + 30.0)])
    assert_at(clips["t2"][0], e1 - 1.0 + 3.0)


@pytest.mark.parametrize("reply, expected_tail", [
    (None, 5.0),  # silent: exactly the trailing 5.0 s
    ((0.5, 2.0), 5.0),  # answered and stopped well before: still 5.0 s
    ((0.5, 7.0), 7.0 + 1.5),  # still answering at 5.0 s: until 1.5 s after it stops
])
def test_trailing_silence_is_extended_while_the_model_answers(reply: tuple[float, float] | None,
                                                              expected_tail: float) -> None:
    item, audio = pause_item()
    e1 = t1_end(item)
    t2_start = e1 + 3.0
    t2_len = item.clips["t2"][1] - item.clips["t2"][0]
    spans = [] if reply is None else [(t2_start + t2_len + reply[0], t2_start + t2_len + reply[1])]
    clips, stream, _ = drive(item, audio, spans)
    end_of_plan = len(stream) / SR  # the plan ends inside the last frame
    assert end_of_plan - clips["t2"][1] == pytest.approx(expected_tail, abs=2 * TOL)


# ------------------------------------------------------------------- through the orchestrator, real VAD


class PromptRecorder(CueTalkerAgent):
    """The cue talker, remembering what `reset` was given."""

    def __init__(self, replies: dict[str, np.ndarray]) -> None:
        self.prompts: list[str | None] = []
        super().__init__(replies)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.prompts.append(system_prompt)
        super().reset(system_prompt, seed)


@pytest.mark.parametrize("level", ["L0", "L2"])
def test_episode_passes_the_level_prompt_to_reset_and_writes_the_gold(level: str, speak, tmp_path: Path) -> None:
    item, audio = pause_item(level=level, speak=speak)
    agent = PromptRecorder({"t1": speak("I see. Go on.")})
    ep = run_episode(agent, item, plan(item, audio, P, agent.sample_rate), tmp_path)
    assert agent.prompts[-1] == ("" if level == "L0" else PERSONA)  # L0's "" is passed as given, never None
    rec = json.loads((tmp_path / f"{item.case_id}.rec.json").read_text())
    assert rec["status"] == "ok" and rec["benchmark"] == "ifeval"
    assert rec["condition"] == level and rec["pair_id"] == item.case.conversation_id
    assert GOLD_KEYS <= set(rec["gold"]) and rec["gold"]["window_anchor"] == "t2"
    assert rec["gold"]["window_rel_s"] == list(item.timed.window(item.case))
    assert rec["params"]["protocol"] == P.to_dict() and rec["params"]["vad"]["preset"] == "ifeval"
    assert rec["params"]["vad"]["min_speech_ms"] == 90 and rec["params"]["vad"]["min_silence_ms"] == 90
    assert [(e.turn_id, e.label) for e in ep.timeline] == [("t1", "take_turn"), ("t2", "take_turn")]
    assert rec["gold"]["t2_start"]["at_s"] == ep.event("t2").start_s
    assert "system_prompt" not in rec["adapter"]["capabilities"]  # persona-blind, and the record says so


def test_real_barge_in_lands_three_seconds_after_the_measured_model_onset(speak, tmp_path: Path) -> None:
    item, audio = barge_item(speak=speak)
    reply = np.concatenate([speak("Let me make sure I follow everything you are telling me."),
                            speak("There is no rush at all, so we can take this as slowly as you need.")])
    agent = CueTalkerAgent({"t1": reply})
    ep = run_episode(agent, item, plan(item, audio, P, agent.sample_rate), tmp_path)
    stereo, _ = read_wav(tmp_path / f"{item.case_id}.wav")
    t1 = ep.event("t1")
    # the onset the scorer measures offline: the protocol's own VAD (silero-vad's rules, padding included)
    onset = next(s.start_s for s in SileroVAD(vad_of(P)).spans(stereo[:, 1], SR) if s.start_s >= t1.end_s)
    t2 = ep.event("t2")
    assert t2.start_s == pytest.approx(onset + 3.0, abs=0.04)  # one 20 ms frame plus the VAD's 32 ms chunk grid
    assert ep.gold["t2_start"]["cause"] == "model_onset"
    assert ep.gold["t2_start"]["model_onset_s"] == pytest.approx(onset, abs=0.033)
    at = seconds_to_samples(t2.start_s)
    assert np.abs(stereo[at:at + seconds_to_samples(0.1), 1]).max() > 0.05  # injected over the model's speech


def test_a_plan_without_two_turns_is_refused() -> None:
    item, audio = pause_item()
    broken = IFEvalItem(item.case, item.timed, {"t1": item.clips["t1"]}, PERSONA, "test")
    with pytest.raises(ValueError, match="expected turns"):
        plan(broken, audio, P, SR)
