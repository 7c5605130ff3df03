"""The README's test commands: `make test` runs every test (no marker filter, in the Makefile or in pytest's
addopts), and `make test-fast` runs the `fast` files (tests/conftest.py FAST_FILES), each of which exists."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.conftest import FAST_FILES

ROOT = Path(__file__).resolve().parent.parent


def recipe(target: str) -> list[str]:
    """The command lines of a Makefile target."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"{re.escape(target)}:", line))
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        out.append(line.strip())
    return out


def test_make_test_runs_everything_and_test_fast_the_fast_marker() -> None:
    (test,) = [c for c in recipe("test") if "pytest" in c]
    assert test.split("pytest", 1)[1].split() == ["-q"], test  # no -m, -k, path or deselection
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert not re.search(r"(^|\s)(-m|-k|--deselect|--ignore)\b", addopts), addopts
    (fast,) = [c for c in recipe("test-fast") if "pytest" in c]
    assert fast.split("pytest", 1)[1].split() == ["-q", "-m", "fast"], fast


def test_every_fast_file_exists() -> None:
    assert FAST_FILES and all((ROOT / "tests" / name).is_file() for name in FAST_FILES)
    assert Path(__file__).name in FAST_FILES
