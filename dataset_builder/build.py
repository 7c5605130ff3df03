"""What every benchmark's builder shares: its options and the TTS it speaks through.

Each benchmark's own builder (`dataset_builder/<bench>/build.py:build`, named in the benchmark registry) turns
these options into a dataset folder; `duplex-eval build <bench>` dispatches to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataset_builder.errors import UsageError
from dataset_builder.tts import TTSBackend, get_tts
from dataset_builder.tts.cache import CachedTTS


@dataclass(frozen=True)
class BuildOptions:
    preset: str = "mini"
    seed: int = 0
    tts: str = "piper"
    tts_args: dict[str, Any] = field(default_factory=dict)  # backend constructor args (`--tts-arg K=V`)
    n: int | None = None  # overrides the preset's size (MPE: scenario pairs)
    cache_dir: Path | None = None
    progress: bool = False  # a progress line with counts and time left, on stderr

    def size(self, presets: dict[str, int]) -> int:
        """The number of units to build: `n` if given, else the preset's."""
        if self.n is not None:
            if self.n < 1:
                raise UsageError(f"--n must be >= 1, got {self.n}")
            return self.n
        if self.preset not in presets:
            raise UsageError(f"unknown preset {self.preset!r}; known: {sorted(presets)}")
        return presets[self.preset]


def open_tts(options: BuildOptions) -> tuple[TTSBackend, TTSBackend]:
    """The backend itself (voices, name) and what to synthesise through (cached when a cache folder is set)."""
    backend = get_tts(options.tts, **options.tts_args)
    return backend, (CachedTTS(backend, options.cache_dir) if options.cache_dir else backend)
