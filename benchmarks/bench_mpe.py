"""Duplex-MPE harness throughput and memory, measured side by side in one run (see benchmarks/README.md).

    .venv/bin/python benchmarks/bench_mpe.py [--pairs N] [--out DIR] [--seed S] [--tts piper]

Prints a markdown table (measurement, value, unit, target) and writes the same rows as JSON to OUT/bench.json.
Without --out the work goes to a temporary folder; its datasets, runs and TTS cache are removed afterwards and
only bench.json is left there (its path is printed). Nothing is asserted: timings depend on the host, so the
figures are reported and compared with each other, never checked.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Before `datasets` is imported anywhere: its progress bars would interleave with the table.
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

ROOT = Path(__file__).resolve().parent.parent
SILENT_TARGET_X = 100.0  # SPEC/brief: the harness itself must not be the bottleneck on a 2-core CPU box


@dataclass
class Row:
    measurement: str
    value: float | int | str | None
    unit: str
    target: str = ""
    detail: dict[str, Any] | None = None  # raw numbers behind the value (JSON only)

    def cell(self) -> str:
        if isinstance(self.value, float):
            return f"{self.value:.1f}" if abs(self.value) >= 10 else f"{self.value:.2f}"
        return "n/a" if self.value is None else str(self.value)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def ratio(audio_s: float, wall_s: float) -> float | None:
    return audio_s / wall_s if wall_s > 0 else None


def episode_seconds(run_dir: Path) -> float:
    """Sum of the realised episode durations recorded in rec.json (the audio the harness produced)."""
    return sum(float(json.loads(p.read_text())["duration_s"]) for p in run_dir.glob("*.rec.json"))


def cache_clip_seconds(cache_dir: Path) -> tuple[int, float]:
    """Number and total length of the clips in a TTS cache: what was actually synthesized (unique clips)."""
    import numpy as np

    from dataset_builder.audio import SESSION_SR

    files = list(cache_dir.rglob("*.npy"))
    # mmap reads only the .npy header, so this stays cheap however large the cache is.
    samples = sum(int(np.load(f, mmap_mode="r", allow_pickle=False).shape[0]) for f in files)
    return len(files), samples / SESSION_SR


def dataset_seconds(dataset: Path) -> tuple[list[Any], float]:
    from dataset_builder.audio import SESSION_SR
    from dataset_builder.hf_dataset import load_cases

    cases, samples = [], 0
    for case, audio in load_cases(dataset, "mpe"):  # one row's audio at a time
        cases.append(case)
        samples += len(audio)
    return cases, samples / SESSION_SR


def warm_process() -> None:
    """One-time imports and model sessions, so the timed calls measure steady-state throughput."""
    import accelerate  # noqa: F401

    from metrics.vad import _silero_session

    _silero_session()


def warm_oracle_cache(cases: list[Any], cache_dir: Path, tts: str) -> None:
    """Synthesize the oracle's answers into the cache, so its timed run measures the harness, not TTS."""
    from adapters.oracle import OracleAgent

    agent = OracleAgent(tts=tts, cache_dir=cache_dir)
    for case in cases:
        agent.bind_case(case)
    agent.close()


def bench_runs(dataset: Path, runs_dir: Path, cache_dir: Path, tts: str) -> tuple[list[Row], dict[str, Path]]:
    from eval.run import RunConfig, run

    rows, dirs = [], {}
    for adapter, args in (("silent", {}), ("oracle", {"cache_dir": str(cache_dir), "tts": tts})):
        out = runs_dir / adapter
        counts, wall = timed(lambda a=adapter, o=out, g=args: run(RunConfig(str(dataset), a, str(o),
                                                                             adapter_args=g)))
        audio = episode_seconds(out)
        target = f">= {SILENT_TARGET_X:g}" if adapter == "silent" else "(compare with silent)"
        rows.append(Row(f"harness run, `{adapter}` adapter ({audio:.0f} s episode audio / {wall:.2f} s wall)",
                        ratio(audio, wall), "x real time", target,
                        {"episode_audio_s": round(audio, 3), "wall_s": round(wall, 3), "counts": counts}))
        dirs[adapter] = out
    return rows, dirs


def bench_vad(runs: dict[str, Path]) -> list[Row]:
    from dataset_builder.audio import read_wav
    from metrics.vad import VAD_PRESETS, SileroVAD

    vad = SileroVAD(VAD_PRESETS["mpe"])
    rows = []
    # The oracle's model channel holds real answers; the silent one is digital silence (the energy-floor path);
    # the user channel is speech-heavy room audio, the costly case.
    for label, run_name, ch in (("model channel, `oracle` run", "oracle", 1),
                                ("model channel, `silent` run (digital silence)", "silent", 1),
                                ("user channel (speech-heavy)", "oracle", 0)):
        audio_s = wall = 0.0
        n_spans = 0
        for wav in sorted(runs[run_name].glob("*.wav")):
            audio, sr = read_wav(wav)
            x = audio[:, ch].copy()
            spans, dt = timed(lambda x=x, sr=sr: vad.spans(x, sr))
            audio_s += len(x) / sr
            wall += dt
            n_spans += len(spans)
        rows.append(Row(f"batch Silero VAD, {label} ({audio_s:.0f} s / {wall:.2f} s)", ratio(audio_s, wall),
                        "x real time", "" if run_name == "silent" else "~200 (docs/offline.md: Silero ONNX, 1 core)",
                        {"audio_s": round(audio_s, 3), "wall_s": round(wall, 3), "spans": n_spans}))
    return rows


def bench_builds(out: Path, pairs: int, seed: int, tts: str, cache_dir: Path) -> tuple[list[Row], list[Any]]:
    """Builds with the default pool (one worker per core); bench_build.py sets them against the engine alone."""
    from dataset_builder.build import BuildOptions
    from dataset_builder.mpe.build import build as build_mpe

    rows = []
    cold_info, cold_wall = timed(lambda: build_mpe(out / "dataset", BuildOptions(
        seed=seed, tts=tts, n=pairs, cache_dir=cache_dir)))
    n_clips, clip_s = cache_clip_seconds(cache_dir)
    (cases, audio_s), load_wall = timed(lambda: dataset_seconds(out / "dataset"))
    workers = cold_info["workers"]
    rows.append(Row(f"build {pairs} pairs, {workers} workers, empty TTS cache: dataset audio "
                    f"({audio_s:.0f} s / {cold_wall:.1f} s)", ratio(audio_s, cold_wall), "x real time", "",
                    {"dataset_audio_s": round(audio_s, 3), "audio_hours": cold_info["audio_hours"],
                     "n_cases": cold_info["n_cases"], "wall_s": round(cold_wall, 3), "workers": workers}))
    rows.append(Row(f"build {pairs} pairs, {workers} workers, empty TTS cache: unique synthesized speech "
                    f"({n_clips} clips, {clip_s:.0f} s / {cold_wall:.1f} s)",
                    ratio(clip_s, cold_wall), "x real time", "(engine alone: bench_build.py)",
                    {"clips": n_clips, "clip_audio_s": round(clip_s, 3), "wall_s": round(cold_wall, 3)}))
    warm_info, warm_wall = timed(lambda: build_mpe(out / "dataset-warm", BuildOptions(
        seed=seed, tts=tts, n=pairs, cache_dir=cache_dir)))
    rows.append(Row(f"build {pairs} pairs, warm TTS cache: dataset audio ({audio_s:.0f} s / {warm_wall:.1f} s)",
                    ratio(audio_s, warm_wall), "x real time", "(compare with empty cache)",
                    {"dataset_audio_s": round(audio_s, 3), "audio_hours": warm_info["audio_hours"],
                     "wall_s": round(warm_wall, 3), "speedup_vs_cold": round(cold_wall / warm_wall, 2)}))
    # Each run call loads the dataset first; at small --pairs this fixed cost is a large share of its wall time.
    rows.append(Row(f"load_cases: {len(cases)} cases through `datasets`, decoded", load_wall, "s", "",
                    {"cases": len(cases), "wall_s": round(load_wall, 3)}))
    return rows, cases


# A child forked from this (by then large) process inherits its peak RSS: Linux carries the parent's high-water
# mark through fork and exec into the child's ru_maxrss. So the CLI step runs under a small launcher, itself
# started fresh, and the launcher reports RUSAGE_CHILDREN of its only child: that child was forked from the
# launcher, not from us. (/usr/bin/time -v does the same job; this works where it is not installed.)
_LAUNCHER = """\
import json, resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
print(json.dumps({"rc": rc.returncode, "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "stderr": rc.stderr.decode(errors="replace")[-3000:]}))
"""


def peak_rss_step(argv: list[str]) -> tuple[float, float]:
    """Run one `duplex-eval` step in a child process; its peak RSS in MiB (ru_maxrss is KiB on Linux)."""
    cmd = [sys.executable, "-c", _LAUNCHER, sys.executable, "-m", "eval.cli", *argv]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if res["rc"] != 0:
        raise RuntimeError(f"duplex-eval {' '.join(argv)} failed ({res['rc']}):\n{res['stderr']}")
    return res["maxrss_kib"] / 1024, wall


def bench_memory(out: Path, pairs: int, seed: int, tts: str, cache_dir: Path) -> list[Row]:
    dataset, run_dir = out / "mem-dataset", out / "mem-run"
    steps = [
        ("build", ["build", "mpe", "--n-pairs", str(pairs), "--seed", str(seed), "--tts", tts,
                   "--out", str(dataset), "--cache-dir", str(cache_dir)]),
        ("run silent", ["run", "--dataset", str(dataset), "--adapter", "silent", "--out", str(run_dir)]),
        ("score (VAD + whisper ASR + heuristic judge)", ["score", str(run_dir)]),
    ]
    how = "RUSAGE_CHILDREN of a fresh launcher process"
    rows = []
    for name, argv in steps:
        rss, wall = peak_rss_step(argv)
        rows.append(Row(f"peak RSS, `duplex-eval {name}` subprocess, {pairs} pairs ({wall:.1f} s)", rss, "MiB",
                        "", {"how": how, "wall_s": round(wall, 3), "argv": argv}))
    return rows


def markdown(rows: list[Row]) -> str:
    lines = ["| measurement | value | unit | target |", "|---|---:|---|---|"]
    lines += [f"| {r.measurement} | {r.cell()} | {r.unit} | {r.target} |" for r in rows]
    return "\n".join(lines)


def build_args(p: argparse.ArgumentParser, tts_help: str = "TTS backend; default piper") -> None:
    """--seed, --tts and --out, as every build benchmark takes them."""
    p.add_argument("--seed", type=int, default=0, help="build seed; default 0")
    p.add_argument("--tts", default="piper", help=tts_help)
    p.add_argument("--out", default=None, help="keep the datasets, runs and caches here (default: a temporary "
                                                "folder, of which only the result JSON is kept)")


def host() -> dict[str, Any]:
    """The machine a result was measured on, as each benchmark's JSON records it."""
    return {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
            "load_average": os.getloadavg()}


def row_records(rows: list[Row]) -> list[dict[str, Any]]:
    return [{"measurement": r.measurement, "value": r.value, "unit": r.unit, "target": r.target,
             **({"detail": r.detail} if r.detail else {})} for r in rows]


class ResultFolder:
    """Where a benchmark writes: `--out` when given, kept whole; otherwise a new temporary folder of which only the
    result JSON is left when the benchmark ends (its datasets, runs and caches are bulky)."""

    def __init__(self, out: str | None, prefix: str, result_name: str) -> None:
        from dataset_builder.atomic import make_temp_dir

        # Not `mkdtemp`: its folder is 0700 whatever the umask, and the result is kept in it.
        self.temporary = not out
        self.path = Path(out) if out else make_temp_dir(Path(tempfile.gettempdir()), prefix=prefix)
        self.path.mkdir(parents=True, exist_ok=True)
        self.result = self.path / result_name

    def write(self, rows: list[Row], total_s: float, **params: Any) -> None:
        """The result JSON: the benchmark's parameters, then when, how long, on what machine, and the rows."""
        result = {**params, "date": time.strftime("%Y-%m-%d"), "total_s": round(total_s, 1), "host": host(),
                  "rows": row_records(rows)}
        self.result.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"json: {self.result}")

    def __enter__(self) -> ResultFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.temporary:
            for child in self.path.iterdir():
                if child != self.result:
                    shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink()


def quiet() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    for name in ("duplex_eval", "datasets", "huggingface_hub", "accelerate", "faster_whisper", "piper"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=5, help="scenario pairs to build (2 cases each); default 5")
    build_args(p, "TTS backend for the build and the oracle; default piper")
    p.add_argument("--skip-memory", action="store_true", help="skip the peak-memory subprocesses (d)")
    a = p.parse_args(argv)
    quiet()
    folder = ResultFolder(a.out, "bench-mpe-", "bench.json")
    out = folder.path
    cache_dir = out / "tts-cache"
    if cache_dir.exists():
        shutil.rmtree(cache_dir)  # (c) measures an empty cache, also when --out is reused
    for stale in ("dataset", "dataset-warm", "runs", "mem-dataset", "mem-run"):
        shutil.rmtree(out / stale, ignore_errors=True)  # a leftover run folder would be resumed, not timed
    t0 = time.perf_counter()
    with folder:
        rows, cases = bench_builds(out, a.pairs, a.seed, a.tts, cache_dir)
        warm_process()
        _, warm_wall = timed(lambda: warm_oracle_cache(cases, cache_dir, a.tts))
        run_rows, runs = bench_runs(out / "dataset", out / "runs", cache_dir, a.tts)
        rows = run_rows + bench_vad(runs) + rows
        if not a.skip_memory:
            rows += bench_memory(out, a.pairs, a.seed, a.tts, cache_dir)
        self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append(Row("peak RSS, this benchmark process (RUSAGE_SELF)", self_rss, "MiB", ""))
        total = time.perf_counter() - t0
        table = markdown(rows)
        print(table)
        print(f"\n{a.pairs} pairs, seed {a.seed}, tts {a.tts}; oracle TTS warm-up {warm_wall:.1f} s (untimed); "
              f"total {total:.0f} s on {os.cpu_count()} CPUs ({platform.processor() or platform.machine()})")
        folder.write(rows, total, pairs=a.pairs, seed=a.seed, tts=a.tts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
