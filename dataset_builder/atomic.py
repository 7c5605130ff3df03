"""Atomic file writes: a reader never sees half a file, and a crash never destroys an earlier one.

Files and folders are created with the modes an ordinary `open()` / `mkdir()` would give (0o666 / 0o777 less
the umask), not the owner-only 0o600 / 0o700 of `tempfile.mkstemp` / `mkdtemp`: a dataset, a run folder or a
shared TTS cache must be readable by whoever the umask lets read it.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

_ATTEMPTS = 100
_T = TypeVar("_T")


def _create_unused(parent: Path, prefix: str, suffix: str, create: Callable[[Path], _T]) -> _T:
    for _ in range(_ATTEMPTS):
        try:
            return create(Path(parent) / f"{prefix}{secrets.token_hex(6)}{suffix}")
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary name {prefix}*{suffix} in {parent} after {_ATTEMPTS} tries")


def make_temp_file(parent: Path, prefix: str, suffix: str = "") -> tuple[int, Path]:
    """A new, empty file opened for writing, as (fd, path); its mode honours the umask, unlike `mkstemp`'s."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    return _create_unused(parent, prefix, suffix, lambda path: (os.open(path, flags, 0o666), path))


def make_temp_dir(parent: Path, prefix: str) -> Path:
    """A new, empty folder; its mode honours the umask, unlike `mkdtemp`'s 0o700."""

    def create(path: Path) -> Path:
        path.mkdir(0o777)
        return path

    return _create_unused(parent, prefix, "", create)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = make_temp_file(path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def round_ms(seconds: float) -> float:
    """All stored times are seconds rounded to the millisecond (docs/conventions.md)."""
    return round(float(seconds), 3)


def whole_ms(seconds: float) -> int:
    """`seconds` as a whole number of milliseconds: M3's rules and corpora count time in integer ms, as the
    authors' code does (M3-DuplexBench's timing.py)."""
    return int(round(float(seconds) * 1000.0))
