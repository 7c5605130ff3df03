"""GPU smoke run of the in-process adapters with their real weights (docs/models.md#gpu-smoke).

    .venv/bin/python benchmarks/gpu_smoke.py [--adapters moshiko,personaplex,...] [--cases 5] [--batch 4]
                                             [--data DIR] [--out DIR]
    make gpu-smoke

For each in-process adapter whose weights are already in the local Hugging Face cache (nothing is downloaded:
HF_HUB_OFFLINE=1), the first `--cases` cases of every benchmark config in the adapter's language are run twice on
one agent built with `batch_size=--batch`: one episode at a time (`run_episode`: `step`, slot 0) and in batched
lockstep (`eval.lockstep.LockstepRunner`: `step_batch`, every slot). The two recordings of each case are compared
sample for sample (the Moshi adapter promises them bit for bit at a fixed batch size, adapters/moshi.py), and
live feasibility is read from each pass's step times (`metrics.feasibility.run_feasibility`: p50 and p99 of the step
against the frame duration). One table is printed; the rows are also written as JSON under --out.

On a machine without a CUDA GPU it refuses before loading anything: one line on stderr and exit status 3 (a smoke
check that did not run must not look like one that passed). `--cpu-tiny` is the dry run of this script itself on
the CPU: the Moshi-family presets' tiny random models, no weights (tests/test_gpu_smoke.py runs it).

Exit status: 0 when every adapter that ran finished every episode and both passes agree sample for sample; 1 when
one did not, or when no adapter had its weights; 3 when refused for want of a GPU; 2 for a usage error.

The datasets: --data DIR holds one built set per benchmark (DIR/mpe, DIR/ifeval, DIR/m3, as `duplex-eval build
--preset mini` writes them); a missing one is built (mini preset) from the repository's TTS clip cache, which a
machine without network needs to have been carried along. Nothing is asserted about timings: they are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights already in the cache, or the adapter is skipped
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DUPLEX_EVAL_CACHE", str(ROOT / ".cache"))

REFUSED = 3  # exit status when there is no CUDA GPU
DEFAULT_CASES, DEFAULT_BATCH = 5, 4


@dataclass(frozen=True)
class InProcess:
    """An in-process adapter as the smoke run builds it."""

    repos: tuple[str, ...]  # Hugging Face repos that must be in the local cache
    language: str  # "en" runs every English config, "ja" the Japanese ones
    batched: bool  # a BatchedDuplexAgent (takes batch_size)
    args: dict[str, Any] = field(default_factory=dict)
    needs: str = ""  # what else it needs, when the cache alone is not enough


def in_process() -> dict[str, InProcess]:
    """Every in-process adapter (the served ones, which need a server, are not smoke-run here)."""
    from adapters.moshi import PRESETS

    table = {name: InProcess((p.repo,), p.language, True) for name, p in PRESETS.items()}
    table["minicpm-o"] = InProcess(("openbmb/MiniCPM-o-4_5",), "en", False)
    table["flm-audio"] = InProcess(("CofeAI/FLM-Audio",), "en", False)  # its code on PYTHONPATH, or repo_dir=
    # its code on PYTHONPATH, or repo_dir=; the voice's speaker embedding is pyannote's wespeaker
    table["voila"] = InProcess(("maitrix-org/Voila-autonomous-preview", "maitrix-org/Voila-Tokenizer",
                                "pyannote/wespeaker-voxceleb-resnet34-LM"), "en", False)
    # F-Actor's training/ on PYTHONPATH, or repo_dir=; NanoCodec comes from the hub cache too.
    table["f-actor"] = InProcess(("maikezu/f-actor", "nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps"), "en", False)
    table["freeze-omni"] = InProcess((), "en", False, needs="a Freeze-Omni checkout and its checkpoints: pass "
                                     "--adapter-arg freeze-omni.repo_dir=DIR (and checkpoint_dir, llm_path)")
    return table


def cuda_name() -> str | None:
    """The first CUDA device's name, or None without one (torch missing counts as none)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def in_cache(repo: str) -> bool:
    """Whether a Hugging Face repo has a snapshot in the local cache (HF_HUB_CACHE)."""
    from huggingface_hub.constants import HF_HUB_CACHE

    snapshots = Path(HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}" / "snapshots"
    return snapshots.is_dir() and any(snapshots.iterdir())


def configs_for(language: str) -> list[str]:
    from dataset_builder.benchmarks import benchmark_names, get_benchmark

    every = [c for name in benchmark_names() for c in get_benchmark(name).evaluated_configs()]
    return [c for c in every if c.endswith("_ja") == (language == "ja")]


def dataset(data: Path, config: str) -> Path:
    """The built set a config's cases come from: DIR/<benchmark>, built (mini) when missing."""
    from dataset_builder.benchmarks import benchmark_for_config
    from dataset_builder.build import BuildOptions
    from eval.cli import heard_gate

    bench = benchmark_for_config(config)
    folder = data / bench.name
    if not folder.exists():
        bench.function("build")(folder, BuildOptions(preset="mini", cache_dir=ROOT / ".cache" / "tts",
                                                     heard_gate=heard_gate()))
    return folder


def jobs(agent: Any, data: Path, configs: list[str], n: int) -> list[tuple[Any, Any]]:
    from dataset_builder.benchmarks import benchmark_for_config

    out = []
    for config in configs:
        bench = benchmark_for_config(config)
        folder = dataset(data, config)
        protocol = bench.protocol_class()().for_agent(agent)
        wanted = {c.case_id for c in bench.function("cases")(folder, config)[:n]}
        for case, audio in bench.function("case_audio")(folder, config, wanted=wanted):
            out.append((case, bench.function("plan")(case, audio, protocol, agent.sample_rate)))
    return out


def feasibility(episodes: list[Any]) -> str:
    from metrics.feasibility import run_feasibility

    feas = run_feasibility(episodes)
    if not feas:
        return "no steps"
    return "; ".join(f"p50 {g['p50_ms']:.3g} / p99 {g['p99_ms']:.3g} ms of {g['frame_ms']:g} ms "
                     f"({'live' if g['live'] else 'NOT live'})" for g in feas["groups"])


def smoke(name: str, spec: InProcess, data: Path, out: Path, *, cases: int, batch: int,
          extra: dict[str, Any], only: list[str] | None = None) -> dict[str, Any]:
    """Both passes of one adapter; the row of the table."""
    from bench_batch import same_recordings

    from adapters.registry import load_adapter
    from eval.lockstep import LockstepRunner
    from eval.orchestrator import run_episode

    args = {**spec.args, **extra, **({"batch_size": batch} if spec.batched else {})}
    agent = load_adapter(name, **args)
    try:
        configs = [c for c in configs_for(spec.language) if only is None or c in only]
        todo = jobs(agent, data, configs, cases)
        one = [run_episode(agent, case, plan, out / name / "one") for case, plan in todo]
        row: dict[str, Any] = {"adapter": name, "episodes": len(one), "ok": sum(e.status == "ok" for e in one),
                               "skipped": sum(e.status == "skipped" for e in one), "step B=1": feasibility(one)}
        if spec.batched and batch > 1:
            todo = jobs(agent, data, configs, cases)  # a plan is consumed by the run it drives: plan afresh
            many = list(LockstepRunner(agent, out / name / "batched").run(todo))
            same, n, worst = same_recordings(out / name / "one", out / name / "batched")
            row |= {"ok batched": sum(e.status == "ok" for e in many), f"step B={batch}": feasibility(many),
                    "same samples": f"{same}/{n}" + (f" (worst {worst} PCM16 steps)" if same < n else ""),
                    "agree": same == n}
        else:
            row |= {"ok batched": None, f"step B={batch}": "not batched", "same samples": "n/a", "agree": True}
    finally:
        agent.close()
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    keys = list(dict.fromkeys(k for r in rows for k in r if k != "agree"))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join("" if r.get(k) is None else str(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def parse_extra(pairs: list[str]) -> dict[str, dict[str, str]]:
    """--adapter-arg ADAPTER.KEY=VALUE, per adapter."""
    out: dict[str, dict[str, str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        adapter, dot, arg = key.partition(".")
        if not (sep and dot and adapter and arg):
            raise ValueError(f"--adapter-arg {pair!r} is not ADAPTER.KEY=VALUE")
        out.setdefault(adapter, {})[arg] = value
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--adapters", default=None, help="comma-separated; default: every in-process adapter")
    p.add_argument("--cases", type=int, default=DEFAULT_CASES, help="cases per benchmark config (default 5)")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="batch size of the batched pass (default 4)")
    p.add_argument("--data", default=None, help="built sets, one folder per benchmark (default: built here)")
    p.add_argument("--out", default=None, help="recordings and the JSON rows (default: a temporary folder)")
    p.add_argument("--configs", default=None, help="comma-separated configs (default: every config in the "
                   "adapter's language)")
    p.add_argument("--adapter-arg", action="append", default=[], metavar="ADAPTER.KEY=VALUE")
    p.add_argument("--cpu-tiny", action="store_true",
                   help="dry run on the CPU with the Moshi-family tiny random models (no weights, no GPU)")
    a = p.parse_args(argv)
    gpu = cuda_name()
    if gpu is None and not a.cpu_tiny:
        print("gpu_smoke: refused: no CUDA GPU on this machine (torch.cuda.is_available() is False); nothing was "
              "run (--cpu-tiny dry-runs the script on the tiny models)", file=sys.stderr)
        return REFUSED
    table = in_process()
    names = a.adapters.split(",") if a.adapters else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        p.error(f"not in-process adapters: {unknown}; known: {sorted(table)}")
    try:
        extra = parse_extra(a.adapter_arg)
    except ValueError as err:
        p.error(str(err))
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="gpu-smoke-"))
    data = Path(a.data) if a.data else out / "data"
    rows, skipped = [], []
    for name in names:
        spec = table[name]
        if a.cpu_tiny:
            if not spec.batched:
                skipped.append(f"{name}: no tiny model (--cpu-tiny runs the Moshi-family presets only)")
                continue
            spec = InProcess(spec.repos, spec.language, True, {"tiny": True, "device": "cpu"})
        else:
            missing = [r for r in spec.repos if not in_cache(r)]
            if missing or (spec.needs and name not in extra):
                skipped.append(f"{name}: " + (f"weights not in the local cache: {missing}" if missing else spec.needs))
                continue
        try:
            rows.append(smoke(name, spec, data, out, cases=a.cases, batch=a.batch, extra=extra.get(name, {}),
                              only=a.configs.split(",") if a.configs else None))
        except Exception as err:  # noqa: BLE001 - one adapter failing must not hide the others' rows
            rows.append({"adapter": name, "episodes": 0, "error": f"{type(err).__name__}: {err}", "agree": False})
    print(f"gpu_smoke on {gpu or 'CPU (--cpu-tiny dry run)'}: {a.cases} cases per config, batched pass at "
          f"B={a.batch}")
    if rows:
        print(markdown(rows))
    for line in skipped:
        print(f"skipped {line}")
    (out / "gpu-smoke.json").parent.mkdir(parents=True, exist_ok=True)
    (out / "gpu-smoke.json").write_text(json.dumps({"device": gpu, "rows": rows, "skipped": skipped}, indent=1,
                                                   default=str))
    print(f"rows as JSON: {out / 'gpu-smoke.json'}")
    if not rows:
        print("gpu_smoke: no adapter ran (none had its weights in the local cache)", file=sys.stderr)
        return 1
    bad = [r["adapter"] for r in rows
           if not r["agree"] or r.get("error") or r["ok"] + r["skipped"] < r["episodes"]
           or (r.get("ok batched") is not None and r["ok batched"] + r["skipped"] < r["episodes"])]
    if bad:
        print(f"gpu_smoke: failed: {bad}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
