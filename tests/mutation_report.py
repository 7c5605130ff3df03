"""Mutation testing of the scoring rules, statistics, schedulers and gold answers (`make mutate`, docs/testing.md).

    .venv/bin/python tests/mutation_report.py --run       # fresh `mutmut run` over SCOPE, then the report
    .venv/bin/python tests/mutation_report.py             # the report of the last run
    .venv/bin/python tests/mutation_report.py --diffs     # + each survivor's diff (`mutmut show`)
    .venv/bin/python tests/mutation_report.py --run --group m3  # one benchmark's modules (mpe, ifeval, m3)
    .venv/bin/python tests/mutation_report.py --run --module metrics/vad.py  # only these modules (repeatable)

mutmut ([tool.mutmut] in pyproject.toml) mutates the modules named there and runs the fast known-answer tests
listed there. SCOPE below narrows a module to the functions that are scoring rules where it holds more (the
heuristic judge, not the HTTP client of the LLM judge). The report reads mutmut's result files
(`mutants/<path>.meta`), so it needs no mutmut import.

A mutant is *detected* when a test failed on it (killed) or ran past its time limit (timeout); the score is
detected / total. Survivors ("no tests" included) must each be named, with the reason it is equivalent, in
tests/MUTATION.md; the report lists any that are not. Not a test module: pytest never collects it.
Exit status: 1 if the run was incomplete or a survivor is unexplained.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTMUT = Path(sys.executable).parent / "mutmut"
EXPLAINED = ROOT / "tests" / "MUTATION.md"

# Mutant-name globs per module (mutmut names: module.x_function__mutmut_N, module.xǁClassǁmethod__mutmut_N).
# A module not listed here is in scope as a whole.
SCOPE = {
    # The heuristic judge only (its answer rule lives in metrics/answer_match.py, in scope as a whole).
    "metrics/judges.py": ["metrics.judges.xǁHeuristicJudgeǁ*", "metrics.judges.x__is_ack*"],
    # What the ASR hears of the model: its VAD spans padded, clipped to the window and fenced (every benchmark).
    "metrics/scoring.py": ["metrics.scoring.x_asr_spans__mutmut_*", "metrics.scoring.x_asr_audio__mutmut_*"],
    # DSB-IFEval's VAD: silero-vad's own span rules (`rules="silero"`), not the ONNX front end (tested with real
    # speech, too slow per mutant) nor the project rules of the other benchmarks.
    "metrics/vad.py": ["metrics.vad.x_silero_pad__mutmut_*", "metrics.vad.x_merge_samples__mutmut_*",
                       "metrics.vad.xǁ_SileroTrackerǁ*", "metrics.vad.x_span_tracker__mutmut_*"],
    # --- DSB-IFEval ---
    # The sweep's arithmetic, not its printing (sweep_text) or its run loading (load_runs, freshness checks).
    "metrics/ifeval/sweep.py": [f"metrics.ifeval.sweep.x_{f}__mutmut_*" for f in (
        "configurations", "_sign", "kendall_tau", "_order", "_floats", "_gaps", "sweep")],
    # M3: the extractor's word-timestamp front end, its table and command; events_from_audio / events_from_wav run
    # the Silero VAD, tested with real speech in tests/test_m3_extract.py (seconds per test, too slow per mutant).
    "metrics/m3/extract.py": ["metrics.m3.extract.x__t__*", "metrics.m3.extract.x__note*",
                              "metrics.m3.extract.x_format_events*", "metrics.m3.extract.x_events_from_words*",
                              "metrics.m3.extract.x__require_file*", "metrics.m3.extract.x__dialogue*",
                              "metrics.m3.extract.x_events_command*", "metrics.m3.extract.xǁDialogueEventsǁ*"],
}

# Which benchmark a module's score is reported under: its package (m3, ifeval), else Duplex-MPE, whose rules
# the shared modules (statistics, spans, judge, scheduler) were brought under mutation testing for.
BENCHMARKS = ("mpe", "ifeval", "m3")


# Shared modules whose scope above is one benchmark's rules.
BENCHMARK_OF = {"metrics/vad.py": "ifeval"}


def benchmark(module: str) -> str:
    if module in BENCHMARK_OF:
        return BENCHMARK_OF[module]
    parts = module.removesuffix(".py").split("/")
    return next((b for b in BENCHMARKS[1:] if b in parts or any(p.startswith(b) for p in parts)), "mpe")

# mutmut 3.8's exit-code meanings (mutmut/stats.py: status_by_exit_code).
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout", 37: "type check"}


def modules(only: str | None = None, names: list[str] | None = None) -> list[str]:
    """The modules under `[tool.mutmut] only_mutate`: those of benchmark `only`, or those named."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]
    unknown = sorted(set(names or ()) - set(listed))
    if unknown:
        raise SystemExit(f"--module {', '.join(unknown)}: not in [tool.mutmut] only_mutate of pyproject.toml")
    return [m for m in listed if (only is None or benchmark(m) == only) and (not names or m in names)]


def globs(module: str) -> list[str]:
    return SCOPE.get(module, [module.removesuffix(".py").replace("/", ".") + ".*"])


def in_scope(module: str, name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, g) for g in globs(module))


def run(max_children: int, only: str | None = None, names: list[str] | None = None) -> int:
    """A fresh run: mutants/ rebuilt from the working tree, only the mutants in scope tested."""
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    (ROOT / "mutants").mkdir()
    chosen = modules(only, names)
    args = [str(MUTMUT), "run", "--max-children", str(max_children)] + [g for m in chosen for g in globs(m)]
    print(f"mutmut run over {len(chosen)} modules (log: mutants/run.log) ...", flush=True)
    with open(ROOT / "mutants" / "run.log", "w") as log:
        rc = subprocess.run(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        print((ROOT / "mutants" / "run.log").read_text()[-3000:], file=sys.stderr)
    return rc


def results(module: str) -> dict[str, str]:
    meta = ROOT / "mutants" / f"{module}.meta"
    if not meta.exists():
        raise SystemExit(f"{meta} not found: run `make mutate` first")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return {name: "not checked" if code is None else STATUS.get(code, "suspicious")
            for name, code in sorted(codes.items()) if in_scope(module, name)}


def explained() -> set[str]:
    return set(re.findall(r"`([\w.ǁ]+__mutmut_\d+)`", EXPLAINED.read_text())) if EXPLAINED.exists() else set()


def report(diffs: bool, only: str | None = None, names: list[str] | None = None) -> int:
    rows, survivors = [], []
    total: Counter[str] = Counter()
    per_benchmark: dict[str, Counter[str]] = {}
    for module in modules(only, names):
        by_name = results(module)
        c = Counter(by_name.values())
        c["n"], c["detected"] = len(by_name), c["killed"] + c["timeout"]
        rows.append((module, c))
        total.update(c)
        per_benchmark.setdefault(benchmark(module), Counter()).update(c)
        survivors += [name for name, st in by_name.items() if st in ("survived", "no tests", "suspicious")]

    head = f"{'module':<32} {'killed':>6} {'timeout':>7} {'survived':>8} {'no tests':>8} {'total':>5}   score"
    print(head + "\n" + "-" * len(head))
    bench_rows = [(f"benchmark {b}", per_benchmark[b]) for b in BENCHMARKS if b in per_benchmark]
    for module, c in [*rows, *bench_rows, ("all", total)]:
        if module in ("all", bench_rows[0][0] if bench_rows else None):
            print("-" * len(head))
        score = f"{100 * c['detected'] / c['n']:5.1f} %" if c["n"] else "    n/a"
        print(f"{module:<32} {c['killed']:>6} {c['timeout']:>7} {c['survived']:>8} {c['no tests']:>8} {c['n']:>5} "
              f"{score:>8}")

    known = explained()
    unexplained = [s for s in survivors if s not in known]
    print(f"\n{len(survivors)} survivors, {len(survivors) - len(unexplained)} explained as equivalent in "
          f"tests/MUTATION.md, {len(unexplained)} unexplained")
    for name in survivors if diffs else unexplained:
        print(f"  {name}{'' if name in known else '  [unexplained]'}")
        if diffs:
            out = subprocess.run([str(MUTMUT), "show", name], cwd=ROOT, capture_output=True, text=True).stdout
            print("\n".join("      " + line for line in out.splitlines() if line[:2] in ("- ", "+ ")))
    if total["not checked"]:
        print(f"\n{total['not checked']} mutants were not checked: the run was interrupted", file=sys.stderr)
    return 1 if total["not checked"] or unexplained else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="run mutmut afresh first")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--diffs", action="store_true", help="print every survivor with its diff (mutmut show)")
    ap.add_argument("--group", choices=BENCHMARKS, help="only this benchmark's modules")
    ap.add_argument("--module", action="append", help="only this module (a path in only_mutate; repeatable)")
    args = ap.parse_args(argv)
    if args.run and run(args.max_children, args.group, args.module) != 0:
        return 1
    return report(args.diffs, args.group, args.module)


if __name__ == "__main__":
    sys.exit(main())
