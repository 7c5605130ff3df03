"""Batched lockstep throughput (docs/scale.md): episodes per second at batch sizes 1, 4 and 16, side by side in one run.

    .venv/bin/python benchmarks/bench_batch.py [--model auto|moshi|tiny-batch|both] [--batches 1,4,16]
                                               [--configs m3_chat_en,m3_task_en] [--out DIR]

The cases are the M3-DuplexBench mini set's English configs (built first, from the repository's TTS cache; not
timed). Each batch size gets a fresh agent and runs every case: B = 1 through `run_episode` one at a time (the
path `eval.run` takes for an adapter without batching), B > 1 through `eval.lockstep.LockstepRunner`, both with the
run's default options. Only the episode loop is timed (per-frame scheduling, the streaming VAD of every slot, the
model's steps, writing WAV + rec.json); building the model and decoding the dataset happen before the timer.

Models: `moshi` is the Moshi adapter's tiny randomly initialised Mimi + LM (`adapters/moshi.py`, `tiny=True`,
needs the `moshi` extra); `tiny-batch` is the lockstep tests' tiny recurrent agent (tests/lockstep_agent.py);
`auto` takes moshi when it loads, else tiny-batch. Nothing is asserted: timings depend on the host, so the figures
are reported and compared with each other, never checked.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("NO_TORCH_COMPILE", "1")  # moshi's CPU path: compiling the tiny model costs more than it saves

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DUPLEX_EVAL_CACHE", str(ROOT / ".cache"))

from bench_mpe import Row, markdown, quiet  # noqa: E402

MODELS = {"moshi": ("moshi", {"tiny": True}), "tiny-batch": ("tests.lockstep_agent:TinyBatchAgent", {})}


def load(model: str, batch: int) -> Any:
    from adapters.registry import load_adapter

    name, args = MODELS[model]
    return load_adapter(name, **args, batch_size=batch)


def pick_models(choice: str) -> list[str]:
    if choice in MODELS:
        return [choice]
    try:
        load("moshi", 1).close()
        moshi_ok = True
    except Exception as err:  # no `moshi` extra here: the tests' agent stands in
        print(f"moshi tiny model unavailable ({type(err).__name__}: {err}); using tiny-batch", file=sys.stderr)
        moshi_ok = False
    if choice == "both":
        return ["moshi", "tiny-batch"] if moshi_ok else ["tiny-batch"]
    return ["moshi"] if moshi_ok else ["tiny-batch"]


def build_cases(out: Path, configs: list[str]) -> list[tuple[str, Path]]:
    from dataset_builder.benchmarks import get_benchmark
    from dataset_builder.build import BuildOptions

    data = out / "data"
    if not data.exists():
        get_benchmark("m3").function("build")(data, BuildOptions(
            preset="mini", cache_dir=ROOT / ".cache" / "tts", configs=tuple(configs)))
    return [(c, data) for c in configs]


def jobs_for(agent: Any, sources: list[tuple[str, Path]]) -> list[tuple[Any, Any]]:
    from dataset_builder.benchmarks import benchmark_for_config

    jobs = []
    for config, data in sources:
        bench = benchmark_for_config(config)
        protocol = bench.protocol_class()().for_agent(agent)
        for case, audio in bench.function("case_audio")(data, config):
            jobs.append((case, bench.function("plan")(case, audio, protocol, agent.sample_rate)))
    return jobs


def bench_one(model: str, batch: int, sources: list[tuple[str, Path]], out: Path) -> dict[str, Any]:
    from eval.lockstep import LockstepRunner
    from eval.orchestrator import run_episode

    agent = load(model, batch)
    jobs = jobs_for(agent, sources)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if batch == 1:
        eps = [run_episode(agent, case, plan, out) for case, plan in jobs]
    else:
        eps = list(LockstepRunner(agent, out).run(jobs))
    wall = time.perf_counter() - t0
    agent.close()
    stepped = [e.compute for e in eps if e.compute]
    steps = sum(c["steps"] for c in stepped)
    return {"model": model, "batch": batch, "episodes": len(eps), "ok": sum(e.status == "ok" for e in eps),
            "wall_s": wall, "audio_s": sum(e.duration_s for e in eps),
            "step_ms": sum(c["total_ms"] for c in stepped) / steps if steps else None,
            "batch_calls": round(sum(c["steps"] for c in stepped) / batch) if steps else 0, "out": str(out)}


def same_recordings(a: Path, b: Path) -> tuple[int, int, int]:
    """Recordings of b byte-identical to a's, how many a has, and the largest difference in PCM16 steps."""
    import numpy as np

    from dataset_builder.audio import read_wav

    names = sorted(p.name for p in a.glob("*.wav"))
    same, worst = 0, 0
    for n in names:
        if (a / n).read_bytes() == (b / n).read_bytes():
            same += 1
            continue
        x, y = read_wav(a / n)[0], read_wav(b / n)[0]
        worst = max(worst, int(np.abs(x - y).max() * 32768) if x.shape == y.shape else 32768)
    return same, len(names), worst


def rows_for(results: list[dict[str, Any]]) -> list[Row]:
    rows = []
    for model in dict.fromkeys(r["model"] for r in results):
        mine = [r for r in results if r["model"] == model]
        base = next((r for r in mine if r["batch"] == 1), mine[0])
        base_eps_s = base["episodes"] / base["wall_s"]
        for r in mine:
            eps_s = r["episodes"] / r["wall_s"]
            label = f"{model}, B={r['batch']}"
            rows.append(Row(f"{label}: episodes per second ({r['episodes']} episodes, {r['ok']} ok)", eps_s, "ep/s",
                            detail=r))
            if r is not base:
                rows.append(Row(f"{label}: speed-up over B={base['batch']}", eps_s / base_eps_s, "x"))
                same, n, worst = same_recordings(Path(base["out"]), Path(r["out"]))
                rows.append(Row(f"{label}: recordings byte-identical to B={base['batch']} (else largest difference)",
                                f"{same}/{n}" + (f" ({worst} PCM16 steps)" if same < n else ""), "wav"))
            rows.append(Row(f"{label}: audio per wall second", r["audio_s"] / r["wall_s"], "x real time"))
            if r["step_ms"] is not None:
                rows.append(Row(f"{label}: one step_batch call (all B slots), mean", r["step_ms"], "ms",
                                "80 ms frame"))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="auto", choices=["auto", "both", *MODELS])
    p.add_argument("--batches", default="1,4,16", help="comma-separated batch sizes; default 1,4,16")
    p.add_argument("--configs", default="m3_chat_en,m3_task_en", help="M3 mini configs to run (English)")
    p.add_argument("--out", default=None, help="keep the dataset and runs here (default: a temporary folder)")
    a = p.parse_args(argv)
    quiet()
    batches = [int(b) for b in a.batches.split(",")]
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="bench-batch-"))
    sources = build_cases(out, a.configs.split(","))
    models = pick_models(a.model)
    results = []
    for model in models:
        bench_one(model, 1, [sources[0]], out / "warm" / model)  # imports, ONNX session, model code paths
        for b in batches:
            results.append(bench_one(model, b, sources, out / "runs" / model / f"b{b}"))
    rows = rows_for(results)
    import torch

    print(f"host: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, torch threads "
          f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")
    print(markdown(rows))
    path = out / "bench-batch.json"
    path.write_text(json.dumps([r.__dict__ for r in rows], indent=1, default=str))
    print(f"\nrows as JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
