"""`build toy --diagnostics`: the toy's own audit of a built folder."""

from __future__ import annotations

from pathlib import Path

from dataset_builder.toy.rows import BENCHMARK, iter_cases

from dataset_builder.audio import SESSION_SR


def audit(folder: Path) -> str:
    """One line per case: its id, question and seconds of audio."""
    lines = [f"toy diagnostics of {folder}:"]
    for case, audio in iter_cases(folder, BENCHMARK):
        lines.append(f"  {case.case_id}: {case.question!r}, {len(audio) / SESSION_SR:.2f} s of audio")
    return "\n".join(lines)
