"""Schedulers decide each frame's user audio from a list of steps and the model's streaming VAD state.

A step hands out samples until it is finished; waits decide only at frame boundaries, from what the
model has already said, so the user stream never depends on the future.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from adapters.protocol import TimelineCue
from metrics.vad import VADParams


class ModelView(Protocol):
    """What a scheduler may know of the model: its streaming VAD state on the stream clock."""

    @property
    def speaking(self) -> bool: ...

    @property
    def silence_s(self) -> float: ...

    @property
    def onsets(self) -> list[float]:
        """Start times (stream seconds) of confirmed model speech, known once confirmed."""
        ...


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
    text: str = ""  # what the clip says, recorded with its realised times (the report's episode page shows it)

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


@dataclass
class TakeTurn:
    """Take-turn (docs/conventions.md): silence until the model has spoken and then been silent for `endpoint_s`.

    A model that never starts is waited for `timeout_s`; a model that never stops, `cap_s` (both from the
    step's start). MPE's wait after T is this step with timeout = onset window + the VAD's confirmation delay.
    """

    endpoint_s: float
    timeout_s: float
    cap_s: float
    start: int | None = None
    spoke: bool = False

    def take(self, n: int, ctx: Ctx) -> np.ndarray | None:
        if self.start is None:
            self.start = ctx.sample
        elapsed = (ctx.sample - self.start) / ctx.sr
        self.spoke = self.spoke or ctx.model.speaking
        if elapsed >= self.cap_s or (not self.spoke and elapsed >= self.timeout_s):
            return None
        if self.spoke and not ctx.model.speaking and ctx.model.silence_s >= self.endpoint_s:
            return None
        return np.zeros(n, np.float32)


@dataclass
class BargeIn:
    """Barge-in (docs/conventions.md): silence until the model has been speaking for `after_s`, so the next clip
    starts over the model's speech; gives up after `timeout_s` if the model never speaks."""

    after_s: float
    timeout_s: float
    start: int | None = None
    anchor_s: float | None = None  # the onset the barge-in is timed from

    def take(self, n: int, ctx: Ctx) -> np.ndarray | None:
        now = ctx.sample / ctx.sr
        if self.start is None:
            self.start = ctx.sample
            if ctx.model.speaking and ctx.model.onsets:  # already talking: time from that utterance's onset
                self.anchor_s = ctx.model.onsets[-1]
        if self.anchor_s is None:
            # The VAD confirms an onset only after min_speech; timing counts from the onset itself.
            later = [t for t in ctx.model.onsets if t >= self.start / ctx.sr - 1e-9]
            self.anchor_s = later[0] if later else None
        if self.anchor_s is not None and now >= self.anchor_s + self.after_s:
            return None
        if self.anchor_s is None and now - self.start / ctx.sr >= self.timeout_s:
            return None
        return np.zeros(n, np.float32)


@dataclass
class UntilTime:
    """Fixed schedule (docs/conventions.md): silence until an absolute stream time, whatever the model does."""

    at_s: float

    def take(self, n: int, ctx: Ctx) -> np.ndarray | None:
        remaining = int(round(self.at_s * ctx.sr)) - ctx.sample
        if remaining <= 0:
            return None
        return np.zeros(min(n, remaining), np.float32)


@dataclass
class EpisodePlan:
    """What a benchmark's plan hands the orchestrator for one case; the orchestrator itself knows no benchmark.

    `steps` drive the user stream; `vad` is the streaming VAD on the model channel that drives the waits (and
    is stored with the episode for scoring); `condition`, `group_id` and `gold` are the benchmark's own rec.json
    fields; `protocol` is the parameter set stored verbatim in rec.json.

    `forced` is teacher forcing (docs/adding-a-model.md): model-channel audio at the agent's rate for the start of the
    stream, a whole number of frames long; while it lasts each frame of it goes to `agent.step` as `forced_model_frame`.
    `requires` names the agent capabilities the case needs ("teacher_forcing" is implied by `forced`): an agent
    without them gets the case recorded as skipped, never run in a way that would score it wrongly.
    `bound_case` is what an agent with "gold_cues" is bound to instead of the case, when the plan has more for it
    than the case holds (M3: the row's reference system channel, which the oracle replays).
    """

    steps: list[Step]
    vad: VADParams
    vad_preset: str
    protocol: dict[str, Any]
    condition: str = ""
    group_id: str = ""  # cases scored together (MPE: the explicit/implicit pair)
    gold: dict[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    forced: np.ndarray | None = None
    requires: frozenset[str] = frozenset()
    bound_case: Any = None

    def needs(self) -> frozenset[str]:
        """Every capability the case needs of an agent."""
        return self.requires | ({"teacher_forcing"} if self.forced is not None else set())

    def missing(self, capabilities: frozenset[str]) -> list[str]:
        """The needed capabilities an agent with `capabilities` lacks, sorted."""
        return sorted(self.needs() - capabilities)

    def labels(self) -> dict[str, str]:
        """Clip id -> label of every clip the plan plays (for the realised timeline)."""
        return {s.turn_id: s.label for s in self.steps if isinstance(s, Play)}

    def texts(self) -> dict[str, str]:
        """Clip id -> what the clip says, for the clips whose text the plan knows."""
        return {s.turn_id: s.text for s in self.steps if isinstance(s, Play) and s.text}
