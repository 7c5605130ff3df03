"""Live feasibility (docs/scale.md): step times recorded per episode, merged exactly per run, and the verdict in
`score`.

Known values first (a hand-made list of step times), then the merge: however a run's steps are split into
episodes, the merged record is the same, its quantiles lie in the bin of the pooled nearest-rank quantile, and the
"could not have held a live call" verdict is exactly "p99 over the frame duration, or a step over a second" (a
stall p99 hides). Then a real run scored by the CLI: the LIVE line and the scores' `feasibility` block; and a
rec.json written before steps were timed still loads.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from dataset_builder.episode import Episode
from eval.run import RunConfig, run
from metrics.feasibility import (
    STALL_MS,
    SessionPace,
    bin_of,
    feasibility_lines,
    merge_records,
    merge_sessions,
    nearest_rank,
    run_feasibility,
    step_time_record,
)

FRAME_S = 0.08


def episode(step_s: list[float], *, batch: int = 1, frame_s: float = FRAME_S, status: str = "ok") -> Episode:
    return Episode(case_id="c", benchmark="mpe", condition="", pair_id="", status=status, adapter={}, params={},
                   seed=0, timeline=[], duration_s=0.0, gold={},
                   compute=step_time_record(step_s, batch, frame_s))


def test_an_episode_record_has_the_exact_numbers() -> None:
    steps = [0.010] * 97 + [0.020, 0.050, 0.200]
    rec = step_time_record(steps, 1, FRAME_S)
    assert rec is not None
    assert (rec["steps"], rec["batch_size"], rec["frame_ms"]) == (100, 1, 80.0)
    assert rec["p50_ms"] == 10.0 and rec["p99_ms"] == 50.0 and rec["max_ms"] == 200.0  # nearest rank: 50th, 99th
    assert rec["mean_ms"] == pytest.approx(12.4) and rec["total_ms"] == pytest.approx(1240.0)
    assert rec["over_frame"] == 1
    assert sum(c for _, c in rec["hist"]) == 100 and [k for k, _ in rec["hist"]] == sorted(
        {bin_of(x * 1000) for x in steps})
    assert step_time_record([], 1, FRAME_S) is None  # never stepped: no record


def test_live_verdict_is_p99_against_the_frame() -> None:
    one_late = run_feasibility([episode([0.010] * 99 + [0.100])])  # 1 of 100 late: p99 is 10 ms
    two_late = run_feasibility([episode([0.010] * 98 + [0.100] * 2)])  # 2 of 100: p99 is 100 ms
    assert one_late is not None and two_late is not None
    assert one_late["live"] is True and two_late["live"] is False
    (g,) = two_late["groups"]
    assert g["over_frame"] == 2 and g["rtf_p99"] == pytest.approx(100 / 80, rel=0.03)
    lines = feasibility_lines(two_late)
    assert len(lines) == 1 and "could NOT have held a live call on this hardware" in lines[0]
    assert "2/100 steps late" in lines[0] and "per 80 ms frame" in lines[0] and "one call" in lines[0]
    assert "could have held a live call" in feasibility_lines(one_late)[0]


def test_a_stall_over_a_second_rules_a_live_call_out_whatever_p99_says() -> None:
    """p99 hides one long step; a caller hears it. The cascade's case: p99 well inside the 80 ms frame, one step of
    9.44 s in one of its episodes: a stall, named with its episode, and NOT live. A longer step under a second is
    named with the playback buffer that would absorb it, and the call could still have been held."""
    assert STALL_MS == 1000.0
    calm = episode([0.001] * 500)
    stalled = episode([0.001] * 499 + [9.44])
    stalled.case_id = "en-chat-d000-e01-user"
    feas = run_feasibility([calm, stalled])
    assert feas is not None and feas["live"] is False
    (g,) = feas["groups"]
    assert g["p99_live"] is True and g["stalled_episodes"] == 1 and g["longest_case"] == "en-chat-d000-e01-user"
    (line,) = feasibility_lines(feas)
    assert "max 9.44e+03 ms per 80 ms frame" in line and "could have held" not in line
    assert line.endswith(": a stall of 9.44 s (its longest step, in en-chat-d000-e01-user; 1/2 episodes had a step "
                         "over 1 s, a gap the caller hears): could NOT have held a live call on this hardware")
    both = run_feasibility([episode([0.1] * 98 + [0.001, 2.0])])
    assert both is not None and feasibility_lines(both)[0].endswith(
        ": p99 over the frame duration (99/100 steps late) and a stall of 2 s (its longest step, in c; 1/1 episodes "
        "had a step over 1 s, a gap the caller hears): could NOT have held a live call on this hardware")
    at_limit = run_feasibility([episode([0.001] * 499 + [STALL_MS / 1000])])  # a second exactly: no stall
    assert at_limit is not None and at_limit["live"] is True
    assert feasibility_lines(at_limit)[0].endswith(": could have held a live call on this hardware, with 920 ms "
                                                   "of audio buffered (its longest step took 12.5 frames)")


def test_run_level_merge_does_not_depend_on_how_steps_fall_into_episodes() -> None:
    rng = random.Random(7)
    for trial in range(40):
        pooled = [math.exp(rng.gauss(math.log(0.02), 1.2)) for _ in range(rng.randint(50, 400))]
        cuts = sorted(rng.sample(range(1, len(pooled)), rng.randint(1, 6)))
        parts = [pooled[a:b] for a, b in zip([0, *cuts], [*cuts, len(pooled)], strict=True)]
        merged = merge_records(step_time_record(p, 4, FRAME_S) for p in parts)
        whole = merge_records([step_time_record(pooled, 4, FRAME_S)])
        assert merged is not None and whole is not None
        assert {k: merged[k] for k in ("steps", "p50_ms", "p99_ms", "max_ms", "over_frame")} == {
            k: whole[k] for k in ("steps", "p50_ms", "p99_ms", "max_ms", "over_frame")}, trial
        ms = sorted(x * 1000 for x in pooled)
        for key, q in (("p50_ms", 0.5), ("p99_ms", 0.99)):
            assert bin_of(merged[key]) == bin_of(nearest_rank(ms, q)), (trial, key)  # within the quantile's bin
        feas = run_feasibility(episode(p, batch=4) for p in parts)
        assert feas is not None, trial
        assert feas["groups"][0]["p99_live"] == (nearest_rank(ms, 0.99) <= FRAME_S * 1000), trial
        assert feas["live"] == (nearest_rank(ms, 0.99) <= FRAME_S * 1000 and ms[-1] <= STALL_MS), trial


def test_batch_sizes_and_frame_durations_are_reported_apart() -> None:
    feas = run_feasibility([episode([0.01] * 10), episode([0.03] * 10, batch=16),
                            episode([0.03] * 10, frame_s=0.02), episode([], status="failed")])
    assert feas is not None
    assert [(g["frame_ms"], g["batch_size"], g["steps"], g["live"]) for g in feas["groups"]] == [
        (20.0, 1, 10, False), (80.0, 1, 10, True), (80.0, 16, 10, True)]
    assert feas["live"] is False  # one group could not keep up
    assert feas["untimed_episodes"] == 0  # a failed episode that never stepped is not "untimed"
    assert any("16 calls at once" in line for line in feasibility_lines(feas))


def paced(starved: int, frames: int = 100) -> SessionPace:
    """A served session as its client saw it: two streams at 24 kHz, 20 ms frames, known arrival times."""
    pace = SessionPace(24_000, 480)
    pace.arrived("r1", 2400, 2400, t=10.0)  # a stream's first piece starts its clock: not timed
    pace.arrived("r1", 2400, 4800, t=10.05)  # 100 ms of audio 50 ms later: 50 ms ahead of playback
    pace.arrived("r1", 2400, 2400, t=10.30)  # due at 10.20 (200 ms played from 10.0): 100 ms late
    pace.arrived("r2", 4800, 4800, t=20.0)
    pace.arrived("r2", 2400, 2400, t=20.1)  # due at 20.2: early
    for k in range(frames):
        pace.step(starved=k < starved)
    return pace


def test_a_served_session_record_has_the_exact_numbers() -> None:
    rec = paced(starved=1).record()
    assert rec == {"frames": 100, "underruns": 1, "frame_ms": 20.0, "chunks": 3, "audio_ms": 300.0,
                   "wall_ms": 400.0, "rtf": 1.333333, "late_max_ms": 100.0, "max_queued_ms": 200.0,
                   "gap_max_ms": 20.0, "live": True}
    assert paced(starved=2).record()["live"] is False  # 2 of 100 due steps starved: more than 1 %
    # 60 due steps starved in a row among 10,000 (0.6 %, within the share): a 1.2 s gap, a stall, not live
    stall = paced(starved=60, frames=10_000).record()
    assert stall["underruns"] == 60 and stall["gap_max_ms"] == 1200.0 and stall["live"] is False
    scattered = SessionPace(24_000, 480)
    for k in range(10_000):
        scattered.step(starved=k % 200 == 0)  # 50 single starved steps: 20 ms gaps
    assert scattered.record()["gap_max_ms"] == 20.0 and scattered.record()["live"] is True
    assert SessionPace(24_000, 480).record()["rtf"] is None  # nothing timed


def test_a_run_adds_up_its_sessions_and_the_verdict_is_theirs() -> None:
    def served(starved: int) -> Episode:
        ep = episode([0.001] * 100)
        assert ep.compute is not None
        ep.compute = {**ep.compute, "session": paced(starved).record()}
        return ep

    feas = run_feasibility([served(0), served(2), episode([0.001] * 100)])
    assert feas is not None and feas["live"] is False
    assert feas["sessions"] == {"episodes": 2, "frames": 200, "underruns": 2, "behind": 1, "rtf": 1.333333,
                                "rtf_max": 1.333333, "late_max_ms": 100.0, "gap_max_ms": 40.0, "stalled": 0,
                                "live": False}
    assert merge_sessions([]) is None
    client, server = feasibility_lines(feas)
    assert client.startswith("client step time p50")  # the client's own steps: the model runs on the server
    assert server == ("served sessions: the server's audio arrived at real-time factor 1.33, worst episode 1.33 (wall "
                      "time per second of audio), at most 100 ms behind real time; playback starved in 2/200 due "
                      "frames, the longest gap 40 ms: 1 of 2 episodes' sessions fell behind real time: the server "
                      "could NOT have held every call live")
    kept_up = run_feasibility([served(0)])
    assert kept_up is not None and kept_up["live"] is True
    assert feasibility_lines(kept_up)[1].endswith("due frames, the longest gap 0 ms: the server kept up with every "
                                                  "session")
    stalled = episode([0.001] * 100)
    assert stalled.compute is not None
    stalled.compute = {**stalled.compute, "session": paced(starved=60, frames=10_000).record()}
    feas = run_feasibility([served(0), stalled])
    assert feas is not None and feas["live"] is False and feas["sessions"]["stalled"] == 1
    assert feasibility_lines(feas)[1].endswith(
        "the longest gap 1200 ms: 1 of 2 episodes' sessions fell behind real time (1 with a stall: playback starved "
        "for over 1 s at once): the server could NOT have held every call live")
    assert "sessions" not in (run_feasibility([episode([0.001] * 100)]) or {})  # in-process: as before


def test_a_rec_json_without_compute_still_loads(tmp_path: Path) -> None:
    data = episode([0.01] * 5).to_dict()
    del data["compute"]  # as written before steps were timed
    (tmp_path / "old.rec.json").write_text(json.dumps(data))
    ep = Episode.load(tmp_path / "old.rec.json")
    assert ep.compute is None
    assert run_feasibility([ep]) is None
    mixed = run_feasibility([ep, episode([0.01] * 5)])
    assert mixed is not None and mixed["untimed_episodes"] == 1
    assert "1 episode(s) without step times" in feasibility_lines(mixed)[-1]


def test_score_prints_step_times_against_the_frame(mini_dataset: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from eval.cli import main

    out = tmp_path / "silent"
    assert run(RunConfig(dataset=str(mini_dataset), adapter="silent", out=str(out), limit=2))["ok"] == 2
    recs = [Episode.load(p) for p in sorted(out.glob("*.rec.json"))]
    assert all(r.compute and r.compute["steps"] == round(r.duration_s / FRAME_S) for r in recs)
    assert main(["score", str(out)]) == 0
    printed = capsys.readouterr().out
    live = [line for line in printed.splitlines() if line.startswith("LIVE ")]
    assert len(live) == 1 and "per 80 ms frame" in live[0] and "2 episodes, one call" in live[0]
    feas = json.loads((out / "scores.json").read_text())["feasibility"]
    (g,) = feas["groups"]
    assert g["steps"] == sum(r.compute["steps"] for r in recs) and g["batch_size"] == 1
    assert isinstance(feas["live"], bool) and (" could NOT " in live[0]) == (not feas["live"])
