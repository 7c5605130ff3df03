"""The README's main job: build each benchmark's small set, run the reference agents, score them, report."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from dataset_builder.benchmarks import benchmark_names, get_benchmark
from eval.run import RunConfig, run
from metrics.scoring import result_tables
from metrics.tables import provenance

log = logging.getLogger("duplex_eval.demo")

SPEAKING_AGENTS = ("oracle", "cascade")  # they speak through the project's TTS and share its clip cache


def demo(out: Path, preset: str = "mini", adapters: list[str] | None = None,
         benchmarks: list[str] | None = None) -> int:
    from dataset_builder.build import BuildOptions
    from eval.report import write_report
    from metrics.scoring import score_run_dir

    adapters = adapters or ["silent", "oracle", "cascade"]
    t0 = time.perf_counter()
    cache = out / "cache"
    run_dirs: list[Path] = []
    names = benchmarks or ["mpe", *(b for b in benchmark_names() if b != "mpe")]
    for bench in [get_benchmark(b) for b in names]:
        dataset = out / "datasets" / f"duplex-{bench.name}-{preset}"
        if not (dataset / "README.md").exists():
            bench.function("build")(dataset, BuildOptions(preset=preset, cache_dir=cache / "tts", progress=True))
        results = {}
        for name in adapters:
            run_dir = out / "runs" / f"{bench.name}-{preset}-{name}"
            args = {"cache_dir": str(cache / "tts")} if name in SPEAKING_AGENTS else {}
            # The first config is the benchmark's set; the others are subsets of it (IFEval's matched-audio
            # cases), which its scorer reports from the same run.
            counts = run(RunConfig(dataset=str(dataset), config=bench.configs[0], adapter=name, out=str(run_dir),
                                   adapter_args=args, progress=True))
            log.info("%s %s: %s", bench.name, name, counts)
            results[name] = score_run_dir(run_dir, progress=True)
            run_dirs.append(run_dir)
        print(f"\n=== {bench.title} {preset} (value k/n [Wilson 95% CI]) ===")
        for name, res in results.items():
            for flag in res.get("health", {}).get("flags", []):
                print(f"HEALTH {name}: {flag}")
        for title, text in result_tables(results):
            print(f"\n--- {title} ---\n{text}")
        print(provenance(next(iter(results.values()))))
        print(f"\ndataset:    {dataset}")
        for name in adapters:
            run_dir = out / "runs" / f"{bench.name}-{preset}-{name}"
            print(f"{name:<8}    recordings + rec.json: {run_dir}/  scores: {run_dir / 'scores.json'}")
    report = write_report(run_dirs, out / "report")
    print(f"report:     {report}")
    print(f"total {time.perf_counter() - t0:.0f}s")
    return 0
