"""`check-adapter`'s checks of a BatchedDuplexAgent (adapters/protocol.py, docs/scale.md).

The lockstep runner trusts three promises: `step_batch` gives one valid frame per slot; a slot's output depends
only on its own input and seed (not on its neighbours, nor on being batched at all); `reset_slot` gives one slot
fresh state and leaves the others alone. The single-episode runs of the main suite are the reference: the same
input and seed in any slot must give the samples `step` gave.
"""

from __future__ import annotations

import time

import numpy as np

from eval.conformance import FAIL, PASS, SKIP, Nonconformance, Run, Suite, first_difference, frame_problem


class BatchChecks:
    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self.agent = suite.agent
        self.size: int = self.agent.batch_size  # type: ignore[attr-defined]
        self.runs: dict[str, list[Run]] = {}

    def play(self, inputs: list[np.ndarray], forced: np.ndarray | None = None, mask: np.ndarray | None = None,
             reset_at: tuple[int, int] | None = None) -> list[Run]:
        """Reset every slot, then one step_batch per frame; `reset_at` = (frame, slot) resets that slot there."""
        agent, n, sr, seed = self.agent, self.agent.frame_size, self.agent.sample_rate, self.suite.seed
        for slot in range(self.size):
            agent.reset_slot(slot, None, seed)  # type: ignore[attr-defined]
        stream = np.stack(inputs).astype(np.float32)
        runs = [Run([], []) for _ in range(self.size)]
        for k in range(stream.shape[1] // n):
            if reset_at is not None and reset_at[0] == k:
                agent.reset_slot(reset_at[1], None, seed)  # type: ignore[attr-defined]
            users = np.ascontiguousarray(stream[:, k * n:(k + 1) * n])
            force = forced[:, k * n:(k + 1) * n].copy() if forced is not None and (k + 1) * n <= forced.shape[
                1] else None
            t0 = time.perf_counter()
            try:
                out = agent.step_batch(users, force, None if force is None else mask)  # type: ignore[attr-defined]
            except Exception as err:
                raise Nonconformance(f"step_batch {k} (t={k * n / sr:.2f}s) raised {type(err).__name__}: {err}"
                                     ) from err
            self.suite.batch_step_s.append(time.perf_counter() - t0)
            if not isinstance(out, list | tuple) or len(out) != self.size:
                raise Nonconformance(f"step_batch {k} returned {type(out).__name__} of length "
                                     f"{len(out) if hasattr(out, '__len__') else '?'}, expected {self.size} Frames")
            for slot, frame in enumerate(out):
                if problem := frame_problem(frame, n):
                    raise Nonconformance(f"step_batch {k} (t={k * n / sr:.2f}s), slot {slot}: {problem}")
                runs[slot].frames.append(frame[0].copy())
                runs[slot].texts.append(frame[1])
        return runs

    def single(self, name: str) -> list[np.ndarray]:
        return self.suite.runs[name].frames

    def comparable(self, *single: str) -> str | None:
        if not self.suite.reproducible:
            return "not judged: the agent is not reproducible (reset-determinism)"
        return self.suite.needs(*single)

    def frames(self) -> tuple[str, str]:
        s = self.suite.stim
        assert s is not None
        self.runs["mixed"] = self.play([s.a if i % 2 == 0 else s.b for i in range(self.size)])
        return PASS, (f"batch_size {self.size}: step_batch gave {self.size} valid Frames per tick over "
                      f"{len(self.runs['mixed'][0].frames)} ticks")

    def equals_single(self) -> tuple[str, str]:
        if why := self.comparable("a2", "b") or ("" if "mixed" in self.runs else "not run: batch-frames failed"):
            return SKIP, why
        s = self.suite.stim
        assert s is not None
        self.runs["all_a"] = self.play([s.a] * self.size)
        for what, runs in [("A in even slots, B in odd ones", self.runs["mixed"]), ("A in every slot",
                                                                                    self.runs["all_a"])]:
            for slot, run in enumerate(runs):
                ref = "a2" if what.startswith("A in every") or slot % 2 == 0 else "b"
                if diff := first_difference(run.frames, self.single(ref), self.suite.atol):
                    if self.suite.agent.realtime:  # N served sessions: when a reply lands is the server's timing
                        return SKIP, (f"realtime agent not sample-reproducible: slot {slot} ({what}) differs from a "
                                      f"one-at-a-time run ({self.suite.at(diff)}); a paced service need not match")
                    return FAIL, (f"slot {slot} ({what}) differs from the same input and seed stepped one at a time "
                                  f"({self.suite.at(diff)})")
        return PASS, f"every slot gave exactly the samples of a one-at-a-time run, in two layouts of {self.size} slots"

    def slot_isolation(self) -> tuple[str, str]:
        if self.size < 2:
            return SKIP, "batch_size 1: no other slot to leak from"
        if why := "" if "mixed" in self.runs else "not run: batch-frames failed":
            return SKIP, why
        s = self.suite.stim
        assert s is not None
        quiet = self.play([s.a] + [np.zeros_like(s.a)] * (self.size - 1))
        if diff := first_difference(quiet[0].frames, self.runs["mixed"][0].frames, self.suite.atol):
            return FAIL, (f"slot 0 heard the same input in two batches but its output changed with what the other "
                          f"slots heard ({self.suite.at(diff)})")
        return PASS, "slot 0's output did not change when the other slots heard speech instead of silence"

    def reset_slot(self) -> tuple[str, str]:
        if why := self.comparable("b") or ("" if "all_a" in self.runs else "not run: batch-equals-single failed"):
            return SKIP, why
        s = self.suite.stim
        assert s is not None
        n, j = self.agent.frame_size, self.size - 1
        k = len(s.a) // n // 2
        inputs = [s.a] * self.size
        inputs[j] = np.concatenate([s.a[:k * n], s.b[:len(s.a) - k * n]])
        runs = self.play(inputs, reset_at=(k, j))
        for slot in range(self.size - 1):
            if diff := first_difference(runs[slot].frames, self.runs["all_a"][slot].frames, self.suite.atol):
                return FAIL, f"reset_slot({j}) changed slot {slot}'s output ({self.suite.at(diff)})"
        if diff := first_difference(runs[j].frames[k:], self.single("b")[:len(runs[j].frames) - k], self.suite.atol):
            return FAIL, (f"after reset_slot({j}) at frame {k}, slot {j} did not behave like a fresh episode of the "
                          f"same input ({self.suite.at(diff)} after the reset)")
        return PASS, f"reset_slot({j}) mid-run gave slot {j} fresh state and left the other slots' samples unchanged"

    def forced_mask(self) -> tuple[str, str]:
        if "teacher_forcing" not in self.agent.capabilities:
            return SKIP, "teacher_forcing not declared"
        if why := self.comparable() or ("" if "all_a" in self.runs else "not run: batch-equals-single failed"):
            return SKIP, why
        s = self.suite.stim
        assert s is not None
        mask = np.array([i % 2 == 1 for i in range(self.size)])
        runs = self.play([s.a] * self.size, forced=np.stack([s.forced] * self.size), mask=mask)
        for slot in np.flatnonzero(~mask):
            if diff := first_difference(runs[slot].frames, self.runs["all_a"][slot].frames, self.suite.atol):
                return FAIL, (f"slot {slot} was masked off from forcing but its output changed "
                              f"({self.suite.at(diff)})")
        return PASS, f"forced audio reached only the masked-in slots ({int(mask.sum())} of {self.size})"


def batch_checks(suite: Suite) -> None:
    checks = BatchChecks(suite)
    for name, fn in [("batch-frames", checks.frames), ("batch-equals-single", checks.equals_single),
                     ("batch-slot-isolation", checks.slot_isolation), ("batch-reset-slot", checks.reset_slot),
                     ("batch-forced-mask", checks.forced_mask)]:
        suite.check(name, fn)
