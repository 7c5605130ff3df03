"""`vllm-omni-duplex` (and `openai-realtime` against vLLM-Omni) with the Realtime stand-in in vLLM-Omni's duplex mode.

tests/realtime_fake.py with `duplex=True` refuses a session without `?duplex=1`, owns turn-taking (no VAD events;
`response.speak` decisions; a barge-in is the model deciding to listen, clearing its output and cancelling the
response). Checked through the real plans, orchestrator and lockstep runner: the reply lands sample for sample
after the turn that caused it; the prompt and extra session fields reach `session.update` with turn detection off;
a barge-in stops the playback where the model cut it and truncates the item to what was heard; N concurrent
sessions run a benchmark's cases together, and a session that drops fails its own episode only while the run goes
on; each episode records its own session's live feasibility, so a session the stand-in serves slowly shows in its
episode and not in the other's; `openai-realtime` runs unchanged against vLLM-Omni's OpenAI-compatible endpoint
(no key, GA event names).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from adapters.openai_realtime import OpenAIRealtimeAgent
from adapters.registry import adapter_target
from adapters.vllm_omni_duplex import VllmOmniDuplexAgent
from dataset_builder.audio import SESSION_SR, to_pcm16
from dataset_builder.episode import Episode
from dataset_builder.errors import UsageError
from eval.lockstep import LockstepRunner
from eval.orchestrator import RunOptions, run_episode
from eval.plans.mpe import plan
from metrics.feasibility import feasibility_lines, run_feasibility
from tests.realtime_fake import Behaviour, FakeRealtimeServer
from tests.test_openai_realtime import ANSWER, FAST, LONG_ANSWER, N4_TURNS, PROMPT, T_TURNS, channels, play_span

MODEL = "openbmb/MiniCPM-o-4_5"
REF = {"ref_audio": "data:audio/wav;base64,AAAA"}


@pytest.fixture(scope="module")
def t_cases(piper):
    from tests.test_orchestrator import make_case

    return [make_case(piper, T_TURNS, f"vd-t{k}") for k in range(3)]


@pytest.fixture(scope="module")
def n4_case(piper):
    from tests.test_orchestrator import make_case

    return make_case(piper, N4_TURNS, "vd-n4")


def reply_lands(out: Path, case_id: str, reply: np.ndarray) -> int:
    """The reply is in the model channel exactly once, sample for sample, and nothing else is; returns its onset."""
    _, model = channels(out, case_id)
    expected = to_pcm16(reply)
    onset = int(np.flatnonzero(model)[0]) - int(np.flatnonzero(expected)[0])
    assert np.array_equal(model[onset:onset + expected.size], expected)
    assert not model[onset + expected.size:].any()
    return onset


def test_duplex_session_reply_prompt_and_decisions(t_cases, speak, tmp_path: Path) -> None:
    case, audio = t_cases[0]
    reply = speak(ANSWER)
    ep_plan = replace(plan(case, audio, FAST, SESSION_SR), system_prompt=PROMPT)
    t_start, t_end = play_span(ep_plan, "t01", SESSION_SR)
    with FakeRealtimeServer(Behaviour(reply=reply, transcript=ANSWER, duplex=True,
                                      respond_after_s=(t_start + t_end) / 2 / SESSION_SR)) as server:
        agent = VllmOmniDuplexAgent(url=server.url, model=MODEL, session_extra=REF)
        try:
            ep = run_episode(agent, case, ep_plan, tmp_path, options=RunOptions(step_timeout_s=10.0))
        finally:
            agent.close()
    assert ep.status == "ok", ep.failure
    (conn,) = server.connections
    onset = reply_lands(tmp_path, case.case_id, reply)
    # The reply may reach the client within the step whose user frame made the server answer, and so play from that
    # frame: one frame before the samples the server had heard.
    assert conn.reply_at[0] - agent.frame_size <= onset <= conn.reply_at[0] + 2 * SESSION_SR
    assert "".join(t for _, t in ep.model_text) == ANSWER
    assert conn.path == "/v1/realtime?model=openbmb%2FMiniCPM-o-4_5&duplex=1"
    assert "Authorization" not in conn.headers  # a local engine without a key
    session = conn.session_updates[0]["session"]
    assert session["instructions"] == PROMPT and session["audio"]["input"]["turn_detection"] is None
    assert session["ref_audio"] == REF["ref_audio"]
    assert agent.session_stats[0] is not None and agent.session_stats[0]["decisions"] == {"speak": 1}
    assert ep.adapter["runtime"] == {"sessions": 1, "session_extra_keys": ["ref_audio"]}
    assert ep.adapter["version"] == f"1/duplex/{MODEL}"


def test_barge_in_the_model_yields_and_the_playback_stops(n4_case, speak, tmp_path: Path) -> None:
    case, audio = n4_case
    reply = speak(LONG_ANSWER)
    ep_plan = plan(case, audio, replace(FAST, n4_answer_window_s=1.2), SESSION_SR)
    _, t_end = play_span(ep_plan, "t01", SESSION_SR)
    with FakeRealtimeServer(Behaviour(reply=reply, transcript=LONG_ANSWER, duplex=True, late_delta=True,
                                      respond_after_s=t_end / SESSION_SR + 0.1)) as server:
        agent = VllmOmniDuplexAgent(url=server.url)
        try:
            ep = run_episode(agent, case, ep_plan, tmp_path, options=RunOptions(step_timeout_s=10.0))
        finally:
            agent.close()
    assert ep.status == "ok", ep.failure
    (conn,) = server.connections
    _, model = channels(tmp_path, case.case_id)
    expected = to_pcm16(reply)
    onset = int(np.flatnonzero(model)[0]) - int(np.flatnonzero(expected)[0])
    (cut,) = conn.truncations
    heard_ms = cut["audio_end_ms"]
    played = [p for p in range(heard_ms * 24, heard_ms * 24 + 24)
              if np.array_equal(model[onset:onset + p], expected[:p]) and not model[onset + p:].any()]
    assert played and 0 < played[0] < expected.size
    r_start = next(e for e in ep.timeline if e.turn_id == "t03").start_s
    assert onset + played[0] >= round(r_start * SESSION_SR)
    text = "".join(t for _, t in ep.model_text)
    assert text and LONG_ANSWER.startswith(text) and text != LONG_ANSWER
    assert agent.session_stats[0]["decisions"] == {"speak": 1, "listen": 1}


def on_two_sessions(server: FakeRealtimeServer, jobs: list, out: Path) -> tuple[dict[str, Episode],
                                                                                VllmOmniDuplexAgent]:
    """The jobs through the lockstep runner on two concurrent sessions: each episode by case id, and the agent."""
    agent = VllmOmniDuplexAgent(url=server.url, sessions=2)
    try:
        runner = LockstepRunner(agent, out, options=RunOptions(step_timeout_s=10.0))
        return {ep.case_id: ep for ep in runner.run(jobs)}, agent
    finally:
        agent.close()


def test_concurrent_sessions_and_a_dropped_one_fails_alone(t_cases, speak, tmp_path: Path) -> None:
    """Three cases on two sessions through the lockstep runner; the second connection drops mid-reply."""
    reply = speak(ANSWER)
    jobs = []
    for case, audio in t_cases:
        p = plan(case, audio, FAST, SESSION_SR)
        jobs.append((case, p))
    t_start, _ = play_span(plan(*t_cases[0], FAST, SESSION_SR), "t01", SESSION_SR)
    with FakeRealtimeServer(Behaviour(reply=reply, transcript=ANSWER, duplex=True, respond_after_s=t_start / SESSION_SR,
                                      drop_connections=frozenset({2}))) as server:
        episodes, agent = on_two_sessions(server, jobs, tmp_path)
    assert {cid: ep.status for cid, ep in episodes.items()} == {"vd-t0": "ok", "vd-t1": "failed", "vd-t2": "ok"}
    failure = episodes["vd-t1"].failure
    assert failure.startswith("step_batch raised RealtimeSessionError for this slot: the connection to the realtime "
                              "server was dropped (no close frame) mid-episode"), failure
    for cid in ("vd-t0", "vd-t2"):
        reply_lands(tmp_path, cid, reply)
        assert episodes[cid].adapter["runtime"]["sessions"] == 2
    assert len(server.connections) == 3 and all("duplex=1" in c.path for c in server.connections)
    # The first two ran at the same time: the third connected only once a slot was free.
    assert all(s is not None for s in agent.session_stats)


def test_each_session_records_its_own_live_feasibility(t_cases, speak, tmp_path: Path) -> None:
    """Two cases on two concurrent sessions; the stand-in streams the second session's reply at half real time.

    Connections open in the order the cases enter their slots, so the second connection is the second case's. The
    stand-in's pace is the known answer: the healthy session streams a burst, then twice as fast as real time; the
    slow one 100 ms of audio every 200 ms, so its real-time factor is at least 2 and playback starves.
    """
    reply = speak(LONG_ANSWER)
    jobs = [(case, plan(case, audio, FAST, SESSION_SR)) for case, audio in t_cases[:2]]
    t_start, _ = play_span(jobs[0][1], "t01", SESSION_SR)
    with FakeRealtimeServer(Behaviour(reply=reply, transcript=LONG_ANSWER, duplex=True,
                                      respond_after_s=t_start / SESSION_SR,
                                      slow_connections=frozenset({2}))) as server:
        episodes, _ = on_two_sessions(server, jobs, tmp_path)
    assert [ep.status for ep in episodes.values()] == ["ok", "ok"]
    healthy, slow = (Episode.load(tmp_path / f"{cid}.rec.json").compute["session"] for cid in ("vd-t0", "vd-t1"))
    assert healthy == episodes["vd-t0"].compute["session"]  # what rec.json holds
    assert healthy["live"] and healthy["underruns"] == 0 and healthy["chunks"] > 0 and healthy["rtf"] < 1
    assert not slow["live"] and slow["underruns"] > 0.01 * slow["frames"] and slow["rtf"] > 1.5
    assert slow["late_max_ms"] > healthy["late_max_ms"] and healthy["frame_ms"] == slow["frame_ms"] == 20.0
    feas = run_feasibility(episodes.values())  # what `score` prints and scores.json holds
    assert feas is not None and feas["live"] is False
    assert (feas["sessions"]["episodes"], feas["sessions"]["behind"]) == (2, 1)
    assert "1 of 2 episodes' sessions fell behind real time" in feasibility_lines(feas)[-1]


def test_openai_realtime_against_the_vllm_omni_endpoint(t_cases, speak, tmp_path: Path) -> None:
    """vLLM-Omni's OpenAI-compatible /v1/realtime: no key, GA event names; its duplex mode with turn detection off."""
    case, audio = t_cases[0]
    reply = speak(ANSWER)
    ep_plan = plan(case, audio, FAST, SESSION_SR)
    t_start, t_end = play_span(ep_plan, "t01", SESSION_SR)
    with FakeRealtimeServer(Behaviour(reply=reply, transcript=ANSWER, duplex=True,
                                      respond_after_s=(t_start + t_end) / 2 / SESSION_SR)) as server:
        agent = OpenAIRealtimeAgent(url=server.url + "?duplex=1", model=MODEL, api_key_env="", turn_detection="none")
        try:
            ep = run_episode(agent, case, ep_plan, tmp_path, options=RunOptions(step_timeout_s=10.0))
        finally:
            agent.close()
    assert ep.status == "ok", ep.failure
    reply_lands(tmp_path, case.case_id, reply)
    assert "".join(t for _, t in ep.model_text) == ANSWER
    (conn,) = server.connections
    assert "Authorization" not in conn.headers and conn.session_updates[0]["session"]["audio"]["input"][
        "turn_detection"] is None


def test_arguments_and_registry() -> None:
    assert adapter_target("vllm-omni-duplex") == "adapters.vllm_omni_duplex:VllmOmniDuplexAgent"
    with pytest.raises(UsageError, match="sessions must be a positive integer"):
        VllmOmniDuplexAgent(sessions=0)
    with pytest.raises(UsageError, match="session_extra is not JSON"):
        VllmOmniDuplexAgent(session_extra="{bad")
    agent = VllmOmniDuplexAgent(url="ws://h:1/v1/realtime?duplex=1", sessions=3)
    assert agent.url == "ws://h:1/v1/realtime?duplex=1" and agent.batch_size == 3
    frames = agent.step_batch(np.zeros((3, agent.frame_size), np.float32))  # no sessions open: silence
    assert [f.audio.any() for f in frames] == [False] * 3
    agent.close()
