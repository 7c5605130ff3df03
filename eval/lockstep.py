"""Batched lockstep (docs/scale.md): B episodes in flight in one batch-capable agent, on one virtual clock.

On a GPU the model step, not the harness, is the cost, and a duplex model steps a batch of independent
conversations about as fast as one. A `BatchedDuplexAgent` (adapters/protocol.py) holds `batch_size` slots; this
runner keeps one episode in each — its own `EpisodeRun` (scheduler, VAD, timeline, failure capture, files), the very
one `run_episode` steps — and on every tick hands all slots' user frames to one `step_batch` call. A case enters a
slot with `reset_slot`; when its episode ends (its plan is done, or it failed) the episode is written and the slot
takes the next case. A slot without a case hears silence and its output is ignored. Each slot's own stream
clock starts when its case enters, so each episode is written exactly as `run_episode` would write it.

Failures stay with their episode: a frame of the wrong shape or with NaN, or an exception returned in a slot's place
(a served session that broke), fails that slot's episode only; an error
raised by `step_batch`, a wrong number of frames, or a stall past the step timeout (which applies to the whole
`step_batch` call) fails every episode in flight, and after a stall the agent is replaced (`reload`) since its
stalled call may still be running. Cases the agent cannot run (a capability missing) and cases whose plan failed
are recorded without entering a slot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from adapters.protocol import BatchedDuplexAgent
from dataset_builder.episode import Episode
from dataset_builder.errors import UsageError
from eval import interrupt
from eval.orchestrator import (
    STALL_PREFIX,
    CaseLike,
    EpisodeFailure,
    EpisodeRun,
    RunOptions,
    TimedCall,
    adapter_info,
    record_failed_episode,
    record_skipped_episode,
    served_session,
    skip_reason,
)
from eval.schedule import EpisodePlan

# One case to run: its plan, or the reason its plan could not be made (recorded as a failed episode).
Job = tuple[CaseLike, EpisodePlan | str]


def is_batched(agent: object) -> bool:
    """Whether `agent` declares more than one slot and the batched protocol's methods."""
    return (int(getattr(agent, "batch_size", 1) or 1) > 1 and callable(getattr(agent, "reset_slot", None))
            and callable(getattr(agent, "step_batch", None)))


class LockstepRunner:
    """Runs jobs through a batched agent, `batch_size` episodes at a time; `run` yields each episode once written.

    `reload` builds a fresh agent after a stall (the stalled `step_batch` may still hold the old one); without it
    the same agent goes on. `agent` is the agent in use (the caller closes it at the end).
    """

    def __init__(self, agent: BatchedDuplexAgent, out_dir: Path, *, seed: int = 0,
                 options: RunOptions | None = None, reload: Callable[[], BatchedDuplexAgent] | None = None) -> None:
        if "gold_cues" in agent.capabilities:
            raise UsageError(f"adapter {agent.name} takes gold cues (the oracle), which are not per slot: run it "
                             "one episode at a time (batch_size=1)")
        self.agent, self.out_dir, self.seed, self.reload = agent, Path(out_dir), seed, reload
        self.options = options or RunOptions()
        self.B, self.n = int(agent.batch_size), int(agent.frame_size)
        self.slots: list[EpisodeRun | None] = [None] * self.B
        self.user = np.zeros((self.B, self.n), np.float32)
        self.forced = np.zeros((self.B, self.n), np.float32)
        self.mask = np.zeros(self.B, bool)

    def run(self, jobs: Iterable[Job]) -> Iterator[Episode]:
        todo = iter(jobs)
        step = TimedCall(self.options.step_timeout_s)
        wall0, ticks = time.perf_counter(), 0
        try:
            while True:
                for i in range(self.B):
                    yield from self._ready(i, todo)
                live = [i for i, r in enumerate(self.slots) if r is not None]
                if not live:
                    return
                interrupt.check()
                any_forced = bool(self.mask.any())
                try:
                    frames, step_s = step(self.agent.step_batch, self.user.copy(),
                                          self.forced.copy() if any_forced else None,
                                          self.mask.copy() if any_forced else None,
                                          t_s=None, what="step_batch")
                    if not isinstance(frames, (list, tuple)) or len(frames) != self.B:
                        got = len(frames) if isinstance(frames, (list, tuple)) else type(frames).__name__
                        raise EpisodeFailure(f"step_batch returned {got} frames for batch size {self.B}")
                except EpisodeFailure as err:
                    yield from self._fail_all(live, str(err))
                    if str(err).startswith(STALL_PREFIX):
                        step.close()
                        step = TimedCall(self.options.step_timeout_s)
                        self._replace_agent()
                    continue
                for i in live:
                    run = self._run(i)
                    if isinstance(frames[i], BaseException):  # that slot's episode broke, the others go on
                        err = frames[i]
                        run.fail(f"step_batch raised {type(err).__name__} for this slot: {err} at t={run.t_s:.3f}s")
                        yield self._finish(i)
                        continue
                    run.accept(frames[i], step_s)
                    if run.done:
                        yield self._finish(i)
                ticks += 1
                if self.agent.realtime:
                    lag = ticks * self.n / self.agent.sample_rate - (time.perf_counter() - wall0)
                    if lag > 0:
                        time.sleep(lag)
        finally:
            step.close()

    def _run(self, i: int) -> EpisodeRun:
        run = self.slots[i]
        assert run is not None
        return run

    def _ready(self, i: int, todo: Iterator[Job]) -> Iterator[Episode]:
        """Slot i holding an episode with its next input staged, or empty when no job is left."""
        while True:
            run = self.slots[i]
            if run is None:
                job = next(todo, None)
                if job is None:
                    self._stage(i, None)
                    return
                entered = self._enter(i, *job)
                if isinstance(entered, Episode):
                    yield entered
                    continue
                self.slots[i] = run = entered
            if not run.done:
                staged = run.next_input()
                if staged is not None:
                    self._stage(i, staged)
                    return
            yield self._finish(i)

    def _enter(self, i: int, case: CaseLike, plan: EpisodePlan | str) -> Episode | EpisodeRun:
        agent, seed, options = self.agent, self.seed, self.options
        if isinstance(plan, str):
            return record_failed_episode(agent, case, self.out_dir, plan, seed=seed, options=options)
        reason = skip_reason(agent, case, plan)
        if reason:
            return record_skipped_episode(agent, case, plan, self.out_dir, reason, seed=seed, options=options)
        run = EpisodeRun(adapter_info(agent), case, plan, self.out_dir, seed=seed, options=options,
                         batch_size=self.B)
        if not run.done:
            try:
                agent.reset_slot(i, plan.system_prompt, seed)
            except Exception as err:
                run.fail(f"reset raised {type(err).__name__}: {err}")
        return run

    def _stage(self, i: int, staged: tuple[np.ndarray, np.ndarray | None] | None) -> None:
        user, forced = staged if staged is not None else (None, None)
        self.user[i] = 0.0 if user is None else user
        self.mask[i] = forced is not None
        self.forced[i] = 0.0 if forced is None else forced

    def _finish(self, i: int) -> Episode:
        run = self._run(i)
        run.session = served_session(self.agent, i)  # a served slot's own session (docs/scale.md)
        episode = run.finish()
        self.slots[i] = None
        self._stage(i, None)
        return episode

    def _fail_all(self, live: list[int], reason: str) -> Iterator[Episode]:
        """A failure of the whole batch call ends every episode in flight, each at its own stream time."""
        for i in live:
            run = self._run(i)
            run.fail(f"{reason} at t={run.t_s:.3f}s")
            yield self._finish(i)

    def _replace_agent(self) -> None:
        if self.reload is None:
            return
        try:
            self.agent.close()
        finally:
            self.agent = self.reload()
