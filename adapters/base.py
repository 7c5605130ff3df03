"""Shared plumbing of the built-in agents: a queue of audio to speak, emitted frame by frame."""

from __future__ import annotations

import numpy as np


class SpeechQueue:
    """Audio waiting to be spoken; `next_frame` pops exactly n samples (zero-padded)."""

    def __init__(self) -> None:
        self.pending = np.zeros(0, np.float32)

    @property
    def speaking(self) -> bool:
        return self.pending.size > 0

    def say(self, audio: np.ndarray) -> None:
        self.pending = np.concatenate([self.pending, audio.astype(np.float32)])

    def stop(self) -> None:
        self.pending = np.zeros(0, np.float32)

    def next_frame(self, n: int) -> np.ndarray:
        if not self.pending.size:
            return np.zeros(n, np.float32)
        out = np.zeros(n, np.float32)
        k = min(n, self.pending.size)
        out[:k] = self.pending[:k]
        self.pending = self.pending[k:]
        return out
