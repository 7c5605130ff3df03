"""Comments, docstrings, cards and docs point at the project's own docs/ pages or at a paper's section, never at
the internal specification's sections or at issue numbers, which a user of the project does not have."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", ".venv", ".cache", "out", "site", "mutants", "runs", "__pycache__", "node_modules",
             ".pytest_cache", ".ruff_cache"}
SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".txt", ".cfg", ".html", ".css", ".js", ".json", ".jsonl"}
# Spelled in pieces so this file does not match itself.
FORBIDDEN = re.compile("SP" + "EC \u00a7|\\b[Ii]ss" + r"ue \d+")


def project_files() -> list[Path]:
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1]) or not path.is_file():
            continue
        if path.suffix in SUFFIXES or path.name == "Makefile":
            out.append(path)
    return out


def test_the_walk_sees_the_project() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in project_files()}
    assert {"README.md", "CHANGELOG.md", "Makefile", "pyproject.toml", "adapters/protocol.py",
            "docs/conventions.md", "cards/m3.md"} <= names


def test_no_spec_section_or_issue_number_is_cited() -> None:
    found = []
    for path in project_files():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "point at docs/ or a paper's section instead:\n" + "\n".join(found)
