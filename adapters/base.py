"""Shared plumbing of the built-in agents: their voice, and a queue of audio emitted frame by frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.tts import get_tts
from dataset_builder.tts.cache import CachedTTS, default_cache_dir

# Speech-free stretches longer than this inside one utterance are shortened to it, so the VAD (spans merged within
# 0.3 s) hears one utterance: a sentence pause must not read as the oracle yielding while it talks on.
MAX_INNER_GAP_S = 0.12
_QUIET_DBFS = -45.0
_WIN_S = 0.01

Say = tuple[int, str, np.ndarray | None, str | None]  # (sample, "say" | "stop", audio, text)


def tighten(audio: np.ndarray, sr: int, max_gap_s: float = MAX_INNER_GAP_S) -> np.ndarray:
    """Speech with its leading and trailing silence cut and every inner silence shortened to `max_gap_s`."""
    win = max(1, int(_WIN_S * sr))
    k = len(audio) // win
    if k == 0:
        return audio
    rms = np.sqrt((audio[:k * win].reshape(k, win) ** 2).mean(axis=1) + 1e-12)
    loud = 20 * np.log10(rms) >= _QUIET_DBFS
    if not loud.any():
        return audio[:0]
    keep_gap = max(1, int(round(max_gap_s / _WIN_S)))
    first, last = int(np.argmax(loud)), k - int(np.argmax(loud[::-1]))
    pieces, quiet = [], 0
    for i in range(first, last):
        quiet = 0 if loud[i] else quiet + 1
        if quiet <= keep_gap:
            pieces.append(audio[i * win:(i + 1) * win])
    return np.concatenate(pieces)



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
    """The built-in agents' mouth: the project's TTS in its reserved assistant voice, at the agent's rate. Its clips
    are kept in the build's clip cache (`cache_dir`, by default the one `duplex-eval build` fills), so a second
    run, or the demo after the quickstart, speaks from the cache instead of synthesising again."""

    def __init__(self, tts: str, cache_dir: str | Path | None, sample_rate: int, **tts_kwargs: Any) -> None:
        backend = get_tts(tts, **tts_kwargs)
        self.tts = CachedTTS(backend, Path(cache_dir) if cache_dir else default_cache_dir())
        self.voice: str = backend.assistant_voice  # type: ignore[attr-defined]
        self.sample_rate = sample_rate

    def speak(self, text: str) -> np.ndarray:
        return resample(self.tts.synthesize(text, self.voice), SESSION_SR, self.sample_rate)
