"""The TTS backend protocol and its lazy registry.

A backend turns (text, voice id) into float32 mono audio on the 24 kHz session clock. Same text, voice and
backend configuration must give identical samples: builds are hashed and compared across runs.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from dataset_builder.errors import UsageError
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
    "kokoro": "dataset_builder.tts.kokoro_backend:KokoroTTS",
}, option="--tts", arg_option="--tts-arg")
# The offline backend that speaks each language: English is piper's (as every build so far), Japanese Kokoro's
# (the only offline backend with Japanese voices; piper's one voice and espeak-ng's kana-only Japanese are not).
LANGUAGE_TTS: dict[str, str] = {"en": "piper", "ja": "kokoro"}


def register_tts(name: str, target: str) -> None:
    """Register a backend as a lazy "module:Class" string, imported only when chosen."""
    _REGISTRY.register(name, target)


def tts_names() -> list[str]:
    return _REGISTRY.names()


def get_tts(name: str, **kwargs: Any) -> TTSBackend:
    return _REGISTRY.load(name, **kwargs)


def tts_for_language(language: str, **kwargs: Any) -> TTSBackend:
    """The offline backend of `language` (`LANGUAGE_TTS`), uncached; constructors load no model."""
    if language not in LANGUAGE_TTS:
        raise UsageError(f"no offline TTS backend speaks {language!r}; known languages: {sorted(LANGUAGE_TTS)}")
    return get_tts(LANGUAGE_TTS[language], **kwargs)
