"""The one protocol every model implements (docs/adding-a-model.md).

One frame of user audio in, one frame of model audio out, on the 24 kHz session clock. Turn-based systems
buffer internally; realtime services declare `realtime=True` and are paced in wall-clock time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

CAPABILITIES = frozenset({"system_prompt", "teacher_forcing", "text_output", "gold_cues"})


class Frame(NamedTuple):
    """One step's output. `note` is optional and never scored: what the model heard or decided at this step, in its
    own words (an ASR transcript, "addressed: answering"), stored in rec.json `notes` and shown on the report's
    episode page, so a failed window can be explained (docs/adding-a-model.md: notes). `Frame(audio, text)` is
    unchanged."""

    audio: np.ndarray  # float32, exactly frame_size samples at sample_rate
    text: str | None = None
    note: str | None = None


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


@runtime_checkable
class BatchedDuplexAgent(DuplexAgent, Protocol):
    """An agent that steps `batch_size` independent episodes ("slots") at once on one clock (docs/scale.md).

    It is also a plain DuplexAgent: `reset`/`step` act as a batch of one, so every single-episode path works.
    The lockstep runner (eval/) keeps B episodes in flight: it resets a slot when a new case enters it, and on
    every tick passes each slot's user frame; a slot without an episode gets silence and its output is ignored.
    A slot's results must not depend on what the other slots hear: the same case and seed give the same samples
    in any slot, at any batch size, as one at a time.
    """

    batch_size: int

    def reset_slot(self, slot: int, system_prompt: str | None, seed: int) -> None:
        """Fresh state for one slot (a new case enters it); the other slots are untouched."""
        ...

    def step_batch(self, user_frames: np.ndarray, forced: np.ndarray | None = None,
                   forced_mask: np.ndarray | None = None) -> list[Frame]:
        """One tick for every slot: `user_frames` is float32 [batch_size, frame_size]; `forced`, when given, is
        [batch_size, frame_size] teacher-forced model audio, applied only to the slots where the bool
        `forced_mask` [batch_size] is True (all slots when it is None). Returns batch_size Frames; an exception
        in a slot's place fails that slot's episode alone (one of N served sessions dropped), while raising fails
        every episode in flight."""
        ...


class GoldAware(Protocol):
    """Optional hooks of agents with the "gold_cues" capability."""

    def bind_case(self, case: Any) -> None: ...

    def cue(self, event: TimelineCue) -> None: ...


class ServedSession(Protocol):
    """Optional hook of an agent whose model runs on a server (moshi-server, openai-realtime, vllm-omni-duplex).

    The client's step times say nothing about a served model, so the runner asks for the live feasibility of the
    slot's session as the client saw it (metrics.feasibility.SessionPace.record) when the slot's episode ends, and
    stores it in that episode's rec.json (`compute.session`, docs/scale.md). None when the slot has no session.
    """

    def session_feasibility(self, slot: int = 0) -> dict[str, Any] | None: ...
