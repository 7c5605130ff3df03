"""A stand-in checkout of a research model's repository: its import layout only, written from a table of files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_checkout(root: Path, files: Mapping[str, str]) -> Path:
    """Every `relative path -> text` of `files` written under `root` (folders made as needed); `root` back."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
