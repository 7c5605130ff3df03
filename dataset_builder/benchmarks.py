"""The benchmark registry (docs/adding-a-benchmark.md): one record per benchmark, its pieces named as lazy
"module:function" strings.

Code stays in its layer — generation in `dataset_builder/<bench>/`, measurements, verdicts and tables in
`metrics/<bench>/`, the oracle's script in `adapters/oracle_<bench>.py`, the user-stream plan in
`eval/plans/<bench>.py`, the report's leaderboards in `eval/report_site/boards/<bench>.py` — and the harness core
names no benchmark: the CLI, the runner, the oracle, the scorer, the report and the demo look a benchmark up here
by name, by dataset config, or by the benchmark a run recorded. Adding one is those files plus one entry below
(docs/adding-a-benchmark.md lists them). The protocol classes still sit together in
`dataset_builder/benchmark_params.py`; the entry's `protocol` is the one place that names a benchmark's class, so a new
benchmark may equally keep its class in its own `dataset_builder/<bench>/`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dataset_builder.errors import UsageError


@dataclass(frozen=True)
class Benchmark:
    name: str  # as recorded in run.json / rec.json / scores.json
    title: str  # for people
    configs: tuple[str, ...]  # the dataset configs it reads and writes
    presets: tuple[str, ...]  # build sizes (`build NAME --preset P`)
    protocol: str  # "module:Class" of its typed, typo-rejecting parameter set
    build: str  # build(out_dir, options) -> info dict
    plan: str  # plan(case, audio, protocol, sr) -> eval.schedule.EpisodePlan
    score: str  # score_run(run_dir, *, asr, judge, overrides, reuse_measurements, out) -> result dict
    tables: str  # tables(results: {name: result}) -> [(title, text)], the text tables of one or more runs
    windows: str  # windows(measurements of one episode, result) -> [(start_s, end_s, ok, spans)] for its plot
    cases: str  # cases(folder, config) -> [case], every validated case of a config, no audio read
    case_audio: str  # case_audio(folder, config, wanted=ids) -> iterator of (case, float32 24 kHz audio)
    oracle: str  # oracle(case the plan bound, agent: adapters.oracle.OracleAgent) -> adapters.oracle.OracleScript
    # The report's leaderboards and breakdowns: boards(runs: [eval.report_site.collect.RunView]) -> [Table];
    # empty: one generic leaderboard of every `{value, n, ...}` entry of the scores.
    boards: str = ""
    # The per-metric outcomes behind one window's verdict on the report's episode page:
    # window_detail(measurement, result) -> str (shown as the detail: why a failed window failed), {metric: passed}
    # (one verdict per metric, where a window counts toward several), or both as (str, {metric: passed}); empty:
    # none shown.
    window_detail: str = ""
    # `build --diagnostics` when the benchmark has its own: diagnostics(folder) -> text; empty: the shared script
    # audit of metrics.build_audit.
    diagnostics: str = ""
    # Wall seconds each of its demo jobs took in a `make demo` from an empty clip cache on an idle 2-core machine, by
    # job ("build" or the agent of a run; the `jobs` of the demo's OUT/demo-timings.json): the demo's progress line
    # and scheduling order use them; a job not listed counts as the demo's default.
    demo_seconds: tuple[tuple[str, int], ...] = ()
    # The configs a whole evaluation runs, each its own run; empty: the first config only (the others are subsets
    # of it that its scorer reports from the same run, like IFEval's matched-audio cases).
    run_configs: tuple[str, ...] = ()
    # `run --sample N`: strata(case) -> (stratum, group); the sample draws whole groups (`sample_unit`: a group's
    # cases are run together or not at all), spread evenly over the groups' strata. Empty: a uniform sample.
    strata: str = ""
    sample_unit: str = "case"  # what one group of `strata` is, for the lines that say what a run covers
    # needs(case) -> the adapter capabilities the case needs, known without its audio (`run --limit/--sample` count
    # only the cases an adapter can run). Empty: every case runs on every adapter.
    needs: str = ""

    def evaluated_configs(self) -> tuple[str, ...]:
        return self.run_configs or self.configs[:1]

    def load(self, part: str) -> Any:
        """The object behind one of the "module:function" fields, imported now."""
        target = getattr(self, part)
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def protocol_class(self) -> Any:
        return self.load("protocol")

    def function(self, part: str) -> Callable[..., Any]:
        fn = self.load(part)
        if not callable(fn):
            raise TypeError(f"benchmark {self.name}: {getattr(self, part)} is not callable")
        return fn


_BENCHMARKS: dict[str, Benchmark] = {}


def register_benchmark(bench: Benchmark) -> None:
    for config in bench.configs:
        owner = next((b.name for b in _BENCHMARKS.values() if config in b.configs and b.name != bench.name), None)
        if owner:
            raise ValueError(f"config {config!r} already belongs to benchmark {owner!r}")
    _BENCHMARKS[bench.name] = bench


def benchmark_names() -> list[str]:
    return sorted(_BENCHMARKS)


def registered_names() -> list[str]:
    """The benchmarks in the order registered below: the order the demo builds, runs and prints them."""
    return list(_BENCHMARKS)


def get_benchmark(name: str) -> Benchmark:
    if name not in _BENCHMARKS:
        raise UsageError(f"unknown benchmark {name!r}; known: {benchmark_names()}")
    return _BENCHMARKS[name]


def benchmark_for_config(config: str) -> Benchmark:
    for bench in _BENCHMARKS.values():
        if config in bench.configs:
            return bench
    known = sorted(c for b in _BENCHMARKS.values() for c in b.configs)
    raise UsageError(f"unknown dataset config {config!r}; known: {known}")


register_benchmark(Benchmark(
    name="mpe", title="Duplex-MPE", configs=("mpe",), presets=("mini", "full"),
    protocol="dataset_builder.benchmark_params:MPEProtocol",
    build="dataset_builder.mpe.build:build",
    plan="eval.plans.mpe:plan",
    score="metrics.mpe.score:score_run",
    tables="metrics.mpe.tables:tables",
    windows="metrics.mpe.tables:plot_windows",
    cases="dataset_builder.hf_dataset:list_cases",
    case_audio="dataset_builder.hf_dataset:iter_cases",
    oracle="adapters.oracle_mpe:oracle_script",
    boards="eval.report_site.boards.mpe:boards",
    window_detail="eval.report_site.boards.mpe:window_detail",
    strata="eval.plans.mpe:strata", sample_unit="scenario pair",
    demo_seconds=(("build", 90), ("cascade", 75), ("oracle", 27), ("silent", 5)),
))

IFEVAL = Benchmark(
    name="ifeval", title="DSB-IFEval", configs=("ifeval", "ifeval_matched"), presets=("mini", "full"),
    protocol="dataset_builder.benchmark_params:IFEvalProtocol",
    build="dataset_builder.ifeval.build:build",
    plan="eval.plans.ifeval:plan",
    score="metrics.ifeval.score:score_run",
    tables="metrics.ifeval.tables:tables",
    windows="metrics.ifeval.tables:plot_windows",
    cases="dataset_builder.ifeval.rows:list_items",
    case_audio="dataset_builder.ifeval.rows:iter_items",
    oracle="adapters.oracle_ifeval:oracle_script",
    boards="eval.report_site.boards.ifeval:boards",
    window_detail="eval.report_site.boards.ifeval:window_detail",
    diagnostics="dataset_builder.ifeval.diagnostics:audit",
    strata="eval.plans.ifeval:strata", sample_unit="conversation",
    demo_seconds=(("build", 38), ("cascade", 158), ("oracle", 35), ("silent", 11)),
)
register_benchmark(IFEVAL)

register_benchmark(Benchmark(
    name="m3", title="M3-DuplexBench", configs=("m3_chat_en", "m3_task_en", "m3_chat_ja", "m3_task_ja"),
    presets=("mini", "full"),
    protocol="dataset_builder.benchmark_params:M3Protocol",
    build="dataset_builder.m3.build:build",
    plan="eval.plans.m3:plan",
    score="metrics.m3.score:score_run",
    tables="metrics.m3.tables:tables",
    windows="metrics.m3.tables:plot_windows",
    cases="dataset_builder.m3.rows:list_items",
    case_audio="dataset_builder.m3.rows:iter_items",
    oracle="adapters.oracle_m3:oracle_script",
    boards="eval.report_site.boards.m3:boards",
    window_detail="eval.report_site.boards.m3:window_detail",
    diagnostics="metrics.m3.diagnostics:audit",
    strata="eval.plans.m3:strata", sample_unit="dialogue",
    needs="eval.plans.m3:needs",
    demo_seconds=(("build", 66), ("cascade", 20), ("oracle", 6), ("silent", 1)),
    run_configs=("m3_chat_en", "m3_task_en", "m3_chat_ja", "m3_task_ja"),  # four languages x domains, four runs
))
