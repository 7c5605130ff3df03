"""A disk + memory cache around any TTS backend, so rebuilding a dataset does not re-synthesize every clip."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np

from dataset_builder.atomic import atomic_write_bytes
from dataset_builder.tts.base import TTSBackend


def default_cache_dir() -> Path:
    """Where synthesised clips are kept unless told otherwise: $DUPLEX_EVAL_CACHE/tts, else
    $XDG_CACHE_HOME/duplex-eval/tts, else ~/.cache/duplex-eval/tts — one place, whatever the working directory."""
    if os.environ.get("DUPLEX_EVAL_CACHE"):
        return Path(os.environ["DUPLEX_EVAL_CACHE"]).expanduser() / "tts"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return base / "duplex-eval" / "tts"


def cache_key(backend_name: str, voice: str, text: str) -> str:
    # JSON framing keeps ("a b", "c") and ("a", "b c") apart.
    return hashlib.sha256(json.dumps([backend_name, voice, text]).encode("utf-8")).hexdigest()


class CachedTTS:
    """Same protocol and `name` as the wrapped backend; clips are stored losslessly as float32 `.npy`.

    The key is (backend.name, voice, text), so a backend whose name omits a setting that changes its audio
    would be served stale clips: backends put every such setting in their name.
    """

    def __init__(self, backend: TTSBackend, cache_dir: Path) -> None:
        self.backend = backend
        self.cache_dir = Path(cache_dir)
        self.name = backend.name
        self._memo: dict[str, np.ndarray] = {}
        self.hits = 0
        self.misses = 0

    @property
    def assistant_voice(self) -> str:
        return self.backend.assistant_voice  # type: ignore[attr-defined]

    def voices(self) -> list[str]:
        return self.backend.voices()

    def slowed(self, factor: float) -> CachedTTS | None:
        """The backend's slower variant (the speech gate's retry), cached in the same folder under its own name;
        None when the backend has none."""
        slowed = getattr(self.backend, "slowed", None)
        inner = slowed(factor) if slowed is not None else None
        return None if inner is None else CachedTTS(inner, self.cache_dir)

    def called_out(self) -> CachedTTS | None:
        """The backend's variant that calls out vocative names (the speech gate's last retries), cached in the
        same folder under its own name; None when the backend has none."""
        called_out = getattr(self.backend, "called_out", None)
        inner = called_out() if called_out is not None else None
        return None if inner is None else CachedTTS(inner, self.cache_dir)

    def path_for(self, text: str, voice: str) -> Path:
        key = cache_key(self.name, voice, text)
        return self.cache_dir / key[:2] / f"{key}.npy"

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        path = self.path_for(text, voice)
        audio = self._memo.get(path.stem)
        if audio is None and path.is_file():
            audio = np.load(path, allow_pickle=False)
        if audio is not None:
            self.hits += 1
        else:
            self.misses += 1
            audio = np.asarray(self.backend.synthesize(text, voice), dtype=np.float32)
            buf = io.BytesIO()
            np.save(buf, audio, allow_pickle=False)
            atomic_write_bytes(path, buf.getvalue())
        self._memo[path.stem] = audio
        # A copy, so a caller that edits its clip in place cannot corrupt the memo.
        return audio.copy()
