"""Whole episodes of every benchmark config for a real-model adapter's tests: the real mini sets (built once per
test session, TTS from the repository's cache), each config's first case(s) planned by its registered plan and
run by the one orchestrator, as `duplex-eval run` would run them. The sets are the session's `mini_sets`
(tests/conftest.py).

Each returned `Ran` holds the episode, the recording (raw PCM16 values, ch0 user, ch1 model) and the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adapters.protocol import DuplexAgent
from dataset_builder.audio import read_wav
from dataset_builder.benchmarks import benchmark_for_config, benchmark_names, get_benchmark
from dataset_builder.episode import Episode
from eval.orchestrator import RunOptions, run_episode
from eval.schedule import EpisodePlan

# Every config a whole evaluation runs (Benchmark.evaluated_configs), in registry order.
CONFIGS = tuple(c for name in benchmark_names() for c in get_benchmark(name).evaluated_configs())


@dataclass
class Ran:
    episode: Episode
    plan: EpisodePlan
    pcm: np.ndarray  # (n, 2) int16 as recorded: ch0 user, ch1 model
    extra: Any = None  # whatever `after` returned for this episode


def first_cases(folder: Path, config: str, n: int) -> list[str]:
    """The first case of a config; for M3, every condition of its first event (the first three cases)."""
    cases = benchmark_for_config(config).function("cases")(folder, config)
    return [c.case_id for c in cases[:n]]


def shortest_cases(folder: Path, config: str) -> list[str]:
    """The config's shortest case; for M3, every condition of its shortest event (the cases share the event's id up
    to the condition). The fewest model steps that still run a whole episode of the config, for tests that hold for
    any case."""
    seconds = {c.case_id: len(a) for c, a in benchmark_for_config(config).function("case_audio")(folder, config)}
    groups: dict[str, list[str]] = {}
    for cid in seconds:
        groups.setdefault(cid.rsplit("-", 1)[0] if config.startswith("m3") else cid, []).append(cid)
    return min(groups.values(), key=lambda ids: (max(seconds[i] for i in ids), ids))


def run_cases(agent: DuplexAgent, folder: Path, config: str, out: Path, case_ids: list[str], *, seed: int = 0,
              after: Callable[[Episode], Any] | None = None, options: RunOptions | None = None) -> Iterator[Ran]:
    """Each case through the config's plan and `run_episode`; `after(episode)` runs right after each (before the
    agent is reset for the next), for what the test wants to take from the model's state."""
    bench = benchmark_for_config(config)
    protocol = bench.protocol_class()().for_agent(agent)
    plan = bench.function("plan")
    by_id = dict((c.case_id, (c, a)) for c, a in bench.function("case_audio")(folder, config, wanted=set(case_ids)))
    for cid in case_ids:
        case, audio = by_id[cid]
        p = plan(case, audio, protocol, agent.sample_rate)
        ep = run_episode(agent, case, p, out, seed=seed, options=options or RunOptions())
        extra = after(ep) if after else None
        pcm = np.zeros((0, 2), np.int16)
        if ep.status != "skipped":
            stereo, _ = read_wav(out / f"{cid}.wav")
            pcm = np.round(stereo * 32768).astype(np.int16)
        yield Ran(ep, p, pcm, extra)
