"""The README's main job: build the mini set, run the reference agents, score them, write the report."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from eval.run import RunConfig, run
from eval.tables import paired_line, provenance, side_by_side

log = logging.getLogger("duplex_eval.demo")


def demo(out: Path, preset: str = "mini", adapters: list[str] | None = None) -> int:
    from dataset_builder.build import BuildOptions, build_mpe
    from eval.report import write_report
    from metrics.mpe.score import score_run

    adapters = adapters or ["silent", "oracle", "cascade"]
    t0 = time.perf_counter()
    dataset = out / "datasets" / f"duplex-mpe-{preset}"
    cache = out / "cache"
    if not (dataset / "README.md").exists():
        build_mpe(dataset, BuildOptions(preset=preset, cache_dir=cache / "tts"))
    results, run_dirs = {}, []
    for name in adapters:
        run_dir = out / "runs" / f"mpe-{preset}-{name}"
        args = {"cache_dir": str(cache / "tts")} if name in ("oracle", "cascade") else {}
        counts = run(RunConfig(dataset=str(dataset), adapter=name, out=str(run_dir), adapter_args=args))
        log.info("%s: %s", name, counts)
        results[name] = score_run(run_dir)
        run_dirs.append(run_dir)
    report = write_report(run_dirs, out / "report")
    print("\n=== Duplex-MPE", preset, "— overall (value k/n [Wilson 95% CI]) ===")
    print(side_by_side(results))
    for cond in ("explicit", "implicit"):
        print(f"\n--- {cond} ---")
        print(side_by_side(results, "by_condition", cond))
    print()
    for name, res in results.items():
        print(f"{name}: {paired_line(res)}")
    print(provenance(next(iter(results.values()))))
    print(f"\ndataset:    {dataset}")
    for name, run_dir in zip(adapters, run_dirs, strict=True):
        print(f"{name:<8}    recordings + rec.json: {run_dir}/  scores: {run_dir / 'scores.json'}")
    print(f"report:     {report}")
    print(f"total {time.perf_counter() - t0:.0f}s")
    return 0
