"""The Freeze-Omni adapter (adapters/freeze_omni.py) against an API fake of its pipeline, speech decoder and VAD
(tests/fake_freeze_omni.py): real mini sets, real plans, the real orchestrator — not the real weights.

The fake's state head decides at a chunk it records (`clock.decisions`), and its speech decoder's audio starts
with a click after a quiet lead the adapter must trim, so where each answer must sit in the recording is known
exactly: chunk k ends at session sample (k + 1) * 3840 (160 ms).
"""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters.freeze_omni import SERVER_ROLE, UPSTREAM, FreezeOmniAgent, FreezeOmniParts, load_parts
from adapters.protocol import DuplexAgent
from adapters.registry import load_adapter
from dataset_builder.audio import SESSION_SR, read_wav, resample, to_pcm16
from dataset_builder.errors import UsageError
from eval.orchestrator import run_episode
from eval.schedule import EpisodePlan, Play, Silence
from metrics.vad import VAD_PRESETS
from tests.adapter_episodes import CONFIGS, Ran, first_cases, run_cases, shortest_cases
from tests.fake_freeze_omni import (
    CHECKPOINT_ROLE,
    CLICK,
    LEAD,
    SCRIPTS,
    SERVER,
    FakeFreezeOmni,
    FakeVAD,
    fake_freeze_omni,
)

CHUNK = 3840  # 160 ms on the session clock


@pytest.fixture(scope="module")
def reply(speak) -> np.ndarray:
    return speak("Sure, I can help with that. What do you need?")


def agent_with(fake: FakeFreezeOmni) -> FreezeOmniAgent:
    return FreezeOmniAgent(parts=fake.parts(), device="cpu")


def taken(fake: FakeFreezeOmni) -> Any:
    """What to keep of the fake after each episode (its records restart with the next reset)."""
    def take(_ep: Any) -> dict[str, Any]:
        said = list(fake.tts.said)
        fake.tts.said.clear()
        return {"decisions": list(fake.clock.decisions), "said": said, "heard": list(fake.vad.heard),
                "role": fake.pipeline.roles[-1] if fake.pipeline.roles else "never"}
    return take


def expected_model_channel(n: int, decisions: list[tuple[int, str]], said: list[tuple[int, np.ndarray]]
                           ) -> tuple[np.ndarray, list[int]]:
    """The model channel a correct adapter records, and where each piece of speech starts: each answer (the
    decoder's pieces from the chunk of an "ss", the first one's quiet lead trimmed) from the end of that chunk,
    until it ends or the next answer starts."""
    out = np.zeros(n, np.int16)
    answers = [k for k, d in decisions if d == "ss"]
    pieces_at: list[int] = []
    for i, k in enumerate(answers):
        pieces = [x for c, x in said if c == k]
        assert pieces, f"no speech for the answer decided at chunk {k}"
        pieces[0] = pieces[0][LEAD:]
        start = (k + 1) * CHUNK
        stop = min(n, (answers[i + 1] + 1) * CHUNK if i + 1 < len(answers) else n)
        audio = to_pcm16(np.concatenate(pieces))[: max(0, stop - start)]
        out[start:start + len(audio)] = audio
        at = start
        for p in pieces:
            if at < stop:
                pieces_at.append(at)
            at += len(p)
    return out, pieces_at


def check_episode(r: Ran) -> int:
    """The exact-timing checks on one ok episode; returns how many answers it held."""
    got = r.extra
    user = r.pcm[:, 0].astype(np.float32) / 32768
    # Every whole 160 ms of the user channel reached the VAD as 2560 samples at 16 kHz, in order.
    assert len(got["heard"]) == len(user) // CHUNK
    for k, chunk in enumerate(got["heard"]):
        np.testing.assert_allclose(chunk, resample(user[k * CHUNK:(k + 1) * CHUNK], SESSION_SR, 16_000), atol=2e-3)
    channel, pieces_at = expected_model_channel(len(r.pcm), got["decisions"], got["said"])
    np.testing.assert_array_equal(r.pcm[:, 1], channel)
    for k, d in got["decisions"]:
        if d == "ss" and (k + 1) * CHUNK < len(r.pcm):
            assert r.pcm[(k + 1) * CHUNK, 1] == to_pcm16(np.float32(CLICK))  # the answer's first sound, on time
    # Each piece's text is stamped on the frame where its audio starts.
    n = 480
    assert [t for t, _ in r.episode.model_text] == [round(a // n * n / SESSION_SR, 3) for a in pieces_at]
    return sum(d == "ss" for _, d in got["decisions"])


@pytest.mark.parametrize("config", CONFIGS)
def test_one_episode_of_every_config(config: str, reply: np.ndarray, mini_sets: Mapping[str, Path],
                                     tmp_path: Path) -> None:
    folder = mini_sets[config.split("_")[0]]
    fake = fake_freeze_omni(voice=reply)
    agent = agent_with(fake)
    ids = shortest_cases(folder, config)
    answers = 0
    for r in run_cases(agent, folder, config, tmp_path, ids, after=taken(fake)):
        if r.plan.forced is not None:  # M3 Full: teacher forcing, which this model has not
            assert r.episode.status == "skipped" and r.episode.failure == (
                "adapter freeze-omni lacks teacher_forcing, which this case (full) needs")
            continue
        assert r.episode.status == "ok", r.episode.failure
        assert r.extra["role"] == (r.plan.system_prompt or SERVER_ROLE)  # no prompt: the server's own role
        answers += check_episode(r)
    assert answers, f"the fake never answered in {config}: the timing checks above checked nothing"


@pytest.fixture(scope="module")
def talk(speak) -> dict[str, np.ndarray]:
    return {"short": speak("Hm."), "ask": speak("Hi, can you help me with something?"),
            "again": speak("Wait, one more thing, please.")}


def hand_plan(talk: dict[str, np.ndarray]) -> EpisodePlan:
    """A short sound (too short to be a turn), a question, and a second question while the answer plays."""
    s = SESSION_SR
    return EpisodePlan(steps=[Silence(s // 2), Play("u0", "BC", talk["short"]), Silence(int(2.5 * s)),
                              Play("u1", "T", talk["ask"]), Silence(int(2.5 * s)), Play("u2", "T", talk["again"]),
                              Silence(9 * s)],
                       vad=VAD_PRESETS["mpe"], vad_preset="mpe", protocol={}, system_prompt="You are Aria.")


class HandCase:
    case_id = "hand-interrupt"
    benchmark = "hand"
    tts_backend = "piper"


def test_short_sound_is_ignored_and_a_new_turn_interrupts(talk: dict[str, np.ndarray], reply: np.ndarray,
                                                          tmp_path: Path) -> None:
    fake = fake_freeze_omni(voice=reply)
    agent = agent_with(fake)
    plan = hand_plan(talk)
    ep = run_episode(agent, HandCase(), plan, tmp_path)
    assert ep.status == "ok", ep.failure
    pcm = np.round(read_wav(tmp_path / "hand-interrupt.wav")[0] * 32768).astype(np.int16)
    r = Ran(ep, plan, pcm, taken(fake)(ep))
    assert [d for _, d in r.extra["decisions"]] == ["el", "ss", "ss"]  # the "Hm." was not a turn
    first, second = [k for k, d in r.extra["decisions"] if d == "ss"]
    a, b = (first + 1) * CHUNK, (second + 1) * CHUNK
    first_answer = sum(len(x) for c, x in r.extra["said"] if c == first) - LEAD
    assert b - a < first_answer  # the second question came while the first answer was still playing ...
    assert r.pcm[b - 480:b, 1].any() and r.pcm[b, 1] == to_pcm16(np.float32(CLICK))  # ... and cut it there
    check_episode(r)  # the whole channel and the text stamps, with the rest of the first answer never played
    assert fake.pipeline.roles == ["You are Aria."]


def test_reset_gives_a_fresh_session(reply: np.ndarray, mini_dataset: Path, tmp_path: Path) -> None:
    fake = fake_freeze_omni(voice=reply)
    agent = agent_with(fake)
    a, b = first_cases(mini_dataset, "mpe", 2)
    runs = {}
    for name, cid, seed in (("a0", a, 0), ("b", b, 0), ("a0_again", a, 0), ("a1", a, 1)):
        out = tmp_path / name
        out.mkdir()
        (r,) = run_cases(agent, mini_dataset, "mpe", out, [cid], seed=seed)
        assert r.episode.status == "ok", r.episode.failure
        runs[name] = r
    np.testing.assert_array_equal(runs["a0"].pcm, runs["a0_again"].pcm)
    assert runs["a0"].episode.model_text == runs["a0_again"].episode.model_text
    # The seed reaches the sampler: the fake draws which answer it gives with torch's generator.
    texts = {name: "".join(t for _, t in runs[name].episode.model_text) for name in ("a0", "a1")}
    assert texts["a0"] != texts["a1"] and all(any(x in t for x in ("".join(s) for s in SCRIPTS))
                                              for t in texts.values())


def test_reset_drops_half_heard_chunks_and_unplayed_speech(reply: np.ndarray) -> None:
    fake = fake_freeze_omni(voice=reply)
    agent = agent_with(fake)
    n = agent.frame_size
    loud, quiet = np.full(n, 0.3, np.float32), np.zeros(n, np.float32)
    agent.reset(None, 0)
    for i in range(2 * SESSION_SR // n):  # a second of talk, then silence: it answers
        agent.step(loud if i < SESSION_SR // n else quiet)
    assert [d for _, d in fake.clock.decisions] == ["ss"] and agent.playback.speaking
    agent.step(loud)  # part of a chunk the VAD has not heard yet
    agent.reset(None, 0)
    frames = [agent.step(quiet) for _ in range(CHUNK // n)]
    assert all(not f.audio.any() and f.text is None for f in frames)
    assert len(fake.vad.heard) == 1 and not fake.vad.heard[0].any()
    assert not fake.vad.in_dialog and agent.listening is None


def test_model_errors_fail_the_episode_with_the_reason(talk: dict[str, np.ndarray], tmp_path: Path) -> None:
    fake = fake_freeze_omni(generate_error=True)
    ep = run_episode(agent_with(fake), HandCase(), hand_plan(talk), tmp_path)
    k = fake.clock.decisions[-1][0]
    assert fake.clock.decisions[-1][1] == "ss"
    t = ((k + 1) * CHUNK - 480) / SESSION_SR  # the step that completed chunk k
    assert ep.status == "failed" and ep.failure == (
        f"step raised RuntimeError: CUDA error: device-side assert triggered at t={t:.3f}s")

    class ContinueFirst(FakeVAD):
        def predict(self, audio: np.ndarray) -> dict[str, Any]:
            out = super().predict(audio)
            return {"status": "cl", "feature": [[[0.0] * 80] * 19]} if self.clock.chunk == 0 else out

    fake = fake_freeze_omni()
    fake.vad = ContinueFirst(fake.clock)
    ep = run_episode(agent_with(fake), HandCase(), hand_plan(talk), tmp_path)
    assert ep.status == "failed" and ep.failure == (
        "step raised FreezeOmniError: the VAD said 'cl' at chunk 0 before any speech start at t=0.140s")


def test_frames_must_tile_the_chunk_and_server_json_must_be_whole() -> None:
    fake = fake_freeze_omni()
    with pytest.raises(ValueError, match="does not divide"):
        FreezeOmniAgent(parts=fake.parts(), frame_size=1000)
    assert FreezeOmniAgent(parts=fake.parts(), frame_size=1920).frame_size == 1920  # two frames a chunk
    with pytest.raises(UsageError, match="server.json lacks \\['decoder_N'\\]"):
        FreezeOmniParts(fake.pipeline, fake.tts, fake.vad, {k: v for k, v in SERVER.items() if k != "decoder_N"})
    agent = agent_with(fake)
    agent.reset(None, 0)
    with pytest.raises(RuntimeError, match="no teacher forcing"):
        agent.step(np.zeros(480, np.float32), np.zeros(480, np.float32))


def test_registered_and_a_duplex_agent() -> None:
    agent = load_adapter("freeze-omni", parts=fake_freeze_omni().parts(), device="cpu")
    assert isinstance(agent, DuplexAgent) and agent.name == "freeze-omni"
    assert agent.capabilities == {"system_prompt", "text_output"} and agent.chunk_s == 0.16


SHIMS = {
    "models/pipeline.py": "from tests.fake_freeze_omni import Clock, FakePipeline\n\n\n"
                          "class inferencePipeline(FakePipeline):\n"
                          "    def __init__(self, args):\n"
                          "        super().__init__(Clock())\n"
                          "        self.args = args\n",
    "models/decoder/llm2tts.py": "from tests.fake_freeze_omni import FakeTTS\n\n\n"
                                 "class llm2TTS(FakeTTS):\n"
                                 "    def __init__(self, model_path):\n"
                                 "        super().__init__()\n"
                                 "        self.model_path = model_path\n",
    "web/vad.py": "from tests.fake_freeze_omni import Clock, FakeVAD\n\n\n"
                  "class VAD(FakeVAD):\n"
                  "    def __init__(self):\n"
                  "        super().__init__(Clock())\n",
}


def test_the_loader_imports_the_repository_code(tmp_path: Path, monkeypatch) -> None:
    """inferencePipeline(args), llm2TTS(model_path), VAD() and server.json, from a checkout that is not a package
    (here a stand-in checkout whose modules are the fakes)."""
    repo, ckpt = tmp_path / "Freeze-Omni", tmp_path / "checkpoints"
    for rel, text in SHIMS.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored after the test, with whatever the loader added
    for name in [m for m in sys.modules if m.split(".")[0] in ("models", "web")]:
        monkeypatch.delitem(sys.modules, name)
    try:
        with pytest.raises(UsageError, match="freeze-omni needs Freeze-Omni's code"):
            load_parts(str(ckpt), "Qwen2-7B-Instruct")
        with pytest.raises(UsageError, match="not a Freeze-Omni checkout"):
            load_parts(str(ckpt), "Qwen2-7B-Instruct", repo_dir=str(tmp_path))
        with pytest.raises(UsageError, match="server.json"):
            load_parts(str(ckpt), "Qwen2-7B-Instruct", repo_dir=str(repo))
        ckpt.mkdir()
        (ckpt / "server.json").write_text(json.dumps(SERVER))
        agent = FreezeOmniAgent(checkpoint_dir=str(ckpt), llm_path="/w/Qwen2-7B-Instruct", repo_dir=str(repo),
                                top_k=5, device="cpu")
        parts = agent.parts
        assert parts is not None and parts.server == SERVER
        assert parts.pipeline.args == Namespace(model_path=str(ckpt), llm_path="/w/Qwen2-7B-Instruct", top_p=0.8,
                                                top_k=5, temperature=0.8)
        assert parts.tts.model_path == str(ckpt) and type(parts.vad).__module__ == "web.vad"
        # Not a git checkout: its commit cannot be told, which is said in one line and recorded.
        assert parts.upstream[0] == {"repo": "VITA-MLLM/Freeze-Omni", "kind": "git", "pinned": UPSTREAM[0].ref,
                                     "used": None, "matches": False}
        assert [u["repo"] for u in parts.upstream[1:]] == [str(ckpt), "/w/Qwen2-7B-Instruct"]
        assert agent.runtime()["upstream"] == parts.upstream
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] in ("models", "web")]:
            sys.modules.pop(name, None)


def test_without_a_case_prompt_the_servers_role_is_prefilled(talk: dict[str, np.ndarray]) -> None:
    """The server prefills its own role for every user (web/parms.py:43-49) and a client prompt replaces it; the
    adapter never asks for role=None, which would select the checkpoint's training role instead. The fake, like the
    real pipeline, refuses a second "pre" on a session that already has past key values."""
    fake = fake_freeze_omni()
    agent = agent_with(fake)
    agent.reset(None, 0)
    agent.reset("You are Aria.", 0)
    assert fake.pipeline.roles == [SERVER_ROLE, "You are Aria."] and CHECKPOINT_ROLE not in fake.pipeline.roles
    assert SERVER_ROLE.startswith("You are a helpful voice assistant.") and SERVER_ROLE.count(" " * 77) == 3
    assert agent.runtime()["default_role"] == SERVER_ROLE and agent.runtime()["upstream"] == []
    with pytest.raises(AssertionError, match="past key values already exist"):
        fake.pipeline.speech_dialogue(None, stat="pre", role="x", past_key_values={"role": "y", "n": 1})
    with pytest.raises(UsageError, match="default_role"):
        FreezeOmniAgent(parts=fake.parts(), device="cpu", default_role=" ")
    # speech_dialogue takes no other keyword (models/pipeline.py:25-33): the state of an answer still holding its
    # "text" or "hidden_state" is refused, as bin/server.py deletes them before every call (159-160, 279-282).
    state = fake.pipeline.speech_dialogue(None, stat="pre", role="x")
    for stray in ("text", "hidden_state"):
        with pytest.raises(TypeError, match=stray):
            fake.pipeline.speech_dialogue(None, **state, **{stray: "x"})
