"""eval.run over the real mini dataset: resume after a crash, refusal of a foreign run folder, failed episodes
kept as data, each agent closed once (a stalled one replaced, the one in use on Ctrl-C), and the two-process
`accelerate launch` path.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import eval.run as run_mod
from dataset_builder.errors import UsageError
from eval.run import RunConfig, run

ROOT = Path(__file__).resolve().parent.parent
BROKEN = "tests.fake_agents:BrokenAgent"


def episode_ids(out: Path) -> tuple[list[str], list[str]]:
    recs = sorted(p.name.removesuffix(".rec.json") for p in out.glob("*.rec.json"))
    wavs = sorted(p.name.removesuffix(".wav") for p in out.glob("*.wav"))
    return recs, wavs


def mtimes(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in out.iterdir()}


@pytest.fixture(scope="module")
def silent_run(mini_dataset: Path, tmp_path_factory) -> tuple[Path, dict[str, int]]:
    out = tmp_path_factory.mktemp("silent-run")
    counts = run(RunConfig(dataset=str(mini_dataset), adapter="silent", out=str(out), limit=4))
    return out, counts


def test_first_run_writes_each_episode_once(silent_run) -> None:
    out, counts = silent_run
    assert counts == {"cases": 4, "skipped_done": 0, "ok": 4, "failed": 0, "failed_kept": 0}
    recs, wavs = episode_ids(out)
    assert len(recs) == 4 and recs == wavs
    assert (out / "run.json").exists()
    for case_id in recs:
        rec = json.loads((out / f"{case_id}.rec.json").read_text())
        assert rec["status"] == "ok" and rec["adapter"]["name"] == "silent" and rec["case_id"] == case_id


def test_resume_reruns_only_the_missing_episode(silent_run, mini_dataset: Path, tmp_path: Path) -> None:
    src, _ = silent_run
    out = tmp_path / "run"
    shutil.copytree(src, out)  # run.json identity does not depend on the folder, so the copy resumes
    recs, _ = episode_ids(out)
    victim = recs[2]
    # A crash after the WAV was written but before rec.json (written last) marked the episode complete.
    (out / f"{victim}.rec.json").unlink()
    before = mtimes(out)
    counts = run(RunConfig(dataset=str(mini_dataset), adapter="silent", out=str(out), limit=4))
    assert counts == {"cases": 4, "skipped_done": 3, "ok": 1, "failed": 0, "failed_kept": 0}
    recs2, wavs2 = episode_ids(out)
    assert recs2 == recs and wavs2 == recs  # no duplicate, none lost
    after = mtimes(out)
    untouched = {name for name in before if not name.startswith(victim)}
    assert {n: after[n] for n in untouched} == {n: before[n] for n in untouched}
    assert json.loads((out / f"{victim}.rec.json").read_text())["status"] == "ok"
    # A further rerun has nothing to do.
    again = run(RunConfig(dataset=str(mini_dataset), adapter="silent", out=str(out), limit=4))
    assert again == {"cases": 4, "skipped_done": 4, "ok": 0, "failed": 0, "failed_kept": 0}


def test_a_different_run_into_the_same_folder_is_refused(silent_run, mini_dataset: Path) -> None:
    out, _ = silent_run
    before = mtimes(out)
    with pytest.raises(UsageError, match="different run"):
        run(RunConfig(dataset=str(mini_dataset), adapter="oracle", out=str(out), limit=4))
    with pytest.raises(UsageError, match="different run"):
        run(RunConfig(dataset=str(mini_dataset), adapter="silent", out=str(out), limit=4, seed=1))
    assert mtimes(out) == before


class _NoASR:
    """Silent and failed episodes have no model speech, so nothing may need transcribing."""

    name = "none"

    def transcribe(self, audio: Any, sr: int) -> str:
        raise AssertionError("no model speech was expected")


def test_failed_episodes_are_kept_retried_on_request_and_count_against_the_model(
        silent_run, mini_dataset: Path, tmp_path: Path) -> None:
    """A failure is a result. It is kept on a rerun, re-run with --retry-failed, makes `run` exit
    non-zero, and counts as a failure in every window the episode would have entered."""
    from metrics.mpe.score import score_run

    out = tmp_path / "broken"
    cfg = RunConfig(dataset=str(mini_dataset), adapter=BROKEN, adapter_args={"mode": "raise"}, out=str(out),
                    limit=2)
    counts = run(cfg)
    assert counts == {"cases": 2, "skipped_done": 0, "ok": 0, "failed": 2, "failed_kept": 0}
    assert run_mod.outcome(counts)[0] == 1
    recs, wavs = episode_ids(out)
    assert len(recs) == 2 and recs == wavs
    for case_id in recs:
        rec = json.loads((out / f"{case_id}.rec.json").read_text())
        assert rec["status"] == "failed" and "raised RuntimeError" in rec["failure"]
    # A rerun does not quietly retry them, and still says the run has failures.
    before = mtimes(out)
    again = run(cfg)
    assert again == {"cases": 2, "skipped_done": 0, "ok": 0, "failed": 0, "failed_kept": 2}
    code, line = run_mod.outcome(again)
    assert code == 1 and "--retry-failed" in line
    assert mtimes(out) == before
    # Two ok (silent) episodes of other cases beside them: the failed ones count in every denominator.
    src, _ = silent_run
    ok_ids = [c for c in episode_ids(src)[0] if c not in recs][:2]
    assert len(ok_ids) == 2
    for case_id in ok_ids:
        for suffix in (".wav", ".rec.json"):
            shutil.copy(src / f"{case_id}{suffix}", out / f"{case_id}{suffix}")
    res = score_run(out, asr=_NoASR())
    assert res["n_episodes"] == 4 and res["n_failed"] == 2
    assert sorted(f["case_id"] for f in res["failed_episodes"]) == recs
    assert all(f["status"] == "failed" and "raised" in f["reason"] for f in res["failed_episodes"])
    scores = res["scores"]
    assert scores["fresh_onset_rate"]["n"] == 4 and scores["fresh_onset_rate"]["k"] == 0
    windows = {cid: json.loads((out / f"{cid}.rec.json").read_text())["gold"]["labels"] for cid in recs + ok_ids}
    silent_windows = {cid: sum(lab in ("N1", "N2", "N3") for lab in labels.values())
                      for cid, labels in windows.items()}
    sp = scores["silence_preservation"]
    assert sp["n"] == sum(silent_windows.values())
    assert sp["k"] == sum(silent_windows[c] for c in ok_ids)  # silent passes its own; failures pass none
    assert scores["answering_window_yield"]["k"] < scores["answering_window_yield"]["n"]
    # --retry-failed runs exactly the failed ones again (the agent still raises: two new failures, none kept).
    retry = run(RunConfig(**{**cfg.__dict__, "retry_failed": True}))
    assert retry["failed"] == 2 and retry["failed_kept"] == 0 and retry["skipped_done"] == 0


def _counting_closes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times each agent the run loads is closed, in the order they were loaded."""
    closes: list[int] = []
    load = run_mod.load_adapter

    def counted(name: str, **kwargs: Any) -> Any:
        agent, k = load(name, **kwargs), len(closes)
        closes.append(0)
        close = agent.close

        def close_once_counted() -> None:
            closes[k] += 1
            close()

        agent.close = close_once_counted
        return agent

    monkeypatch.setattr(run_mod, "load_adapter", counted)
    return closes


def test_each_agent_is_closed_once_a_stalled_one_replaced_and_on_ctrl_c(
        mini_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stalled agent is closed and a fresh one runs the next episode; the last one is closed at the end, and
    on Ctrl-C the one in use is closed before the run stops."""
    closes = _counting_closes(monkeypatch)
    cfg = RunConfig(dataset=str(mini_dataset), adapter=BROKEN, adapter_args={"mode": "stall", "stall_s": 5.0},
                    out=str(tmp_path / "stall"), limit=2, step_timeout_s=0.5)
    counts = run(cfg)
    assert counts["failed"] == 2
    assert closes == [1, 1, 1]  # two stalls, two replacements, the last closed at the end

    closes.clear()
    planned = run_mod.planned

    def ctrl_c_before_the_second(*args: Any) -> Iterator[Any]:
        for k, job in enumerate(planned(*args)):
            if k == 1:
                raise KeyboardInterrupt
            yield job

    monkeypatch.setattr(run_mod, "planned", ctrl_c_before_the_second)
    with pytest.raises(run_mod.Interrupted):
        run(RunConfig(**{**cfg.__dict__, "out": str(tmp_path / "ctrl-c")}))
    assert closes == [1, 1]  # the stalled one, then the one in use when Ctrl-C came


def test_ctrl_c_between_writing_an_episode_and_counting_it_still_reports_it_kept(
        mini_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The count an interruption reports is what is on disk for a rerun, even when Ctrl-C lands just after an
    episode's rec.json is written and before the run has counted it."""
    real = run_mod.run_jobs

    def ctrl_c_as_the_second_is_counted(agent: Any, jobs: Any, cfg: RunConfig, done: Any) -> None:
        def late(i: int, ep: Any) -> None:
            if i == 2:
                raise KeyboardInterrupt
            done(i, ep)

        real(agent, jobs, cfg, late)

    monkeypatch.setattr(run_mod, "run_jobs", ctrl_c_as_the_second_is_counted)
    out = tmp_path / "late"
    with pytest.raises(run_mod.Interrupted) as err:
        run(RunConfig(dataset=str(mini_dataset), adapter="silent", out=str(out), limit=4))
    assert err.value.kept == len(list(out.glob("*.rec.json"))) == 2
    assert "2 episodes kept" in str(err.value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_accelerate_two_processes_share_the_cases(mini_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "acc"
    accelerate = Path(sys.executable).parent / "accelerate"
    # What works here (accelerate 1.15, CPU only): `--cpu --num_processes 2` starts ONE process, so ask for
    # --multi_gpu with every config value on the command line (no config file needed); the runner then builds
    # PartialState(cpu=True) (gloo) because DUPLEX_EVAL_CPU=1. A free port avoids clashing with another run.
    cmd = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
           "eval/run.py", "--dataset", str(mini_dataset), "--adapter", "silent", "--out", str(out),
           "--limit", "6"]
    env = os.environ | {"DUPLEX_EVAL_CPU": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # One summary, the main process's, for both: the whole run's counts, not one line per process.
    summaries = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert summaries == [{"cases": 6, "skipped_done": 0, "ok": 6, "failed": 0, "failed_kept": 0, "processes": 2}]
    assert proc.stderr.count("6 episodes run, 0 already done, none failed") == 1
    # Both did work: the split is even ("[i/3]" in each process's log) and covers the 6 cases.
    done_lines = [line for line in proc.stderr.splitlines() if "duplex_eval.run [" in line]
    assert len(done_lines) == 6 and sum("/3] " in line for line in done_lines) == 6
    recs, wavs = episode_ids(out)
    assert len(recs) == 6 and recs == wavs
    case_ids = [line.split()[4] for line in done_lines]
    assert sorted(case_ids) == recs  # each case ran exactly once


class _FakeState:
    """One of several accelerate processes, splitting a list exactly as PartialState does."""

    def __init__(self, index: int, num: int) -> None:
        self.process_index, self.num_processes = index, num
        self.is_main_process = index == 0

    def wait_for_everyone(self) -> None:
        """Sequential stand-ins: the processes run one after another, so there is nothing to wait for."""

    @contextmanager
    def split_between_processes(self, inputs: list) -> Iterator[list]:
        per, extra = divmod(len(inputs), self.num_processes)
        start = self.process_index * per + min(self.process_index, extra)
        yield inputs[start:start + per + (1 if self.process_index < extra else 0)]


def test_split_does_not_depend_on_when_each_process_lists(mini_dataset: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes, the second one slower to start: it looks for finished episodes only after the first has
    run its whole share. Every case must still run exactly once (the split may not depend on that timing)."""
    out = tmp_path / "race"
    cfg = RunConfig(dataset=str(mini_dataset), adapter="silent", out=str(out), limit=6)
    shares = []
    for index in (0, 1):
        monkeypatch.setattr(run_mod, "_state", lambda index=index: _FakeState(index, 2))
        shares.append(run(cfg))
    recs, wavs = episode_ids(out)
    assert len(recs) == 6 and recs == wavs
    assert [(c["ok"], c["skipped_done"]) for c in shares] == [(3, 0), (3, 0)]
