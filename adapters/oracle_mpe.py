"""The oracle's Duplex-MPE behaviour: answers a target turn, holds the floor after an N4 question, stops at the
N4 redirect, all timed from the realised timeline cues; it speaks through the project's TTS and gives no text
(MPE episodes carry none)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from adapters.base import Say
from adapters.protocol import TimelineCue
from dataset_builder.audio import seconds_to_samples

if TYPE_CHECKING:
    from adapters.oracle import OracleAgent

# Long enough to still be speaking when N4R starts after the answering window, so yielding is exercised.
HOLDING_REPLY = ("Sure, let me look into that for you. I am checking what I know about it, "
                 "and I will have an answer for you in just a moment.")


def answer_sentence(gold_answer: str) -> str:
    return f"The answer is {gold_answer}."


class MPEOracleScript:
    """What the oracle says when, for one MPE case: the gold answer after T, a holding reply after N4Q, and a stop
    when N4R starts."""

    def __init__(self, case: Any, agent: OracleAgent) -> None:
        self.sr = agent.sample_rate
        self.answer_delay_s = agent.answer_delay_s
        self.stop_delay_s = agent.stop_delay_s
        self.labels: dict[str, str] = {t.turn_id: t.label for t in case.script.turns}
        self.answer = agent.mouth.speak(answer_sentence(case.script.gold_answer))
        self.holding = agent.mouth.speak(HOLDING_REPLY) if "N4Q" in self.labels.values() else np.zeros(0, np.float32)

    def on_cue(self, event: TimelineCue) -> list[Say]:
        label = self.labels.get(event.turn_id)
        delay = seconds_to_samples(self.answer_delay_s, self.sr)
        if event.kind == "clip_end" and label == "T":
            return [(event.sample + delay, "say", self.answer, None)]
        if event.kind == "clip_end" and label == "N4Q":
            return [(event.sample + delay, "say", self.holding, None)]
        if event.kind == "clip_start" and label == "N4R":
            return [(event.sample + seconds_to_samples(self.stop_delay_s, self.sr), "stop", None, None)]
        return []

    def frame(self, n: int) -> None:
        """None: it speaks through the agent's speech queue."""
        return None


def oracle_script(case: Any, agent: OracleAgent) -> MPEOracleScript:
    return MPEOracleScript(case, agent)
