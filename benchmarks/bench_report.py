"""The report of a demo's runs: how long it takes to write, what it weighs, how fast it opens in a browser.

    .venv/bin/python benchmarks/bench_report.py [--demo out] [--out DIR] [--repeat 3] [--runs GLOB]
        [--baseline CHECKOUT] [--no-browser]

Writes the report of every run folder under DEMO/runs (what `make demo` reports; `--runs` keeps those whose name
matches GLOB) to OUT twice: cold (no media folder: every distinct recording is read and encoded) and warm (the
encoded audio and unchanged pages reused), each in its own process, with wall time and the CPU time of that process
and its workers. With `--baseline` (another checkout of the project, e.g. `git worktree add /tmp/base main~5`), the
same cold and warm writes are made with that checkout's code, alternating with this one's so both see the same
machine load, and a ratio table compares their CPU seconds. Then the report's size (every file's bytes, and per
part: audio, episode pages, the rest), its episodes, distinct recordings and minutes of audio; then index.html,
episodes.html and the longest episode's page, each opened `--repeat` times in headless Debian chromium through
playwright (executable_path; nothing downloaded), timed from navigation to the load event (median and max). Prints
a markdown table and writes it with the raw numbers to OUT/bench-report.json. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


REPO = Path(__file__).resolve().parent.parent
WRITE = "import sys; from pathlib import Path; from eval.report import write_report; " \
        "write_report([Path(p) for p in sys.argv[2:]], Path(sys.argv[1]))"


def children_cpu_s() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def write(run_dirs: list[Path], out: Path, checkout: Path = REPO) -> dict[str, float]:
    """One report write by `checkout`'s code in a fresh process: wall seconds and CPU seconds of that process and
    its encoding workers (every descendant is waited for, so RUSAGE_CHILDREN holds them all)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    w0, c0 = time.perf_counter(), children_cpu_s()
    subprocess.run([sys.executable, "-c", WRITE, str(out), *map(str, run_dirs)], cwd=checkout, env=env,
                   check=True)
    return {"wall_s": round(time.perf_counter() - w0, 1), "cpu_s": round(children_cpu_s() - c0, 1)}


def sizes(out: Path) -> dict[str, Any]:
    files = [p for p in out.rglob("*") if p.is_file()]
    part = {"audio": sum(p.stat().st_size for p in files if p.suffix == ".ogg"),
            "episode pages": sum(p.stat().st_size for p in files if p.parent.parent.name == "ep")}
    total = sum(p.stat().st_size for p in files)
    index = json.loads((out / "media" / "index.json").read_text())
    return {"total_bytes": total, **{f"{k}_bytes": v for k, v in part.items()},
            "rest_bytes": total - sum(part.values()), "files": len(files),
            "episode_pages": len(list((out / "ep").rglob("*.html"))), "distinct_recordings": len(index),
            "audio_min": round(sum(e["seconds"] for e in index.values()) / 60, 1)}


def open_times(out: Path, repeat: int) -> dict[str, dict[str, float]]:
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("DUPLEX_EVAL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    index = json.loads((out / "media" / "index.json").read_text())
    longest = max(index, key=lambda k: index[k]["seconds"])
    episode = next(p for p in (out / "ep").rglob("*.html") if f"media/{longest}.ogg" in p.read_text())
    pages = {"index.html": out / "index.html", "episodes.html": out / "episodes.html",
             f"longest episode ({index[longest]['seconds']:.0f} s)": episode}
    got: dict[str, dict[str, float]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True)
        for name, path in pages.items():
            times = []
            for _ in range(repeat):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                t0 = time.perf_counter()
                page.goto(path.as_uri(), wait_until="load")
                times.append(time.perf_counter() - t0)
                page.close()
            got[name] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}
        browser.close()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo", default="out", help="a `make demo` output folder (its runs/ are reported)")
    ap.add_argument("--out", default=None, help="where the report goes (default DEMO/bench-report)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", default="*", help="only the run folders whose name matches this glob")
    ap.add_argument("--baseline", default=None, help="another checkout whose report code to compare with")
    ap.add_argument("--no-browser", action="store_true", help="skip the open times (no chromium)")
    a = ap.parse_args()
    demo = Path(a.demo).resolve()
    out = (Path(a.out) if a.out else demo / "bench-report").resolve()
    run_dirs = sorted(p for p in (demo / "runs").glob(a.runs) if (p / "scores.json").exists())
    shutil.rmtree(out, ignore_errors=True)
    res: dict[str, Any] = {"runs": len(run_dirs), "load_1min": round(os.getloadavg()[0], 1)}
    if a.baseline:
        base_out = out.with_name(out.name + "-baseline")
        shutil.rmtree(base_out, ignore_errors=True)
        res["baseline"] = {"checkout": a.baseline}
        res["baseline"]["cold"] = write(run_dirs, base_out, Path(a.baseline).resolve())
    res["cold"] = write(run_dirs, out)
    if a.baseline:
        res["baseline"]["warm"] = write(run_dirs, base_out, Path(a.baseline).resolve())
    res["warm"] = write(run_dirs, out)
    res |= sizes(out)
    res["open"] = {} if a.no_browser else open_times(out, a.repeat)
    if a.baseline:
        print(f"| write ({res['runs']} runs, {res['episode_pages']} episodes) | baseline CPU s | this CPU s | "
              "ratio | baseline wall s | this wall s |\n|---|---:|---:|---:|---:|---:|")
        for kind in ("cold", "warm"):
            b, t = res["baseline"][kind], res[kind]
            print(f"| {kind} | {b['cpu_s']} | **{t['cpu_s']}** | {b['cpu_s'] / max(t['cpu_s'], 0.1):.2f}x | "
                  f"{b['wall_s']} | {t['wall_s']} |")
        print()
    mb = 1e6
    rows = [("runs / episode pages / distinct recordings", f"{res['runs']} / {res['episode_pages']} / "
                                                           f"{res['distinct_recordings']}"),
            ("audio (distinct recordings)", f"{res['audio_min']} min"),
            ("report size: total", f"**{res['total_bytes'] / mb:.1f} MB** ({res['files']} files)"),
            ("of which audio / episode pages / the rest", f"{res['audio_bytes'] / mb:.1f} / "
                                                          f"{res['episode pages_bytes'] / mb:.1f} / "
                                                          f"{res['rest_bytes'] / mb:.1f} MB"),
            ("write, cold (every recording encoded)", f"{res['cold']['wall_s']} s wall, {res['cold']['cpu_s']} s CPU"),
            ("write, warm (encoded audio reused)", f"{res['warm']['wall_s']} s wall, {res['warm']['cpu_s']} s CPU")]
    rows += [(f"open {name} (load event)", f"**{t['median_s']} s** median, {t['max_s']} s max of {a.repeat}")
             for name, t in res["open"].items()]
    print(f"| measurement (host load {res['load_1min']}) | value |\n|---|---:|")
    print("\n".join(f"| {k} | {v} |" for k, v in rows))
    (out / "bench-report.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
