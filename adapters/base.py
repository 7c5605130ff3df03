"""Shared plumbing of the built-in agents: their voice, and a queue of audio emitted frame by frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.tts import get_tts
from dataset_builder.tts.cache import CachedTTS


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


class AssistantVoice:
    """The built-in agents' mouth: the project's TTS in its reserved assistant voice, at the agent's rate."""

    def __init__(self, tts: str, cache_dir: str | Path | None, sample_rate: int, **tts_kwargs: Any) -> None:
        backend = get_tts(tts, **tts_kwargs)
        self.tts = CachedTTS(backend, Path(cache_dir)) if cache_dir else backend
        self.voice: str = backend.assistant_voice  # type: ignore[attr-defined]
        self.sample_rate = sample_rate

    def speak(self, text: str) -> np.ndarray:
        return resample(self.tts.synthesize(text, self.voice), SESSION_SR, self.sample_rate)
