"""DSB-IFEval end to end on the real mini set (docs/benchmarks/ifeval.md): build -> plan -> episodes -> score.

`oracle` performs every expected action at the right time, so it must score IAS >= 0.95 on every action; `silent`
passes LISTEN and NO_BACKCHANNEL and fails TAKE_TURN, INTERRUPT, READBACK and BACKCHANNEL; `cascade` runs every
case without a failed episode (its ASR memo makes a conversation's other levels cheap). The pieces are taken from
the IFEval Benchmark entry (build, protocol, plan, score) and driven the way `eval.run` drives a registered
benchmark (rows -> plan -> `run_episode`); `eval.run`'s own dispatch to IFEval is covered by the registry test
(tests/test_benchmark_registry.py) once IFEval is registered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters.registry import load_adapter
from dataset_builder.audio import read_wav, seconds_to_samples
from dataset_builder.benchmarks import IFEVAL
from dataset_builder.ifeval.rows import iter_items, list_items
from dataset_builder.ifeval.schema import ACTIONS
from eval.orchestrator import RunOptions, run_episode

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "tts"
EDGE = 13  # samples: a clip position rounded to whole ms is within 12 samples of the true one at 24 kHz
# The cascade does ASR and TTS inside one step; on a busy shared 2-core machine one such step has taken over 30 s
# (the run default that flags a hung agent). A stall here would be the machine, not the agent under test.
OPTIONS = RunOptions(step_timeout_s=300.0)


@pytest.fixture(scope="module")
def ifeval_mini(mini_sets) -> Path:
    return mini_sets["ifeval"]


def run_agent(dataset: Path, agent_name: str, out: Path) -> dict[str, int]:
    """Every case of the `ifeval` config through the entry's plan and the one episode runner."""
    agent = load_adapter(agent_name, **({} if agent_name == "silent" else {"cache_dir": str(CACHE)}))
    protocol, plan = IFEVAL.protocol_class()(), IFEVAL.function("plan")
    counts = {"cases": len(list_items(dataset, "ifeval")), "ok": 0, "failed": 0}
    try:
        for item, audio in iter_items(dataset, "ifeval"):
            ep = run_episode(agent, item, plan(item, audio, protocol, agent.sample_rate), out, options=OPTIONS)
            counts[ep.status] += 1
    finally:
        agent.close()
    return counts


@pytest.fixture(scope="module")
def runs(ifeval_mini: Path, tmp_path_factory) -> dict[str, tuple[Path, dict[str, int], dict[str, Any]]]:
    out = {}
    for agent in ("silent", "oracle", "cascade"):
        folder = tmp_path_factory.mktemp(agent)
        counts = run_agent(ifeval_mini, agent, folder)
        out[agent] = (folder, counts, IFEVAL.function("score")(folder))
    return out


def by_action(result: dict[str, Any]) -> dict[str, float | None]:
    return {a: e["value"] for a, e in result["by_action"].items() if e["n"]}


def test_oracle_performs_every_action(runs) -> None:
    _, counts, result = runs["oracle"]
    assert counts["failed"] == 0 and counts["ok"] == counts["cases"] == 83, counts
    assert result["n_failed"] == 0
    scores = by_action(result)
    assert set(scores) == set(ACTIONS), "the mini set scores every action"
    assert all(v is not None and v >= 0.95 for v in scores.values()), scores
    readbacks = [json.loads(line)["readback"] for line in (runs["oracle"][0] / "measurements.jsonl").open()
                 if json.loads(line)["expected_action"] == "READBACK"]
    assert readbacks and all(r["source"] == "model_text" for r in readbacks)  # App. E.5: its own text, no ASR


def test_silent_passes_the_silences_and_fails_the_acts(runs) -> None:
    _, counts, result = runs["silent"]
    assert counts["failed"] == 0 and result["n_failed"] == 0
    scores = by_action(result)
    assert scores["LISTEN"] == 1.0 and scores["NO_BACKCHANNEL"] == 1.0, scores
    for action in ("TAKE_TURN", "INTERRUPT", "READBACK", "BACKCHANNEL", "CONTINUE"):  # continuing needs speech
        assert scores[action] == 0.0, (action, scores)


def test_cascade_runs_every_case_without_failures(runs) -> None:
    folder, counts, result = runs["cascade"]
    assert counts["failed"] == 0 and counts["ok"] == counts["cases"] == 83, counts
    assert result["n_failed"] == 0 and result["n_episodes"] == 83
    # It ignores the prompt's text (persona-blind): every level of a conversation is the same episode.
    l0, l3 = read_wav(folder / "R6-C2-i1-L0.wav")[0], read_wav(folder / "R6-C2-i1-L3.wav")[0]
    assert np.array_equal(l0, l3) and np.abs(l3[:, 1]).max() > 0.05


def test_reference_agents_are_recorded_persona_blind(runs) -> None:
    """None of them reads the system prompt, and every episode says so through the adapter's capabilities."""
    for agent, (folder, _, _) in runs.items():
        recs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.rec.json"))]
        assert recs and all("system_prompt" not in r["adapter"]["capabilities"] for r in recs), agent


def shift_of(user: np.ndarray, clip: np.ndarray, at: int, max_shift: int = 24) -> int | None:
    """How many samples from `at` the clip lies in `user` (within one PCM16 step, its first and last EDGE samples
    aside), or None when it is not there. The rows give clip positions in whole ms, so a cut may gain or lose up to
    12 samples at an edge and a clip may land up to one ms from its nominal place; a clip played from the wrong
    place or cut elsewhere differs by far more wherever the user speaks. (Writing scales by 32767 and reading by
    1/32768, dataset_builder.audio, hence the one step.)"""
    core = clip[EDGE:len(clip) - EDGE]
    for shift in sorted(range(-max_shift, max_shift + 1), key=abs):
        a = at + shift + EDGE
        if a >= 0 and a + len(core) <= len(user) and np.abs(user[a:a + len(core)] - core).max() <= 1.5 / 32768:
            return shift
    return None


def test_a_silent_model_hears_the_dataset_audio(runs, ifeval_mini: Path) -> None:
    """Take-turn cases: with nobody answering, the user hears the row's nominal audio (t1, 3.0 s, t2, 5.0 s), so
    the rows' clip positions and the plan's gap and tail agree (to the ms the rows round them to)."""
    folder = runs["silent"][0]
    checked = 0
    for item, audio in iter_items(ifeval_mini, "ifeval"):
        if item.timed.conversation.turn2.mode != "take_turn" or item.case.level != "L2":
            continue
        user = read_wav(folder / f"{item.case_id}.wav")[0][:, 0]
        for tid, (a, b) in item.clips.items():
            clip = audio[seconds_to_samples(a):seconds_to_samples(b)]
            assert shift_of(user, clip, seconds_to_samples(a)) is not None, (item.case_id, tid)
        tail = seconds_to_samples(item.clips["t2"][1] + 0.001)
        assert not user[tail:].any() and abs(len(user) - len(audio)) <= 24 + 1920, item.case_id
        t2 = next(e for e in json.loads((folder / f"{item.case_id}.rec.json").read_text())["timeline"]
                  if e["turn_id"] == "t2")
        assert t2["start_s"] == pytest.approx(item.clips["t2"][0], abs=1.001e-3), item.case_id
        checked += 1
    assert checked == 13  # the mini set's take-turn conversations (16 scripts less 3 benign twins), at L2
