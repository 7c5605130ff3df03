"""The build's process pool: the same bytes for any number of workers, results in input order, a bounded number
in flight, errors that surface, a TTS cache that concurrent workers fill safely, and the `--workers` flag."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.errors import UsageError
from dataset_builder.pool import WorkerPool, resolve_workers

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "tts"


def _digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _cache_files(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file())


def test_one_and_two_workers_write_the_same_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dataset_builder.build import BuildOptions
    from dataset_builder.mpe.build import build as build_mpe

    # No cache for one worker, an empty one shared by two: every clip is synthesised in both builds.
    one = build_mpe(tmp_path / "one", BuildOptions(n=3, seed=5, workers=1))
    two = build_mpe(tmp_path / "two", BuildOptions(n=3, seed=5, workers=2, cache_dir=tmp_path / "cache",
                                                    progress=True))
    assert (one["workers"], two["workers"]) == (1, 2)
    a, b = _digest(tmp_path / "one"), _digest(tmp_path / "two")
    assert any(name.endswith(".parquet") for name in a) and "README.md" in a
    assert a == b
    assert {k: v for k, v in one.items() if k not in ("build_s", "workers")} == \
        {k: v for k, v in two.items() if k not in ("build_s", "workers")}
    # Progress counts every case, with time left, as cases come back from the pool.
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("build mpe (2 workers)")]
    assert lines and "6/6" in lines[-1] and "100%" in lines[-1] and "left 0:00" in lines[-1]
    # The workers' concurrent writes left whole clips and no temporary files.
    files = _cache_files(tmp_path / "cache")
    assert files and all(p.suffix == ".npy" and not p.name.startswith(".") for p in files)
    assert all(np.load(p, allow_pickle=False).dtype == np.float32 for p in files)


# Module-level: the pool's spawned workers import this module to find them.
_TAG = ""  # set in each worker by its initializer


def _note_worker(tag: str) -> None:
    global _TAG
    _TAG = tag


def _slow_tagged(i: int) -> tuple[int, str]:
    time.sleep(0.05 * (5 - i % 5))  # earlier items finish later
    return i * i, _TAG


def _fail_on_three(i: int) -> int:
    if i == 3:
        raise ValueError(f"item {i} is bad")
    return i


def test_ordered_map_returns_input_order_and_bounds_what_is_in_flight() -> None:
    pulled: list[int] = []

    def items():
        for i in range(12):
            pulled.append(i)
            yield i

    with WorkerPool(2, _note_worker, ("ready",)) as pool:
        results = []
        for value in pool.ordered_map(_slow_tagged, items(), window=3):
            results.append(value)
            if len(results) == 1:
                in_flight_at_first = len(pulled)
    assert results == [(i * i, "ready") for i in range(12)]  # every worker ran the initializer first
    assert in_flight_at_first == 3


def test_a_worker_error_reaches_the_caller() -> None:
    with WorkerPool(2, _note_worker, ("x",)) as pool:
        got = []
        with pytest.raises(ValueError, match="item 3 is bad"):
            for value in pool.ordered_map(_fail_on_three, range(8)):
                got.append(value)
    assert got == [0, 1, 2]


def test_what_cannot_reach_a_worker_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="worker processes"):
        WorkerPool(2, _note_worker, (lambda: None,))
    with pytest.raises(UsageError, match="--workers must be >= 1"):
        WorkerPool(0, _note_worker, ("x",))


def test_workers_default_to_the_cores_and_never_exceed_the_work() -> None:
    import os

    assert resolve_workers(None, 10_000) == len(os.sched_getaffinity(0))
    assert resolve_workers(8, 3) == 3
    assert resolve_workers(2, 0) == 1
    with pytest.raises(UsageError, match="--workers must be >= 1, got 0"):
        resolve_workers(0, 5)


def _speak_cached(texts: list[str]) -> list[np.ndarray]:
    from dataset_builder.build import unit_tts
    from dataset_builder.mpe import build

    voice = build._voice()
    tts = unit_tts(voice.backend, voice.cache_dir)
    return [tts.synthesize(text, voice.backend.voices()[0]) for text in texts]


def test_workers_writing_the_same_clips_at_once_leave_one_whole_file_each(tmp_path: Path) -> None:
    from dataset_builder.mpe.build import start_speaking
    from dataset_builder.tts.piper_backend import PiperTTS

    texts = ["Is the oven still on?", "Twelve forty five.", "Let's ask Aria."]
    cache = tmp_path / "cache"
    with WorkerPool(2, start_speaking, (PiperTTS(), cache)) as pool:
        # Both workers start on the same three uncached clips at the same moment.
        results = list(pool.ordered_map(_speak_cached, [texts] * 4, window=4))
    files = _cache_files(cache)
    assert len(files) == len(texts) and all(p.suffix == ".npy" for p in files)
    for clips in results:
        assert all(np.array_equal(a, b) for a, b in zip(clips, results[0], strict=True))
    stored = sorted(np.load(p, allow_pickle=False).tobytes() for p in files)
    assert stored == sorted(clip.tobytes() for clip in results[0])


def test_cli_workers_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from eval.cli import main

    out = tmp_path / "set"
    assert main(["build", "mpe", "--n", "1", "--workers", "0", "--out", str(out)]) == 2
    assert "--workers must be >= 1, got 0" in capsys.readouterr().err
    assert main(["build", "mpe", "--n", "1", "--workers", "1", "--no-progress", "--out", str(out),
                 "--cache-dir", str(CACHE)]) == 0
    assert "with 1 worker(s)" in capsys.readouterr().out
    info = json.loads((out / "build-info.json").read_text())
    assert info["workers"] == 1 and info["n_cases"] == 2
