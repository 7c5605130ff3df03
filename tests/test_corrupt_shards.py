"""A damaged parquet shard is reported by name, with what to do, by every reader.

pyarrow's own errors ("Parquet magic bytes not found in footer", "Couldn't deserialize thrift") name no file,
and `datasets` wraps them in "An error occurred while generating the dataset".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dataset_builder.hf_dataset import (
    MPE_FEATURES,
    card_front_matter,
    iter_cases,
    list_cases,
    load_cases,
    mpe_card_context,
    write_config,
)
from dataset_builder.schema import SchemaError
from tests.test_hf_dataset import make_case, rows_for


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _garbage(data: bytes) -> bytes:
    return b"this is not parquet\n" * 50


def _damage_pages(data: bytes) -> bytes:
    """Zeros over every data page, footer intact: opening works, reading does not."""
    footer = int.from_bytes(data[-8:-4], "little") + 8
    return data[:4] + bytes(len(data) - 4 - footer) + data[-footer:]


DAMAGE = {"truncated": _truncate, "garbage": _garbage, "damaged-pages": _damage_pages}
READERS: dict[str, Callable[[Path, Path], object]] = {
    "list_cases": lambda repo, cache: list_cases(repo),
    "iter_cases": lambda repo, cache: list(iter_cases(repo)),
    "iter_cases(wanted)": lambda repo, cache: list(iter_cases(repo, wanted={"mpe-001-explicit"})),
    "load_cases": lambda repo, cache: list(load_cases(repo, cache_dir=cache)),
    "mpe_card_context": lambda repo, cache: mpe_card_context(repo, build_seed=0, build_params={},
                                                             generator_version="0"),
    "card_front_matter": lambda repo, cache: card_front_matter(repo, {"mpe": {}}),
}
# card_front_matter reads only footers (row counts), so damaged pages do not concern it.
CASES = [(d, r) for d in sorted(DAMAGE) for r in sorted(READERS)
         if not (d == "damaged-pages" and r == "card_front_matter")]


def damaged_repo(root: Path, damage: str) -> tuple[Path, Path]:
    cases = [make_case(k, c) for k in range(2) for c in ("explicit", "implicit")]
    shards = write_config(root / "repo", "mpe", rows_for(cases), MPE_FEATURES, shard_size=2)
    bad = shards[1]  # holds mpe-001-explicit and mpe-001-implicit
    bad.write_bytes(DAMAGE[damage](bad.read_bytes()))
    return root / "repo", bad


@pytest.mark.parametrize(("damage", "reader"), CASES)
def test_damaged_shard_is_named(damage: str, reader: str, tmp_path: Path) -> None:
    repo, bad = damaged_repo(tmp_path, damage)
    with pytest.raises(SchemaError) as err:
        READERS[reader](repo, tmp_path / "cache")
    msg = str(err.value)
    assert err.value.source == str(bad) and str(bad) in msg
    assert "not a readable parquet file" in msg and "rebuild the dataset" in msg
    assert "\n" not in msg  # the CLI prints it as one line


def test_load_cases_names_a_broken_footer_on_the_call(tmp_path: Path) -> None:
    repo, bad = damaged_repo(tmp_path, "truncated")
    with pytest.raises(SchemaError, match="not a readable parquet file"):
        load_cases(repo, cache_dir=tmp_path / "cache")  # before any row is asked for
