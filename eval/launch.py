"""`duplex-eval run --num-processes N`: the same run in N processes, launched through accelerate.

The command this starts is what the docs' "Running at scale" page spells out by hand:

    accelerate launch --multi_gpu --num_processes N --num_machines 1 --mixed_precision no --dynamo_backend no \
        -m eval.cli run ...the same arguments...

with `DUPLEX_EVAL_CPU=1` when the machine has fewer than N GPUs (accelerate's `--cpu` starts only one process,
so `--multi_gpu` asks for N processes and the runner then joins them over gloo instead of NCCL). Each process
runs its share of the cases (`eval.run`) and hands its counts, and the case ids of the whole run once it has chosen
them, back in a file of a private folder (`DUPLEX_EVAL_LAUNCH_DIR`) instead of printing them, and always exits 0, so
that accelerate's launcher has nothing to report; this process then prints one combined summary and returns the
run's exit status.

Ctrl-C reaches this process only (the launcher runs in its own session, and it starts its workers in sessions of
their own): it is passed on to the workers (each registers its pid on starting; one that starts later sees a stop
flag), and each stops, leaving no episode half-written; once all have stopped, this process counts the whole run's
episodes on disk, once, and prints one line for all of them ("interrupted; N episodes kept by 2 processes; rerun the
same command to resume"). A worker that has not stopped `STOP_GRACE_S` later, or a second Ctrl-C, ends the launcher
and every process under it: none is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

LAUNCH_ENV = "DUPLEX_EVAL_LAUNCH_DIR"  # set in the workers: where each writes rank-<i>.json
STOP_FILE = "stop"  # written by the launching process on Ctrl-C, before it signals the registered workers
STOP_GRACE_S = 20.0  # how long the workers get to stop after Ctrl-C before they are killed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gpu_count() -> int:
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def launch_command(argv: list[str], n: int, port: int) -> list[str]:
    """The accelerate launch of `duplex-eval ARGV` in n processes (every launcher setting given, so it needs no
    config file and prints no warning about missing ones)."""
    return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(n),
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", str(port), "-m", "eval.cli", *argv]


def worker_rank() -> tuple[int, int] | None:
    """(rank, number of processes) in a worker this module launched, else None."""
    if not os.environ.get(LAUNCH_ENV):
        return None
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def register_worker() -> bool:
    """Write this worker's pid (its SIGINT handler already set), so that the launching process can pass Ctrl-C on
    to it, and end it even when the launcher is gone; False when Ctrl-C came before it registered."""
    rank = worker_rank()
    folder = Path(os.environ[LAUNCH_ENV])
    path = folder / f"pid-{rank[0] if rank else 0}"
    path.with_suffix(".tmp").write_text(str(os.getpid()))
    os.replace(path.with_suffix(".tmp"), path)
    return not (folder / STOP_FILE).exists()


def write_worker_result(result: dict[str, Any]) -> None:
    """A worker's counts (or its interruption or error) for the launching process; atomic."""
    folder = Path(os.environ[LAUNCH_ENV])
    rank = worker_rank()
    path = folder / f"rank-{rank[0] if rank else 0}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, path)


def _descendants(pid: int) -> list[Any]:
    import psutil  # accelerate's own dependency

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _signal_all(procs: list[Any], sig: int) -> None:
    import psutil

    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.NoSuchProcess:
            pass


def _registered(folder: Path) -> list[Any]:
    """The workers that wrote their pid and still run (each is also checked to be one of ours)."""
    import psutil

    procs = []
    for f in folder.glob("pid-*[0-9]"):
        try:
            p = psutil.Process(int(f.read_text()))
            if p.environ().get(LAUNCH_ENV) == str(folder):
                procs.append(p)
        except (psutil.Error, ValueError, OSError):
            pass
    return procs


def _kill_tree(launcher: subprocess.Popen, workers: list[Any]) -> None:
    """The launcher first (SIGKILL: it has no chance to print its own traceback), then everything under it."""
    workers = [*workers, *_descendants(launcher.pid)]
    if launcher.poll() is None:
        launcher.kill()
    _signal_all(workers, signal.SIGKILL)
    launcher.wait()


def launch(argv: list[str], n: int) -> tuple[int, bool, list[dict[str, Any] | None]]:
    """Run `duplex-eval ARGV` in n processes; returns the launcher's exit status, whether Ctrl-C stopped it, and
    each rank's result (None for a rank that wrote none: it was killed, or never started)."""
    with tempfile.TemporaryDirectory(prefix="duplex-eval-launch-") as tmp:
        env = os.environ | {LAUNCH_ENV: tmp}
        if gpu_count() < n:
            env["DUPLEX_EVAL_CPU"] = "1"
        launcher = subprocess.Popen(launch_command(argv, n, free_port()), env=env, start_new_session=True)
        interrupted = False
        try:
            while True:
                try:
                    code = launcher.wait(timeout=STOP_GRACE_S if interrupted else None)
                    break
                except KeyboardInterrupt:
                    if interrupted:  # a second Ctrl-C: stop now
                        _kill_tree(launcher, [])
                        code = launcher.returncode
                        break
                    interrupted = True
                    # First the flag, then the signal: a worker registered too late for the signal sees the flag.
                    (Path(tmp) / STOP_FILE).write_text("")
                    _signal_all(_registered(Path(tmp)), signal.SIGINT)
                except subprocess.TimeoutExpired:  # a worker that did not stop (blocked in a collective, say)
                    _kill_tree(launcher, [])
                    code = launcher.returncode
                    break
        finally:
            if launcher.poll() is None:  # anything else went wrong here: leave nothing running
                _kill_tree(launcher, [])
            _kill_tree(launcher, _registered(Path(tmp)))  # a worker its launcher left behind
        results: list[dict[str, Any] | None] = []
        for rank in range(n):
            path = Path(tmp) / f"rank-{rank}.json"
            results.append(json.loads(path.read_text()) if path.exists() else None)
    return code, interrupted, results
