"""Run an adapter over a dataset config, sharded across processes, resumable.

    duplex-eval run --dataset out/datasets/duplex-mpe --adapter oracle --out runs/oracle
    accelerate launch eval/run.py --dataset ... --adapter ... --out ...   # same arguments

Each process builds one adapter instance and runs its share of the cases
(`PartialState().split_between_processes`). An episode whose `rec.json` exists is complete and skipped,
so a rerun resumes without duplicating or losing episodes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `accelerate launch eval/run.py`: make the repo importable as packages
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.registry import load_adapter  # noqa: E402
from dataset_builder.atomic import atomic_write_json  # noqa: E402
from dataset_builder.protocols import MPEProtocol  # noqa: E402
from dataset_builder.schema import SchemaError  # noqa: E402

log = logging.getLogger("duplex_eval.run")


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
    step_timeout_s: float | None = 30.0

    def identity(self) -> dict[str, Any]:
        """What must match for a rerun to resume into the same folder."""
        return {"dataset": str(Path(self.dataset).resolve()), "config": self.config, "adapter": self.adapter,
                "adapter_args": self.adapter_args, "params": sorted(self.params), "seed": self.seed}


def parse_kv(items: list[str], what: str) -> dict[str, Any]:
    """"k=v" strings; values parsed as JSON when they can be (numbers, booleans), else kept as text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"{what}: expected key=value, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _state() -> Any:
    from accelerate import PartialState

    # cpu=True lets `accelerate launch --multi_gpu --num_processes 2` start two gloo processes on a CPU box.
    cpu = os.environ.get("DUPLEX_EVAL_CPU", "") == "1" or not _cuda_available()
    return PartialState(cpu=cpu)


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def check_run_dir(out: Path, cfg: RunConfig, is_main: bool) -> None:
    marker = out / "run.json"
    if marker.exists():
        old = json.loads(marker.read_text())
        if old.get("identity") != cfg.identity():
            raise SystemExit(f"{marker} belongs to a different run ({old.get('identity')}); "
                             "use another --out folder")
    elif is_main:
        atomic_write_json(marker, {"identity": cfg.identity(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                   "benchmark": cfg.config})


def run(cfg: RunConfig) -> dict[str, int]:
    from dataset_builder.hf_dataset import iter_cases, list_cases
    from eval.orchestrator import STALL_PREFIX, RunOptions, episode_paths, run_mpe_episode

    if cfg.config != "mpe":
        raise SystemExit(f"config {cfg.config!r} is not implemented yet (available: mpe)")
    protocol = MPEProtocol().override(cfg.params)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    state = _state()
    check_run_dir(out, cfg, state.is_main_process)
    cases = list_cases(cfg.dataset, cfg.config)
    if cfg.cases:
        wanted = set(cfg.cases)
        cases = [c for c in cases if c.case_id in wanted]
    if cfg.limit is not None:
        cases = cases[: cfg.limit]
    # Split the full list, then skip finished episodes inside each shard: every process sees the same split
    # even if another process has already finished some episodes by the time it looks.
    counts = {"cases": len(cases), "skipped_done": 0, "ok": 0, "failed": 0}
    with state.split_between_processes(cases) as shard:
        mine = {c.case_id for c in shard if not episode_paths(out, c.case_id)[1].exists()}
        counts["cases"] = len(shard)
        counts["skipped_done"] = len(shard) - len(mine)
        if not mine:
            return counts
        agent = load_adapter(cfg.adapter, **cfg.adapter_args)
        options = RunOptions(step_timeout_s=cfg.step_timeout_s)
        try:
            for i, (case, audio) in enumerate(iter_cases(cfg.dataset, cfg.config, wanted=mine), 1):
                ep = run_mpe_episode(agent, case, audio, protocol, out, seed=cfg.seed, options=options)
                counts[ep.status] = counts.get(ep.status, 0) + 1
                if ep.failure and ep.failure.startswith(STALL_PREFIX):
                    # The stalled step may still be running in its abandoned thread: never reuse that agent.
                    agent.close()
                    agent = load_adapter(cfg.adapter, **cfg.adapter_args)
                log.info("[%d/%d] %s %s %s", i, len(mine), case.case_id, ep.status, ep.failure or "")
        finally:
            agent.close()
    return counts


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True, help="dataset folder (as written by `duplex-eval build`)")
    p.add_argument("--config", default="mpe", help="dataset config (benchmark); default mpe")
    p.add_argument("--adapter", required=True, help="registered adapter name or module:Class")
    p.add_argument("--adapter-arg", action="append", default=[], metavar="K=V", help="adapter constructor arg")
    p.add_argument("--out", required=True, help="run folder: recordings, rec.json files, scores")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a protocol default (e.g. t_onset_window_s=4)")
    p.add_argument("--limit", type=int, default=None, help="run only the first N cases")
    p.add_argument("--case", action="append", dest="cases", default=None, help="run only this case id")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step-timeout", type=float, default=30.0, help="seconds one agent step may take")


def config_from_args(a: argparse.Namespace) -> RunConfig:
    return RunConfig(dataset=a.dataset, adapter=a.adapter, out=a.out, config=a.config,
                     adapter_args=parse_kv(a.adapter_arg, "--adapter-arg"), params=list(a.param),
                     limit=a.limit, cases=a.cases, seed=a.seed,
                     step_timeout_s=a.step_timeout if a.step_timeout > 0 else None)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    p = argparse.ArgumentParser(prog="eval/run.py", description=__doc__.split("\n")[0])
    add_run_arguments(p)
    try:
        counts = run(config_from_args(p.parse_args(argv)))
    except SchemaError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
