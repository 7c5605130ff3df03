"""The TTS backend protocol and its lazy registry.

A backend turns (text, voice id) into float32 mono audio on the 24 kHz session clock. Same text, voice and
backend configuration must give identical samples: builds are hashed and compared across runs.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from dataset_builder.registry import LazyRegistry


@runtime_checkable
class TTSBackend(Protocol):
    name: str  # provenance string stored with every build, e.g. "piper:en_US-joe-medium"

    def voices(self) -> list[str]:
        """Voice ids this backend can speak with, in a stable order."""
        ...

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        """Float32 mono audio at 24 kHz, deterministic for a given (text, voice)."""
        ...


_REGISTRY = LazyRegistry("TTS backend", {
    "piper": "dataset_builder.tts.piper_backend:PiperTTS",
    "espeak": "dataset_builder.tts.espeak_backend:EspeakTTS",
    "http": "dataset_builder.tts.http_backend:HttpTTS",
}, option="--tts", arg_option="--tts-arg")


def register_tts(name: str, target: str) -> None:
    """Register a backend as a lazy "module:Class" string, imported only when chosen."""
    _REGISTRY.register(name, target)


def tts_names() -> list[str]:
    return _REGISTRY.names()


def get_tts(name: str, **kwargs: Any) -> TTSBackend:
    return _REGISTRY.load(name, **kwargs)
