"""The oracle's DSB-IFEval behaviour: the expected action at the right time, from the case's gold.

Turn 1 is answered (briefly before a take-turn turn 2; at length before a barge-in turn 2, so the user barges in
over it). In turn 2 the oracle does what `expected_action` asks, timed from the realised start of turn 2 and the
segment timings in the gold (DESIGN.md, "Trigger events and windows"): it stays silent (LISTEN,
NO_BACKCHANNEL), says one short "mm-hmm" after the attention check (BACKCHANNEL), takes the turn in the pause
(TAKE_TURN), cuts in after the trigger phrase (INTERRUPT), stops when the user barges in (YIELD) or talks on over
them (CONTINUE, ACCEPT_OVERLAP), and once turn 2 is over reads the dictated target back (READBACK) or closes.
Everything it says is also given as text (App. E.5 scores a readback on the model's own text).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from adapters.base import MAX_INNER_GAP_S, Say, tighten
from adapters.protocol import TimelineCue
from dataset_builder.audio import seconds_to_samples
from dataset_builder.ifeval.schema import BARGE_WINDOW_S

if TYPE_CHECKING:
    from adapters.oracle import OracleAgent

ACK = "I see. Go on."  # answers turn 1 before a take-turn turn 2
# Answers turn 1 before a barge-in turn 2: spoken on, sentence after sentence, until it outlasts the barge window.
HOLDING = ("Let me make sure I follow everything you are telling me.",
           "I am going to go over what I have heard so far, one piece at a time.",
           "Then we can decide together what the next step should be.",
           "There is no rush at all, so we can take this as slowly as you need.")
TAKE_TURN = "Got it."  # short enough to fit a 1.2 s chunk gap after the answer delay
BACKCHANNEL = "Mm-hmm."
INTERRUPT = "Sorry to cut in, but that is important."
READBACK = "Let me read that back: {target}."
CLOSING = "Thank you. I understand."

def spaced_digits(text: str) -> str:
    """Digit runs said one digit at a time ("4172" -> "4 1 7 2"), as a caller would hear a readback."""
    return re.sub(r"\b\d{2,}\b", lambda m: " ".join(m.group(0)), text)


class IFEvalOracleScript:
    """What the oracle says when, for one IFEval case; `on_cue` turns realised timeline cues into timed actions."""

    def __init__(self, item: Any, speak: Any, sample_rate: int, answer_delay_s: float,
                 stop_delay_s: float) -> None:
        self.gold: dict[str, Any] = item.gold()
        self.sr = sample_rate
        self.speak = speak  # text -> audio at sample_rate
        self.delay = seconds_to_samples(answer_delay_s, sample_rate)
        self.stop_delay = seconds_to_samples(stop_delay_s, sample_rate)
        self.t2_start: int | None = None

    def utter(self, at: int, text: str) -> Say:
        return at, "say", tighten(self.speak(text), self.sr), text

    def holding(self, at: int) -> Say:
        """A reply to turn 1 that is still going when a barge-in turn 2's window closes."""
        need = (self.gold["barge_in_after_s"] or 0.0) + BARGE_WINDOW_S + 2.0
        gap = np.zeros(seconds_to_samples(MAX_INNER_GAP_S, self.sr), np.float32)
        parts: list[np.ndarray] = []
        said: list[str] = []
        while sum(len(p) for p in parts) < need * self.sr:
            text = HOLDING[len(said) % len(HOLDING)]
            parts += [tighten(self.speak(text), self.sr), gap]
            said.append(text)
        return at, "say", np.concatenate(parts[:-1]), " ".join(said)

    def at(self, rel_s: float) -> int:
        assert self.t2_start is not None
        return self.t2_start + seconds_to_samples(rel_s, self.sr)

    def on_cue(self, cue: TimelineCue) -> list[Say]:
        g = self.gold
        action = g["expected_action"]
        if cue.turn_id == "t1" and cue.kind == "clip_end":
            if g["turn2_mode"] == "barge_in":
                return [self.holding(cue.sample + self.delay)]
            return [self.utter(cue.sample + self.delay, ACK)]
        if cue.turn_id != "t2":
            return []
        if cue.kind == "clip_end":
            if action == "READBACK":
                return [self.utter(cue.sample + self.delay, READBACK.format(target=spaced_digits(
                    g["readback_target"])))]
            return [self.utter(cue.sample + self.delay, CLOSING)]
        self.t2_start = cue.sample
        w0 = g["window_rel_s"][0]
        if action == "YIELD":
            return [(cue.sample + self.stop_delay, "stop", None, None)]
        if action == "TAKE_TURN":
            return [self.utter(self.at(w0) + self.delay, TAKE_TURN)]
        if action == "INTERRUPT":  # w0 is the end of the trigger phrase
            return [self.utter(self.at(w0) + self.delay, INTERRUPT)]
        if action == "BACKCHANNEL":  # after the check phrase, inside the pause that follows it
            check = next(s for s in g["turn2_segments"] if s["mark"] == "check")
            return [self.utter(self.at(check["end_s"]) + self.delay, BACKCHANNEL)]
        # LISTEN, NO_BACKCHANNEL: silent through turn 2; CONTINUE, ACCEPT_OVERLAP: the holding reply talks on;
        # READBACK: after turn 2 (above).
        return []

    def frame(self, n: int) -> None:
        """None: it speaks through the agent's speech queue (what `on_cue` returns)."""
        return None


def oracle_script(case: Any, agent: OracleAgent) -> IFEvalOracleScript:
    return IFEvalOracleScript(case, agent.mouth.speak, agent.sample_rate, agent.answer_delay_s, agent.stop_delay_s)
