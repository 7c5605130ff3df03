"""`openai-realtime` against a stand-in Realtime model served on a local websocket (tests/realtime_fake.py).

Whole MPE episodes run through the real plan and `run_episode`, paced in wall-clock time (short hand-built cases
keep that to seconds). Checked: the reply lands intact in the model channel, after the user turn that caused it;
the server heard exactly the recorded user channel; the prompt and turn detection reached it; the key went only
into the handshake (never into rec.json, a log, stdout or the agent's repr); a barge-in stops the model's audio
where the server cut it (`protocol="live"`), or keeps every delta at its arrival (`protocol="dsb-ifeval"`, with the
paper's 800 ms end-of-turn silence); a dropped connection, a server `error` and a refused session fail the episode
with a clear reason (after a drop, the next case runs on a fresh session); both layouts and their event names are
understood; the stand-in refuses what the service's schema refuses and the adapter sends none of it; each episode
records its session's live feasibility and the schema revision it was written against.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from adapters.openai_realtime import REDACTED, OpenAIRealtimeAgent, RealtimeConfig, session_url
from adapters.registry import adapter_target
from dataset_builder.audio import SESSION_SR, to_pcm16
from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.errors import UsageError
from eval.orchestrator import RunOptions, adapter_info, run_episode
from eval.plans.mpe import plan
from eval.schedule import EpisodePlan, Play, Silence
from tests.realtime_fake import SERVER_LOGGER, Behaviour, FakeRealtimeServer
from tests.test_orchestrator import make_case

KEY_ENV = "DUPLEX_EVAL_TEST_REALTIME_KEY"
PROMPT = "You are Aria, a calm assistant on a family's kitchen speaker."
ANSWER = "Twelve times three is thirty-six."
LONG_ANSWER = "Let me look at the weather for you. It is going to be a bright and sunny day with a light breeze."
SILENCE_MS = 500  # the server VAD's silence_duration_ms the adapter asks for; the fake honours it
# Gaps longer than the server's silence duration, so each turn is one utterance to its VAD.
T_TURNS = [
    ("t00", "N3", "Maya", "Okay then.", 0.7),
    ("t01", "T", "Liam", "Aria, what is twelve times three?", 0.7),
    ("t02", "N2", "Noah", "Thanks, Maya.", 0.7),
]
N4_TURNS = [
    ("t00", "N3", "Maya", "Okay then.", 0.7),
    ("t01", "T", "Liam", "Aria, what is twelve times three?", 0.7),
    ("t02", "N4Q", "Noah", "Aria, can you check the weather?", 0.7),
    ("t03", "N4R", "Maya", "Never mind, it is sunny outside.", 0.7),
]
FAST = MPEProtocol(post_preamble_s=0.2, t_onset_window_s=1.0, endpoint_s=0.6, tail_s=0.3, n4_answer_window_s=0.9)


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    secret = f"sk-test-{secrets.token_hex(12)}"
    monkeypatch.setenv(KEY_ENV, secret)
    return secret


@pytest.fixture(scope="module")
def t_case(piper):
    return make_case(piper, T_TURNS, "rt-t")


@pytest.fixture(scope="module")
def n4_case(piper):
    return make_case(piper, N4_TURNS, "rt-n4")


def agent_for(server: FakeRealtimeServer, **kwargs) -> OpenAIRealtimeAgent:
    return OpenAIRealtimeAgent(url=server.url, model="fake-realtime", api_key_env=KEY_ENV,
                               silence_duration_ms=SILENCE_MS, **kwargs)


def play_span(ep_plan: EpisodePlan, turn_id: str, sr: int) -> tuple[int, int]:
    """Where a clip plays in the stream when nothing before it waits on the model (only Play and Silence)."""
    pos = 0
    for s in ep_plan.steps:
        if isinstance(s, Play) and s.turn_id == turn_id:
            return pos, pos + s.audio.size
        assert isinstance(s, Play | Silence), "a wait before the clip: its start is not known in advance"
        pos += s.audio.size if isinstance(s, Play) else s.n_samples
    raise KeyError(turn_id)


def channels(out: Path, case_id: str) -> tuple[np.ndarray, np.ndarray]:
    pcm, sr = sf.read(out / f"{case_id}.wav", dtype="int16")
    assert sr == SESSION_SR
    return pcm[:, 0], pcm[:, 1]


def run(agent: OpenAIRealtimeAgent, case_audio, ep_plan: EpisodePlan, out: Path):
    try:
        return run_episode(agent, case_audio[0], ep_plan, out, options=RunOptions(step_timeout_s=10.0))
    finally:
        agent.close()


def test_mpe_episode_reply_lands_intact_and_the_key_stays_secret(
        t_case, speak, key: str, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    case, audio = t_case
    reply = speak(ANSWER)
    ep_plan = replace(plan(case, audio, FAST, SESSION_SR), system_prompt=PROMPT)
    t_start, t_end = play_span(ep_plan, "t01", SESSION_SR)
    caplog.set_level(logging.DEBUG)  # the websocket library logs request headers at DEBUG
    with FakeRealtimeServer(Behaviour(reply=reply, transcript=ANSWER,
                                      respond_after_s=(t_start + t_end) / 2 / SESSION_SR)) as server:
        agent = agent_for(server)
        ep = run(agent, t_case, ep_plan, tmp_path)
    assert ep.status == "ok", ep.failure
    (conn,) = server.connections
    user, model = channels(tmp_path, case.case_id)

    # The reply is in the model channel exactly once, sample for sample, and nothing else is.
    expected = to_pcm16(reply)
    onset = int(np.flatnonzero(model)[0]) - int(np.flatnonzero(expected)[0])  # the clip may open with zeros
    assert np.array_equal(model[onset:onset + expected.size], expected)
    assert not model[onset + expected.size:].any()
    # It answers the T turn (the utterance its VAD heard ends inside T, and it waited the silence duration);
    # the reply sounds from the frame after the server decided, never earlier, and once it arrives (the upper
    # bound is loose: the stream is paced in wall-clock time on a shared host).
    realised_t = next(e for e in ep.timeline if e.turn_id == "t01")
    (decided,) = conn.reply_at
    answered = max(u for u in conn.utterances if u[1] + SILENCE_MS * SESSION_SR // 1000 <= decided)
    assert realised_t.start_s * SESSION_SR <= answered[1] <= realised_t.end_s * SESSION_SR
    assert decided <= onset <= decided + 2 * SESSION_SR, (onset, decided)
    # The transcript is text_output, due when its audio starts sounding.
    assert "".join(t for _, t in ep.model_text) == ANSWER
    assert ep.model_text[0][0] == pytest.approx(onset / SESSION_SR, abs=1e-3)
    # The server heard exactly the recorded user channel, in order, with nothing lost.
    assert np.array_equal(conn.user_audio(), user)

    # session.update carried the prompt, 24 kHz PCM16 both ways and the server VAD settings.
    (update,) = conn.session_updates
    session = update["session"]
    assert session["instructions"] == PROMPT and session["type"] == "realtime"
    assert session["audio"]["input"]["format"] == session["audio"]["output"]["format"] == \
        {"type": "audio/pcm", "rate": 24000}
    turn = session["audio"]["input"]["turn_detection"]
    assert turn["type"] == "server_vad" and turn["silence_duration_ms"] == SILENCE_MS and turn["interrupt_response"]
    assert conn.path == "/v1/realtime?model=fake-realtime"
    assert conn.close_code == 1000  # closed cleanly by the agent, not dropped

    # The key went into the handshake only.
    assert conn.headers["Authorization"] == f"Bearer {key}"
    rec = (tmp_path / f"{case.case_id}.rec.json").read_text()
    assert key not in rec and json.loads(rec)["adapter"] == adapter_info(agent)
    assert key not in json.dumps(adapter_info(agent)) and key not in repr(agent) and key not in str(vars(agent))
    client_log = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith(SERVER_LOGGER))
    assert f"Authorization: Bearer {REDACTED}" in client_log  # the header was logged, redacted
    assert key not in client_log
    printed = capsys.readouterr()
    assert key not in printed.out and key not in printed.err
    assert ep.adapter["realtime"] is True and ep.adapter["version"] == "1/fake-realtime"
    # The session's live feasibility (docs/scale.md): the reply arrived intact, so playback never starved mid-stream.
    pace = ep.compute["session"]
    assert pace["live"] and pace["underruns"] == 0 and pace["chunks"] > 0 and pace["frame_ms"] == 20.0


def test_barge_in_stops_the_reply_where_the_server_cut_it(n4_case, speak, key: str, tmp_path: Path) -> None:
    """Beta API and beta event names; N4R speaks over the reply to N4Q: the server cancels, the agent stops."""
    case, audio = n4_case
    reply = speak(LONG_ANSWER)
    # N4R starts 1.2 s after N4Q ends, 0.7 s into the reply (the server answers after 0.5 s of silence).
    ep_plan = plan(case, audio, replace(FAST, n4_answer_window_s=1.2), SESSION_SR)
    _, t_end = play_span(ep_plan, "t01", SESSION_SR)  # the fake answers the first utterance after T: N4Q
    with FakeRealtimeServer(Behaviour(reply=reply, transcript=LONG_ANSWER, late_delta=True,
                                      respond_after_s=t_end / SESSION_SR + 0.1)) as server:
        ep = run(agent_for(server, api="beta"), n4_case, ep_plan, tmp_path)
    assert ep.status == "ok", ep.failure
    (conn,) = server.connections
    assert conn.headers["OpenAI-Beta"] == "realtime=v1"
    session = conn.session_updates[0]["session"]
    assert session["input_audio_format"] == session["output_audio_format"] == "pcm16"
    assert session["turn_detection"]["silence_duration_ms"] == SILENCE_MS and "instructions" not in session

    user, model = channels(tmp_path, case.case_id)
    expected = to_pcm16(reply)
    onset = int(np.flatnonzero(model)[0]) - int(np.flatnonzero(expected)[0])
    (cut,) = conn.truncations
    assert cut["item_id"] == "item_1" and cut["content_index"] == 0
    heard_ms = cut["audio_end_ms"]
    # The model channel is the reply's first audio_end_ms (to the sample within that millisecond), then silence:
    # no queued audio and no late delta of the cancelled reply (a loud block) was played after the cut.
    played = [p for p in range(heard_ms * 24, heard_ms * 24 + 24)
              if np.array_equal(model[onset:onset + p], expected[:p]) and not model[onset + p:].any()]
    assert played, "the model channel is not the reply cut at the truncation point"
    assert 0 < played[0] < expected.size
    r_start = next(e for e in ep.timeline if e.turn_id == "t03").start_s
    # Cut only once the server could hear N4R: at the earliest from the frame whose user audio carried N4R's start
    # (a step's output plays in the same frame slot as the input it was given).
    frame = 480  # the agent's 20 ms frame
    assert onset + played[0] >= round(r_start * SESSION_SR) // frame * frame
    # Only the transcript of what started sounding was emitted, in order.
    text = "".join(t for _, t in ep.model_text)
    assert text and LONG_ANSWER.startswith(text) and text != LONG_ANSWER
    assert np.array_equal(conn.user_audio(), user)


def test_dropped_connection_fails_the_episode_and_the_next_case_runs(t_case, speak, key: str, tmp_path: Path) -> None:
    """Two cases through one agent, as a run steps them; the stand-in drops the first session mid-reply."""
    with FakeRealtimeServer(Behaviour(reply=speak(ANSWER), drop_connections=frozenset({1}))) as server:
        agent = agent_for(server)
        try:
            # A plan is stepped once (its turn-taking steps keep state): each case gets its own, as in a run.
            ep, after = (run_episode(agent, t_case[0], plan(t_case[0], t_case[1], FAST, SESSION_SR), tmp_path / str(k),
                                     options=RunOptions(step_timeout_s=10.0)) for k in range(2))
        finally:
            agent.close()
    assert after.status == "ok", after.failure
    assert len(server.connections) == 2 and server.connections[1].replies == 1
    assert ep.status == "failed"
    assert "step raised RealtimeSessionError" in ep.failure and "dropped" in ep.failure, ep.failure
    assert "mid-episode" in ep.failure
    # The episode stopped at the drop (during the reply to the preamble), it did not run on as silence.
    assert [e.turn_id for e in ep.timeline] == ["preamble"]


def test_server_error_fails_the_episode_with_its_message(t_case, speak, key: str, tmp_path: Path) -> None:
    ep_plan = plan(t_case[0], t_case[1], FAST, SESSION_SR)
    with FakeRealtimeServer(Behaviour(reply=speak(ANSWER), error_after_s=0.5)) as server:
        ep = run(agent_for(server), t_case, ep_plan, tmp_path)
    assert ep.status == "failed"
    assert "The fake model failed on purpose. (server_error/fake_code)" in ep.failure, ep.failure
    assert ep.duration_s < t_case[0].preamble_end_s  # it stopped at the error (0.5 s in), not ran on as silence


def test_refused_session_and_missing_key_fail_at_reset(t_case, speak, key: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ep_plan = plan(t_case[0], t_case[1], FAST, SESSION_SR)
    with FakeRealtimeServer(Behaviour(reply=speak(ANSWER), refuse_session=True)) as server:
        ep = run(agent_for(server), t_case, ep_plan, tmp_path / "refused")
        monkeypatch.delenv(KEY_ENV)
        ep_nokey = run(agent_for(server), t_case, ep_plan, tmp_path / "nokey")
    assert ep.status == "failed" and ep.failure.startswith("reset raised RealtimeSessionError: the server refused "
                                                           "the session: The model does not exist."), ep.failure
    assert ep_nokey.status == "failed" and f"environment variable {KEY_ENV} is not set" in ep_nokey.failure
    assert len(server.connections) == 1  # without a key no connection is attempted


def test_reset_opens_a_fresh_session_and_close_closes_it(speak, key: str) -> None:
    """Driven directly: a reply queued in one session never leaks into the next; both close cleanly."""
    tone = (0.3 * np.sin(np.arange(480) * 0.3)).astype(np.float32)
    quiet = np.zeros(480, np.float32)
    with FakeRealtimeServer(Behaviour(reply=speak(ANSWER), transcript=ANSWER)) as server:
        agent = agent_for(server)
        try:
            agent.reset(PROMPT, 0)
            for k in range(60):  # 0.4 s of tone, then silence past the server's silence duration
                assert not agent.step(tone if k < 20 else quiet).audio.any()
            heard = []
            for _ in range(2000):  # the reply is on its way; step with short sleeps until some of it arrives
                frame = agent.step(quiet)  # (a fast machine runs 500 bare steps before the server even answers)
                if frame.audio.any():
                    heard.append(frame)
                    break
                time.sleep(0.005)
            assert heard and server.connections[0].replies == 1
            agent.reset("", 0)  # the rest of the reply is queued here: it must not reach the new case
            assert server.connections[0].close_code == 1000
            assert all(not agent.step(quiet).audio.any() for _ in range(50))
        finally:
            agent.close()
    first, second = server.connections
    assert second.close_code == 1000 and second.replies == 0
    assert first.session_updates[0]["session"]["instructions"] == PROMPT
    assert second.session_updates[0]["session"]["instructions"] == ""


def test_transcript_follows_the_audio_it_belongs_to(key: str) -> None:
    """Driven directly: each transcript piece is due once the audio after it sounds; the tail sent after the last
    audio delta is due with the frame that ends the audio. 0.3 s of reply (3 deltas) carries 6 words."""
    words = "one two three four five six"
    reply = np.full(SESSION_SR * 3 // 10, 0.25, np.float32)
    tone = (0.3 * np.sin(np.arange(480) * 0.3)).astype(np.float32)
    quiet = np.zeros(480, np.float32)
    with FakeRealtimeServer(Behaviour(reply=reply, transcript=words)) as server:
        agent = agent_for(server)
        try:
            agent.reset(None, 0)
            # 20 frames of tone, then 25 of silence: with that last one the server has heard 500 ms of silence.
            frames = [agent.step(tone if k < 20 else quiet) for k in range(45)]
            for _ in range(500):  # the whole reply is sent at once (one burst); wait until it has all arrived
                if agent._session is not None and agent._session.audio_done:
                    break
                time.sleep(0.01)
            frames += [agent.step(quiet) for _ in range(20)]
        finally:
            agent.close()
    assert server.connections[0].reply_at == [45 * 480]
    audio = np.concatenate([f.audio for f in frames])
    assert np.array_equal(audio[45 * 480:], np.pad(to_pcm16(reply) / 32767.0, (0, 5 * 480)).astype(np.float32))
    texts = {k: f.text for k, f in enumerate(frames) if f.text}
    # Deltas of 100 ms = 5 frames: "one " with the first, "two " once the second delta sounds, and so on; the
    # tail with frame 59, which hands out the last sample.
    assert texts == {45: "one ", 50: "two ", 55: "three ", 59: "four five six"}


def test_step_before_reset_and_bad_arguments_are_clear() -> None:
    agent = OpenAIRealtimeAgent(url="ws://127.0.0.1:9/v1/realtime")
    with pytest.raises(RuntimeError, match="step before reset"):
        agent.step(np.zeros(agent.frame_size, np.float32))
    agent.close()
    with pytest.raises(UsageError, match="ws:// or wss://"):
        OpenAIRealtimeAgent(url="https://api.openai.com/v1/realtime")
    with pytest.raises(UsageError, match="turn_detection"):
        OpenAIRealtimeAgent(turn_detection="server-vad")
    with pytest.raises(UsageError, match="api must be"):
        OpenAIRealtimeAgent(api="v2")


def test_session_update_shapes() -> None:
    ga = RealtimeConfig(turn_detection="none", voice="marin").session_update(None)["session"]
    assert ga["audio"]["input"]["turn_detection"] is None and ga["audio"]["output"]["voice"] == "marin"
    assert "instructions" not in ga
    semantic = RealtimeConfig(turn_detection="semantic_vad", api="beta").session_update("x")["session"]
    assert semantic["turn_detection"] == {"type": "semantic_vad", "create_response": True,
                                          "interrupt_response": True}
    assert semantic["instructions"] == "x" and semantic["modalities"] == ["audio", "text"]
    assert session_url("wss://h/v1/realtime?model=a", "b") == "wss://h/v1/realtime?model=a"
    assert session_url("wss://h/v1/realtime", None) == "wss://h/v1/realtime"


def test_registered() -> None:
    assert adapter_target("openai-realtime") == "adapters.openai_realtime:OpenAIRealtimeAgent"



def test_dsb_ifeval_protocol_keeps_every_delta_at_its_arrival(n4_case, speak, key: str, tmp_path: Path) -> None:
    """DSB-IFEval's harness (appendix D.1-D.3): 800 ms end-of-turn silence, and a barge-in truncates nothing: the
    audio the service sent before it cancelled, and a late delta of the cancelled reply, all play from arrival."""
    case, audio = n4_case
    reply = speak(LONG_ANSWER)
    ep_plan = plan(case, audio, replace(FAST, n4_answer_window_s=1.5), SESSION_SR)
    _, t_end = play_span(ep_plan, "t01", SESSION_SR)
    with FakeRealtimeServer(Behaviour(reply=reply, transcript=LONG_ANSWER, late_delta=True,
                                      respond_after_s=t_end / SESSION_SR + 0.1)) as server:
        agent = OpenAIRealtimeAgent(url=server.url, model="fake-realtime", api_key_env=KEY_ENV, protocol="dsb-ifeval")
        ep = run(agent, n4_case, ep_plan, tmp_path)
    assert ep.status == "ok", ep.failure
    (conn,) = server.connections
    turn = conn.session_updates[0]["session"]["audio"]["input"]["turn_detection"]
    assert (turn["type"], turn["threshold"], turn["silence_duration_ms"], turn["prefix_padding_ms"]) == \
        ("server_vad", 0.5, 800, 300)
    assert conn.truncations == []  # nothing is cut on speech_started
    _, model = channels(tmp_path, case.case_id)
    expected = to_pcm16(reply)
    onset = int(np.flatnonzero(model)[0]) - int(np.flatnonzero(expected)[0])
    late = np.flatnonzero(model == to_pcm16(np.full(1, 0.5, np.float32))[0])
    assert late.size == 480 * 4  # the late delta of the cancelled reply, played whole
    cut = int(late[0]) - onset  # what the service sent before it cancelled, played whole before the late delta
    assert 0 < cut < expected.size and np.array_equal(model[onset:onset + cut], expected[:cut])
    r_start = next(e for e in ep.timeline if e.turn_id == "t03").start_s
    assert late[0] > r_start * SESSION_SR  # it went on sounding over the barge-in
    assert ep.adapter["runtime"]["protocol"] == "dsb-ifeval" and ep.adapter["runtime"]["playback"] == "keep"


def test_the_stand_in_refuses_what_the_service_refuses_and_the_adapter_sends_none_of_it() -> None:
    """The refusals of the service's schema (openai-python e43b4224), each shown on the stand-in; every
    session.update the adapter can send passes the same check."""
    from websockets.sync.client import connect

    from tests.realtime_fake import session_problem

    pcm = {"type": "audio/pcm", "rate": 24000}
    wrong = [  # (layout is beta, the session, the refusal's code and param)
        (False, {"type": "realtime", "modalities": ["audio"]}, "unknown_parameter", "session.modalities"),
        (False, {"audio": {"input": {"format": pcm}}}, "missing_required_parameter", "session.type"),
        (False, {"type": "realtime", "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}},
         "invalid_value", "session.audio.input.format.rate"),
        (False, {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", "decision": 1}}}},
         "unknown_parameter", "session.audio.input.turn_detection.decision"),
        (True, {"audio": {"input": {"format": pcm}}}, "unknown_parameter", "session.audio"),
    ]
    with FakeRealtimeServer(Behaviour(reply=np.zeros(480, np.float32))) as server:
        for beta, session, code, param in wrong:
            headers = {"OpenAI-Beta": "realtime=v1"} if beta else {}
            with connect(server.url, additional_headers=headers) as ws:
                ws.recv()  # session.created
                ws.send(json.dumps({"type": "session.update", "session": session}))
                error = json.loads(ws.recv())
            assert error["type"] == "error" and (error["error"]["code"], error["error"]["param"]) == (code, param)
        with connect(server.url) as ws:
            ws.recv()
            ws.send(json.dumps({"type": "conversation.item.truncate", "item_id": "item_9", "content_index": 0,
                                "audio_end_ms": 100}))
            assert json.loads(ws.recv())["error"]["code"] == "invalid_value"
    for api in ("ga", "beta"):
        for turn in ("server_vad", "semantic_vad", "none"):
            for prompt in (None, "", PROMPT):
                update = RealtimeConfig(api=api, turn_detection=turn, voice="marin").session_update(prompt)
                assert session_problem(update["session"], api == "beta") is None, (api, turn, prompt)


def test_the_record_names_the_schema_it_was_written_against(caplog: pytest.LogCaptureFixture) -> None:
    """A served API cannot say its revision: one line says so, and every rec.json records the pin, unmatched."""
    caplog.set_level(logging.WARNING, logger="duplex_eval.upstream")
    agent = OpenAIRealtimeAgent(url="ws://127.0.0.1:9/v1/realtime")
    try:
        (line,) = [r.getMessage() for r in caplog.records if r.name == "duplex_eval.upstream"]
        assert "openai-realtime: the served event schema is at a revision it cannot tell" in line
        assert "openai/openai-python@e43b4224" in line
        (pin,) = agent.runtime()["upstream"]
        assert pin == {"repo": "openai/openai-python", "kind": "git",
                       "pinned": "e43b422412a9e96c9cc5192c61fffbe2d7e04836", "used": None, "matches": False}
        assert agent.runtime()["protocol"] == "live" and agent.config.silence_duration_ms == 500  # auto, no run
        other = OpenAIRealtimeAgent(protocol="dsb-ifeval", silence_duration_ms=600)
        other.close()
        assert other.config.silence_duration_ms == 600 and other.config.vad_threshold == 0.5
        with pytest.raises(UsageError, match="protocol must be .auto. or one of"):
            OpenAIRealtimeAgent(protocol="paper")
    finally:
        agent.close()


@pytest.mark.parametrize(("config", "args", "protocol", "silence_ms"), [
    ("ifeval", {}, "dsb-ifeval", 800),  # DSB-IFEval: its paper's harness by default
    ("ifeval_matched", {"silence_duration_ms": 650}, "dsb-ifeval", 650),  # a setting given wins
    ("ifeval", {"protocol": "live"}, "live", 500),  # a protocol given is used as given
    ("mpe", {}, "live", 500),
])
def test_the_run_gives_each_benchmark_its_papers_protocol(config: str, args: dict, protocol: str,
                                                          silence_ms: int) -> None:
    from eval.run import RunConfig, _load

    agent = _load(RunConfig(dataset="unused", adapter="openai-realtime", out="unused", config=config,
                            adapter_args={"url": "ws://127.0.0.1:9/v1/realtime", **args}))
    try:
        assert (agent.runtime()["protocol"], agent.config.silence_duration_ms) == (protocol, silence_ms)
        assert agent.runtime()["playback"] == ("keep" if protocol == "dsb-ifeval" else "truncate")
    finally:
        agent.close()
