"""`vllm-omni-duplex` against the stand-in vLLM-Omni server (tests/vllm_omni_fake.py, vraiti/vllm-omni@d6240742).

Checked through the real plans, orchestrator and lockstep runner: the session is opened the way vLLM-Omni's own
client opens it (the native-duplex query with `autostart=0`, `RealtimeDuplexClient.configure`'s fields, the reference
voice), user audio goes at 16 kHz in 200 ms appends, the reply lands sample for sample after the turn that caused it
(never in the slot of the user frame that made the server answer), its transcript is due with the audio delta before
it, listen and speak decisions are counted, played-out responses are acknowledged, and each session is closed with
`session.close`, so back-to-back episodes fit a one-session server; a model that yields mid-reply is played as it was
sent; N concurrent sessions run a benchmark's cases together, a session that drops fails its own episode only, and
each episode records its own session's live feasibility. The stand-in refuses what vLLM-Omni refuses (no
native-duplex flag: a silent generic session; no reference voice; server turn detection; a second session while one
is held; `?model=` without `autostart=0` opening a default session first), and the adapter makes none of those calls.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from websockets.sync.client import connect

from adapters.openai_realtime import OpenAIRealtimeAgent
from adapters.registry import adapter_target
from adapters.vllm_omni_duplex import VllmOmniDuplexAgent
from adapters.ws_session import RealtimeSessionError
from dataset_builder.audio import SESSION_SR, to_pcm16
from dataset_builder.episode import Episode
from dataset_builder.errors import UsageError
from eval.lockstep import LockstepRunner
from eval.orchestrator import RunOptions, run_episode
from eval.plans.mpe import plan
from metrics.feasibility import feasibility_lines, run_feasibility
from tests.test_openai_realtime import ANSWER, FAST, LONG_ANSWER, N4_TURNS, PROMPT, T_TURNS, channels, play_span
from tests.vllm_omni_fake import FakeVllmOmniServer, vllm_behaviour

MODEL = "openbmb/MiniCPM-o-4_5"
CONFIGURE = {  # RealtimeDuplexClient.configure (client.py:338-351), beside the prompt and the reference voice
    "model": MODEL, "modalities": ["audio", "text"], "input_audio_format": "pcm16", "output_audio_format": "pcm16",
    "turn_detection": None, "overlap_policy": "listen_only", "playback_commit_policy": "ack_only",
    "extra_body": {"auto_response": True, "minicpmo45_native_duplex": True, "force_listen_count": 0}}


@pytest.fixture(scope="module")
def t_cases(piper):
    from tests.test_orchestrator import make_case

    return [make_case(piper, T_TURNS, f"vd-t{k}") for k in range(3)]


@pytest.fixture(scope="module")
def n4_case(piper):
    from tests.test_orchestrator import make_case

    return make_case(piper, N4_TURNS, "vd-n4")


@pytest.fixture
def voice(tmp_path: Path) -> Path:
    path = tmp_path / "voice.wav"
    sf.write(path, (0.1 * np.sin(np.arange(16_000) * 0.05)).astype(np.float32), 16_000)
    return path


def reply_lands(out: Path, case_id: str, reply: np.ndarray) -> int:
    """The reply is in the model channel exactly once, sample for sample, and nothing else is; returns its onset."""
    _, model = channels(out, case_id)
    expected = to_pcm16(reply)
    onset = int(np.flatnonzero(model)[0]) - int(np.flatnonzero(expected)[0])
    assert np.array_equal(model[onset:onset + expected.size], expected)
    assert not model[onset + expected.size:].any()
    return onset


def episode(agent: VllmOmniDuplexAgent, case_audio, ep_plan, out: Path) -> Episode:
    try:
        return run_episode(agent, case_audio[0], ep_plan, out, options=RunOptions(step_timeout_s=10.0))
    finally:
        agent.close()


def test_native_session_opened_as_its_client_opens_it(t_cases, speak, voice: Path, tmp_path: Path) -> None:
    case, audio = t_cases[0]
    reply = speak(ANSWER)
    ep_plan = replace(plan(case, audio, FAST, SESSION_SR), system_prompt=PROMPT)
    t_start, t_end = play_span(ep_plan, "t01", SESSION_SR)
    with FakeVllmOmniServer(vllm_behaviour(reply, ANSWER, respond_after_s=(t_start + t_end) / 2 / SESSION_SR)) \
            as server:
        agent = VllmOmniDuplexAgent(url=server.url, model=MODEL, ref_audio=str(voice))
        ep = episode(agent, t_cases[0], ep_plan, tmp_path)
    assert ep.status == "ok", ep.failure
    (conn,) = server.connections
    assert conn.query == {"model": MODEL, "duplex": "1", "minicpmo45_native_duplex": "1", "autostart": "0"}
    assert conn.opened == "native" and "Authorization" not in conn.headers  # a local engine without a key
    assert "OpenAI-Beta" not in conn.headers  # its client sends no OpenAI header
    session = conn.session_updates[0]["session"]
    assert {k: v for k, v in session.items() if k not in ("instructions", "ref_audio")} == CONFIGURE
    assert session["instructions"] == PROMPT  # raw: the server wraps it (minicpmo45/policy.py:46-56)
    assert session["ref_audio"] == "data:audio/wav;base64," + base64.b64encode(voice.read_bytes()).decode("ascii")
    # 16 kHz in 200 ms appends: the model's rate and its client's cadence; the stream the server heard is the
    # recorded user channel, resampled.
    user, _ = channels(tmp_path, case.case_id)
    assert set(conn.rates) == {16_000} and conn.user_audio().size == user.size // 4800 * 3200  # whole appends
    assert np.corrcoef(conn.user_audio()[::2], user[::3][:conn.user_audio()[::2].size])[0, 1] > 0.95
    # The reply is played whole after the append that made the model answer: never in that append's slots.
    onset = reply_lands(tmp_path, case.case_id, reply)
    assert conn.reply_at[0] * 3 // 2 <= onset <= conn.reply_at[0] * 3 // 2 + 2 * SESSION_SR
    assert "".join(t for _, t in ep.model_text) == ANSWER
    assert ep.model_text[0][0] == pytest.approx(onset / SESSION_SR, abs=1e-3)  # with the audio delta before it
    # Decisions counted; the played-out response acknowledged; the session closed, so the server holds nothing.
    stats = agent.session_stats[0]
    assert stats is not None and stats["decisions"]["speak"] == 1 and stats["decisions"]["listen"] > 0
    (ack,) = conn.acks
    assert (ack["response_id"], ack["item_id"]) == ("resp_1", "item_resp_1")
    assert ack["played_ms"] == ack["committed_ms"] == reply.size * 1000 // SESSION_SR
    assert conn.closed_session and server.held == {} and conn.close_code == 1000
    runtime = ep.adapter["runtime"]
    assert (runtime["sessions"], runtime["input_rate"], runtime["append_ms"]) == (1, 16_000, 200)
    assert runtime["upstream"][0]["repo"] == "vraiti/vllm-omni" and runtime["upstream"][0]["matches"] is False
    assert ep.adapter["version"] == f"2/duplex/{MODEL}"


def test_back_to_back_sessions_fit_a_one_session_server(t_cases, speak, voice: Path, tmp_path: Path) -> None:
    """Two episodes one after the other on a server admitting one session: each closes its session. A session left
    without `session.close` is held for the disconnect grace, and the next is refused (`resource_exhausted`)."""
    with FakeVllmOmniServer(vllm_behaviour(speak(ANSWER), ANSWER), max_sessions=1) as server:
        agent = VllmOmniDuplexAgent(url=server.url, ref_audio=str(voice))
        try:
            eps = [run_episode(agent, case, plan(case, audio, FAST, SESSION_SR), tmp_path / str(k),
                               options=RunOptions(step_timeout_s=10.0)) for k, (case, audio) in enumerate(t_cases[:2])]
        finally:
            agent.close()
        assert [ep.status for ep in eps] == ["ok", "ok"], [ep.failure for ep in eps]
        assert [c.closed_session for c in server.connections] == [True, True]
        with connect(f"{server.url}?duplex=1&autostart=0") as ws:  # a client that leaves without closing
            ws.send(json.dumps({"type": "session.update", "session": {**CONFIGURE, "ref_audio": "data:,"}}))
            assert json.loads(ws.recv())["type"] == "session.created"
        agent = VllmOmniDuplexAgent(url=server.url, ref_audio=str(voice), admission_wait_s=1.5)
        try:
            began = time.monotonic()
            with pytest.raises(RealtimeSessionError, match="resource_exhausted"):
                agent.reset(None, 0)
            assert time.monotonic() - began >= 1.5  # it retried while the hold could run out
        finally:
            agent.close()


def test_a_yielding_model_is_played_as_it_was_sent(n4_case, speak, voice: Path, tmp_path: Path) -> None:
    """N4R speaks over the reply to N4Q: the model decides to listen at the next unit and its response ends there;
    what it had sent plays out (its web client drops nothing), and nothing is truncated."""
    case, audio = n4_case
    reply = speak(LONG_ANSWER)
    ep_plan = plan(case, audio, replace(FAST, n4_answer_window_s=1.2), SESSION_SR)
    _, t_end = play_span(ep_plan, "t01", SESSION_SR)
    with FakeVllmOmniServer(vllm_behaviour(reply, LONG_ANSWER, respond_after_s=t_end / SESSION_SR + 0.1)) as server:
        agent = VllmOmniDuplexAgent(url=server.url, ref_audio=str(voice))
        ep = episode(agent, n4_case, ep_plan, tmp_path)
    assert ep.status == "ok", ep.failure
    (conn,) = server.connections
    _, model = channels(tmp_path, case.case_id)
    expected = to_pcm16(reply)
    onset = int(np.flatnonzero(model)[0]) - int(np.flatnonzero(expected)[0])
    end = int(np.flatnonzero(model)[-1]) + 1 - onset
    assert 0 < end < expected.size and np.array_equal(model[onset:onset + end], expected[:end])
    r_start = next(e for e in ep.timeline if e.turn_id == "t03").start_s
    assert onset + end > r_start * SESSION_SR  # it went on over the user until its decision
    assert conn.truncations == []
    text = "".join(t for _, t in ep.model_text)
    assert text and LONG_ANSWER.startswith(text) and text != LONG_ANSWER
    assert agent.session_stats[0]["decisions"]["speak"] == 1


def on_two_sessions(server: FakeVllmOmniServer, jobs: list, out: Path, voice: Path
                    ) -> tuple[dict[str, Episode], VllmOmniDuplexAgent]:
    """The jobs through the lockstep runner on two concurrent sessions: each episode by case id, and the agent."""
    agent = VllmOmniDuplexAgent(url=server.url, sessions=2, ref_audio=str(voice))
    try:
        runner = LockstepRunner(agent, out, options=RunOptions(step_timeout_s=10.0))
        return {ep.case_id: ep for ep in runner.run(jobs)}, agent
    finally:
        agent.close()


def test_concurrent_sessions_and_a_dropped_one_fails_alone(t_cases, speak, voice: Path, tmp_path: Path) -> None:
    """Three cases on two sessions (a server admitting two) through the lockstep runner; the second connection
    drops mid-reply."""
    reply = speak(ANSWER)
    jobs = [(case, plan(case, audio, FAST, SESSION_SR)) for case, audio in t_cases]
    t_start, _ = play_span(jobs[0][1], "t01", SESSION_SR)
    with FakeVllmOmniServer(vllm_behaviour(reply, ANSWER, respond_after_s=t_start / SESSION_SR,
                                           drop_connections=frozenset({2})), max_sessions=2,
                            disconnect_grace_s=0.1) as server:  # the dropped session is held 0.1 s, not 30
        episodes, agent = on_two_sessions(server, jobs, tmp_path, voice)
    assert {cid: ep.status for cid, ep in episodes.items()} == {"vd-t0": "ok", "vd-t1": "failed", "vd-t2": "ok"}, \
        {cid: ep.failure for cid, ep in episodes.items()}
    failure = episodes["vd-t1"].failure
    assert failure.startswith("step_batch raised RealtimeSessionError for this slot: the connection to the vLLM-Omni "
                              "server was dropped (no close frame) mid-episode"), failure
    for cid in ("vd-t0", "vd-t2"):
        reply_lands(tmp_path, cid, reply)
        assert episodes[cid].adapter["runtime"]["sessions"] == 2
    # The third case may have been refused while the dropped session was still held, then admitted on a retry.
    assert [c.opened for c in server.connections].count("native") == 3
    assert all(c.opened in ("native", "") for c in server.connections)
    assert all(s is not None for s in agent.session_stats)


def test_each_session_records_its_own_live_feasibility(t_cases, speak, voice: Path, tmp_path: Path) -> None:
    """Two cases on two concurrent sessions; the stand-in streams the second session's reply at half real time, so
    its real-time factor is at least 2 and playback starves; the healthy one streams faster than real time."""
    reply = speak(LONG_ANSWER)
    jobs = [(case, plan(case, audio, FAST, SESSION_SR)) for case, audio in t_cases[:2]]
    t_start, _ = play_span(jobs[0][1], "t01", SESSION_SR)
    with FakeVllmOmniServer(vllm_behaviour(reply, LONG_ANSWER, respond_after_s=t_start / SESSION_SR, pace=2.0,
                                           slow_connections=frozenset({2})), max_sessions=2) as server:
        episodes, _ = on_two_sessions(server, jobs, tmp_path, voice)
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


def exchange(url: str, *events: dict) -> list[dict]:
    """Send `events` on a fresh connection; every event the stand-in sent within a short wait."""
    got = []
    with connect(url) as ws:
        for event in events:
            ws.send(json.dumps(event))
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            try:
                got.append(json.loads(ws.recv(timeout=0.05)))
            except TimeoutError:
                continue
    return got


def test_the_stand_in_refuses_what_vllm_omni_refuses(speak) -> None:
    """Each refusal of the upstream server, on the stand-in; the tests above show the adapter makes none of them."""
    tone = base64.b64encode(to_pcm16(0.3 * np.sin(np.arange(16_000 * 3) * 0.2).astype(np.float32))
                            .astype("<i2").tobytes()).decode("ascii")
    quiet = base64.b64encode(np.zeros(16_000 * 2, "<i2").tobytes()).decode("ascii")
    stream = [{"type": "input_audio_buffer.append", "audio": a, "sample_rate_hz": 16_000} for a in (tone, quiet)]
    codes = lambda events: [e["error"]["code"] for e in events if e["type"] == "error"]  # noqa: E731
    native = {**CONFIGURE, "ref_audio": "data:,"}
    # A short disconnect grace, so a session each exchange leaves unclosed does not hold the next one off.
    with FakeVllmOmniServer(vllm_behaviour(speak(ANSWER), ANSWER), max_sessions=1, disconnect_grace_s=0.2) as server:
        base = f"{server.url}?duplex=1&autostart=0"
        # No native-duplex flag: the generic commit-only path, which never answers a stream nobody commits.
        generic = exchange(base, {"type": "session.update", "session": {**native, "extra_body": {}}}, *stream)
        assert server.connections[-1].opened == "generic"
        assert "session.created" in [e["type"] for e in generic]
        assert not any(e["type"].startswith("response.") for e in generic)
        # The same stream on a native session is answered: the refusal above is the flag's doing.
        answered = exchange(base, {"type": "session.update", "session": native}, *stream)
        assert "response.speak" in [e["type"] for e in answered]
        speak_event = next(e for e in answered if e["type"] == "response.speak")
        assert "decision" not in speak_event and speak_event["metadata"]["model_speak"] is True
        kinds = [e["type"] for e in answered]
        first_audio = kinds.index("response.audio.delta")
        assert kinds[first_audio + 1] == "response.audio_transcript.delta"  # each transcript after its audio
        # No reference voice; server turn detection; server-owned runtime keys; an event it does not take.
        no_voice = {k: v for k, v in native.items() if k != "ref_audio"}
        assert codes(exchange(base, {"type": "session.update", "session": no_voice})) == ["ref_audio_required"]
        vad = {**native, "turn_detection": {"type": "server_vad"}}
        assert codes(exchange(base, {"type": "session.update", "session": vad})) == ["unsupported_turn_detection"]
        private = {**native, "extra_body": {**CONFIGURE["extra_body"], "ref_audio_data": "x"}}
        assert codes(exchange(base, {"type": "session.update", "session": private})) == ["invalid_request_error"]
        assert codes(exchange(base, {"type": "response.speak"})) == ["unknown_event"]
        # `?model=` without autostart=0: a default session is opened before the client's event is read; with the
        # native flag in the query it has no reference voice and is refused.
        auto = exchange(f"{server.url}?duplex=1&model={MODEL}&minicpmo45_native_duplex=1",
                        {"type": "session.update", "session": native})
        assert codes(auto)[:1] == ["ref_audio_required"]
        # A second session while one is held.
        with connect(base) as ws:
            ws.send(json.dumps({"type": "session.update", "session": native}))
            assert json.loads(ws.recv())["type"] == "session.created"
            assert codes(exchange(base, {"type": "session.update", "session": native})) == ["resource_exhausted"]
            ws.send(json.dumps({"type": "session.close"}))
            assert [json.loads(ws.recv())["type"] for _ in range(2)][-1] == "session.closed"
        assert codes(exchange(base, {"type": "session.update", "session": native},
                              {"type": "session.close"})) == []


def test_openai_realtime_on_the_duplex_route_measures_a_silent_model(t_cases, speak, tmp_path: Path) -> None:
    """The generic `openai-realtime` adapter on `?duplex=1` opens no native session (no native-duplex flag): the
    server runs the commit-only path, so the model never answers. Hence the dedicated adapter."""
    case, audio = t_cases[0]
    ep_plan = plan(case, audio, FAST, SESSION_SR)
    with FakeVllmOmniServer(vllm_behaviour(speak(ANSWER), ANSWER)) as server:
        agent = OpenAIRealtimeAgent(url=server.url + "?duplex=1&autostart=0", model=MODEL, api_key_env="",
                                    api="beta", turn_detection="none")
        try:
            ep = run_episode(agent, case, ep_plan, tmp_path, options=RunOptions(step_timeout_s=10.0))
        finally:
            agent.close()
    assert ep.status == "ok", ep.failure
    assert server.connections[0].opened == "generic" and not channels(tmp_path, case.case_id)[1].any()


def test_arguments_and_registry(voice: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert adapter_target("vllm-omni-duplex") == "adapters.vllm_omni_duplex:VllmOmniDuplexAgent"
    with pytest.raises(UsageError, match="ref_audio is required"):
        VllmOmniDuplexAgent()
    with pytest.raises(UsageError, match="no such file"):
        VllmOmniDuplexAgent(ref_audio="/nonexistent/voice.wav")
    with pytest.raises(UsageError, match="sessions must be a positive integer"):
        VllmOmniDuplexAgent(sessions=0, ref_audio=str(voice))
    with pytest.raises(UsageError, match="session_extra is not JSON"):
        VllmOmniDuplexAgent(session_extra="{bad", ref_audio=str(voice))
    caplog.set_level(logging.WARNING, logger="duplex_eval.upstream")
    caplog.clear()
    agent = VllmOmniDuplexAgent(url="ws://h:1/v1/realtime?duplex=1&autostart=1", sessions=3, ref_audio=str(voice))
    (line,) = [r.getMessage() for r in caplog.records if r.name == "duplex_eval.upstream"]
    assert line.startswith("vllm-omni-duplex: the served event schema is at a revision it cannot tell") and \
        "vraiti/vllm-omni@d6240742" in line
    # A parameter the URL already carries is kept (build_realtime_url's setdefault, client.py:78-84).
    assert agent.url == ("ws://h:1/v1/realtime?duplex=1&autostart=1&model=openbmb%2FMiniCPM-o-4_5"
                         "&minicpmo45_native_duplex=1") and agent.batch_size == 3
    frames = agent.step_batch(np.zeros((3, agent.frame_size), np.float32))  # no sessions open: silence
    assert [f.audio.any() for f in frames] == [False] * 3
    agent.close()
