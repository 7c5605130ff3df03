"""The README's promise: every command and snippet it shows works exactly as written, from any working directory.

Every ```bash and ```python block runs, in order, in one empty folder, with the virtual environment's bin folder
first on PATH (what `source .venv/bin/activate` does). A block is marked by the HTML comment on the line before
it: `<!-- readme-test: skip: REASON -->` (only for what cannot run here, with the reason said) or
`<!-- readme-test: file NAME -->` (written to NAME instead of run, like a file the reader saves).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
MARK = re.compile(r"<!-- readme-test: (skip|file):? (.+?) -->\s*$")


@dataclass
class Block:
    lang: str
    code: str
    line: int
    mark: tuple[str, str] | None


def readme_blocks() -> list[Block]:
    text = (ROOT / "README.md").read_text()
    blocks = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        blocks.append(Block(m.group(1), m.group(2), text[:m.start()].count("\n") + 1,
                            (mark.group(1), mark.group(2).strip()) if mark else None))
    return [b for b in blocks if b.lang in ("bash", "python")]


def test_every_skip_says_why_and_most_blocks_run() -> None:
    blocks = readme_blocks()
    skipped = [b for b in blocks if b.mark and b.mark[0] == "skip"]
    assert all(len(b.mark[1]) > 10 for b in skipped)
    assert len(blocks) - len(skipped) >= 6


def test_readme_blocks_run_as_written_from_an_empty_folder(tmp_path: Path, mini_dataset: Path) -> None:
    """`mini_dataset` first: the session's build fills the TTS cache, so the README's build reuses its clips."""
    bindir = Path(sys.executable).parent
    env = os.environ | {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(bindir.parent),
                        "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    env.pop("PYTHONPATH")
    for block in readme_blocks():
        where = f"README.md line {block.line}"
        if block.mark and block.mark[0] == "skip":
            continue
        if block.mark and block.mark[0] == "file":
            (tmp_path / block.mark[1]).write_text(block.code)
            continue
        cmd = ["bash", "-euo", "pipefail", "-c", block.code] if block.lang == "bash" else [
            str(bindir / "python"), "-c", block.code]
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{where} failed ({proc.returncode}):\n{block.code}\n{proc.stderr[-3000:]}"
    assert (tmp_path / "report" / "index.html").exists()
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "moshi-tiny", "my-model", "oracle", "silent", "silent-2proc"]


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
