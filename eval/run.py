"""Run an adapter over a dataset config, sharded across processes, resumable.

    duplex-eval run --dataset out/datasets/duplex-mpe --adapter oracle --out runs/oracle
    duplex-eval run --dataset ... --adapter ... --out ... --num-processes 4   # through accelerate (eval.launch)
    accelerate launch eval/run.py --dataset ... --adapter ... --out ...   # same arguments, by hand

The config names the benchmark (docs/adding-a-benchmark.md): its protocol validates `--param`, its plan drives the user
stream, and the one episode runner (`eval.orchestrator.run_episode`) does the rest; an adapter declaring `batch_size` >
1 (`--adapter-arg batch_size=16`) runs that many episodes at once in lockstep (`eval.lockstep`, docs/scale.md), each
written exactly as one at a time. Each process builds one adapter instance and runs its share of the cases
(`PartialState().split_between_processes`). An episode whose `rec.json` exists is finished and skipped, so a rerun
resumes without duplicating or losing episodes; failed episodes are kept as results and re-run only with
`--retry-failed`. A case needing a capability the adapter lacks (M3's Full context needs teacher forcing) is
recorded as a skipped episode with its reason: counted, never run; `--limit` and `--sample` count only the cases
the adapter can run (`eval.selection`). Ctrl-C stops the run between two writes: `Interrupted` says how many
episodes are kept, and the same command resumes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # `accelerate launch eval/run.py`: make the repo importable as packages
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.registry import load_adapter  # noqa: E402
from dataset_builder.atomic import atomic_write_json  # noqa: E402
from dataset_builder.benchmarks import Benchmark, benchmark_for_config  # noqa: E402
from dataset_builder.episode import Episode  # noqa: E402
from dataset_builder.errors import UsageError  # noqa: E402
from dataset_builder.progress import Progress  # noqa: E402
from dataset_builder.schema import SchemaError  # noqa: E402
from eval.orchestrator import RunOptions  # noqa: E402
from eval.selection import covered, select_cases  # noqa: E402
from metrics.episodes import RUN_INFO, read_run_info  # noqa: E402

if TYPE_CHECKING:
    from eval.schedule import EpisodePlan

log = logging.getLogger("duplex_eval.run")

# What `--force` removes from a run folder besides the scoring outputs: only what a run writes there.
RUN_OUTPUTS = ("*.wav", "*.rec.json", RUN_INFO)
# What to do about a run.json that cannot be read, when resuming into its folder.
RESUME_HINT = "remove it or use --force"


@dataclass
class RunConfig:
    dataset: str
    adapter: str
    out: str
    config: str = "mpe"
    adapter_args: dict[str, Any] = field(default_factory=dict)
    params: list[str] = field(default_factory=list)
    limit: int | None = None  # the first N cases the adapter can run
    sample: int | None = None  # a stratified sample of N cases the adapter can run, drawn with `seed`
    cases: list[str] | None = None
    seed: int = 0
    step_timeout_s: float | None = RunOptions.step_timeout_s
    retry_failed: bool = False  # re-run episodes recorded as failed
    force: bool = False  # start the folder over: remove its episodes, scores and run.json first
    progress: bool = False  # a progress line with counts and time left, on stderr

    def identity(self) -> dict[str, Any]:
        """What must match for a rerun to resume into the same folder (the dataset's content is checked too)."""
        return {"dataset": str(Path(self.dataset).resolve()), "config": self.config, "adapter": self.adapter,
                "adapter_args": self.adapter_args, "params": sorted(self.params), "seed": self.seed}


def _load(cfg: RunConfig) -> Any:
    """The run's agent, told which benchmark it runs when it asks (`for_benchmark`: an adapter whose defaults are
    the settings a benchmark's paper ran it with, docs/models.md)."""
    agent = load_adapter(cfg.adapter, **cfg.adapter_args)
    if callable(hook := getattr(agent, "for_benchmark", None)):
        hook(benchmark_for_config(cfg.config).name)
    return agent


def comma_list(values: str | Sequence[str | None] | None) -> list[str]:
    """The names a list-taking flag was given: comma-separated, the flag given again, or both (`--case a,b --case
    c`); blanks dropped, each name once, in the order given."""
    items = [values] if isinstance(values, str) else list(values or [])
    names = (name.strip() for item in items if item for name in item.split(","))
    return list(dict.fromkeys(name for name in names if name))


def parse_kv(items: list[str], what: str) -> dict[str, Any]:
    """"k=v" strings; values parsed as JSON when they can be (numbers, booleans), else kept as text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what}: expected key=value, got {item!r}")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


class Interrupted(Exception):  # noqa: N818  (it is the user's Ctrl-C, not an error)
    """Ctrl-C during a run: how many episodes are on disk (kept for the rerun): this process's share, or with
    `processes` > 1 the whole run's, which one process says for all of them. `quiet`: another process says it."""

    def __init__(self, kept: int, processes: int = 1, *, quiet: bool = False) -> None:
        by = f" by {processes} processes" if processes > 1 else ""
        super().__init__(f"interrupted; {kept} episodes kept{by}; rerun the same command to resume")
        self.kept = kept
        self.quiet = quiet


@dataclass
class Tally:
    """What one summary of a run started in several processes by `accelerate launch` needs (each process runs its
    shard; only the main one prints, for all of them): the cases of the whole run and, taken by the main process
    before any episode ran, the status each had on disk. Filled by `run`."""

    processes: int = 1
    main: bool = True
    cases: list[Any] = field(default_factory=list)
    before: dict[str, str | None] = field(default_factory=dict)
    # Started by `run --num-processes` (eval/launch.py): the launching process counts the whole run on disk once
    # every process has stopped and says it; no process here counts for the others, and none says anything.
    launched: bool = False


def _state() -> Any:
    from accelerate import PartialState

    # cpu=True lets `accelerate launch --multi_gpu --num_processes 2` start two gloo processes on a CPU box.
    cpu = os.environ.get("DUPLEX_EVAL_CPU", "") == "1" or not _cuda_available()
    return PartialState(cpu=cpu)


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _wait(state: Any) -> None:
    if getattr(state, "num_processes", 1) > 1:
        state.wait_for_everyone()


def check_marker(out: Path, cfg: RunConfig, fingerprint: str) -> None:
    """Refuse to resume a folder that belongs to another run, or whose dataset has changed since."""
    old = read_run_info(out, strict=RESUME_HINT)
    if old is None:
        return
    if old.get("identity") != cfg.identity():
        raise UsageError(f"{out / RUN_INFO} belongs to a different run ({old.get('identity')}); "
                         "use another --out folder, or --force to start this one over")
    if old.get("dataset_fingerprint") not in (None, fingerprint):
        raise UsageError(f"the dataset {cfg.dataset} has changed since {out} was started (fingerprint "
                         f"{str(old['dataset_fingerprint'])[:12]} then, {fingerprint[:12]} now): its episodes would "
                         "mix two datasets; use another --out folder, or --force to start this one over")


def record_selection(out: Path, cfg: RunConfig, bench: Benchmark, fingerprint: str, *, n_dataset: int,
                     n_selected: int, unrunnable: int) -> None:
    """Write run.json once the dataset, params and adapter all checked out, and add to its `selections` each
    distinct choice of cases this folder has run (`--limit`, `--sample` with its seed, `--case`), so a run of a
    sample says so."""
    info = read_run_info(out, strict=RESUME_HINT) or {
        "identity": cfg.identity(), "benchmark": bench.name, "config": cfg.config,
        "dataset_fingerprint": fingerprint, "n_dataset_cases": n_dataset,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    selection = {"limit": cfg.limit, "sample": cfg.sample, "seed": cfg.seed if cfg.sample is not None else None,
                 "case_ids": sorted(cfg.cases) if cfg.cases else None, "n_cases": n_selected,
                 "left_out_not_runnable": unrunnable}
    selections = info.setdefault("selections", [])
    if selection not in selections or not (out / RUN_INFO).exists():
        if selection not in selections:
            selections.append(selection)
        atomic_write_json(out / RUN_INFO, info)


def clear_run_dir(out: Path) -> int:
    """Remove the run's episodes and run.json, and every scoring output (`metrics.freshness.invalidate`)."""
    from metrics.freshness import invalidate

    removed = len(invalidate(out))
    for pattern in RUN_OUTPUTS:
        for p in out.glob(pattern):
            p.unlink()
            removed += 1
    return removed


def finished(out: Path, case_id: str) -> str | None:
    """'ok', 'failed' or 'skipped' for a finished episode, None when it has to run (absent or unreadable rec.json).
    """
    from eval.orchestrator import episode_paths

    rec = episode_paths(out, case_id)[1]
    if not rec.exists():
        return None
    try:
        return Episode.load(rec).status
    except SchemaError:
        return None  # a torn or foreign file: run the episode again and overwrite it


def reruns(status: str | None, retry_failed: bool) -> bool:
    """Whether a rerun of the same command runs an episode of this `finished` status again."""
    return status is None or (retry_failed and status == "failed")


def still_to_run(out: Path, shard: list[Any], retry_failed: bool) -> tuple[set[str], dict[str, int]]:
    """The case ids of this process's shard that have no finished episode in `out` (failed ones too, with
    --retry-failed), and the counts of what is kept: episodes done, failures kept, and (only when there are any)
    episodes recorded as skipped."""
    status = {c.case_id: finished(out, c.case_id) for c in shard}
    mine = {cid for cid, st in status.items() if reruns(st, retry_failed)}
    counts = {"cases": len(shard), "skipped_done": sum(st == "ok" for st in status.values()),
              "failed_kept": sum(st == "failed" and cid not in mine for cid, st in status.items())}
    if any(st == "skipped" for st in status.values()):
        counts["skipped_kept"] = sum(st == "skipped" for st in status.values())
    return mine, counts


class AgentOwner:
    """Who closes an adapter: the `with` block that holds it closes it when it ends, normally, on an error or on
    Ctrl-C, unless it was handed on (`hand_over`) to a block that then owns it; `replace` closes it and holds a
    fresh one. Each agent is closed once, by its last owner."""

    def __init__(self, agent: Any = None) -> None:
        self.agent = agent

    def __enter__(self) -> AgentOwner:
        return self

    def __exit__(self, *exc: object) -> None:
        agent, self.agent = self.agent, None
        if agent is not None:
            agent.close()

    def hand_over(self) -> Any:
        """The agent, no longer this block's to close."""
        agent, self.agent = self.agent, None
        return agent

    def replace(self, load: Callable[[], Any]) -> None:
        """Close the agent, then hold `load()`."""
        old, self.agent = self.agent, None
        if old is not None:
            old.close()
        self.agent = load()


def run(cfg: RunConfig, tally: Tally | None = None) -> dict[str, int]:
    """Run the config's cases; returns this process's counts: cases, ok, failed, episodes already done
    (`skipped_done`), failures kept from an earlier run, and — only when there are any — cases recorded as
    skipped now (`skipped`) or earlier (`skipped_kept`) because the adapter lacks a capability they need.

    With a `tally`, a run `accelerate launch` started in several processes is said once: on Ctrl-C the main process
    says how many episodes the whole run keeps (counted on disk once the others have stopped) and the others say
    nothing; `summary` gives the main process the whole run's counts. Without one, or with a `launched` one, each
    process counts only its own shard (the shards do not overlap)."""
    counts = {"cases": 0, "skipped_done": 0, "ok": 0, "failed": 0, "failed_kept": 0}
    shard: list[Any] = []
    one_summary = tally is not None and not tally.launched
    tally = tally if tally is not None else Tally()
    try:
        return _run(cfg, counts, shard, tally)
    except KeyboardInterrupt:
        mine = kept_on_disk(cfg, [c.case_id for c in shard])
        if tally.processes == 1 or not one_summary:
            raise Interrupted(mine, quiet=tally.launched) from None
        if not tally.main:
            raise Interrupted(mine, quiet=True) from None
        whole = [c.case_id for c in tally.cases]
        raise Interrupted(settled_count(lambda: kept_on_disk(cfg, whole)), tally.processes) from None


# How long the main process of a multi-process run waits, after Ctrl-C, for the episode count on disk to stop
# changing (the other processes heard the same Ctrl-C and stop within a step), and for how long at most.
SETTLE_S = 1.0
SETTLE_MAX_S = 10.0


def settled_count(count: Callable[[], int]) -> int:
    """`count()` once it has not changed for SETTLE_S (at most SETTLE_MAX_S)."""
    start = last_change = time.monotonic()
    value = count()
    while time.monotonic() - last_change < SETTLE_S and time.monotonic() - start < SETTLE_MAX_S:
        time.sleep(0.2)
        now = count()
        if now != value:
            value, last_change = now, time.monotonic()
    return value


def summary(cfg: RunConfig, counts: dict[str, int], tally: Tally) -> dict[str, int] | None:
    """The counts to print: this process's in a run of one process; in one `accelerate launch` started in several,
    the whole run's, counted on disk once every process has finished its shard, in the main process, and None in
    the others (they print nothing)."""
    if tally.processes == 1:
        return counts
    _wait(_state())
    if not tally.main:
        return None
    return counts_on_disk(Path(cfg.out), tally, cfg.retry_failed) | {"processes": tally.processes}


def counts_on_disk(out: Path, tally: Tally, retry_failed: bool) -> dict[str, int]:
    """The run's counts (as `run` returns them for one process) from each case's status on disk before the run
    and now."""
    counts = {"cases": len(tally.cases), "skipped_done": 0, "ok": 0, "failed": 0, "failed_kept": 0}
    for case in tally.cases:
        before, now = tally.before.get(case.case_id), finished(out, case.case_id)
        if reruns(before, retry_failed):
            if now is not None:
                counts[now] = counts.get(now, 0) + 1
        else:
            key = {"ok": "skipped_done", "failed": "failed_kept", "skipped": "skipped_kept"}[before]
            counts[key] = counts.get(key, 0) + 1
    return counts


def kept_on_disk(cfg: RunConfig, case_ids: list[str]) -> int:
    """The episodes of these cases (a process's shard, or the whole run's) that a rerun of the same command keeps,
    counted on disk (none while the cases are not yet known): an episode is written whole or not at all (its
    rec.json last), and Ctrl-C can land after one is written and before it is counted."""
    return sum(not reruns(finished(Path(cfg.out), cid), cfg.retry_failed) for cid in case_ids)


def _run(cfg: RunConfig, counts: dict[str, int], my_shard: list[Any], tally: Tally) -> dict[str, int]:
    """`run`, counting into `counts` as it goes, with this process's cases put in `my_shard` once it has them
    (what an interruption reports), and what one summary of several processes needs in `tally`."""
    from dataset_builder.fingerprint import dataset_fingerprint
    from dataset_builder.hf_dataset import config_shards

    bench: Benchmark = benchmark_for_config(cfg.config)
    protocol = bench.protocol_class()().override(cfg.params)
    fingerprint = dataset_fingerprint(config_shards(cfg.dataset, cfg.config))
    out = Path(cfg.out)
    state = _state()
    if not cfg.force:
        check_marker(out, cfg, fingerprint)  # before anything is written
    all_cases = bench.function("cases")(cfg.dataset, cfg.config)
    with AgentOwner() as owner:
        runnable = None
        needs: Callable[[Any], frozenset[str]] = lambda case: frozenset()  # noqa: E731
        capabilities: frozenset[str] = frozenset()
        if bench.needs and (cfg.limit is not None or cfg.sample is not None):
            # --limit and --sample count only the cases this adapter can run, so it is built before choosing.
            owner.agent = _load(cfg)
            needs, capabilities = bench.function("needs"), frozenset(owner.agent.capabilities)

            def runnable(case: Any) -> bool:
                return needs(case) <= capabilities

        strata = bench.function("strata") if bench.strata else None
        cases, unrunnable = select_cases(all_cases, ids=cfg.cases, limit=cfg.limit, sample=cfg.sample,
                                         seed=cfg.seed, strata=strata, runnable=runnable,
                                         where=f"{cfg.dataset} ({cfg.config})")
        if state.is_main_process:
            if cfg.force and out.exists():
                n = clear_run_dir(out)
                log.info("--force: removed %d files from %s", n, out)
            if len(cases) < len(all_cases):
                how = (f"whole {bench.sample_unit}s drawn with seed {cfg.seed} (--sample {cfg.sample})"
                       if cfg.sample is not None else f"the first (--limit {cfg.limit})" if cfg.limit is not None
                       else "the --case ids")
                lacking = sorted({x for c in all_cases for x in needs(c) - capabilities}) if unrunnable else []
                left = (f"; {unrunnable} left out, which adapter {cfg.adapter} cannot run (they need "
                        f"{', '.join(lacking)})" if unrunnable else "")
                pool = [c for c in all_cases if runnable is None or runnable(c)]
                cover = covered(cases, pool, strata, bench.sample_unit)
                log.info("running %d of %d cases of %s (%s): %s%s%s", len(cases), len(all_cases), cfg.dataset,
                         cfg.config, how, f"; covers {cover}" if cover else "", left)
        tally.processes, tally.main, tally.cases = state.num_processes, state.is_main_process, list(cases)
        if state.is_main_process and state.num_processes > 1:  # before any process runs an episode
            tally.before = {c.case_id: finished(out, c.case_id) for c in cases}
        _wait(state)
        # Split the full list, then skip finished episodes inside each shard: every process sees the same split
        # even if another process has already finished some episodes by the time it looks.
        with state.split_between_processes(cases) as shard:
            mine, kept = still_to_run(out, shard, cfg.retry_failed)
            my_shard.extend(shard)
            counts |= kept
            if mine and owner.agent is None:
                owner.agent = _load(cfg)
            if state.is_main_process:
                out.mkdir(parents=True, exist_ok=True)
                record_selection(out, cfg, bench, fingerprint, n_dataset=len(all_cases), n_selected=len(cases),
                                 unrunnable=unrunnable)
            if not mine:
                return counts
            out.mkdir(parents=True, exist_ok=True)
            progress = Progress(f"run {cfg.adapter}", len(mine), enabled=cfg.progress)
            # The protocol may take what it needs of the adapter (M3: its frame size, whether it greets).
            jobs = planned(bench.function("case_audio")(cfg.dataset, cfg.config, wanted=mine),
                           bench.function("plan"), protocol.for_agent(owner.agent), owner.agent.sample_rate)

            def done(i: int, ep: Episode) -> None:
                counts[ep.status] = counts.get(ep.status, 0) + 1
                log.info("[%d/%d] %s %s %s", i, len(mine), ep.case_id, ep.status, ep.failure or "")
                progress.advance(note=f"{counts['failed']} failed" if counts["failed"] else "")

            run_jobs(owner.hand_over(), jobs, cfg, done)
    return counts


def run_jobs(agent: Any, jobs: Iterable[tuple[Any, Any]], cfg: RunConfig, done: Callable[[int, Episode], None]
             ) -> None:
    """Run the planned episodes with `agent`, each reported to `done` as it finishes, and close the agent (or the
    one that replaced it after a stall) at the end."""
    from eval.lockstep import LockstepRunner, is_batched
    from eval.orchestrator import STALL_PREFIX, record_failed_episode, run_episode

    out = Path(cfg.out)
    options = RunOptions(step_timeout_s=cfg.step_timeout_s)

    def reload() -> Any:
        return _load(cfg)

    with AgentOwner(agent) as owner:
        if is_batched(owner.agent):
            # B episodes in flight on one clock (docs/scale.md); the runner replaces the agent after a stall.
            runner = LockstepRunner(owner.agent, out, seed=cfg.seed, options=options, reload=reload)
            try:
                for i, ep in enumerate(runner.run(jobs), 1):
                    done(i, ep)
            finally:
                owner.agent = runner.agent
        else:
            for i, (case, episode_plan) in enumerate(jobs, 1):
                if isinstance(episode_plan, str):
                    ep = record_failed_episode(owner.agent, case, out, episode_plan, seed=cfg.seed, options=options)
                else:
                    ep = run_episode(owner.agent, case, episode_plan, out, seed=cfg.seed, options=options)
                done(i, ep)
                if ep.failure and ep.failure.startswith(STALL_PREFIX):
                    # The stalled step may still be running in its abandoned thread: never reuse that agent.
                    owner.replace(reload)


def planned(cases_with_audio: Iterable[tuple[Any, Any]], plan: Callable[..., EpisodePlan], protocol: Any,
            sr: int) -> Iterator[tuple[Any, EpisodePlan | str]]:
    """Each case with its plan, or with the reason its plan failed (that case fails alone, the run goes on)."""
    for case, audio in cases_with_audio:
        try:
            yield case, plan(case, audio, protocol, sr)
        except Exception as err:
            yield case, f"plan failed: {type(err).__name__}: {err}"


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("benchmark", nargs="?", default=None, metavar="BENCHMARK",
                   help="the same as --config (as `build BENCHMARK`)")
    p.add_argument("--dataset", required=True,
                   help="dataset folder (as written by `duplex-eval build`), or a Hub dataset repo ORG/NAME[@REV] "
                        "(when no local folder has that name; hf://datasets/ORG/NAME always means the Hub), read "
                        "from the HF cache")
    p.add_argument("--config", action="append", default=None, metavar="NAME[,NAME...]",
                   help="what to run: a benchmark (mpe, ifeval, m3: its evaluated configs) or a dataset config "
                        "(m3_chat_en), or several (comma-separated or the flag again), each its own run in "
                        "OUT/<config>; default: the benchmark the dataset folder holds, when it holds one")
    p.add_argument("--adapter", required=True, help="registered adapter name, module:Class or file.py:Class")
    p.add_argument("--adapter-arg", action="append", default=[], metavar="K=V", help="adapter constructor arg")
    p.add_argument("--out", required=True, help="run folder: recordings, rec.json files, scores")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a protocol default (e.g. t_onset_window_s=4)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="run only the first N cases the adapter can run (the run says which groups and strata "
                        "they cover; --sample spreads them)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="run a sample of at least N cases the adapter can run, in whole groups drawn with --seed "
                        "(Duplex-MPE: scenario pairs, explicit and implicit, spread over cue kinds; DSB-IFEval: "
                        "conversations, every level of each, spread over roles and turn-2 modes; M3: dialogues, "
                        "every event and condition of each); the run says what it covers")
    p.add_argument("--case", action="append", dest="cases", default=None, metavar="ID[,ID...]",
                   help="run only these case ids (comma-separated or the flag again)")
    p.add_argument("--seed", type=int, default=0, help="the seed every episode's reset gets, and --sample's")
    p.add_argument("--step-timeout", type=float, default=RunOptions.step_timeout_s,
                   help="seconds one agent step may take (default %(default)g; 0: none)")
    p.add_argument("--retry-failed", action="store_true", help="re-run episodes recorded as failed")
    p.add_argument("--force", action="store_true",
                   help="start the folder over: remove its episodes, scores and run.json first")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress line on stderr")


def resolve_configs(dataset: str, spec: str | None) -> list[str]:
    """The dataset configs a `run` means: each name of `spec` (a comma list) is a config, or a benchmark standing
    for its evaluated configs in the folder; no `spec`: the evaluated configs of the one benchmark the folder
    holds."""
    from dataset_builder.benchmarks import benchmark_names, get_benchmark
    from dataset_builder.hf_dataset import available_configs

    folder = Path(dataset)
    have = available_configs(folder) if folder.is_dir() else []
    if not spec:
        if not folder.is_dir():
            raise FileNotFoundError(f"dataset folder {dataset} does not exist")
        benches: dict[str, Benchmark] = {}
        for config in have:
            try:
                bench = benchmark_for_config(config)
            except UsageError:
                continue  # a config no registered benchmark reads
            benches.setdefault(bench.name, bench)
        if not benches:
            raise UsageError(f"{dataset} holds no benchmark's config (it has {have}); build one there with "
                             f"`duplex-eval build BENCHMARK --out {dataset}`")
        if len(benches) > 1:
            raise UsageError(f"{dataset} holds configs of {len(benches)} benchmarks ({', '.join(benches)}); "
                             f"say which with --config NAME (a benchmark or a config of {have}), or a comma list")
        bench = next(iter(benches.values()))
        return [c for c in bench.evaluated_configs() if c in have] or [c for c in bench.configs if c in have][:1]
    known = sorted(c for name in benchmark_names() for c in get_benchmark(name).configs)
    out: list[str] = []
    for name in (n.strip() for n in spec.split(",")):
        if not name:
            continue
        if name in known:
            found = [name]
        elif name in benchmark_names():
            wanted = get_benchmark(name).evaluated_configs()
            found = [c for c in wanted if c in have] if have else list(wanted)
            if not found:
                raise UsageError(f"--config {name}: {dataset} has no config of benchmark {name} "
                                 f"({', '.join(wanted)}); it has {have}")
        else:
            raise UsageError(f"--config {name!r} is neither a benchmark ({', '.join(benchmark_names())}) nor a "
                             f"dataset config ({', '.join(known)})")
        out += [c for c in found if c not in out]
    if not out:
        raise UsageError(f"--config {spec!r} names no benchmark or config")
    return out


def configs_from_args(a: argparse.Namespace) -> list[RunConfig]:
    """One RunConfig per config the command names (`resolve_configs`): several go to OUT/<config> each."""
    from dataset_builder.hub_source import dataset_folder
    from eval.launch import worker_rank

    named = comma_list(a.config)
    if a.benchmark and named and comma_list(a.benchmark) != named:
        raise UsageError(f"run: two benchmarks given ({a.benchmark} and --config {','.join(named)}); give one")
    # ORG/NAME[@REV] naming no local folder is a Hub dataset repo: its snapshot in the HF cache (docs/release.md).
    # A process `--num-processes` started finds it where the launching process put it, without the network.
    dataset = dataset_folder(a.dataset, local_only=worker_rank() is not None)
    configs = resolve_configs(dataset, ",".join(named or comma_list(a.benchmark)) or None)
    if a.limit is not None and a.sample is not None:
        raise UsageError("give --limit N (the first N cases) or --sample N (a stratified sample), not both")
    base = RunConfig(dataset=dataset, adapter=a.adapter, out=a.out, config=configs[0],
                     adapter_args=parse_kv(a.adapter_arg, "--adapter-arg"), params=list(a.param),
                     limit=a.limit, sample=a.sample, cases=comma_list(a.cases) or None, seed=a.seed,
                     step_timeout_s=a.step_timeout if a.step_timeout > 0 else None,
                     retry_failed=a.retry_failed, force=a.force, progress=a.progress)
    if len(configs) == 1:
        return [base]
    return [replace(base, config=c, out=str(Path(a.out) / c)) for c in configs]


def config_from_args(a: argparse.Namespace) -> RunConfig:
    """The one RunConfig of a command naming one config."""
    cfgs = configs_from_args(a)
    if len(cfgs) > 1:
        raise UsageError(f"this command runs one config; --config names {[c.config for c in cfgs]}")
    return cfgs[0]


def outcome(counts: dict[str, int]) -> tuple[int, str]:
    """Exit status and a closing line: non-zero whenever any episode of this shard is a failure (a skipped
    case is not one: the adapter cannot run it as specified, and the scores count it apart)."""
    failed = counts["failed"] + counts["failed_kept"]
    n_skipped = counts.get("skipped", 0) + counts.get("skipped_kept", 0)
    skipped = (f"; {n_skipped} case(s) skipped because the adapter lacks a capability they need (reasons in their "
               "rec.json and in `duplex-eval score`)") if n_skipped else ""
    if not failed:
        return 0, f"{counts['ok']} episodes run, {counts['skipped_done']} already done, none failed{skipped}"
    kept = f" ({counts['failed_kept']} from an earlier run; --retry-failed re-runs them)" if counts[
        "failed_kept"] else ""
    return 1, (f"{failed} episode(s) failed{kept}; {counts['ok']} ok, {counts['skipped_done']} already done"
               f"{skipped}; the reasons are in each failed episode's rec.json and in `duplex-eval score`")


def finish(counts: dict[str, int], *, quiet: bool = False) -> int:
    """Print the counts (JSON, stdout) and the closing line (stderr), unless `quiet`; return the exit status."""
    if quiet:
        return outcome(counts)[0]
    # One write of the whole line: under accelerate every process shares one stdout pipe, and print() writes the
    # text and its newline separately, so two processes' counts could land on one line.
    sys.stdout.write(json.dumps(counts) + "\n")
    sys.stdout.flush()
    code, line = outcome(counts)
    print(line, file=sys.stderr)
    return code


def run_and_finish(cfg: RunConfig) -> int:
    """`run`, then its summary (`finish`): under `accelerate launch` in several processes, printed once, by the main
    process, for all of them; the others return their own status silently."""
    tally = Tally()
    counts = run(cfg, tally)
    combined = summary(cfg, counts, tally)
    return finish(counts, quiet=True) if combined is None else finish(combined)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    p = argparse.ArgumentParser(prog="eval/run.py", description=__doc__.split("\n")[0])
    add_run_arguments(p)
    try:
        return run_and_finish(config_from_args(p.parse_args(argv)))
    except (SchemaError, UsageError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Interrupted as err:
        if not err.quiet:
            print(str(err), file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
