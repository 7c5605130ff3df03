"""The README's main job: build each benchmark's small set, run the reference agents, score them, report."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from dataset_builder.benchmarks import Benchmark, benchmark_names, get_benchmark
from eval.run import RunConfig, run
from metrics.scoring import result_tables
from metrics.tables import provenance

log = logging.getLogger("duplex_eval.demo")

SPEAKING_AGENTS = ("oracle", "cascade")  # they speak through the project's TTS and share its clip cache


def demo(out: Path, preset: str = "mini", adapters: list[str] | None = None,
         benchmarks: list[str] | None = None) -> int:
    from dataset_builder.build import BuildOptions
    from eval.report import write_report

    adapters = adapters or ["silent", "oracle", "cascade"]
    t0 = time.perf_counter()
    cache = out / "cache"
    run_dirs: list[Path] = []
    names = benchmarks or ["mpe", *(b for b in benchmark_names() if b != "mpe")]
    for bench in [get_benchmark(b) for b in names]:
        dataset = out / "datasets" / f"duplex-{bench.name}-{preset}"
        if not (dataset / "README.md").exists():
            bench.function("build")(dataset, BuildOptions(preset=preset, cache_dir=cache / "tts", progress=True))
        for config in bench.evaluated_configs():
            run_dirs += _run_config(bench, config, dataset, out, preset, adapters, cache)
    report = write_report(run_dirs, out / "report")
    print(f"report:     {report}")
    print(f"total {time.perf_counter() - t0:.0f}s")
    return 0


def _run_config(bench: Benchmark, config: str, dataset: Path, out: Path, preset: str, adapters: list[str],
                cache: Path) -> list[Path]:
    """Run, score and print the reference agents side by side on one config; their run folders."""
    from metrics.scoring import score_run_dir

    results = {}
    run_dirs = []
    # One config (the first; IFEval's others are subsets of it, scored from the same run): the run names stay
    # "<bench>-<preset>-<agent>"; a benchmark run per config adds the config.
    tag = bench.name if len(bench.evaluated_configs()) == 1 else config
    for name in adapters:
        run_dir = out / "runs" / f"{tag}-{preset}-{name}"
        args = {"cache_dir": str(cache / "tts")} if name in SPEAKING_AGENTS else {}
        counts = run(RunConfig(dataset=str(dataset), config=config, adapter=name, out=str(run_dir),
                               adapter_args=args, progress=True))
        log.info("%s %s %s: %s", bench.name, config, name, counts)
        results[name] = score_run_dir(run_dir, progress=True)
        run_dirs.append(run_dir)
    title = bench.title if tag == bench.name else f"{bench.title} {config}"
    print(f"\n=== {title} {preset} (value k/n [Wilson 95% CI]) ===")
    for name, res in results.items():
        for flag in res.get("health", {}).get("flags", []):
            print(f"HEALTH {name}: {flag}")
    for table_title, text in result_tables(results):
        print(f"\n--- {table_title} ---\n{text}")
    print(provenance(next(iter(results.values()))))
    print(f"\ndataset:    {dataset}")
    for name, run_dir in zip(adapters, run_dirs, strict=True):
        print(f"{name:<8}    recordings + rec.json: {run_dir}/  scores: {run_dir / 'scores.json'}")
    return run_dirs
