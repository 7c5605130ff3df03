"""The one protocol every model implements (SPEC §3).

One frame of user audio in, one frame of model audio out, on the 24 kHz session clock. Turn-based systems
buffer internally; realtime services declare `realtime=True` and are paced in wall-clock time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

CAPABILITIES = frozenset({"system_prompt", "teacher_forcing", "text_output", "gold_cues"})


class Frame(NamedTuple):
    audio: np.ndarray  # float32, exactly frame_size samples at sample_rate
    text: str | None = None


@dataclass(frozen=True)
class TimelineCue:
    """A realised user-stream event, sent only to agents with the "gold_cues" capability (the oracle).

    `kind` is "clip_start" or "clip_end"; `sample` is the session sample at which it happened; `turn_id`
    names the clip ("preamble" for the duty preamble).
    """

    kind: str
    turn_id: str
    sample: int


@runtime_checkable
class DuplexAgent(Protocol):
    name: str
    version: str
    sample_rate: int
    frame_size: int
    realtime: bool
    capabilities: frozenset[str]

    def reset(self, system_prompt: str | None, seed: int) -> None:
        """Fresh state for a new case."""
        ...

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        """Consume one frame of user audio, emit one frame of model audio."""
        ...

    def close(self) -> None: ...


class GoldAware(Protocol):
    """Optional hooks of agents with the "gold_cues" capability."""

    def bind_case(self, case: Any) -> None: ...

    def cue(self, event: TimelineCue) -> None: ...
