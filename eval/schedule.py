"""Schedulers decide each frame's user audio from a list of steps and the model's streaming VAD state.

A step hands out samples until it is finished; waits decide only at frame boundaries, from what the
model has already said, so the user stream never depends on the future.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from adapters.protocol import TimelineCue


class ModelView(Protocol):
    """What a scheduler may know of the model: its streaming VAD state on the stream clock."""

    @property
    def speaking(self) -> bool: ...

    @property
    def silence_s(self) -> float: ...


@dataclass
class Ctx:
    sample: int  # stream position of the next sample to hand out
    sr: int
    model: ModelView
    cues: list[TimelineCue] = field(default_factory=list)


class Step(Protocol):
    def take(self, n: int, ctx: Ctx) -> np.ndarray | None:
        """Up to n samples, or None when the step is finished (it then hands out nothing more)."""
        ...


@dataclass
class Play:
    """Play one clip; records its realised start and end as cues."""

    turn_id: str
    label: str
    audio: np.ndarray
    pos: int = 0

    def take(self, n: int, ctx: Ctx) -> np.ndarray | None:
        if self.pos >= len(self.audio):
            return None
        if self.pos == 0:
            ctx.cues.append(TimelineCue("clip_start", self.turn_id, ctx.sample))
        chunk = self.audio[self.pos:self.pos + n]
        self.pos += len(chunk)
        if self.pos >= len(self.audio):
            ctx.cues.append(TimelineCue("clip_end", self.turn_id, ctx.sample + len(chunk)))
        return chunk


@dataclass
class Silence:
    n_samples: int
    pos: int = 0

    def take(self, n: int, ctx: Ctx) -> np.ndarray | None:
        if self.pos >= self.n_samples:
            return None
        k = min(n, self.n_samples - self.pos)
        self.pos += k
        return np.zeros(k, np.float32)


@dataclass
class AwaitResponse:
    """Silence until the model's response (if any) has ended.

    With no model speech, advance once `onset_window_s` (plus the VAD's confirmation delay) has passed;
    once speech is seen, advance after `endpoint_s` of confirmed silence, and never later than `cap_s`.
    """

    onset_window_s: float
    endpoint_s: float
    cap_s: float
    confirm_s: float = 0.0
    start: int | None = None
    response_seen: bool = False

    def take(self, n: int, ctx: Ctx) -> np.ndarray | None:
        if self.start is None:
            self.start = ctx.sample
        elapsed = (ctx.sample - self.start) / ctx.sr
        if ctx.model.speaking:
            self.response_seen = True
        if elapsed >= self.cap_s:
            return None
        if self.response_seen:
            if not ctx.model.speaking and ctx.model.silence_s >= self.endpoint_s:
                return None
        elif elapsed >= self.onset_window_s + self.confirm_s:
            return None
        return np.zeros(n, np.float32)


class StepScheduler:
    """Runs steps in order; `fill` returns exactly n samples (silence once the plan is done)."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.index = 0

    @property
    def done(self) -> bool:
        return self.index >= len(self.steps)

    def fill(self, n: int, ctx: Ctx) -> np.ndarray:
        out = np.zeros(n, np.float32)
        filled = 0
        while filled < n and not self.done:
            chunk = self.steps[self.index].take(n - filled, ctx)
            if chunk is None:
                self.index += 1
                continue
            out[filled:filled + len(chunk)] = chunk
            filled += len(chunk)
            ctx.sample += len(chunk)
        ctx.sample += n - filled
        return out
