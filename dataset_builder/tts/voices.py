"""Voices across backends: a deterministic speaker->voice map and the clip conventions all backends apply."""

from __future__ import annotations

import hashlib
import random

import numpy as np

PEAK_DBFS = -3.0
EDGE_SILENCE_S = 0.05  # silence kept before the first and after the last audible sample
SILENCE_DB = -45.0  # relative to the clip's peak; below this an edge sample counts as silence


def assign_voices(speakers: list[str], voices: list[str], seed: int) -> dict[str, str]:
    """Map each speaker to a voice, deterministically from the inputs only.

    Speakers get distinct voices while there are enough; beyond that voices are reused round-robin in the same
    shuffled order, so no voice is used twice before every voice was used once.
    """
    if not voices:
        raise ValueError("assign_voices needs at least one voice")
    if len(set(speakers)) != len(speakers):
        raise ValueError(f"duplicate speakers: {speakers}")
    # Seed from a stable digest: Python's hash() of str is salted per process.
    digest = hashlib.sha256(("\x00".join([str(seed), *voices])).encode("utf-8")).digest()
    order = list(voices)
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return {spk: order[i % len(order)] for i, spk in enumerate(speakers)}


def trim_silence(audio: np.ndarray, sr: int, keep_s: float = EDGE_SILENCE_S) -> np.ndarray:
    """Cut leading/trailing near-silence down to `keep_s`, so clip edges sit close to speech edges."""
    audio = np.asarray(audio, dtype=np.float32)
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak <= 0.0:
        return audio
    loud = np.flatnonzero(np.abs(audio) > peak * 10 ** (SILENCE_DB / 20))
    keep = int(round(keep_s * sr))
    return audio[max(0, loud[0] - keep) : min(audio.size, loud[-1] + 1 + keep)].copy()


def peak_normalize(audio: np.ndarray, peak_dbfs: float = PEAK_DBFS) -> np.ndarray:
    """Scale to a fixed peak so every clip, whatever the backend or voice, has a comparable level."""
    audio = np.asarray(audio, dtype=np.float32)
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak <= 0.0:
        return audio
    return (audio * np.float32(10 ** (peak_dbfs / 20) / peak)).astype(np.float32)
