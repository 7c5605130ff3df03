"""Shared fixtures: real components and real mini sets, each built or loaded once per test session.

Every test that needs a benchmark's mini set takes it from `mini_sets` (built on first use, through the registry,
with the real TTS and the repository's clip cache), and every test that needs the same agent run of a set takes it
from `agent_runs`, so the suite builds each set and runs each (set, config, agent, cases) once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "tts"
# One TTS clip cache for the whole suite and the commands it runs in subprocesses: the repository's .cache/tts.
os.environ["DUPLEX_EVAL_CACHE"] = str(REPO / ".cache")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`fast` (the inner loop, `make test-fast`): the tests of the pure rules, known answers and schemas, which load
    no TTS, ASR or VAD model and build no audio set. Marked per file in FAST_FILES, or per test with the marker."""
    for item in items:
        if item.path.name in FAST_FILES:
            item.add_marker(pytest.mark.fast)


# Files whose every test is pure: rules, known answers, schemas, parsers, layering (each measured under a few
# seconds with no model loaded). A test elsewhere can be marked `@pytest.mark.fast` itself.
FAST_FILES: frozenset[str] = frozenset()


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


class MiniSets(Mapping[str, Path]):
    """Benchmark name -> its real mini set, built on first use through the registry (`duplex-eval build NAME
    --preset mini`), once per session: a test that needs one set builds only that one. `info(name)` is what the
    build returned (counts, configs)."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._built: dict[str, tuple[Path, dict[str, Any]]] = {}

    def _build(self, name: str) -> tuple[Path, dict[str, Any]]:
        from dataset_builder.benchmarks import get_benchmark
        from dataset_builder.build import BuildOptions

        if name not in self._built:
            folder = self._tmp.mktemp(f"{name}-mini")
            info = get_benchmark(name).function("build")(folder, BuildOptions(preset="mini", cache_dir=CACHE))
            self._built[name] = (folder, info)
        return self._built[name]

    def __getitem__(self, name: str) -> Path:
        from dataset_builder.benchmarks import benchmark_names

        if name not in benchmark_names():
            raise KeyError(name)
        return self._build(name)[0]

    def info(self, name: str) -> dict[str, Any]:
        self[name]  # noqa: B018  (checks the name)
        return self._built[name][1]

    def __iter__(self) -> Iterator[str]:
        from dataset_builder.benchmarks import benchmark_names

        return iter(benchmark_names())

    def __len__(self) -> int:
        from dataset_builder.benchmarks import benchmark_names

        return len(benchmark_names())


@pytest.fixture(scope="session")
def mini_sets(tmp_path_factory: pytest.TempPathFactory) -> MiniSets:
    """Every registered benchmark's real mini set, each built once per session on first use."""
    return MiniSets(tmp_path_factory)


@pytest.fixture(scope="session")
def mini_dataset(mini_sets: MiniSets) -> Path:
    """The real mini Duplex-MPE set, built once with the real TTS."""
    return mini_sets["mpe"]


@pytest.fixture(scope="session")
def agent_runs(tmp_path_factory: pytest.TempPathFactory, mini_sets: MiniSets
               ) -> Callable[..., tuple[Path, dict[str, int]]]:
    """`agent_runs(benchmark, config, agent, cases=None, limit=None)`: `duplex-eval run` of a built-in agent
    (`silent`, `oracle`) on the benchmark's mini set, once per session for each distinct request -> (run folder,
    the run's counts). Callers must not write into the folder (score it elsewhere or with its own outputs only)."""
    from eval.run import RunConfig, run

    done: dict[tuple[Any, ...], tuple[Path, dict[str, int]]] = {}

    def _run(benchmark: str, config: str, agent: str, cases: tuple[str, ...] | None = None,
             limit: int | None = None) -> tuple[Path, dict[str, int]]:
        key = (benchmark, config, agent, cases, limit)
        if key not in done:
            out = tmp_path_factory.mktemp(f"{config}-{agent}")
            args = {"cache_dir": str(CACHE)} if agent == "oracle" else {}
            counts = run(RunConfig(dataset=str(mini_sets[benchmark]), config=config, adapter=agent, out=str(out),
                                   adapter_args=args, cases=list(cases) if cases is not None else None,
                                   limit=limit))
            done[key] = (out, counts)
        return done[key]

    return _run
