"""`load_cases` yields one (Case, audio) at a time instead of a list of the whole set:
the full Duplex-MPE set is ~11 GB of audio. Its temporary Arrow cache lives exactly as long as the generator."""

from __future__ import annotations

import inspect
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.hf_dataset import MPE_FEATURES, load_cases, write_config
from dataset_builder.schema import Case
from tests.test_hf_dataset import make_case, rows_for

N = 4


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stream") / "repo"
    cases = [make_case(k, c) for k in range(N // 2) for c in ("explicit", "implicit")]
    write_config(root, "mpe", rows_for(cases), MPE_FEATURES, shard_size=3)
    return root


def caches(parent: Path) -> list[Path]:
    return sorted(parent.glob("duplex-eval-load-*")) if parent.exists() else []


def test_load_cases_is_a_generator_of_case_and_audio(repo: Path, tmp_path: Path) -> None:
    gen = load_cases(repo, cache_dir=tmp_path)
    assert inspect.isgenerator(gen)
    assert caches(tmp_path) == []  # nothing is built until a row is asked for
    case, audio = next(gen)
    assert isinstance(case, Case) and isinstance(audio, np.ndarray) and audio.dtype == np.float32
    assert len(caches(tmp_path)) == 1  # the Arrow cache is alive while rows are still to come
    rest = list(gen)
    assert [c.case_id for c, _ in [(case, audio), *rest]] == [
        f"mpe-{k:03d}-{c}" for k in range(N // 2) for c in ("explicit", "implicit")]
    assert caches(tmp_path) == []  # exhausted: cleaned up


def test_closing_early_removes_the_cache(repo: Path, tmp_path: Path) -> None:
    with closing(load_cases(repo, cache_dir=tmp_path)) as gen:
        next(gen)
        assert len(caches(tmp_path)) == 1
    assert caches(tmp_path) == []


def test_abandoned_generator_removes_the_cache(repo: Path, tmp_path: Path) -> None:
    gen = load_cases(repo, cache_dir=tmp_path)
    next(gen)
    del gen  # CPython finalises the generator at once, which closes it
    assert caches(tmp_path) == []


def test_hub_offline_switch_is_back_between_rows(repo: Path, tmp_path: Path) -> None:
    """Offline mode covers only the local load: a suspended generator must not keep the user's Hub offline."""
    import datasets.config
    import huggingface_hub.constants

    before = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    with closing(load_cases(repo, cache_dir=tmp_path)) as gen:
        next(gen)
        assert (datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE) == before


def test_missing_folder_fails_on_the_call(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_cases(tmp_path / "nothing")  # not deferred to the first next()
