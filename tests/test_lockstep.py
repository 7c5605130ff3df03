"""Batched lockstep (docs/scale.md): B episodes in one batch-capable agent give the very episodes one-at-a-time runs
give.

Real mini cases of two benchmarks (Duplex-MPE and M3-DuplexBench's English chat config, built with the real TTS),
mixed in one job list so neighbouring slots play different plans; a batch-capable agent with a tiny random recurrent
net (tests/lockstep_agent.py) whose replies depend on what its slot hears; the real scheduler and Silero VAD per
slot. Each case's wav must be byte-identical and its rec.json identical apart from the timing fields (`wall_s`,
`compute`) to `run_episode` run on the same cases one at a time, at B = 1, 3 and 4 with more cases than slots, so
slots are refilled. Also: a slot whose frame is NaN or half a frame fails alone; M3 Full's forced context reaches
only its own slot; a case the agent lacks a capability for is recorded as skipped without entering a slot; a stall
fails the episodes in flight and a fresh agent runs the rest; `eval.run` takes the lockstep path for an adapter
declaring batch_size > 1 and resumes like the one-at-a-time path.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataset_builder.audio import read_wav, to_pcm16
from dataset_builder.benchmarks import get_benchmark
from dataset_builder.episode import Episode
from eval.lockstep import LockstepRunner, is_batched
from eval.orchestrator import STALL_PREFIX, RunOptions, run_episode
from eval.run import RunConfig, run
from tests.lockstep_agent import TinyBatchAgent

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "tts"
M3_CONFIG = "m3_chat_en"
N_MPE, N_M3 = 3, 6  # 9 cases: more than any batch size below, so slots are refilled
TIMING = ("wall_s", "compute")

Jobs = list[tuple[Any, Any]]


@pytest.fixture(scope="module")
def m3_mini(mini_sets) -> Path:
    """The session's M3 mini set (its M3_CONFIG rows are those of a build of that config alone)."""
    return mini_sets["m3"]


@pytest.fixture(scope="module")
def cases(mini_dataset: Path, m3_mini: Path) -> list[tuple[str, Any, np.ndarray]]:
    """(benchmark, case, audio): the first MPE cases and the first M3 cases (None, User and Full conditions)."""
    out = []
    for bench, folder, config, k in (("mpe", mini_dataset, "mpe", N_MPE), ("m3", m3_mini, M3_CONFIG, N_M3)):
        items = list(get_benchmark(bench).function("case_audio")(folder, config))[:k]
        out += [(bench, case, audio) for case, audio in items]
    assert {c.condition for b, c, _ in out if b == "m3"} >= {"none", "user", "full"}
    return out


def jobs_for(agent: Any, cases: list[tuple[str, Any, np.ndarray]]) -> Jobs:
    jobs = []
    for bench, case, audio in cases:
        b = get_benchmark(bench)
        jobs.append((case, b.function("plan")(case, audio, b.protocol_class()().for_agent(agent), agent.sample_rate)))
    return jobs


def one_at_a_time(agent: Any, jobs: Jobs, out: Path) -> dict[str, Episode]:
    out.mkdir(parents=True, exist_ok=True)
    return {case.case_id: run_episode(agent, case, plan, out) for case, plan in jobs}


def lockstep(agent: Any, jobs: Jobs, out: Path, **kw: Any) -> dict[str, Episode]:
    out.mkdir(parents=True, exist_ok=True)
    eps = list(LockstepRunner(agent, out, **kw).run(jobs))
    assert len(eps) == len(jobs) and len({e.case_id for e in eps}) == len(eps), "each case written exactly once"
    return {e.case_id: e for e in eps}


def record(out: Path, case_id: str, *, run_options: bool = True) -> dict[str, Any]:
    rec = json.loads((out / f"{case_id}.rec.json").read_text())
    if not run_options:
        del rec["params"]["run"]
    return {k: v for k, v in rec.items() if k not in TIMING}


def assert_same_episodes(a: Path, b: Path, case_ids: list[str], *, run_options: bool = True) -> None:
    """Byte-identical recordings and equal rec.json apart from timing (and, unless `run_options`, the recorded
    RunOptions, for runs made with another step timeout)."""
    for cid in case_ids:
        assert (a / f"{cid}.wav").read_bytes() == (b / f"{cid}.wav").read_bytes(), f"{cid}: recordings differ"
        assert record(a, cid, run_options=run_options) == record(b, cid, run_options=run_options), cid


@pytest.fixture(scope="module")
def reference(cases, tmp_path_factory) -> tuple[Path, dict[str, Episode]]:
    """Every case one at a time through `run_episode`, the agent a batch of one."""
    out = tmp_path_factory.mktemp("one-at-a-time")
    agent = TinyBatchAgent(batch_size=1)
    return out, one_at_a_time(agent, jobs_for(agent, cases), out)


def test_the_reference_agent_replies_and_depends_on_what_it_hears_and_its_seed(reference, cases,
                                                                               tmp_path: Path) -> None:
    """Otherwise a swapped slot, or one not reset, could go unnoticed."""
    out, eps = reference
    assert all(e.status == "ok" for e in eps.values()), {k: e.failure for k, e in eps.items()}
    assert all(e.model_text for e in eps.values()), "the agent replies in every case"
    for cid in eps:
        stereo, _ = read_wav(out / f"{cid}.wav")
        assert np.abs(stereo[:, 1]).max() > 0.05
    mpe = [tuple(t for t, _ in e.model_text) for cid, e in eps.items() if cid.startswith("mpe-")]
    assert len(set(mpe)) == len(mpe), "different conversations, different reply times"
    agent = TinyBatchAgent(batch_size=1)
    case, plan = jobs_for(agent, cases[:1])[0]
    other = run_episode(agent, case, plan, tmp_path, seed=1)
    assert other.status == "ok" and other.model_text != eps[case.case_id].model_text


@pytest.mark.parametrize("batch", [1, 3, 4])
def test_batched_equals_one_at_a_time(batch: int, reference, cases, tmp_path: Path) -> None:
    ref_out, ref = reference
    agent = TinyBatchAgent(batch_size=batch)
    assert is_batched(agent) == (batch > 1)
    eps = lockstep(agent, jobs_for(agent, cases), tmp_path)
    assert agent.resets == len(cases)  # every case entered a slot once: refilled as episodes ended
    assert_same_episodes(ref_out, tmp_path, list(ref))
    for cid, ep in eps.items():
        assert ep.compute is not None and ep.compute["batch_size"] == batch
        assert ep.compute["steps"] == ref[cid].compute["steps"]  # one timed step per frame
        assert Episode.load(tmp_path / f"{cid}.rec.json") == ep


def test_forced_context_reaches_only_its_own_slot(reference, cases, tmp_path: Path) -> None:
    """M3 Full: its slot returns the forced model audio while it lasts; the User twin, next to it, is not forced."""
    ref_out, _ = reference
    agent = TinyBatchAgent(batch_size=4)
    jobs = jobs_for(agent, cases)
    lockstep(agent, jobs, tmp_path)
    full = [(c, p) for c, p in jobs if getattr(c, "condition", "") == "full"]
    # a Full case whose model had not yet spoken is forced silence, which an unforced slot may give too
    assert [p for _, p in full if np.abs(p.forced).max() > 0.01], "no Full case with model speech in its context"
    for case, plan in full:
        raw = np.round(read_wav(tmp_path / f"{case.case_id}.wav")[0] * 32768).astype(np.int16)
        np.testing.assert_array_equal(raw[:len(plan.forced), 1], to_pcm16(plan.forced))
        twin = case.case_id.removesuffix("-full") + "-user"
        user_raw = np.round(read_wav(tmp_path / f"{twin}.wav")[0] * 32768).astype(np.int16)
        if np.abs(plan.forced).max() > 0.01:
            assert not np.array_equal(user_raw[:len(plan.forced), 1], raw[:len(plan.forced), 1])


@pytest.mark.parametrize("mode", ["nan", "shape"])
def test_a_bad_frame_fails_its_own_episode_only(mode: str, cases, tmp_path: Path) -> None:
    make: Callable[[int], TinyBatchAgent] = lambda b: TinyBatchAgent(b, fail_mode=mode, fail_episode=1,  # noqa: E731
                                                                     fail_frame=40)
    seq = make(1)
    ref = one_at_a_time(seq, jobs_for(seq, cases), tmp_path / "one")
    agent = make(4)
    eps = lockstep(agent, jobs_for(agent, cases), tmp_path / "four")
    bad = cases[1][1].case_id
    assert ref[bad].status == eps[bad].status == "failed"
    expected = "non-finite samples" if mode == "nan" else "wrong frame shape (960,)"
    assert expected in (eps[bad].failure or "") and "t=3.200s" in (eps[bad].failure or "")
    assert all(e.status == "ok" for cid, e in eps.items() if cid != bad)
    assert_same_episodes(tmp_path / "one", tmp_path / "four", list(ref))


class NoForcing(TinyBatchAgent):
    capabilities = frozenset({"text_output"})


def test_cases_the_agent_cannot_run_are_skipped_without_a_slot(reference, cases, tmp_path: Path) -> None:
    ref_out, ref = reference
    seq = NoForcing(1)
    one_at_a_time(seq, jobs_for(seq, cases), tmp_path / "one")
    agent = NoForcing(3)
    eps = lockstep(agent, jobs_for(agent, cases), tmp_path / "three")
    skipped = [cid for cid, e in eps.items() if e.status == "skipped"]
    assert skipped and all(cid.endswith("-full") for cid in skipped)
    assert agent.resets == len(cases) - len(skipped)  # never entered a slot
    assert all("lacks teacher_forcing" in (eps[cid].failure or "") for cid in skipped)
    assert_same_episodes(tmp_path / "one", tmp_path / "three", list(ref))


def test_a_stall_fails_the_episodes_in_flight_and_a_fresh_agent_runs_the_rest(reference, cases,
                                                                              tmp_path: Path) -> None:
    ref_out, ref = reference
    stalling = TinyBatchAgent(3, fail_mode="stall", fail_episode=1, fail_frame=10, stall_s=30.0)
    fresh: list[TinyBatchAgent] = []

    def reload() -> TinyBatchAgent:
        fresh.append(TinyBatchAgent(3))
        return fresh[-1]

    runner = LockstepRunner(stalling, tmp_path, options=RunOptions(step_timeout_s=2.0), reload=reload)
    eps = {e.case_id: e for e in runner.run(jobs_for(stalling, cases))}
    assert stalling.released.is_set(), "the stalled agent was closed"
    assert runner.agent is fresh[0] and len(fresh) == 1
    order = [c.case_id for _, c, _ in cases]
    stalled = order[:3]  # the three in flight
    for cid in stalled:
        assert eps[cid].status == "failed" and (eps[cid].failure or "").startswith(STALL_PREFIX), eps[cid].failure
    assert_same_episodes(ref_out, tmp_path, order[3:], run_options=False)
    assert all(eps[cid].params["run"]["step_timeout_s"] == 2.0 for cid in order)


def test_run_takes_the_lockstep_path_and_resumes(m3_mini: Path, tmp_path: Path) -> None:
    agent = "tests.lockstep_agent:TinyBatchAgent"
    one = RunConfig(dataset=str(m3_mini), config=M3_CONFIG, adapter=agent, out=str(tmp_path / "one"), limit=5)
    batched = RunConfig(dataset=str(m3_mini), config=M3_CONFIG, adapter=agent, out=str(tmp_path / "three"),
                        adapter_args={"batch_size": 3}, limit=5)
    counts = run(one)
    assert run(batched) == counts and counts["ok"] == 5
    ids = sorted(p.name.removesuffix(".rec.json") for p in (tmp_path / "one").glob("*.rec.json"))
    assert_same_episodes(tmp_path / "one", tmp_path / "three", ids)
    assert {Episode.load(tmp_path / "three" / f"{i}.rec.json").compute["batch_size"] for i in ids} == {3}
    # Resume: finished episodes are kept, the removed ones run again (in lockstep) and come out the same.
    copy = tmp_path / "resumed"
    shutil.copytree(tmp_path / "three", copy)
    for cid in ids[1:3]:
        (copy / f"{cid}.rec.json").unlink()
    kept = (copy / f"{ids[0]}.rec.json").stat().st_mtime_ns
    again = run(RunConfig(**{**batched.__dict__, "out": str(copy)}))
    assert again["skipped_done"] == 3 and again["ok"] == 2
    assert (copy / f"{ids[0]}.rec.json").stat().st_mtime_ns == kept
    assert_same_episodes(tmp_path / "one", copy, ids)


def moshi_agent(batch: int) -> Any:
    """The Moshi adapter's tiny random model, when the adapter and its `moshi` extra are here."""
    pytest.importorskip("moshi", reason="the moshi extra is not installed")
    try:
        from adapters.moshi import MoshiAgent
    except ImportError as err:
        pytest.skip(f"adapters/moshi.py not available ({err})")
    return MoshiAgent(tiny=True, batch_size=batch)


def test_moshi_batched_equals_one_at_a_time(cases, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real batch-capable adapter (tiny random Mimi + LM): at one batch size a slot gives the same samples in
    lockstep, refilled beside other cases, as one case at a time (slot 0, the others silent). Across batch sizes
    CPU matrix kernels round differently (adapters/moshi.py): B = 1 agrees with B = 3 to one PCM16 step.

    One intra-op thread: with two, torch splits the batch's rows between threads, and a slot's samples then
    depended on its position in the batch by one PCM16 step (measured here: slot 2 against slot 0)."""
    import torch

    monkeypatch.setenv("NO_TORCH_COMPILE", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        check_moshi(cases, tmp_path)
    finally:
        torch.set_num_threads(threads)


def check_moshi(cases: list[tuple[str, Any, np.ndarray]], tmp_path: Path) -> None:
    m3 = [c for c in cases if c[0] == "m3"][:4]  # 4 cases in 3 slots: one refill
    seq3, lock3, seq1 = (moshi_agent(b) for b in (3, 3, 1))
    one_at_a_time(seq3, jobs_for(seq3, m3), tmp_path / "one-b3")
    eps = lockstep(lock3, jobs_for(lock3, m3), tmp_path / "lockstep-b3")
    ids = [c.case_id for _, c, _ in m3]
    assert all(eps[i].status == "ok" for i in ids), {i: eps[i].failure for i in ids}
    assert_same_episodes(tmp_path / "one-b3", tmp_path / "lockstep-b3", ids)
    one_at_a_time(seq1, jobs_for(seq1, m3[:2]), tmp_path / "one-b1")
    for cid in ids[:2]:
        a, _ = read_wav(tmp_path / "one-b1" / f"{cid}.wav")
        b, _ = read_wav(tmp_path / "lockstep-b3" / f"{cid}.wav")
        assert a.shape == b.shape and np.abs(a - b).max() <= 1 / 32768, cid
        assert record(tmp_path / "one-b1", cid) == record(tmp_path / "lockstep-b3", cid)
