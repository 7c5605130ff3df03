"""docs/adding-a-benchmark.md: every registered benchmark builds its mini set, runs `silent` and `oracle` through the
one episode runner, and is scored and tabulated through the registry alone — so an entry cannot drift from its code."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from dataset_builder.benchmarks import (
    Benchmark,
    benchmark_for_config,
    benchmark_names,
    get_benchmark,
    register_benchmark,
)
from dataset_builder.errors import UsageError
from eval.report import write_report
from eval.run import RunConfig, run
from metrics.scoring import result_tables, run_benchmark, score_run_dir

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "tts"
PARTS = ("protocol", "build", "plan", "score", "tables", "windows", "cases", "case_audio", "oracle")
OPTIONAL_PARTS = ("boards", "window_detail", "diagnostics")  # empty: the shared default
# The harness core that once branched on benchmark names; it now reads each benchmark's entry instead.
CORE = ("adapters/oracle.py", "eval/report_site/collect.py", "eval/report_site/boards/__init__.py", "eval/demo.py",
        "eval/run.py", "metrics/scoring.py")
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", benchmark_names())
def test_every_part_of_every_entry_resolves(name: str) -> None:
    bench = get_benchmark(name)
    for part in PARTS:
        assert callable(bench.load(part)), (name, part)
    for part in OPTIONAL_PARTS:
        assert not getattr(bench, part) or callable(bench.load(part)), (name, part)
    assert all(isinstance(s, int) and s > 0 for _, s in bench.demo_seconds), name
    protocol = bench.protocol_class()()
    assert protocol.to_dict() and type(protocol).from_dict(protocol.to_dict()) == protocol
    for config in bench.configs:
        assert benchmark_for_config(config) is bench


def _score_entries(scores: dict, prefix: str = "") -> list[tuple[str, dict]]:
    """Every `{"value", "n", ...}` entry of a scores block, flat (MPE, IFEval) or grouped (M3: per
    `<lang>_<domain>_<condition>`), named by its path."""
    out = []
    for key, entry in scores.items():
        if isinstance(entry, dict) and "n" in entry:
            out.append((prefix + key, entry))
        elif isinstance(entry, dict):
            out += _score_entries(entry, f"{prefix}{key}.")
    return out


@pytest.mark.parametrize("name", benchmark_names())
def test_every_benchmark_runs_and_scores_silent_and_oracle(name: str, mini_sets: Mapping[str, Path],
                                                           tmp_path: Path) -> None:
    bench = get_benchmark(name)
    results = {}
    for agent in ("silent", "oracle"):
        run_dir = tmp_path / agent
        args = {"cache_dir": str(CACHE)} if agent == "oracle" else {}
        counts = run(RunConfig(dataset=str(mini_sets[name]), config=bench.configs[0], adapter=agent,
                               out=str(run_dir), adapter_args=args, limit=4))
        # A case the adapter lacks a capability for (M3's Full context needs teacher forcing) is skipped, not run.
        assert counts["ok"] + counts.get("skipped", 0) == 4 and counts["failed"] == 0, counts
        assert json.loads((run_dir / "run.json").read_text())["benchmark"] == name
        assert run_benchmark(run_dir) is bench  # the scorer is found from the run folder alone
        results[agent] = score_run_dir(run_dir)
        assert results[agent]["benchmark"] == name and results[agent]["n_failed"] == 0
    scored = [m for m, e in _score_entries(results["oracle"]["scores"]) if e["n"]]
    assert scored, "the oracle entered no denominator"
    text = "\n".join(f"{title}\n{body}" for title, body in result_tables(results))  # M3 names runs in titles
    assert "silent" in text and "oracle" in text
    page = write_report([tmp_path / "silent", tmp_path / "oracle"], tmp_path / "report", max_plots=1)
    assert bench.title in page.read_text()


def test_a_config_cannot_belong_to_two_benchmarks() -> None:
    mpe = get_benchmark("mpe")
    clash = Benchmark(**{**mpe.__dict__, "name": "mpe-copy"})
    with pytest.raises(ValueError, match="already belongs"):
        register_benchmark(clash)
    assert "mpe-copy" not in benchmark_names()


def test_unknown_names_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown benchmark 'm4'"):
        get_benchmark("m4")
    with pytest.raises(UsageError, match="unknown dataset config"):
        benchmark_for_config("nope")


def test_the_core_names_no_benchmark() -> None:
    """Adding a benchmark is its own files and its entry: no module of the core quotes a benchmark's name."""
    quoted = [(path, name) for path in CORE for name in benchmark_names()
              if f'"{name}"' in (ROOT / path).read_text() or f"'{name}'" in (ROOT / path).read_text()]
    assert quoted == [("eval/run.py", "mpe")], quoted  # the runner's default --config, which is a config name
