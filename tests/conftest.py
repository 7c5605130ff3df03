"""Shared fixtures: real components and real mini sets, each built or loaded once per test session.

Every test that needs a benchmark's mini set takes it from `mini_sets` (built on first use, through the registry,
with the real TTS and the repository's clip cache), so a session builds each set at most once, and only the sets
its tests use.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from dataset_builder.atomic import atomic_write_bytes

if TYPE_CHECKING:
    from dataset_builder.build import BuildOptions

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "tts"
# One TTS clip cache for the whole suite and the commands it runs in subprocesses: the repository's .cache/tts.
os.environ["DUPLEX_EVAL_CACHE"] = str(REPO / ".cache")


# `make test-fast` (`pytest -m fast`), the inner loop: the files whose every test is pure -- rules, known answers,
# schemas, the import layering -- loading no TTS, ASR or VAD model and building no audio set, each file a few seconds
# on an idle machine (the generators' and shard files' own tests, pure but slower, are left to `make test`). `make test`
# runs these and everything else. The mark is per file, so `-m fast` need not import the other files at all (their
# imports alone -- torch, onnxruntime, faster-whisper -- take most of a minute).
FAST_FILES: frozenset[str] = frozenset({
    "test_answer_digit_groups.py", "test_answers.py", "test_cascade_policy.py", "test_failed_windows.py",
    "test_judge_http.py", "test_judge_near_miss.py", "test_judge_rules.py", "test_layering.py",
    "test_m3_aggregate.py", "test_m3_events.py", "test_m3_paper_rules.py", "test_mpe_aggregate.py",
    "test_phrasebank.py", "test_rule_boundaries.py", "test_schedule.py", "test_scheduler_exact.py", "test_schema.py",
    "test_spans_boundaries.py", "test_stats.py", "test_stats_known_values.py", "test_test_commands.py",
    "test_vad_silero_rules.py",
})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if config.option.markexpr.strip() == "fast" and collection_path.name.startswith("test_") \
            and collection_path.suffix == ".py" and collection_path.name not in FAST_FILES:
        return True
    return None


# The session's real components: a test in a fast file that takes one of them is not fast (it runs in `make test`).
MODEL_FIXTURES = frozenset({"piper", "speak", "mini_sets", "mini_dataset"})


# The slowest files, slowest first (their tests' seconds in a whole `make test`, as pytest's --durations lists them;
# benchmarks/bench_tests.py times a file), collected first. pytest-xdist hands out the files with the most tests
# first (pyproject.toml says why that order is kept), so this decides only the order of files with as many tests,
# and the order in one process (`-n 0`).
SLOW_FILES: tuple[str, ...] = (
    "test_readme.py", "test_ifeval_e2e.py", "test_e2e_mpe.py", "test_moshi_adapter.py", "test_build_audit.py",
    "test_benchmark_registry.py", "test_build_pool.py", "test_check_adapter.py", "test_tts_ja.py",
    "test_lockstep.py", "test_evaluate_modules.py", "test_m3_build.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in FAST_FILES and not MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.fast)
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's own order is kept


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


# A run without pytest-xdist workers keeps the session's shared folders in this folder of its basetemp.
SHARED = "shared"


def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test session's own temporary folder, shared by all of its pytest-xdist workers (each worker's basetemp is
    a `popen-gwN` folder inside it); a run without workers keeps it in its basetemp, as `shared`."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return base.parent
    (base / SHARED).mkdir(exist_ok=True)
    return base / SHARED


@pytest.fixture(scope="module", autouse=True)
def _file_temp_removed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What a test file wrote to the temporary folder (its module fixtures' runs, built sets and reports) is removed
    once the file is done, unless one of its tests failed or errored; a passed test's own `tmp_path` goes when the
    test ends (pyproject's tmp_path_retention_policy). A whole `make test` writes several GB of recordings and sets
    in all; held to the end, they would fill a small disk."""
    base = tmp_path_factory.getbasetemp()
    before, failed = set(base.iterdir()), request.session.testsfailed
    yield
    if request.session.testsfailed == failed:
        for path in set(base.iterdir()) - before:
            if path.is_symlink() or path.is_file():
                path.unlink(missing_ok=True)
            elif path.name != SHARED:
                shutil.rmtree(path, ignore_errors=True)


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Held by one process of the session at a time (an advisory lock on `lock`, released if the holder dies)."""
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def built_once(root: Path, name: str, build: Callable[[Path], Any]) -> tuple[Path, Any]:
    """`build(root / name)` run once per test session, whichever worker asks first; the others wait for it and get
    the same folder and the same return value (pickled beside it). A build that raised left no record, so the next
    asker builds again, from an empty folder."""
    folder, record = root / name, root / f"{name}.built.pickle"
    with exclusive(root / f"{name}.lock"):
        if not record.exists():
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            atomic_write_bytes(record, pickle.dumps(build(folder)))
        return folder, pickle.loads(record.read_bytes())


def mini_options(**changes: Any) -> BuildOptions:
    """The suite's mini-set options: the suite's clip cache, M3's heard gate as `duplex-eval build` passes it, and
    `changes`. The ASR speech gate stays off (as `--no-speech-gate`), as the suite's MPE mini set has always been
    built: its own tests build with a gate of their own (tests/test_speech_gate.py)."""
    from dataset_builder.build import BuildOptions
    from eval.cli import heard_gate

    return BuildOptions(**{"preset": "mini", "cache_dir": CACHE, "heard_gate": heard_gate(), **changes})


class MiniSets(Mapping[str, Path]):
    """Benchmark name -> its real mini set, built on first use through the registry (`duplex-eval build NAME
    --preset mini`), once per session: a test that needs one set builds only that one, and the session's other
    workers (pytest-xdist) read the same folder. `info(name)` is what the build returned (counts, configs)."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._built: dict[str, tuple[Path, dict[str, Any]]] = {}

    def _build(self, name: str) -> tuple[Path, dict[str, Any]]:
        from dataset_builder.benchmarks import get_benchmark

        if name not in self._built:
            build = get_benchmark(name).function("build")
            self._built[name] = built_once(self._root, f"{name}-mini", lambda folder: build(folder, mini_options()))
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
    return MiniSets(session_dir(tmp_path_factory))


@pytest.fixture(scope="session")
def mini_dataset(mini_sets: MiniSets) -> Path:
    """The real mini Duplex-MPE set, built once with the real TTS."""
    return mini_sets["mpe"]
