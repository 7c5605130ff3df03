"""The DSB-IFEval user-stream plan (docs/benchmarks/ifeval.md, App. D): two user turns around the model's replies.

    t1 (context) | wait | t2 (the scored turn, one contiguous clip) | trailing wait

- Take-turn turn 2: played once the model has answered turn 1 and then been silent for `endpoint_s`, never
  sooner than `inter_turn_gap_s` after turn 1; a model that has not started speaking by then is not waited for.
  A model that says nothing therefore hears the dataset's nominal audio (t1, 3.0 s, t2, 5.0 s; exactly, up to the
  whole-ms rounding of the rows' clip positions).
- Barge-in turn 2: injected at the model's first speech onset after turn 1 + the conversation's
  `barge_in_after_s` (3.0 s C3, 2.0 s R8_B), over the model's speech. The clip then plays whole whatever the
  model does ("hold" semantics: the user stream never pauses for the model), so every model hears the same turn.
- Trailing: at least `trailing_s` of silence, extended while the model is still answering (so a readback is never
  cut off), up to `response_cap_s`.

Turn ids are "t1"/"t2" (the trigger window in DESIGN.md is anchored on the realised start of "t2"); each clip's
label is its turn mode. rec.json's gold is `schema.gold` plus `t2_start`: what decided the realised start of
turn 2 (written while the episode runs; see `NoteTurn2`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dataset_builder.audio import SESSION_SR, resample, seconds_to_samples
from dataset_builder.benchmark_params import IFEvalProtocol
from dataset_builder.ifeval.schema import IFEvalItem
from eval.schedule import BargeIn, Ctx, EpisodePlan, Play, Step
from metrics.vad import vad_of

TURN_IDS = ("t1", "t2")


@dataclass
class TurnEnd:
    """Silence after a user turn until the model has had its say.

    At least `min_s`. Past that, it waits only for a model that has spoken since the step began: until that model
    has been silent for `endpoint_s`, or `cap_s` after the step began. `min_s` is sample-exact, so a model that
    never speaks gets exactly `min_s`; the other decisions fall on frame boundaries, from what the model has
    already said. `cause` says which rule ended it: "gap" (it ended at `min_s`: the model said nothing, or had
    already been silent `endpoint_s`), "endpoint" (later, once the model had been silent `endpoint_s`) or "cap".
    """

    min_s: float
    endpoint_s: float
    cap_s: float
    start: int | None = None
    spoke: bool = False
    cause: str = ""

    def take(self, n: int, ctx: Ctx) -> np.ndarray | None:
        if self.start is None:
            self.start = ctx.sample
        self.spoke = self.spoke or ctx.model.speaking
        elapsed = ctx.sample - self.start
        floor = seconds_to_samples(self.min_s, ctx.sr)
        if elapsed < floor:
            return np.zeros(min(n, floor - elapsed), np.float32)
        if not self.spoke or (not ctx.model.speaking and ctx.model.silence_s >= self.endpoint_s):
            self.cause = "gap" if elapsed == floor else "endpoint"
        elif elapsed >= seconds_to_samples(self.cap_s, ctx.sr):
            self.cause = "cap"
        else:
            return np.zeros(n, np.float32)
        return None


@dataclass
class NoteTurn2:
    """Hands out nothing: records in `into` (the plan's gold, written to rec.json after the episode) why turn 2
    starts now. Placed right after the wait before turn 2, so `ctx.sample` is turn 2's realised start."""

    wait: TurnEnd | BargeIn
    into: dict[str, Any]

    def take(self, n: int, ctx: Ctx) -> np.ndarray | None:
        note: dict[str, Any] = {"at_s": round(ctx.sample / ctx.sr, 3)}
        if isinstance(self.wait, BargeIn):
            anchor = self.wait.anchor_s
            note["cause"] = "model_onset" if anchor is not None else "timeout"
            note["model_onset_s"] = None if anchor is None else round(anchor, 3)
        else:
            note["cause"] = self.wait.cause
        self.into["t2_start"] = note
        return None


def cut_clips(item: IFEvalItem, audio: np.ndarray, sr: int) -> dict[str, np.ndarray]:
    """Each turn's clip, cut from the row's nominal 24 kHz audio and resampled to `sr`."""
    return {tid: resample(audio[seconds_to_samples(a):seconds_to_samples(b)], SESSION_SR, sr)
            for tid, (a, b) in item.clips.items()}


def strata(case: IFEvalItem) -> tuple[tuple[str, str], str]:
    """`run --sample`: whole conversations (every conditioning level of one: the level gaps compare a
    conversation with itself), spread over the roles first, then turn 2's mode (take-turn, barge-in)."""
    return (f"role {case.case.role}", f"turn 2 {case.timed.conversation.turn2.mode}"), case.case.conversation_id


def plan(case: IFEvalItem, audio: np.ndarray, protocol: IFEvalProtocol, sr: int) -> EpisodePlan:
    """The whole episode: the level's system prompt, the steps, the IFEval VAD, the gold (DESIGN.md)."""
    c = case.case
    vad = vad_of(protocol)
    gold = case.gold()
    return EpisodePlan(steps=user_steps(case, audio, protocol, sr, gold), vad=vad, vad_preset="ifeval",
                       protocol=protocol.to_dict(), condition=c.level, group_id=c.conversation_id, gold=gold,
                       system_prompt=c.system_prompt)


def user_steps(item: IFEvalItem, audio: np.ndarray, protocol: IFEvalProtocol, sr: int,
               notes: dict[str, Any] | None = None) -> list[Step]:
    conv = item.timed.conversation
    turns = {t.turn_id: t for t in conv.turns}
    if tuple(turns) != TURN_IDS or set(item.clips) != set(TURN_IDS):
        raise ValueError(f"{item.case_id}: expected turns {TURN_IDS}, got {tuple(turns)} / clips {sorted(item.clips)}")
    clips = cut_clips(item, audio, sr)
    wait: TurnEnd | BargeIn
    if turns["t2"].mode == "barge_in":
        assert conv.barge_in_after_s is not None  # the schema requires it on barge-in turns
        wait = BargeIn(after_s=conv.barge_in_after_s, timeout_s=protocol.barge_in_timeout_s)
    else:
        wait = TurnEnd(protocol.inter_turn_gap_s, protocol.endpoint_s, protocol.response_cap_s)
    return [
        Play("t1", turns["t1"].mode, clips["t1"], text=turns["t1"].markup),
        wait,
        NoteTurn2(wait, notes if notes is not None else {}),
        Play("t2", turns["t2"].mode, clips["t2"], text=turns["t2"].markup),
        TurnEnd(protocol.trailing_s, protocol.endpoint_s, protocol.response_cap_s),
    ]
