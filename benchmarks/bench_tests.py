"""Where `make test`'s time goes: wall and CPU seconds of pytest runs, per test file or for the whole suite.

    .venv/bin/python benchmarks/bench_tests.py tests/test_readme.py tests/test_ifeval_e2e.py   # each file alone
    .venv/bin/python benchmarks/bench_tests.py --workers 0 --workers 2                          # the suite, 1 vs 2
    .venv/bin/python benchmarks/bench_tests.py --fast                                            # `make test-fast`

Each row is one fresh `python -m pytest -q -p no:cacheprovider` process (pyproject's addopts apply; `--workers N`
adds `-n N`, so 0 is one process), timed from start to exit: wall seconds and the CPU seconds (user + sys) of the
process and everything it started (pytest-xdist workers, build pools, the commands the README test runs). On a host
that other work shares, wall time stretches and CPU time does not: compare CPU seconds between rows, and read wall
seconds only from an idle machine. With no file named, the row is the whole suite. Every row uses the repository's
TTS clip cache (REPO/.cache, as `make test` does): empty it first (`make clean`) to time a fresh clone, as CI runs.
Prints a markdown table and, with `--out FILE`, writes the rows as JSON. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def children_cpu_s() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def timed_pytest(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """One pytest process: its exit code, its closing line, wall and CPU seconds (itself and its descendants)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    c0, w0 = children_cpu_s(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - w0, children_cpu_s() - c0
    tail = [line for line in proc.stdout.splitlines() if " in " in line and ("passed" in line or "failed" in line)]
    return {"args": args, "rc": proc.returncode, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "summary": tail[-1].strip("= ") if tail else proc.stdout[-300:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="test files, each timed alone (none: the whole suite)")
    ap.add_argument("--workers", type=int, action="append", help="pytest-xdist workers (-n); repeat to compare")
    ap.add_argument("--fast", action="store_true", help="only the `fast` files (`make test-fast`)")
    ap.add_argument("--out", type=Path, help="write the rows here as JSON")
    args = ap.parse_args(argv)

    rows = []
    for workers in args.workers or [None]:
        for target in args.files or [None]:
            extra = ([] if workers is None else ["-n", str(workers)]) + (["-m", "fast"] if args.fast else [])
            row = timed_pytest(extra + ([target] if target else []), dict(os.environ))
            row |= {"target": target or ("fast files" if args.fast else "whole suite"), "workers": workers}
            rows.append(row)
            print(f"{row['target']} -n {workers}: {row['wall_s']} s wall, {row['cpu_s']} s CPU", file=sys.stderr,
                  flush=True)

    print("| target | -n | wall s | CPU s (user+sys) | exit | pytest's summary |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        n = "addopts" if r["workers"] is None else r["workers"]
        print(f"| {r['target']} | {n} | {r['wall_s']} | {r['cpu_s']} | {r['rc']} | {r['summary']} |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
