"""Score a run folder with its own benchmark's scorer: the benchmark is the one the run recorded (SPEC §11)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dataset_builder.benchmarks import Benchmark, get_benchmark
from dataset_builder.errors import UsageError


def run_benchmark(run_dir: Path) -> Benchmark:
    """The benchmark a run folder belongs to: from run.json, else from its first readable rec.json."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"run folder {run_dir} does not exist")
    marker = run_dir / "run.json"
    if marker.exists():
        try:
            return get_benchmark(json.loads(marker.read_text())["benchmark"])
        except (json.JSONDecodeError, KeyError) as err:
            raise UsageError(f"{marker} is not a run record ({err}); was this folder written by `run`?") from None
    for rec in sorted(run_dir.glob("*.rec.json")):
        try:
            return get_benchmark(json.loads(rec.read_text())["benchmark"])
        except (json.JSONDecodeError, KeyError):
            continue
    raise UsageError(f"{run_dir}: no run.json and no readable *.rec.json episodes to score")


def score_run_dir(run_dir: Path, **kwargs: Any) -> dict[str, Any]:
    """Dispatch to `metrics/<bench>/score.py:score_run` of the run's benchmark."""
    return run_benchmark(run_dir).function("score")(Path(run_dir), **kwargs)


def result_tables(results: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """The text tables of results of one benchmark, side by side."""
    names = {r["benchmark"] for r in results.values()}
    if len(names) != 1:
        raise UsageError(f"cannot put runs of different benchmarks side by side: {sorted(names)}")
    return get_benchmark(names.pop()).function("tables")(results)
