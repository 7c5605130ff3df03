"""Duplex-MPE build throughput against the TTS engine's own speed on all cores, side by side in one run.

    .venv/bin/python benchmarks/bench_build.py [--pairs N] [--workers W] [--full-pairs P] [--out DIR]

The same clips (every distinct utterance of N pairs' scripts, and the preamble) are synthesised three ways:
(1) directly by the backend in a pool of W processes (no build machinery), (2) by `build mpe --workers W` into an
empty TTS cache, (3) by the backend in this one process with its default threads (how builds ran before the
pool). The build's overhead is (2) against (1). The full-preset build time is projected from the measured
throughput and the full preset's own scripts (their distinct text, in characters). Prints a markdown table and
writes it with the raw numbers to OUT/bench-build.json. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import sys
import time
from typing import Any

from bench_mpe import ResultFolder, Row, build_args, markdown, quiet, ratio, timed

BUILD_OVERHEAD_GOAL = 0.15  # the goal: the build adds under 15 % on top of synthesis

_ENGINE: Any = None  # the backend, in each engine-pool worker


def _start_engine(backend: Any) -> None:
    global _ENGINE
    _ENGINE = backend


def _engine_speak(utterance: tuple[str, str]) -> int:
    """One clip straight from the backend; its length in samples (the clip itself need not travel back)."""
    return len(_ENGINE.synthesize(*utterance))


def utterances(scripts: list[Any], preamble_text: str, assistant_voice: str) -> list[tuple[str, str]]:
    """Each distinct (text, voice) the build synthesises, in the order it first needs them: what an empty
    cache makes it synthesise exactly once."""
    seen = {(preamble_text, assistant_voice): None}
    for script in scripts:
        voices = {s.name: s.voice for s in script.speakers}
        for turn in script.turns:
            for seg in turn.speech_segments():
                if seg.kind == "speech":
                    seen.setdefault((seg.text, voices[turn.speaker]), None)
    return list(seen)


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and of every child it has waited for (a pool's workers once it
    is shut down): unlike wall time, hardly moved by other jobs sharing the cores."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def clock(seconds: float) -> str:
    m = int(round(seconds / 60))
    return f"{m // 60}:{m % 60:02d}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=20, help="scenario pairs to build (2 cases each); default 20")
    p.add_argument("--workers", type=int, default=None, help="pool size for engine and build; default all cores")
    p.add_argument("--full-pairs", type=int, default=2000, help="pairs of the preset to project to; default 2000")
    build_args(p)
    p.add_argument("--speech-gate", action="store_true",
                   help="also time one build with the CLI's default speech gate (the default ASR checks every "
                        "turn) and project the full build with it")
    p.add_argument("--repeat", type=int, default=1,
                   help="measure engine and build this many times, alternating, and keep the fastest of each")
    a = p.parse_args(argv)
    quiet()
    from dataset_builder.audio import SESSION_SR
    from dataset_builder.build import BuildOptions
    from dataset_builder.mpe.build import build as build_mpe
    from dataset_builder.mpe.generator import generate_scripts
    from dataset_builder.mpe.preamble import duty_preamble
    from dataset_builder.pool import WorkerPool, resolve_workers
    from dataset_builder.tts import get_tts

    folder = ResultFolder(a.out, "bench-build-", "bench-build.json")
    out = folder.path
    workers = resolve_workers(a.workers, a.pairs)
    backend = get_tts(a.tts)
    preamble_text = duty_preamble()
    scripts = generate_scripts(a.pairs, a.seed, backend.voices())
    assistant = backend.assistant_voice  # type: ignore[attr-defined]
    clips = utterances(scripts, preamble_text, assistant)
    chars = sum(len(text) for text, _ in clips)
    t_start = time.perf_counter()
    with folder:
        engine_walls, build_walls, startups, engine_cpus, build_cpus = [], [], [], [], []
        for _ in range(a.repeat):
            # (1) The engine alone: a fresh pool of the build's size and kind (spawned, one ONNX thread per
            # worker), start-up and model load included as in the build.
            t0, cpu0 = time.perf_counter(), cpu_seconds()
            with WorkerPool(workers, _start_engine, (backend,)) as pool:
                pool.submit(_engine_speak, ("Hello.", assistant)).result()
                startups.append(time.perf_counter() - t0)
                # Every clip in flight at once: order does not matter here, and no worker waits for a slow one.
                samples = sum(pool.ordered_map(_engine_speak, clips, window=len(clips)))
            engine_walls.append(time.perf_counter() - t0)
            engine_cpus.append(cpu_seconds() - cpu0)
            # (2) The build, into an empty cache: it synthesises exactly these clips.
            for stale in ("dataset", "tts-cache"):
                shutil.rmtree(out / stale, ignore_errors=True)
            cpu0 = cpu_seconds()
            info, wall = timed(lambda: build_mpe(out / "dataset", BuildOptions(
                seed=a.seed, tts=a.tts, n=a.pairs, workers=workers, cache_dir=out / "tts-cache")))
            build_walls.append(wall)
            build_cpus.append(cpu_seconds() - cpu0)
        # The fastest of the repeats: other jobs on the host only ever slow a run down.
        engine_wall, build_wall, startup = min(engine_walls), min(build_walls), min(startups)
        engine_cpu, build_cpu = min(engine_cpus), min(build_cpus)
        speech_s = samples / SESSION_SR
        cached = sum(1 for _ in (out / "tts-cache").rglob("*.npy"))
        dataset_s = info["audio_hours"] * 3600
        gated = None
        if a.speech_gate:
            # (4) What `duplex-eval build` runs by default: the same build with the ASR gate on every turn
            # (empty TTS and transcript caches).
            from metrics.intelligibility import AsrSpeechGate

            for stale in ("dataset-gated", "tts-cache-gated"):
                shutil.rmtree(out / stale, ignore_errors=True)
            cpu0 = cpu_seconds()
            gate = AsrSpeechGate(cache_dir=out / "tts-cache-gated")
            gated_info, gated_wall = timed(lambda: build_mpe(out / "dataset-gated", BuildOptions(
                seed=a.seed, tts=a.tts, n=a.pairs, workers=workers, cache_dir=out / "tts-cache-gated",
                speech_gate=gate)))
            gated = (gated_wall, cpu_seconds() - cpu0, gated_info.get("speech_gate", {}))
        # (3) The engine in this process, with the backend's default threads, its model loaded first.
        backend.synthesize("Hello.", assistant)
        single_samples, single_wall = timed(lambda: sum(len(backend.synthesize(*u)) for u in clips))
        overhead = build_wall / engine_wall - 1
        # Projection: the full preset's distinct text at the measured seconds of speech per character, at the
        # build's throughput once its pool has started.
        full = generate_scripts(a.full_pairs, a.seed, backend.voices())
        full_chars = sum(len(text) for text, _ in utterances(full, preamble_text, assistant))
        full_speech_s = full_chars * speech_s / chars
        steady = speech_s / max(build_wall - startup, 1e-9)
        full_build_s = startup + full_speech_s / steady
        full_engine_s = startup + full_speech_s / (speech_s / max(engine_wall - startup, 1e-9))
        full_dataset_h = dataset_s / a.pairs * a.full_pairs / 3600
        # On an idle host the build's CPU time spreads over its W workers: the same speech at the measured CPU
        # seconds per second of speech, divided by W. Unlike the wall figure, other jobs hardly move it.
        full_idle_s = startup + full_speech_s * build_cpu / speech_s / workers
        w = f"{workers} worker{'s' * (workers > 1)}"
        rows = [
            Row(f"TTS engine alone, pool of {w} ({len(clips)} clips, {speech_s:.0f} s of speech / "
                f"{engine_wall:.1f} s)", ratio(speech_s, engine_wall), "x real time", "",
                {"clips": len(clips), "speech_s": round(speech_s, 3), "wall_s": round(engine_wall, 3),
                 "walls_s": [round(w, 3) for w in engine_walls]}),
            Row(f"build, {w}, empty TTS cache (same {speech_s:.0f} s of speech / {build_wall:.1f} s)",
                ratio(speech_s, build_wall), "x real time", "",
                {"speech_s": round(speech_s, 3), "wall_s": round(build_wall, 3), "cache_clips": cached,
                 "n_cases": info["n_cases"], "walls_s": [round(w, 3) for w in build_walls]}),
            Row("build overhead on top of synthesis (build wall / engine wall - 1)", 100 * overhead, "%",
                f"< {100 * BUILD_OVERHEAD_GOAL:.0f} %", {"engine_wall_s": round(engine_wall, 3),
                                                          "build_wall_s": round(build_wall, 3)}),
            Row(f"build CPU time over the engine's, all processes ({build_cpu:.0f} s / {engine_cpu:.0f} s CPU) - 1",
                100 * (build_cpu / engine_cpu - 1), "%", "(robust to a busy host)",
                {"engine_cpu_s": round(engine_cpu, 3), "build_cpu_s": round(build_cpu, 3),
                 "engine_cpus_s": [round(c, 3) for c in engine_cpus],
                 "build_cpus_s": [round(c, 3) for c in build_cpus]}),
            Row(f"TTS engine in one process, default threads ({single_wall:.1f} s; builds before the pool)",
                ratio(single_samples / SESSION_SR, single_wall), "x real time", "(compare with the pool)",
                {"wall_s": round(single_wall, 3)}),
            Row(f"pool start-up ({w}: spawn, imports, model load, first clip)", startup, "s", "",
                {"wall_s": round(startup, 3)}),
            Row(f"build: dataset audio per wall second ({dataset_s:.0f} s / {build_wall:.1f} s)",
                ratio(dataset_s, build_wall), "x real time", "", {"dataset_audio_s": round(dataset_s, 3)}),
            Row(f"projected `full` build ({a.full_pairs} pairs: {full_chars:,} distinct characters ~ "
                f"{full_speech_s / 3600:.1f} h of speech, ~{full_dataset_h:.0f} h of dataset audio), {w}",
                clock(full_build_s), "h:mm", f"engine alone {clock(full_engine_s)}",
                {"full_chars": full_chars, "speech_s_per_char": round(speech_s / chars, 5),
                 "full_speech_s": round(full_speech_s), "build_s": round(full_build_s),
                 "engine_s": round(full_engine_s), "dataset_audio_h": round(full_dataset_h, 1)}),
            Row(f"projected `full` build on an idle host: build CPU time ({build_cpu / speech_s:.3f} s per s of "
                f"speech) / {workers}", clock(full_idle_s), "h:mm", "", {"build_s": round(full_idle_s)}),
        ]
        if gated is not None:
            gated_wall, gated_cpu, report = gated
            rows += [
                Row(f"build with the speech gate, {w} (same {speech_s:.0f} s of speech / {gated_wall:.1f} s; "
                    f"{gated_cpu:.0f} s CPU)", ratio(speech_s, gated_wall), "x real time",
                    f"{100 * (gated_cpu / build_cpu - 1):.0f} % more CPU than without",
                    {"wall_s": round(gated_wall, 3), "cpu_s": round(gated_cpu, 3), "speech_gate": report}),
                Row("projected `full` build with the speech gate on an idle host (CPU time / "
                    f"{workers})", clock(startup + full_speech_s * gated_cpu / speech_s / workers), "h:mm", "",
                    {"build_s": round(startup + full_speech_s * gated_cpu / speech_s / workers)}),
            ]
        total = time.perf_counter() - t_start
        print(markdown(rows))
        print(f"\n{a.pairs} pairs, seed {a.seed}, tts {a.tts}, {w}, fastest of {a.repeat}; total {total:.0f} s "
              f"on {os.cpu_count()} CPUs ({platform.processor() or platform.machine()})")
        folder.write(rows, total, pairs=a.pairs, workers=workers, repeat=a.repeat, seed=a.seed, tts=a.tts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
