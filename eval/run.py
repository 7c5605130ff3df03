"""Run an adapter over a dataset config, sharded across processes, resumable.

    duplex-eval run --dataset out/datasets/duplex-mpe --adapter oracle --out runs/oracle
    accelerate launch eval/run.py --dataset ... --adapter ... --out ...   # same arguments

The config names the benchmark (SPEC §11): its protocol validates `--param`, its plan drives the user stream,
and the one episode runner (`eval.orchestrator.run_episode`) does the rest; an adapter declaring `batch_size` > 1
(`--adapter-arg batch_size=16`) runs that many episodes at once in lockstep (`eval.lockstep`, SPEC §12), each
written exactly as one at a time. Each process builds one adapter instance and runs its share of the cases
(`PartialState().split_between_processes`). An episode whose `rec.json` exists is finished and skipped, so a rerun
resumes without duplicating or losing episodes; failed episodes are kept as results and re-run only with
`--retry-failed`. A case needing a capability the adapter lacks (M3's Full context needs teacher forcing) is
recorded as a skipped episode with its reason: counted, never run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
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
    limit: int | None = None
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


def chosen_cases(cfg: RunConfig, all_cases: list[Any]) -> list[Any]:
    """The dataset's cases this run covers: those named with --case, then the first --limit of them."""
    cases = all_cases
    if cfg.cases:
        known = {c.case_id for c in all_cases}
        unknown = sorted(set(cfg.cases) - known)
        if unknown:
            raise UsageError(f"--case: no such case id(s) {unknown[:5]} in {cfg.dataset} ({cfg.config})")
        cases = [c for c in all_cases if c.case_id in set(cfg.cases)]
    if cfg.limit is not None:
        if cfg.limit < 1:
            raise UsageError(f"--limit must be >= 1, got {cfg.limit}")
        cases = cases[: cfg.limit]
    return cases


def still_to_run(out: Path, shard: list[Any], retry_failed: bool) -> tuple[set[str], dict[str, int]]:
    """The case ids of this process's shard that have no finished episode in `out` (failed ones too, with
    --retry-failed), and the counts of what is kept: episodes done, failures kept, and (only when there are any)
    episodes recorded as skipped."""
    status = {c.case_id: finished(out, c.case_id) for c in shard}
    retry = {"failed"} if retry_failed else set()
    mine = {cid for cid, st in status.items() if st is None or st in retry}
    counts = {"cases": len(shard), "skipped_done": sum(st == "ok" for st in status.values()),
              "failed_kept": sum(st == "failed" and cid not in mine for cid, st in status.items())}
    if any(st == "skipped" for st in status.values()):
        counts["skipped_kept"] = sum(st == "skipped" for st in status.values())
    return mine, counts


def run(cfg: RunConfig) -> dict[str, int]:
    """Run the config's cases; returns this process's counts: cases, ok, failed, episodes already done
    (`skipped_done`), failures kept from an earlier run, and — only when there are any — cases recorded as
    skipped now (`skipped`) or earlier (`skipped_kept`) because the adapter lacks a capability they need."""
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
    cases = chosen_cases(cfg, all_cases)
    if state.is_main_process:
        if cfg.force and out.exists():
            n = clear_run_dir(out)
            log.info("--force: removed %d files from %s", n, out)
        if len(cases) < len(all_cases):
            log.info("running %d of %d cases of %s", len(cases), len(all_cases), cfg.dataset)
    _wait(state)
    # Split the full list, then skip finished episodes inside each shard: every process sees the same split
    # even if another process has already finished some episodes by the time it looks.
    counts = {"cases": len(cases), "skipped_done": 0, "ok": 0, "failed": 0, "failed_kept": 0}
    with state.split_between_processes(cases) as shard:
        mine, kept = still_to_run(out, shard, cfg.retry_failed)
        counts |= kept
        agent = load_adapter(cfg.adapter, **cfg.adapter_args) if mine else None
        if state.is_main_process:
            out.mkdir(parents=True, exist_ok=True)
            # written only once the dataset, params and adapter all checked out
            if read_run_info(out, strict=RESUME_HINT) is None:
                atomic_write_json(out / RUN_INFO, {
                    "identity": cfg.identity(), "benchmark": bench.name, "config": cfg.config,
                    "dataset_fingerprint": fingerprint, "n_dataset_cases": len(all_cases),
                    "started": time.strftime("%Y-%m-%dT%H:%M:%S")})
        if agent is None:
            return counts
        out.mkdir(parents=True, exist_ok=True)
        progress = Progress(f"run {cfg.adapter}", len(mine), enabled=cfg.progress)
        # The protocol may take what it needs of the adapter (M3: its frame size, whether it greets).
        jobs = planned(bench.function("case_audio")(cfg.dataset, cfg.config, wanted=mine), bench.function("plan"),
                       protocol.for_agent(agent), agent.sample_rate)

        def done(i: int, ep: Episode) -> None:
            counts[ep.status] = counts.get(ep.status, 0) + 1
            log.info("[%d/%d] %s %s %s", i, len(mine), ep.case_id, ep.status, ep.failure or "")
            progress.advance(note=f"{counts['failed']} failed" if counts["failed"] else "")

        run_jobs(agent, jobs, cfg, done)
    return counts


def run_jobs(agent: Any, jobs: Iterable[tuple[Any, Any]], cfg: RunConfig, done: Callable[[int, Episode], None]
             ) -> None:
    """Run the planned episodes with `agent`, each reported to `done` as it finishes, and close the agent (or the
    one that replaced it after a stall) at the end."""
    from eval.lockstep import LockstepRunner, is_batched
    from eval.orchestrator import STALL_PREFIX, record_failed_episode, run_episode

    out = Path(cfg.out)
    options = RunOptions(step_timeout_s=cfg.step_timeout_s)
    try:
        if is_batched(agent):
            # B episodes in flight on one clock (SPEC §12); the runner replaces the agent after a stall.
            runner = LockstepRunner(agent, out, seed=cfg.seed, options=options,
                                    reload=lambda: load_adapter(cfg.adapter, **cfg.adapter_args))
            try:
                for i, ep in enumerate(runner.run(jobs), 1):
                    done(i, ep)
            finally:
                agent = runner.agent
        else:
            for i, (case, episode_plan) in enumerate(jobs, 1):
                if isinstance(episode_plan, str):
                    ep = record_failed_episode(agent, case, out, episode_plan, seed=cfg.seed, options=options)
                else:
                    ep = run_episode(agent, case, episode_plan, out, seed=cfg.seed, options=options)
                done(i, ep)
                if ep.failure and ep.failure.startswith(STALL_PREFIX):
                    # The stalled step may still be running in its abandoned thread: never reuse that agent.
                    agent.close()
                    agent = load_adapter(cfg.adapter, **cfg.adapter_args)
    finally:
        agent.close()


def planned(cases_with_audio: Iterable[tuple[Any, Any]], plan: Callable[..., EpisodePlan], protocol: Any,
            sr: int) -> Iterator[tuple[Any, EpisodePlan | str]]:
    """Each case with its plan, or with the reason its plan failed (that case fails alone, the run goes on)."""
    for case, audio in cases_with_audio:
        try:
            yield case, plan(case, audio, protocol, sr)
        except Exception as err:
            yield case, f"plan failed: {type(err).__name__}: {err}"


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True, help="dataset folder (as written by `duplex-eval build`)")
    p.add_argument("--config", default="mpe", help="dataset config (names the benchmark); default mpe")
    p.add_argument("--adapter", required=True, help="registered adapter name or module:Class")
    p.add_argument("--adapter-arg", action="append", default=[], metavar="K=V", help="adapter constructor arg")
    p.add_argument("--out", required=True, help="run folder: recordings, rec.json files, scores")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a protocol default (e.g. t_onset_window_s=4)")
    p.add_argument("--limit", type=int, default=None, help="run only the first N cases")
    p.add_argument("--case", action="append", dest="cases", default=None, help="run only this case id")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step-timeout", type=float, default=RunOptions.step_timeout_s,
                   help="seconds one agent step may take (0: none)")
    p.add_argument("--retry-failed", action="store_true", help="re-run episodes recorded as failed")
    p.add_argument("--force", action="store_true",
                   help="start the folder over: remove its episodes, scores and run.json first")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress line on stderr")


def config_from_args(a: argparse.Namespace) -> RunConfig:
    return RunConfig(dataset=a.dataset, adapter=a.adapter, out=a.out, config=a.config,
                     adapter_args=parse_kv(a.adapter_arg, "--adapter-arg"), params=list(a.param),
                     limit=a.limit, cases=a.cases, seed=a.seed,
                     step_timeout_s=a.step_timeout if a.step_timeout > 0 else None,
                     retry_failed=a.retry_failed, force=a.force, progress=a.progress)


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


def finish(counts: dict[str, int]) -> int:
    """Print this process's counts (JSON, stdout) and the closing line (stderr); return the exit status."""
    # One write of the whole line: under accelerate every process shares one stdout pipe, and print() writes the
    # text and its newline separately, so two processes' counts could land on one line.
    sys.stdout.write(json.dumps(counts) + "\n")
    sys.stdout.flush()
    code, line = outcome(counts)
    print(line, file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    p = argparse.ArgumentParser(prog="eval/run.py", description=__doc__.split("\n")[0])
    add_run_arguments(p)
    try:
        counts = run(config_from_args(p.parse_args(argv)))
    except (SchemaError, UsageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return finish(counts)


if __name__ == "__main__":
    sys.exit(main())
