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

import json
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
    gate = json.loads((tmp_path / "data" / "mpe-mini" / "build-info.json").read_text())["speech_gate"]
    assert not gate_mismatches(gate), gate_mismatches(gate)


# docs/benchmarks/mpe.md's account of the speech gate on the mini set the quickstart builds.
GATE_SAID = re.compile(r"On the mini set it re-spoke (\d+) of (\d+) turns and (\d+) then passed; the (\d+) it still "
                       r"reports \((\d+) turns, each in both versions of its pair\)")


def gate_mismatches(gate: dict) -> list[str]:
    """Where the page's gate counts differ from a build's `speech_gate` record: the turns checked exactly, the counts
    whisper decides within the golden runs' tolerance (tests/test_e2e_mpe.py ASR_TOLERANCE: docs/testing.md, "Same
    numbers on another machine")."""
    from tests.test_e2e_mpe import ASR_TOLERANCE

    said = GATE_SAID.search(" ".join((ROOT / "docs" / "benchmarks" / "mpe.md").read_text().split()))
    assert said, "docs/benchmarks/mpe.md no longer states the gate's counts as GATE_SAID reads them"
    retried, turns, fixed, failed, failed_turns = map(int, said.groups())
    out = [] if turns == gate["turns"] else [f"turns checked: page {turns}, build {gate['turns']}"]
    for what, page, build in (("re-spoken", retried, gate["retried"]), ("then passed", fixed, gate["fixed"]),
                              ("still reported", failed, len(gate["failures"]))):
        if abs(page - build) > ASR_TOLERANCE:
            out.append(f"{what}: page {page}, build {build}")
    return out


def test_the_pages_gate_counts_add_up() -> None:
    """The page's own arithmetic: each re-spoken turn then passed or is still reported, and every reported turn is
    reported in both versions of its pair."""
    retried, turns, fixed, failed, failed_turns = map(int, GATE_SAID.search(
        " ".join((ROOT / "docs" / "benchmarks" / "mpe.md").read_text().split())).groups())
    assert retried == fixed + failed and failed == 2 * failed_turns and retried <= turns
    assert gate_mismatches({"turns": turns, "retried": retried, "fixed": fixed, "failures": [{}] * failed}) == []
    assert gate_mismatches({"turns": turns, "retried": retried - 4, "fixed": fixed, "failures": [{}] * failed}) == [
        f"re-spoken: page {retried}, build {retried - 4}"]


if __name__ == "__main__":
    pytest.main([__file__, "-q"])
