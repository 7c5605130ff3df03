"""Written files and folders get the modes the umask asks for, not tempfile's owner-only 0600/0700: a dataset, a run
folder or a shared TTS cache must be readable by the group the umask lets in."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.atomic import atomic_write_bytes, atomic_write_json, make_temp_dir, make_temp_file
from dataset_builder.tts.cache import CachedTTS

# umask -> (file mode, folder mode)
MODES = {0o022: (0o644, 0o755), 0o002: (0o664, 0o775)}


@pytest.fixture(params=sorted(MODES), ids=lambda m: f"umask{m:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[tuple[int, int]]:
    old = os.umask(request.param)
    try:
        yield MODES[request.param]
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_writes_honour_the_umask(umask: tuple[int, int], tmp_path: Path) -> None:
    file_mode, dir_mode = umask
    target = tmp_path / "run" / "sub" / "scores.json"
    atomic_write_json(target, {"a": 1})
    assert mode(target) == file_mode
    assert mode(target.parent) == dir_mode and mode(target.parent.parent) == dir_mode
    atomic_write_bytes(target, b"again")  # replacing an existing file: same rule
    assert mode(target) == file_mode and target.read_bytes() == b"again"
    assert [p.name for p in target.parent.iterdir()] == ["scores.json"]  # no temp file left


def test_temp_helpers_honour_the_umask(umask: tuple[int, int], tmp_path: Path) -> None:
    file_mode, dir_mode = umask
    fd, path = make_temp_file(tmp_path, prefix=".x.", suffix=".tmp")
    os.close(fd)
    assert mode(path) == file_mode and path.name.startswith(".x.") and path.name.endswith(".tmp")
    folder = make_temp_dir(tmp_path, prefix=".new-")
    assert mode(folder) == dir_mode and folder.name.startswith(".new-")
    assert make_temp_dir(tmp_path, prefix=".new-") != folder


def test_dataset_shards_and_folder_honour_the_umask(umask: tuple[int, int], tmp_path: Path) -> None:
    from dataset_builder.hf_dataset import MPE_FEATURES, write_config
    from tests.test_hf_dataset import make_case, rows_for

    file_mode, dir_mode = umask
    repo = tmp_path / "repo"
    rows = rows_for([make_case(0, "explicit"), make_case(0, "implicit")])
    for _ in range(2):  # a first build, then a rebuild in place (the old folder is swapped out)
        shards = write_config(repo, "mpe", rows, MPE_FEATURES, shard_size=1)
        assert len(shards) == 2 and all(mode(s) == file_mode for s in shards)
        assert mode(repo / "data" / "mpe") == dir_mode and mode(repo / "data") == dir_mode


class _Tone:
    name = "test:tone"

    def voices(self) -> list[str]:
        return ["v0"]

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        return np.full(240, 0.1, np.float32)


def test_tts_cache_honours_the_umask(umask: tuple[int, int], tmp_path: Path) -> None:
    file_mode, dir_mode = umask
    tts = CachedTTS(_Tone(), tmp_path / "tts")
    tts.synthesize("hello", "v0")
    path = tts.path_for("hello", "v0")
    assert mode(path) == file_mode
    assert mode(path.parent) == dir_mode and mode(tmp_path / "tts") == dir_mode
