"""Each benchmark's docs page lists every parameter of its protocol with the default the code has, so the page
cannot drift from dataset_builder/benchmark_params.py (the cards render theirs from the class itself)."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from dataset_builder.benchmarks import get_benchmark

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"


@pytest.mark.parametrize("bench", ["mpe", "ifeval", "m3"])
def test_every_parameter_and_its_default_is_on_the_benchmark_page(bench: str) -> None:
    protocol = get_benchmark(bench).load("protocol")
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", (DOCS / f"{bench}.md").read_text(), re.M))
    defaults = protocol()
    for f in fields(protocol):
        assert f.name in rows, f"docs/benchmarks/{bench}.md has no row for {f.name}"
        assert float(rows[f.name]) == getattr(defaults, f.name), (f.name, rows[f.name], getattr(defaults, f.name))
