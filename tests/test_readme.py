"""The README's and the docs' promise: every command and snippet they show works exactly as written, from any
working directory.

Every ```bash and ```python block of README.md and then of each docs/ page (in the site's navigation order,
mkdocs.yml) runs, in order, in one empty folder, with the virtual environment's bin folder first on PATH (what
`source .venv/bin/activate` does); a page may use what an earlier one built (the quickstart's data/mpe-mini and runs).
A block is marked by the HTML comment on the line before it: `<!-- readme-test: skip: REASON -->` (only for what
cannot run here, with the reason said) or `<!-- readme-test: file NAME -->` (written to NAME instead of run, like a
file the reader saves). A block identical to one already run (the docs' quickstart repeats the README's) runs once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
MARK = re.compile(r"<!-- readme-test: (skip|file):? (.+?) -->\s*$")


@dataclass
class Block:
    lang: str
    code: str
    where: str  # "README.md line 12"
    mark: tuple[str, str] | None


def doc_pages() -> list[Path]:
    """README.md, then every docs/ page in the order of the site's navigation."""
    def walk(items: list) -> list[str]:
        out = []
        for item in items:
            for value in (item.values() if isinstance(item, dict) else [item]):
                out.extend(walk(value) if isinstance(value, list) else [value])
        return out

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    return [ROOT / "README.md", *(ROOT / "docs" / page for page in walk(nav))]


def blocks_of(path: Path) -> list[Block]:
    text = path.read_text()
    blocks = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        where = f"{path.relative_to(ROOT)} line {text[:m.start()].count(chr(10)) + 1}"
        blocks.append(Block(m.group(1), m.group(2), where, (mark.group(1), mark.group(2).strip()) if mark else None))
    return [b for b in blocks if b.lang in ("bash", "python")]


def all_blocks() -> list[Block]:
    return [b for page in doc_pages() for b in blocks_of(page)]


def test_every_page_of_the_docs_is_in_the_navigation() -> None:
    """So the test below runs every page's blocks: a page left out of mkdocs.yml would go untested."""
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in doc_pages()[1:]}
    assert pages == {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}


def test_every_skip_says_why_and_most_blocks_run() -> None:
    for name, blocks, least in (("README.md", blocks_of(ROOT / "README.md"), 1), ("all", all_blocks(), 15)):
        skipped = [b for b in blocks if b.mark and b.mark[0] == "skip"]
        assert all(len(b.mark[1]) > 10 for b in skipped), [b.where for b in skipped]
        assert len(blocks) - len(skipped) >= least, name


def test_readme_and_docs_blocks_run_as_written_from_an_empty_folder(tmp_path: Path, mini_dataset: Path) -> None:
    """`mini_dataset` first: the session's build fills the TTS cache, so the README's build reuses its clips."""
    bindir = Path(sys.executable).parent
    env = os.environ | {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(bindir.parent),
                        "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    env.pop("PYTHONPATH")
    ran: set[tuple[str, str]] = set()
    for block in all_blocks():
        if block.mark and block.mark[0] == "skip":
            continue
        if block.mark and block.mark[0] == "file":
            (tmp_path / block.mark[1]).write_text(block.code)
            continue
        if (block.lang, block.code) in ran:
            continue
        ran.add((block.lang, block.code))
        cmd = ["bash", "-euo", "pipefail", "-c", block.code] if block.lang == "bash" else [
            str(bindir / "python"), "-c", block.code]
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{block.where} failed ({proc.returncode}):\n{block.code}\n{proc.stderr[-3000:]}"
    assert (tmp_path / "report" / "index.html").exists()
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "moshi-tiny", "my-model", "oracle", "silent", "silent-2proc"]


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
