"""`moshi-server` against a stand-in moshi / PersonaPlex server on a local websocket (tests/moshi_server_fake.py).

Whole MPE episodes through the real plan and `run_episode`, paced in wall-clock time. Checked: the stand-in heard
the recorded user channel (through Opus), its reply lands in the model channel after the turn that caused it, its
text stream is recorded and so is the session's live feasibility; PersonaPlex's prompt and voice reach the query
string; a barge-in stops the reply; a dropped connection or an error message fails that episode with a clear reason
and the next case runs (check-adapter against the stand-in: tests/test_check_adapter.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest
import soundfile as sf

from adapters.moshi import DEFAULT_ROLE_PROMPT
from adapters.moshi_server import FRAME, MoshiServerAgent, chat_url
from adapters.registry import adapter_target, load_adapter
from dataset_builder.audio import SESSION_SR
from dataset_builder.benchmark_params import M3Protocol
from dataset_builder.errors import UsageError
from eval.orchestrator import RunOptions, run_episode
from eval.plans.mpe import plan
from tests.moshi_server_fake import FakeMoshiServer, MoshiBehaviour
from tests.test_openai_realtime import ANSWER, FAST, LONG_ANSWER, N4_TURNS, PROMPT, T_TURNS, play_span


@pytest.fixture(scope="module")
def t_case(piper):
    from tests.test_orchestrator import make_case

    return make_case(piper, T_TURNS, "ms-t")


@pytest.fixture(scope="module")
def n4_case(piper):
    from tests.test_orchestrator import make_case

    return make_case(piper, N4_TURNS, "ms-n4")


def model_channel(out: Path, case_id: str) -> np.ndarray:
    pcm, sr = sf.read(out / f"{case_id}.wav", dtype="float32")
    assert sr == SESSION_SR
    return pcm[:, 1]


def best_match(model: np.ndarray, reply: np.ndarray) -> tuple[int, float]:
    """Where the reply sits in the model channel and how alike they are there (normalised correlation); Opus is
    lossy, so the comparison is by shape, not sample for sample."""
    env = np.correlate(model, reply[:FRAME * 4], mode="valid")
    onset = int(np.argmax(env))
    seg = model[onset:onset + reply.size]
    ref = reply[:seg.size]
    return onset, float(seg @ ref / (np.linalg.norm(seg) * np.linalg.norm(ref) + 1e-12))


def run(agent: MoshiServerAgent, case, ep_plan, out: Path):
    return run_episode(agent, case, ep_plan, out, options=RunOptions(step_timeout_s=10.0))


def test_reply_and_text_stream_after_the_turn(t_case, speak, tmp_path: Path) -> None:
    case, audio = t_case
    reply = speak(ANSWER)
    ep_plan = plan(case, audio, FAST, SESSION_SR)
    t_start, t_end = play_span(ep_plan, "t01", SESSION_SR)
    with FakeMoshiServer(MoshiBehaviour(reply=reply, transcript=ANSWER,
                                        respond_after_s=(t_start + t_end) / 2 / SESSION_SR)) as server:
        agent = MoshiServerAgent(url=server.url)
        try:
            ep = run(agent, case, ep_plan, tmp_path)
        finally:
            agent.close()
    assert ep.status == "ok", ep.failure
    (conn,) = server.connections
    model = model_channel(tmp_path, case.case_id)
    onset, likeness = best_match(model, reply)
    assert likeness > 0.9, likeness
    # The stand-in answered on the user frame that completed 400 ms of quiet after T; the reply plays from then
    # plus the client's two-frame jitter buffer and the round trip (loose upper bound: a shared, paced host).
    decided = conn.reply_frames[0] * FRAME
    assert t_end <= decided - 4 * FRAME
    assert decided <= onset + FRAME <= decided + 8 * FRAME, (onset, decided)
    assert not np.abs(model[:onset]).max() > 0.01  # nothing before the reply but codec noise
    assert "".join(t for _, t in ep.model_text) == ANSWER
    assert ep.model_text[0][0] == pytest.approx(onset / SESSION_SR, abs=FRAME * 2 / SESSION_SR)
    # The stand-in decoded what the recording holds as the user channel (Opus round trip: shape, not samples).
    user = sf.read(tmp_path / f"{case.case_id}.wav", dtype="float32")[0][:, 0]
    heard = np.concatenate(conn.user)
    assert heard.size >= user.size - 2 * FRAME
    lag = int(np.argmax(np.correlate(heard[:SESSION_SR * 4], user[:SESSION_SR * 3], mode="valid")))
    assert lag < FRAME  # the codec's own delay, well under a frame
    n = min(user.size, heard.size - lag)
    assert float(heard[lag:lag + n] @ user[:n] / (np.linalg.norm(heard[lag:lag + n]) * np.linalg.norm(user[:n]))) > 0.9
    assert conn.query == {} and conn.close_code == 1000
    assert agent.session_stats is not None and agent.session_stats["frames"] > 0
    # The episode recorded its session's live feasibility (docs/scale.md), as the client saw it when it ended.
    assert ep.compute["session"]["frames"] == agent.session_stats["frames"]
    assert ep.compute["session"]["frame_ms"] == 80.0 and ep.compute["session"]["chunks"] > 0
    runtime = ep.adapter["runtime"]
    assert {k: runtime[k] for k in ("server", "buffer_frames", "voice_prompt", "default_role_prompt")} == {
        "server": "moshi", "buffer_frames": 2, "voice_prompt": None, "default_role_prompt": None}
    (pin,) = runtime["upstream"]  # which server code ran cannot be told over the wire: recorded as unknown
    assert (pin["repo"], pin["used"], pin["matches"]) == ("kyutai-labs/moshi", None, False)


def test_personaplex_prompt_voice_and_seeds_reach_the_query(t_case, speak, tmp_path: Path) -> None:
    case, audio = t_case
    ep_plan = replace(plan(case, audio, FAST, SESSION_SR), system_prompt=PROMPT)
    with FakeMoshiServer(MoshiBehaviour(reply=speak(ANSWER), require_prompt=True, respond_after_s=99)) as server:
        agent = MoshiServerAgent(url=server.url, server="personaplex", voice_prompt="NATM1.pt")
        try:
            ep = run_episode(agent, case, ep_plan, tmp_path, seed=7, options=RunOptions(step_timeout_s=10.0))
            # A case without a role prompt (M3, Duplex-MPE) sends NVIDIA's default: its server has no path without.
            bare_case = run(agent, case, plan(case, audio, FAST, SESSION_SR), tmp_path / "no-prompt")
        finally:
            agent.close()
        bare = MoshiServerAgent(url=server.url)  # the moshi flavour sends no query: PersonaPlex's server refuses
        try:
            refused = run(bare, case, ep_plan, tmp_path / "bare")
        finally:
            bare.close()
    assert ep.status == "ok", ep.failure
    assert bare_case.status == "ok", bare_case.failure
    # NVIDIA's client's seed parameters, never `seed` (its server raises on that one).
    assert server.connections[0].query == {"text_prompt": PROMPT, "voice_prompt": "NATM1.pt", "text_seed": "7",
                                           "audio_seed": "7"}
    assert server.connections[1].query["text_prompt"] == DEFAULT_ROLE_PROMPT
    assert ep.adapter["runtime"]["default_role_prompt"] == DEFAULT_ROLE_PROMPT
    assert "system_prompt" in agent.capabilities and "system_prompt" not in bare.capabilities
    assert refused.status == "failed" and server.connections[2].refused == "KeyError: 'voice_prompt'"
    assert refused.failure.startswith("reset raised RealtimeSessionError: the server closed the connection before "
                                      "its handshake"), refused.failure


@pytest.mark.parametrize(("query", "why"), [
    ({"text_prompt": "hi", "voice_prompt": "NATF2.pt", "seed": "7"}, "KeyError: 'seed'"),
    ({"text_prompt": "", "voice_prompt": "NATF2.pt"}, "TypeError: 'NoneType' object is not iterable"),
    ({"voice_prompt": "NATF2.pt"}, "KeyError: 'text_prompt'"),
    ({"text_prompt": "hi"}, "KeyError: 'voice_prompt'"),
    ({"text_prompt": "hi", "voice_prompt": "NATF2.wav"}, "FileNotFoundError: voice prompt 'NATF2.wav' not found"),
])
def test_the_stand_in_refuses_what_personaplex_refuses(speak, query: dict[str, str], why: str) -> None:
    """PersonaPlex's handler (server.py at 3428dfd9) raises after accepting the websocket: no handshake, an HTTP 500
    on the upgraded connection, closed. The stand-in does the same; the adapter's own query passes."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    with FakeMoshiServer(MoshiBehaviour(reply=speak(ANSWER), require_prompt=True)) as server:
        with connect(f"{server.url}?{urlencode(query)}", open_timeout=10) as ws, pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
        with connect(chat_url(server.url, "personaplex", query.get("text_prompt"), "NATF2.pt", 7),
                     open_timeout=10) as ws:
            assert ws.recv(timeout=10) == b"\x00"  # the handshake
    assert [c.refused for c in server.connections] == [why, None]
    assert "seed" not in server.connections[1].query and server.connections[1].query["text_prompt"]


def test_barge_in_stops_the_reply(n4_case, speak, tmp_path: Path) -> None:
    case, audio = n4_case
    reply = speak(LONG_ANSWER)
    ep_plan = plan(case, audio, replace(FAST, n4_answer_window_s=1.2), SESSION_SR)
    _, t_end = play_span(ep_plan, "t01", SESSION_SR)  # it answers the first utterance after T: N4Q
    with FakeMoshiServer(MoshiBehaviour(reply=reply, transcript=LONG_ANSWER,
                                        respond_after_s=t_end / SESSION_SR + 0.1)) as server:
        agent = MoshiServerAgent(url=server.url)
        try:
            ep = run(agent, case, ep_plan, tmp_path)
        finally:
            agent.close()
    assert ep.status == "ok", ep.failure
    (conn,) = server.connections
    assert conn.cut_at is not None, "the stand-in never heard the user speak over its reply"
    model = model_channel(tmp_path, case.case_id)
    onset, likeness = best_match(model, reply)
    assert likeness > 0.5
    r_start = next(e for e in ep.timeline if e.turn_id == "t03").start_s * SESSION_SR
    played = len(conn.reply_frames) * FRAME
    assert played < reply.size  # cut short
    # Loud model audio ends within the reply frames sent (plus codec ring-out), after N4R began.
    loud = np.flatnonzero(np.abs(model) > 0.02)
    assert r_start <= loud[-1] <= onset + played + FRAME
    text = "".join(t for _, t in ep.model_text)
    assert text and LONG_ANSWER.startswith(text) and text != LONG_ANSWER


def test_a_dropped_connection_fails_one_episode_and_the_next_case_runs(t_case, speak, tmp_path: Path) -> None:
    """Three cases through one agent, as a run steps them; the stand-in drops the second session mid-reply."""
    case, audio = t_case
    t_start, _ = play_span(plan(case, audio, FAST, SESSION_SR), "t01", SESSION_SR)
    behaviour = MoshiBehaviour(reply=speak(ANSWER), transcript=ANSWER, respond_after_s=t_start / SESSION_SR)
    results = []
    with FakeMoshiServer(behaviour) as server:
        agent = MoshiServerAgent(url=server.url)
        try:
            for k in range(3):
                server.behaviour = replace(behaviour, drop_after_frames=3 if k == 1 else None)
                # A plan is stepped once (its turn-taking steps keep state): each case gets its own, as in a run.
                results.append(run(agent, case, plan(case, audio, FAST, SESSION_SR), tmp_path / str(k)))
        finally:
            agent.close()
    assert [ep.status for ep in results] == ["ok", "failed", "ok"], [c.reply_frames for c in server.connections]
    assert results[1].failure.startswith("step raised RealtimeSessionError: the connection to the moshi server was "
                                         "dropped (no close frame) mid-episode"), results[1].failure
    assert len(server.connections) == 3


def test_an_error_message_fails_the_episode(t_case, speak, tmp_path: Path) -> None:
    case, audio = t_case
    with FakeMoshiServer(MoshiBehaviour(reply=speak(ANSWER), error_after_s=0.5)) as server:
        agent = MoshiServerAgent(url=server.url)
        try:
            ep = run(agent, case, plan(case, audio, FAST, SESSION_SR), tmp_path)
        finally:
            agent.close()
    assert ep.status == "failed" and "the moshi server sent an error: the fake model failed on purpose" in ep.failure
    assert ep.duration_s < case.preamble_end_s


def test_arguments_and_registry() -> None:
    assert adapter_target("moshi-server") == "adapters.moshi_server:MoshiServerAgent"
    with pytest.raises(UsageError, match="ws:// or wss://"):
        MoshiServerAgent(url="http://localhost:8998/api/chat")
    with pytest.raises(UsageError, match="server must be one of"):
        MoshiServerAgent(server="nope")
    assert chat_url("ws://h/api/chat?x=1&seed=3", "personaplex", "Be brief.", "NATF2.pt", 4) == \
        "ws://h/api/chat?x=1&text_prompt=Be+brief.&voice_prompt=NATF2.pt&text_seed=4&audio_seed=4"
    assert chat_url("ws://h/api/chat", "personaplex", " ", "NATF2.pt", None) == \
        f"ws://h/api/chat?{urlencode({'text_prompt': DEFAULT_ROLE_PROMPT, 'voice_prompt': 'NATF2.pt'})}"
    assert chat_url("ws://h/api/chat?x=1", "moshi", "ignored", "NATF2.pt", 4) == "ws://h/api/chat?x=1"
    assert load_adapter("moshi-server").frame_size == 1920
    assert M3Protocol().for_agent(MoshiServerAgent()).greets_first == 1  # the M3 authors' lead-in for Moshi


@pytest.mark.parametrize("server_kind", ["moshi", "personaplex"])
def test_a_text_piece_is_released_with_its_frame_whichever_comes_first(t_case, speak, tmp_path: Path,
                                                                      server_kind: str) -> None:
    """Kyutai's server sends a frame's text after its audio, NVIDIA's before it (server.py 83-92; 234-251): either
    way the first word is stamped where the reply's first frame plays, not a frame before it."""
    case, audio = t_case
    reply = speak(ANSWER)
    ep_plan = plan(case, audio, FAST, SESSION_SR)
    t_start, t_end = play_span(ep_plan, "t01", SESSION_SR)
    persona = server_kind == "personaplex"
    if persona:
        ep_plan = replace(ep_plan, system_prompt=PROMPT)
    with FakeMoshiServer(MoshiBehaviour(reply=reply, transcript=ANSWER, require_prompt=persona,
                                        respond_after_s=(t_start + t_end) / 2 / SESSION_SR)) as server:
        agent = MoshiServerAgent(url=server.url, server=server_kind)
        try:
            ep = run(agent, case, ep_plan, tmp_path)
        finally:
            agent.close()
    assert ep.status == "ok", ep.failure
    onset, likeness = best_match(model_channel(tmp_path, case.case_id), reply)
    assert likeness > 0.9, likeness
    assert "".join(t for _, t in ep.model_text) == ANSWER
    # The played frame that holds the reply's onset (the codec's delay puts the onset a little into it).
    assert ep.model_text[0][0] == pytest.approx(onset // FRAME * FRAME / SESSION_SR, abs=FRAME / 4 / SESSION_SR), \
        (ep.model_text[0][0] * SESSION_SR, onset)
