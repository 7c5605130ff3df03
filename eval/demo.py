"""The README's main job: build each benchmark's small set, run the reference agents, score them, report.

The jobs (a build per benchmark, then a run + score + encoding of the report's audio per benchmark config and
agent) go to a pool of worker processes, one per core (at most 2) by default, the longest chains first and the
long runs one at a time; the tables print in the benchmarks' order as each config's runs finish, and the report
at the end reuses the encoded audio. Every job writes only its own folder and its own audio files (the parent
merges the audio index), and the TTS clip cache is safe to share (atomic writes), so the results do not depend on
the number of workers.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_text
from dataset_builder.benchmarks import get_benchmark, registered_names
from dataset_builder.progress import Progress
from eval.report_site.media import Media
from eval.run import RunConfig, run
from metrics.scoring import result_tables
from metrics.tables import provenance

log = logging.getLogger("duplex_eval.demo")

SPEAKING_AGENTS = ("oracle", "cascade")  # they speak through the project's TTS and share its clip cache
# The wall seconds each job took in a `make demo` from an empty clip cache on an idle 2-core machine (what the demo
# writes to OUT/demo-timings.json) are each benchmark's `demo_seconds` (a job not listed counts as DEFAULT_JOB_S):
# the progress line's time left and the scheduling order use them; runs of LONG_JOB_S or more go one at a time.
DEFAULT_JOB_S = 25
LONG_JOB_S = 60  # run jobs this long (the cascades of Duplex-MPE and DSB-IFEval) go one at a time
TICK_S = 15  # the progress line is redrawn this often while jobs run, not only when one ends


@dataclass(frozen=True)
class ConfigRuns:
    """One benchmark config's runs of every agent: what the demo prints as one block."""

    bench: str
    config: str
    tag: str  # run folder prefix: the benchmark, or the config when a benchmark runs several
    dataset: Path
    preset: str
    run_dirs: tuple[Path, ...]


def demo(out: Path, preset: str = "mini", adapters: list[str] | None = None,
         benchmarks: list[str] | None = None, workers: int | None = None) -> int:
    from eval.report import write_report

    adapters = adapters or ["silent", "oracle", "cascade"]
    workers = workers or min(2, os.cpu_count() or 1)
    t0 = time.perf_counter()
    names = benchmarks or registered_names()
    datasets = {b: out / "datasets" / f"duplex-{b}-{preset}" for b in names}
    blocks: list[ConfigRuns] = []
    for b in names:
        bench = get_benchmark(b)
        configs = bench.evaluated_configs()
        for config in configs:
            # One config (the first; IFEval's others are subsets of it, scored from the same run): the run names
            # stay "<bench>-<preset>-<agent>"; a benchmark run per config adds the config.
            tag = b if len(configs) == 1 else config
            blocks.append(ConfigRuns(b, config, tag, datasets[b], preset,
                                     tuple(out / "runs" / f"{tag}-{preset}-{a}" for a in adapters)))
    jobs = [f"build {b}" for b in names] + [f"{blk.bench} {a}" for blk in blocks for a in adapters]
    total_s = sum(_seconds(j) for j in jobs)
    # The expected wall time is the job-seconds shared by the workers; once jobs are under way the line's pace is
    # what it measures (`credited`).
    bar = Progress("demo", total_s, estimate_s=total_s / workers)
    bar.start(note=f"{len(jobs)} jobs on {workers} worker process(es)")
    results: dict[tuple[str, str], dict[str, Any]] = {}
    timings: dict[str, dict[str, float]] = {}  # each job's wall and CPU seconds: what `demo_seconds` is read from
    printed = 0
    # Jobs go to the pool only when a worker is free, the longest ready one first (a build ranks by its chain: the
    # build and its benchmark's longest run), so the longest chain of the demo starts at once.
    ready: list[tuple[float, str, Any]] = [
        (_seconds(f"build {b}") + max(_seconds(f"{b} {a}") for a in adapters), "build", b) for b in names]
    # spawn: a worker must not inherit a forked copy of torch/ONNX thread pools. (Limiting each worker to one
    # native thread, as the build pools do, was tried: the cascade runs, whose ASR, TTS and VAD threads overlap,
    # then took longer.)
    # Ctrl-C is the parent's alone (the workers ignore it): it ends the workers, so none is left running a job.
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_sigint)
    try:
        pending: dict[Future[Any], tuple[str, Any]] = {}
        started: dict[Future[Any], float] = {}  # when each job in flight started
        finished = 0.0  # the expected seconds of the jobs done
        while ready or pending:
            ready.sort(key=lambda job: -job[0])
            while ready and len(pending) < workers:
                # Never two long jobs at once: both use more than a core (ASR, TTS and VAD threads), and together
                # they took longer than one after the other while the short jobs filled the second worker.
                long_running = any(_is_long(p) for p in pending.values())
                pick = next((j for j in ready if not (long_running and _is_long(j[1:]))), None)
                if pick is None:
                    break
                ready.remove(pick)
                _, kind, what = pick
                with _sigint_ignored():  # a worker started now inherits it ignored, even while it starts up
                    if kind == "build":
                        fut = pool.submit(_build, what, datasets[what], preset)
                    else:
                        blk, a, d = what
                        fut = pool.submit(_run_and_score, blk.dataset, blk.config, a, d, out / "report")
                pending[fut] = (kind, what)
                started[fut] = time.perf_counter()
            done, _ = wait(pending, timeout=TICK_S, return_when=FIRST_COMPLETED)
            notes = []
            for fut in done:
                kind, what = pending.pop(fut)
                del started[fut]
                finished += _job_seconds(kind, what)
                value, cost = fut.result()  # a job's error ends the demo with it, as a sequential demo would
                if kind == "build":
                    timings[f"build {what}"] = cost
                    notes.append(f"built {what}")
                    ready += [(_job_seconds("run", job), "run", job) for blk in blocks if blk.bench == what
                              for job in ((blk, a, d) for a, d in zip(adapters, blk.run_dirs, strict=True))]
                else:
                    blk, a, _ = what
                    timings[f"{blk.config} {a}"] = cost
                    results[(blk.config, a)], media = value
                    Media.merge(out / "report" / "media", media)
                    notes.append(f"{blk.tag} {a} scored")
            running = ", ".join(_job_name(*job) for job in pending.values())
            in_flight = [(started[f], _job_seconds(*job)) for f, job in pending.items()]
            bar.advance(credited(finished, in_flight, time.perf_counter()) - bar.done,
                        note="; ".join(notes) or f"running {running}", force=bool(notes))
            while printed < len(blocks) and all((blocks[printed].config, a) in results for a in adapters):
                _print_block(blocks[printed], {a: results[(blocks[printed].config, a)] for a in adapters})
                printed += 1
    except KeyboardInterrupt:
        _stop(pool)
        print("interrupted; finished builds and episodes are kept; rerun the same command to resume", flush=True)
        return 130
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()
    t_report = _clock()
    report = write_report([d for blk in blocks for d in blk.run_dirs], out / "report", progress=True)
    from eval.report_site.site import site_bytes

    print(f"report:     {report} ({site_bytes(report.parent) / 1e6:.1f} MB; open it in a browser, no server needed)")
    print(f"summary:    {report.parent / 'summary.md'} (the leaderboards in Markdown)")
    timings["report"] = _cost(t_report)
    total = time.perf_counter() - t0
    atomic_write_text(out / "demo-timings.json", json.dumps(
        {"workers": workers, "cpus": os.cpu_count(), "total_s": round(total, 1), "jobs": timings}, indent=2) + "\n")
    print(f"total {total:.0f}s with {workers} worker process(es); each job's time: {out / 'demo-timings.json'}")
    return 0


def _clock() -> tuple[float, float]:
    """Wall and CPU seconds so far, the CPU of this process and of the children it has waited for (a build's
    synthesis pool)."""
    children = os.times()
    return time.perf_counter(), time.process_time() + children.children_user + children.children_system


def _cost(since: tuple[float, float]) -> dict[str, float]:
    wall, cpu = _clock()
    return {"wall_s": round(wall - since[0], 1), "cpu_s": round(cpu - since[1], 1)}


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while the pool may start a worker: an ignored signal stays ignored in the child from its first
    instruction (the initializer alone would leave a window while the child imports). A Ctrl-C in these few
    milliseconds is lost."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the pool's workers and the processes they started (a build's synthesis pool) now, and wait for them, so
    that none outlives the demo (a job in flight is cut off: a run keeps its finished episodes, a build its
    atomic writes)."""
    import psutil  # accelerate's own dependency

    procs = []
    for child in multiprocessing.active_children():
        try:
            procs += [psutil.Process(child.pid), *psutil.Process(child.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=10)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def credited(finished: float, in_flight: Iterable[tuple[float, float]], now: float) -> int:
    """Expected job-seconds done, what the progress line counts: the finished jobs' and, for each job in flight
    (started when, expected seconds), the seconds it has run, up to all but one of its expected seconds (a job is
    done when it ends, however long it takes). Counting only finished jobs would say nothing for minutes and then
    overstate the time left (a 2-worker pool that has finished one build said "left 30:45" of 13 minutes)."""
    return int(finished + sum(min(max(now - t, 0.0), max(expected - 1.0, 0.0)) for t, expected in in_flight))


def _job_name(kind: str, what: Any) -> str:
    return f"build {what}" if kind == "build" else f"{what[0].tag} {what[1]}"


def _job_seconds(kind: str, what: Any) -> float:
    return _seconds(f"build {what}" if kind == "build" else f"{what[0].bench} {what[1]}")


def _seconds(job: str) -> float:
    """Seconds of a job: "build <bench>" or "<bench> <agent>"."""
    first, _, second = job.partition(" ")
    bench, part = (second, "build") if first == "build" else (first, second)
    return dict(get_benchmark(bench).demo_seconds).get(part, DEFAULT_JOB_S)


def _is_long(job: tuple[str, Any]) -> bool:
    """A run job (kind, (block, agent, run dir)) of LONG_JOB_S or more; builds never count."""
    kind, what = job
    return kind == "run" and _job_seconds(kind, what) >= LONG_JOB_S


def build_args(bench_name: str, dataset: Path, preset: str) -> list[str]:
    """The command line whose build the demo runs: the quickstart's own `duplex-eval build` (speech gate and clip
    cache included), so the demo's set and the quickstart's are the same bytes (docs/quickstart.md)."""
    return ["build", bench_name, "--preset", preset, "--out", str(dataset), "--no-progress"]


def _build(bench_name: str, dataset: Path, preset: str) -> tuple[None, dict[str, float]]:
    from eval.building import build_options, build_quietly
    from eval.cli import build_selection, parser

    since = _clock()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if not (dataset / "README.md").exists():
        bench, configs = build_selection(a := parser().parse_args(build_args(bench_name, dataset, preset)))
        build_quietly(bench, dataset, build_options(a, configs))
    return None, _cost(since)


def _run_and_score(dataset: Path, config: str, agent: str, run_dir: Path, report: Path
                   ) -> tuple[tuple[dict[str, Any], dict[str, dict[str, Any]]], dict[str, float]]:
    """Run and score one agent on one config, then encode its recordings for the report (the report's slowest
    part, done here so that it fills the pool while other runs go on); (the scores, the media entries) and the
    job's cost."""
    from dataset_builder.tts.cache import default_cache_dir
    from eval.building import quiet_libraries
    from eval.report_site.site import encode_run_media
    from metrics.scoring import score_run_dir

    since = _clock()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    quiet_libraries()
    args = {"cache_dir": str(default_cache_dir())} if agent in SPEAKING_AGENTS else {}
    counts = run(RunConfig(dataset=str(dataset), config=config, adapter=agent, out=str(run_dir), adapter_args=args))
    log.info("%s %s: %s", config, agent, counts)
    scores = score_run_dir(run_dir)
    return (scores, encode_run_media(run_dir, report)), _cost(since)


def _print_block(blk: ConfigRuns, results: dict[str, dict[str, Any]]) -> None:
    bench = get_benchmark(blk.bench)
    title = bench.title if blk.tag == bench.name else f"{bench.title} {blk.config}"
    print(f"\n=== {title} {blk.preset} (value k/n [Wilson 95% CI]) ===")
    for name, res in results.items():
        for flag in res.get("health", {}).get("flags", []):
            print(f"HEALTH {name}: {flag}")
    for table_title, text in result_tables(results):
        print(f"\n--- {table_title} ---\n{text}")
    print(provenance(next(iter(results.values()))))
    print(f"\ndataset:    {blk.dataset}")
    for name, run_dir in zip(results, blk.run_dirs, strict=True):
        print(f"{name:<8}    recordings + rec.json: {run_dir}/  scores: {run_dir / 'scores.json'}", flush=True)
