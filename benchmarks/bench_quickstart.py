"""The first hour, timed as a new user meets it: the README's quickstart (its five commands, read from the README
itself) from an empty clip cache and again from the warm one, then `duplex-eval demo` (what `make demo` runs).

    .venv/bin/python benchmarks/bench_quickstart.py [--out DIR] [--skip-demo] [--demo-cold]

Cold: `$DUPLEX_EVAL_CACHE` points at an empty folder, so the build synthesises every clip and the speech gate
transcribes every turn (the models themselves, piper and whisper, are already on disk: `make setup` fetched
them). Warm: the same five commands in a fresh folder with that cache, as a second quickstart would run. Demo:
`duplex-eval demo` with the cache the quickstart left (the Duplex-MPE mini set warm, DSB-IFEval and M3 cold), or
from an empty cache with `--demo-cold`. Each command runs as typed, in its own process, from an empty working
folder; wall seconds and CPU seconds (the command and everything it started) per command, and the 1-minute load
average before and after: on a shared host the walls stretch, the CPU seconds hardly do, and CPU / 2 is about what
two idle cores would take. Prints a markdown table and writes it with the raw numbers to OUT/bench-quickstart.json.
The targets (docs/performance.md): quickstart <= 3 min warm and <= 6 min cold, the demo <= 6 min, on an idle
2-core machine. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the venv's bin, where `duplex-eval` lives
TARGETS_S = {"quickstart cold": 360, "quickstart warm": 180, "demo": 360}


def quickstart_commands(readme: Path = ROOT / "README.md") -> list[str]:
    """The first bash block under the README's "Quickstart" heading that runs `duplex-eval` (the activation
    block before it has none): the commands a new user types."""
    text = readme.read_text(encoding="utf-8")
    start = re.search(r"^## Quickstart.*$", text, re.M)
    if start is None:
        raise SystemExit(f"{readme}: no '## Quickstart' heading")
    for block in re.findall(r"```bash\n(.*?)```", text[start.end():], re.S):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        if any(ln.startswith("duplex-eval ") for ln in lines):
            return lines
    raise SystemExit(f"{readme}: no duplex-eval commands under '## Quickstart'")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: str, cwd: Path, env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run one command as typed (`duplex-eval` from the venv), its output to `log`; wall and CPU seconds."""
    load0, cpu0, t0 = os.getloadavg()[0], children_cpu(), time.perf_counter()
    with open(log, "ab") as fh:
        fh.write(f"$ {cmd}\n".encode())
        fh.flush()
        code = subprocess.call(shlex.split(cmd), cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    row = {"command": cmd, "exit": code, "wall_s": round(time.perf_counter() - t0, 1),
           "cpu_s": round(children_cpu() - cpu0, 1), "load": [round(load0, 1), round(os.getloadavg()[0], 1)]}
    print(f"  {row['wall_s']:7.1f} s wall {row['cpu_s']:7.1f} s CPU  load {row['load'][0]}->{row['load'][1]}  "
          f"exit {code}  {cmd}", flush=True)
    return row


def stage(name: str, commands: list[str], folder: Path, env: dict[str, str]) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{name} (in {folder})", flush=True)
    rows = [timed(c, folder, env, folder / "output.log") for c in commands]
    return {"stage": name, "commands": rows, "wall_s": round(sum(r["wall_s"] for r in rows), 1),
            "cpu_s": round(sum(r["cpu_s"] for r in rows), 1), "ok": all(r["exit"] == 0 for r in rows)}


def _clock(s: float) -> str:
    return f"{int(s) // 60}:{int(round(s)) % 60:02d}"


def markdown(stages: list[dict[str, Any]]) -> str:
    # CPU / 2 is what two idle cores would take at best: right for the build (a worker per core), short of a
    # command that runs in one process (run, score, report), which takes about its CPU seconds.
    out = ["| stage | wall (this host) | CPU s | CPU / 2 (2 idle cores, at best) | load | target |",
           "|---|---:|---:|---:|---|---:|"]
    for s in stages:
        loads = [x for r in s["commands"] for x in r["load"]]
        out.append(f"| {s['stage']}{'' if s['ok'] else ' (FAILED)'} | {_clock(s['wall_s'])} | {s['cpu_s']:.0f} | "
                   f"{_clock(s['cpu_s'] / 2)} | {min(loads):.1f}-{max(loads):.1f} | "
                   f"{_clock(TARGETS_S[s['stage']])} |")
        for r in s["commands"]:
            out.append(f"| `{r['command']}` | {_clock(r['wall_s'])} | {r['cpu_s']:.0f} | {_clock(r['cpu_s'] / 2)} | "
                       f"{r['load'][0]}-{r['load'][1]} | |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=None, help="work folder, kept (default: a new temporary folder)")
    p.add_argument("--skip-demo", action="store_true", help="time the quickstart only")
    p.add_argument("--demo-cold", action="store_true", help="the demo from an empty clip cache of its own")
    a = p.parse_args(argv)
    out = Path(a.out or tempfile.mkdtemp(prefix="bench-quickstart-")).resolve()
    cache = out / "cache"
    if cache.exists() and any(cache.iterdir()):
        raise SystemExit(f"{cache} is not empty: give a new --out (the cold quickstart needs an empty cache)")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DUPLEX_EVAL_CACHE": str(cache)}
    commands = quickstart_commands()
    stages = [stage("quickstart cold", commands, out / "cold", env),
              stage("quickstart warm", commands, out / "warm", env)]
    if not a.skip_demo:
        demo_env = {**env, "DUPLEX_EVAL_CACHE": str(out / "demo-cache")} if a.demo_cold else env
        stages.append(stage("demo", ["duplex-eval demo --out demo-out"], out / "demo", demo_env))
    table = markdown(stages)
    print(f"\n{table}")
    (out / "bench-quickstart.json").write_text(json.dumps({"cpus": os.cpu_count(), "stages": stages,
                                                           "table": table}, indent=2) + "\n")
    print(f"\nwritten: {out / 'bench-quickstart.json'}")
    return 0 if all(s["ok"] for s in stages) else 1


if __name__ == "__main__":
    sys.exit(main())
