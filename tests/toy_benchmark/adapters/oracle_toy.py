"""The oracle's toy behaviour: it answers the question `answer_delay_s` after hearing it end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.base import Say
from adapters.protocol import TimelineCue
from dataset_builder.audio import seconds_to_samples

if TYPE_CHECKING:
    from adapters.oracle import OracleAgent


class ToyOracleScript:
    def __init__(self, case: Any, agent: OracleAgent) -> None:
        self.answer: str = case.gold()["answer"]
        self.speak = agent.mouth.speak
        self.delay = seconds_to_samples(agent.answer_delay_s, agent.sample_rate)

    def on_cue(self, cue: TimelineCue) -> list[Say]:
        if cue.turn_id == "q" and cue.kind == "clip_end":
            return [(cue.sample + self.delay, "say", self.speak(self.answer), self.answer)]
        return []

    def frame(self, n: int) -> None:
        """None: it speaks through the agent's speech queue."""
        return None


def oracle_script(case: Any, agent: OracleAgent) -> ToyOracleScript:
    return ToyOracleScript(case, agent)
