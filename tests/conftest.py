"""Shared fixtures: real components, built once per test session."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
# One TTS clip cache for the whole suite and the commands it runs in subprocesses: the repository's .cache/tts.
os.environ["DUPLEX_EVAL_CACHE"] = str(REPO / ".cache")


@pytest.fixture(scope="session")
def piper():
    from dataset_builder.tts.piper_backend import PiperTTS

    return PiperTTS()


@pytest.fixture(scope="session")
def speak(piper):
    """Piper speech (24 kHz float32) in the assistant's voice."""
    memo: dict[str, np.ndarray] = {}

    def _speak(text: str) -> np.ndarray:
        if text not in memo:
            memo[text] = piper.synthesize(text, piper.assistant_voice)
        return memo[text]

    return _speak


@pytest.fixture(scope="session")
def mini_dataset(tmp_path_factory) -> Path:
    """The real mini Duplex-MPE set, built once with the real TTS."""
    from dataset_builder.build import BuildOptions
    from dataset_builder.mpe.build import build as build_mpe

    out = tmp_path_factory.mktemp("mpe-mini")
    cache = REPO / ".cache" / "tts"
    build_mpe(out, BuildOptions(preset="mini", cache_dir=cache))
    return out


@pytest.fixture(scope="session")
def mini_sets(tmp_path_factory, mini_dataset: Path) -> dict[str, Path]:
    """Every registered benchmark's real mini set, built once through the registry (MPE's is `mini_dataset`)."""
    from dataset_builder.benchmarks import benchmark_names, get_benchmark
    from dataset_builder.build import BuildOptions

    out: dict[str, Path] = {"mpe": mini_dataset}
    for name in benchmark_names():
        if name not in out:
            out[name] = tmp_path_factory.mktemp(f"{name}-mini")
            get_benchmark(name).function("build")(out[name], BuildOptions(preset="mini",
                                                                          cache_dir=REPO / ".cache" / "tts"))
    return out
