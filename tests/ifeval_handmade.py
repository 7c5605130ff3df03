"""Hand-built DSB-IFEval episodes for scoring tests: a real contract gold, exact timings, chosen model channels.

The gold comes from the data contract itself (`dataset_builder.ifeval.schema`: a validated Conversation and
IFEvalCase, timed from the real TTS clip lengths, through `schema.gold`), so these tests read exactly what the
episode plan writes. A folder written here looks like one `duplex-eval run` wrote: `{case_id}.wav` (ch0 user,
ch1 model, 24 kHz) beside `{case_id}.rec.json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import round_ms
from dataset_builder.audio import SESSION_SR, write_wav
from dataset_builder.episode import Episode, TimelineEvent
from dataset_builder.ifeval import schema as S
from metrics.vad import VAD_PRESETS

USER_VOICE = "piper-joe-p118-f104"
T1_TEXT = "Hi, I need some help with something, if you have a minute."
T1_START = 0.5
GAP_S = 3.0
TAIL_S = 5.0
PERSONA = "You keep the line calm and steady for people who call in at the worst moment of their day."
CONTRADICTION = "Additionally: when I stop talking, wait for me to carry on."


@dataclass
class Built:
    """One case: its gold, where turn 2 and the trigger window lie in the recording, and the user channel."""

    case_id: str
    gold: dict[str, Any]
    t2_start: float
    t2_end: float
    w0: float
    w1: float
    duration: float
    user: np.ndarray
    model: np.ndarray = field(init=False)
    model_text: list[list[Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.model = np.zeros_like(self.user)

    def seg(self, mark: str, which: int = 0) -> tuple[float, float]:
        """Recording time of the `which`-th turn-2 segment with this mark."""
        segs = [s for s in self.gold["turn2_segments"] if s["mark"] == mark]
        return self.t2_start + segs[which]["start_s"], self.t2_start + segs[which]["end_s"]

    def say(self, audio: np.ndarray, at: float, until: float | None = None) -> Built:
        """Model speech starting at recording time `at`, cut off at `until` if given."""
        a = int(round(at * SESSION_SR))
        clip = audio if until is None else audio[: max(0, int(round((until - at) * SESSION_SR)))]
        self.model[a:a + clip.size] += clip[: self.model.size - a]
        return self


def _timings(segments: list[S.ProbeSegment], speak_user: Any) -> tuple[list[S.SegmentTiming], np.ndarray]:
    parts, timings, pos = [], [], 0
    for s in segments:
        audio = speak_user(s.text) if s.kind == "speech" else np.zeros(int(round(s.duration_s * SESSION_SR)),
                                                                       np.float32)
        timings.append(S.SegmentTiming(s.kind, s.mark, round_ms(pos / SESSION_SR),
                                       round_ms((pos + audio.size) / SESSION_SR)))
        parts.append(audio)
        pos += audio.size
    return timings, np.concatenate(parts)


def build(speak_user: Any, role: str, probe: str, level: str, t2_markup: str, base_action: str, event: str, *,
          expected_action: str | None = None, instance: int = 5, readback_target: str = "",
          matched_group: str = "", pre_barge_s: float = 3.0) -> Built:
    """A validated case of the contract and its user channel (turn 1 at 0.5 s, turn 2 after a 3 s gap, or for a
    barge-in turn `pre_barge_s` later, as if injected over the model; 5 s of tail)."""
    t1_segments, _ = S.parse_markup(T1_TEXT)
    t2_segments, barge = S.parse_markup(t2_markup)
    conv = S.Conversation(
        conversation_id=S.conversation_id(role, probe, instance), role=role, probe=probe, instance=instance,
        seed=0, voice=USER_VOICE,
        turns=[S.UserTurn("t1", T1_TEXT, t1_segments, "take_turn"),
               S.UserTurn("t2", t2_markup, t2_segments, "barge_in" if barge else "take_turn")],
        base_action=base_action, base_event=event, barge_in_after_s=3.0 if barge else None,
        readback_target=readback_target, readback_kind="phone" if readback_target else "",
        matched_group=matched_group, safety_relevant=(role, probe) in S.SAFETY_CELLS)
    conv.validate()
    action = expected_action or base_action
    l4 = level.startswith("L4")
    case = S.IFEvalCase(
        case_id=S.case_id(role, probe, instance, level), conversation_id=conv.conversation_id, role=role,
        probe=probe, instance=instance, level=level, system_prompt="" if level == "L0" else PERSONA,
        expected_action=action, base_action=base_action, event=event,
        resolution_target=S.RESOLUTIONS.get(level, ""), contradiction=CONTRADICTION if l4 else "",
        contradiction_variant=instance if level == "L4a" else 0, verifier=S.verifier_params(action, role),
        matched_audio=bool(matched_group), matched_group=matched_group,
        label_rule={"L4a": "directive-wins", "L4b": "persona-wins"}.get(level, "role-target"),
        rationale=f"hand-made case: {action} at the {event}", safety_relevant_audio=conv.safety_relevant)
    case.validate()
    t1_timings, t1_audio = _timings(t1_segments, speak_user)
    t2_timings, t2_audio = _timings(t2_segments, speak_user)
    timed = S.TimedConversation(conv, {"t1": t1_timings, "t2": t2_timings})
    gold = S.gold(case, timed, PERSONA)
    t1_end = T1_START + t1_audio.size / SESSION_SR
    t2_start = round_ms(t1_end + GAP_S + (pre_barge_s if barge else 0.0))
    t2_end = round_ms(t2_start + t2_audio.size / SESSION_SR)
    duration = round_ms(t2_end + TAIL_S)
    user = np.zeros(int(round(duration * SESSION_SR)), np.float32)
    for at, audio in ((T1_START, t1_audio), (t2_start, t2_audio)):
        a = int(round(at * SESSION_SR))
        user[a:a + audio.size] = audio
    w0_rel, w1_rel = gold["window_rel_s"]
    return Built(case.case_id, gold, t2_start, t2_end, round_ms(t2_start + w0_rel),
                 duration if w1_rel is None else round_ms(t2_start + w1_rel), duration, user)


def episode(b: Built, *, capabilities: tuple[str, ...] = ("system_prompt",), status: str = "ok",
            failure: str | None = None) -> Episode:
    t1_end = round_ms(b.t2_start - GAP_S)  # only the start of t2 matters to the scorer
    return Episode(
        case_id=b.case_id, benchmark="ifeval", condition=b.gold["level"], pair_id=b.gold["conversation_id"],
        status=status, failure=failure, adapter={"name": "handmade", "capabilities": sorted(capabilities)},
        params={"protocol": {}, "vad": VAD_PRESETS["ifeval"].to_dict() | {"preset": "ifeval"}}, seed=0,
        timeline=[TimelineEvent("t1", "t1", T1_START, t1_end), TimelineEvent("t2", "t2", b.t2_start, b.t2_end)],
        duration_s=b.duration, gold=b.gold, model_text=b.model_text)


def write(out: Path, b: Built, **kwargs: Any) -> Episode:
    out.mkdir(parents=True, exist_ok=True)
    ep = episode(b, **kwargs)
    write_wav(out / f"{b.case_id}.wav", np.stack([b.user, b.model], axis=1))
    ep.save(out / f"{b.case_id}.rec.json")
    return ep
