"""Plumbing of adapters whose model hears fixed chunks at its own rate and answers with audio: MiniCPM-o (1 s at
16 kHz) and Freeze-Omni (160 ms at 16 kHz), both speaking 24 kHz.

`ChunkGatherer` collects session frames into whole chunks and resamples each chunk to the model's rate; the
adapter calls the model when a chunk is complete. `Playback` is the loudspeaker: the model's audio waits here and
leaves one frame per step, with the model's text marked at the sample where the audio it came with starts.

Timing rule shared by both adapters: the frame a step returns is taken from `Playback` *before* the chunk that
this step completes is given to the model, so whatever the model says after hearing chunk k starts exactly at the
session sample where chunk k ends, (k + 1) * chunk_samples — never earlier than it could have heard the chunk.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adapters.protocol import Frame
from dataset_builder.audio import resample


def whole_samples(seconds: float, sr: int, what: str) -> int:
    """`seconds` at `sr` as a sample count, refusing a duration that is not a whole number of samples."""
    n = Fraction(str(seconds)) * sr
    if n.denominator != 1 or n <= 0:
        raise ValueError(f"{what}: {seconds} s is not a whole number of samples at {sr} Hz")
    return int(n)


class ChunkGatherer:
    """Session frames in, whole model-rate chunks out.

    Each chunk is resampled on its own (soxr, exact length), so no audio from after a chunk's end reaches the
    model with it; the price is a resampler edge at each chunk boundary, a few samples long.
    """

    def __init__(self, chunk_s: float, sample_rate: int, frame_size: int, model_rate: int) -> None:
        self.chunk_samples = whole_samples(chunk_s, sample_rate, "chunk")
        self.model_samples = whole_samples(chunk_s, model_rate, "chunk")
        if self.chunk_samples % frame_size:
            raise ValueError(f"frame_size {frame_size} does not divide the {chunk_s} s chunk "
                             f"({self.chunk_samples} samples at {sample_rate} Hz)")
        self.sample_rate = sample_rate
        self.model_rate = model_rate
        self.reset()

    def reset(self) -> None:
        self.frames: list[np.ndarray] = []
        self.filled = 0
        self.chunks = 0  # chunks completed since reset

    def push(self, frame: np.ndarray) -> np.ndarray | None:
        """Add one frame; when it completes a chunk, that chunk at the model's rate (float32), else None."""
        self.frames.append(np.asarray(frame, np.float32))
        self.filled += len(frame)
        if self.filled < self.chunk_samples:
            return None
        chunk = np.concatenate(self.frames)
        self.frames, self.filled = [], 0
        self.chunks += 1
        out = resample(chunk, self.sample_rate, self.model_rate)
        if out.size != self.model_samples:  # soxr rounds the length; the model is owed exactly one chunk
            out = np.pad(out, (0, max(0, self.model_samples - out.size)))[: self.model_samples]
        return out.astype(np.float32, copy=False)


class Playback:
    """The model's audio waiting to be played, and its text marked where that audio starts (SpeechQueue with
    text): `say` appends, `stop` drops everything not yet played (an interruption), `next_frame` pops n samples
    (zero-padded) and the text of every mark inside them."""

    def __init__(self) -> None:
        self.stop()

    def stop(self) -> None:
        self.pending = np.zeros(0, np.float32)
        self.marks: list[tuple[int, str]] = []  # (offset into pending, text)

    @property
    def speaking(self) -> bool:
        return self.pending.size > 0

    def say(self, audio: np.ndarray | None, text: str | None = None) -> None:
        if text:
            self.marks.append((self.pending.size, text))
        if audio is not None and np.asarray(audio).size:
            self.pending = np.concatenate([self.pending, np.asarray(audio, np.float32).reshape(-1)])

    def next_frame(self, n: int) -> tuple[np.ndarray, str | None]:
        out = np.zeros(n, np.float32)
        k = min(n, self.pending.size)
        out[:k] = self.pending[:k]
        self.pending = self.pending[k:]
        due = [t for at, t in self.marks if at < n]
        self.marks = [(at - n, t) for at, t in self.marks if at >= n]
        return out, ("".join(due) or None)


class ChunkedAgent:
    """`step` of an agent built from a ChunkGatherer and a Playback (the timing rule above): play one frame, then
    give the model the chunk this frame completes (`_hear`). Such models have no teacher forcing: a forced frame
    raises `error`, since the runner skips the cases that need one."""

    name: str
    frame_size: int
    gatherer: ChunkGatherer
    playback: Playback
    error: type[Exception] = RuntimeError

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        if forced_model_frame is not None:
            raise self.error(f"{self.name} has no teacher forcing; the runner should have skipped this case")
        out, text = self.playback.next_frame(self.frame_size)
        chunk = self.gatherer.push(user_frame)
        if chunk is not None:
            self._hear(chunk)
        return Frame(out, text)

    def _hear(self, chunk: np.ndarray) -> None:
        raise NotImplementedError
