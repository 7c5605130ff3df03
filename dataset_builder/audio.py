"""Audio conventions shared by every layer: the 24 kHz session clock, resampling and WAV I/O."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from dataset_builder.atomic import atomic_write_bytes

SESSION_SR = 24_000  # the session clock (docs/conventions.md)
VAD_SR = 16_000


def resample(audio: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    """Band-limited resampling with soxr (never by slicing); float32 in, float32 out."""
    audio = np.asarray(audio, dtype=np.float32)
    if sr_in == sr_out or audio.size == 0:
        return audio.copy() if sr_in == sr_out else np.zeros(0, np.float32)
    return soxr.resample(audio, sr_in, sr_out, quality="HQ").astype(np.float32)


def samples_digest(audio: np.ndarray) -> str:
    """SHA-256 (hex) of the float32 samples: the key under which a result computed from them is memoised."""
    return hashlib.sha256(np.ascontiguousarray(audio, dtype=np.float32).tobytes()).hexdigest()


def seconds_to_samples(seconds: float, sr: int = SESSION_SR) -> int:
    return int(round(seconds * sr))


def to_pcm16(audio: np.ndarray) -> np.ndarray:
    return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype(np.int16)


def wav_bytes(audio: np.ndarray, sr: int = SESSION_SR) -> bytes:
    """PCM16 WAV bytes; `audio` is (n,) mono or (n, channels)."""
    buf = io.BytesIO()
    sf.write(buf, to_pcm16(audio), sr, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def write_wav(path: str | Path, audio: np.ndarray, sr: int = SESSION_SR) -> None:
    atomic_write_bytes(Path(path), wav_bytes(audio, sr))


def read_wav(path_or_bytes: str | Path | bytes) -> tuple[np.ndarray, int]:
    """Float32 audio, (n,) for mono or (n, channels), and its sample rate."""
    src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else str(path_or_bytes)
    audio, sr = sf.read(src, dtype="float32", always_2d=False)
    return audio, int(sr)


def silence(seconds: float, sr: int = SESSION_SR) -> np.ndarray:
    return np.zeros(seconds_to_samples(seconds, sr), dtype=np.float32)
