"""`fun-audio-chat` (adapters/fun_audio_chat.py): `turn-based` with Fun-Audio-Chat inside, against a fake of its
library written from its public code (tests/fake_fun_audio_chat.py), not real weights.

Checked: a DSB-IFEval mini barge-in episode through the real plan and orchestrator with whole-turn handover (each
scripted turn reaches the model whole at 16 kHz, the case's prompt appended once to the system prompt, the second
turn with the first in its history, both replies played sample for sample and never cut by the user's barge-in,
their text stamped where they start, every parameter in rec.json); the default end-of-turn quiet against the longest
pause DSB-IFEval puts inside a user turn; seeding, reset and the history window; arguments and the loader's one-line
error without the code; the default (paper) handover answering inside a pause of the turn; the loader's imports in
the repository's order against a stand-in checkout (the old order fails there) and a checkout at another commit
logged in one line and recorded.
`check-adapter` runs on it in tests/test_check_adapter.py.
"""

from __future__ import annotations

import importlib
import json
import logging
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from adapters.fun_audio_chat import (
    AUDIO_TEMPLATE,
    END_OF_TURN_S,
    FRAME_SIZE,
    GEN_KWARGS,
    S2M_PROMPT,
    SP_GEN_KWARGS,
    SPEECH_VOCAB,
    UPSTREAM,
    FunAudioChat,
    import_code,
    upstream_of,
)
from adapters.registry import adapter_target, load_adapter
from dataset_builder.audio import SESSION_SR, to_pcm16
from dataset_builder.benchmarks import benchmark_for_config
from dataset_builder.errors import UsageError
from eval.orchestrator import RunOptions, run_episode
from tests.fake_fun_audio_chat import SENTENCES, TOKEN_SAMPLES, fake_checkout

PARTS = "tests.fake_fun_audio_chat:fake_parts"
# The plan's waits, lengthened past the model's end-of-turn quiet so that each reply is heard before the next turn
# (and before the episode ends): the settings docs/models.md gives for running it on DSB-IFEval.
LONG_WAITS = {"inter_turn_gap_s": 17.0, "barge_in_timeout_s": 17.0, "trailing_s": 17.0, "response_cap_s": 60.0}


def turn(seconds: float, level: float, sr: int = 16_000) -> np.ndarray:
    """A tone of `seconds` at `level`, then 1 s of quiet: a user turn as the wrapper hands it over."""
    t = np.arange(round(seconds * sr)) / sr
    return np.concatenate([level * np.sin(2 * np.pi * 220 * t), np.zeros(sr)]).astype(np.float32)


def test_dsb_ifeval_barge_in_episode(mini_sets: Mapping[str, Path], tmp_path: Path) -> None:
    folder, config = mini_sets["ifeval"], "ifeval"
    bench = benchmark_for_config(config)
    items = bench.function("cases")(folder, config)
    item = next(c for c in items if c.timed.conversation.turn2.mode == "barge_in" and c.case.level == "L1")
    (case, audio), = bench.function("case_audio")(folder, config, wanted={item.case_id})
    agent = load_adapter("fun-audio-chat", parts=PARTS, handover="whole-turn")
    protocol = replace(bench.protocol_class()().for_agent(agent), **LONG_WAITS)
    ep_plan = bench.function("plan")(case, audio, protocol, agent.sample_rate)
    try:
        ep = run_episode(agent, case, ep_plan, tmp_path, seed=3, options=RunOptions(step_timeout_s=30.0))
    finally:
        agent.close()
    assert ep.status == "ok", ep.failure
    model, detok = agent.model.parts.model, agent.model.parts.detokenizer
    assert len(model.calls) == len(detok.waves) == 2  # one reply per scripted turn: each reached the model whole
    prompt = case.case.system_prompt
    assert prompt
    for k, call in enumerate(model.calls):
        system = f"<|im_start|>system\n{S2M_PROMPT} {prompt}<|im_end|>\n"
        assert call["prompt"].startswith(system) and call["prompt"].count(prompt) == 1
        assert call["prompt"].count("<|AUDIO|>") == len(call["audios"]) == k + 1
        assert call["gen_kwargs"] == GEN_KWARGS and call["gen_kwargs"]["max_new_tokens"] == 2048
        assert call["sp_gen_kwargs"] == SP_GEN_KWARGS
    # The first reply's text is the assistant's message in the second turn's prompt.
    assert f"<|im_start|>assistant\n{model.calls[0]['text']}<|im_end|>" in model.calls[1]["prompt"]
    # Heard at 16 kHz: the whole clip, from just before its onset (the 0.5 s before the VAD confirmed it), to 1.0 s
    # after its last sound (the 16 s of quiet that ended it, cut).
    for (a, b), heard in zip(item.clips.values(), model.calls[1]["audios"], strict=True):
        assert b - a + 0.5 < heard.size / 16_000 < b - a + 1.6  # less the clip's own near-silent tail
        assert np.abs(heard[-16_000:]).max() <= 1e-3 < np.abs(heard[-16_001])
    # Both replies play whole: the user barged in over the first one 3.0 s after it started, and it went on.
    rec = json.loads((tmp_path / f"{case.case_id}.rec.json").read_text())
    assert rec["gold"]["t2_start"]["cause"] == "model_onset"
    pcm = model_channel(tmp_path, case.case_id)
    onsets = [t for t, _ in ep.model_text]
    assert [t for _, t in ep.model_text] == [c["text"] for c in model.calls]
    assert all(t in SENTENCES for _, t in ep.model_text)
    for onset, (tokens, wave) in zip(onsets, detok.waves, strict=True):
        start = round(onset * SESSION_SR)
        assert start % FRAME_SIZE == 0 and wave.size == len(tokens) * TOKEN_SAMPLES
        assert np.array_equal(pcm[start:start + wave.size], to_pcm16(wave))
    # The plan heard the first reply start (Silero on the model channel, its span padded by 30 ms, within the
    # reply's first second) and played turn 2 over it 3.0 s later.
    t2_start, heard_onset = rec["gold"]["t2_start"]["at_s"], rec["gold"]["t2_start"]["model_onset_s"]
    assert onsets[0] - 0.04 <= heard_onset < onsets[0] + 1.0 and t2_start - heard_onset == pytest.approx(3.0, abs=0.08)
    assert t2_start + 3.0 < onsets[0] + detok.waves[0][1].size / SESSION_SR  # the reply went on under turn 2
    # Every parameter, and Fun-Audio-Chat's own, recorded.
    runtime = rec["adapter"]["runtime"]
    assert {k: runtime[k] for k in ("inner", "inner_args", "inner_sample_rate", "end_of_turn_s", "barge_in_stop_s",
                                     "response_delay_s")} == {
        "inner": "adapters.fun_audio_chat:FunAudioChat", "inner_args": {"parts": PARTS}, "inner_sample_rate": 16_000,
        "end_of_turn_s": 16.0, "barge_in_stop_s": -1.0, "response_delay_s": 0.0}
    assert runtime["handover"] == "whole-turn" and runtime["upstream"] == []
    assert runtime["inner_describe"] == {
        "model_path": "FunAudioLLM/Fun-Audio-Chat-8B", "detokenizer_path": "FunAudioLLM/Fun-CosyVoice3-0.5B-2512",
        "device": "cpu", "dtype": "bfloat16", "parts": PARTS, "base_prompt": S2M_PROMPT, "gen_kwargs": GEN_KWARGS,
        "sp_gen_kwargs": SP_GEN_KWARGS, "history_turns": 8, "trailing_s": 1.0, "input_sr": 16_000, "token_hop_len": 750,
        "pre_lookahead_len": 3, "speaker": "token2wav's default (embedding=None)", "revision": None}
    assert rec["adapter"]["name"] == "fun-audio-chat" and rec["adapter"]["version"] == f"1/fun-audio-chat:{PARTS}"
    assert sorted(rec["adapter"]["capabilities"]) == ["system_prompt", "text_output"]


def model_channel(out: Path, case_id: str) -> np.ndarray:
    import soundfile as sf

    pcm, sr = sf.read(out / f"{case_id}.wav", dtype="int16")
    assert sr == SESSION_SR
    return pcm[:, 1]


def test_end_of_turn_outlasts_every_pause_inside_a_dsb_ifeval_turn() -> None:
    """The full grid's longest pause inside a user turn: R4_A's 12 s pause, drawn up to 1.3x. Turn 1 has none."""
    from dataset_builder.ifeval.grid import INSTANCES, compose, pause_range

    grid = compose(0, ["v1", "v2", "v3"], INSTANCES)
    pauses = [(s.duration_s, c.conversation_id, t.turn_id) for c in grid.conversations for t in c.turns
              for s in t.segments if s.kind == "silence"]
    assert max(pauses) == (15.6, "R4-R4_A-i5", "t2") and not [p for p in pauses if p[2] == "t1"]
    assert pause_range("pause", 12.0, False)[1] == 15.6 <= END_OF_TURN_S


def test_seed_reset_and_history_window() -> None:
    m = FunAudioChat(parts=PARTS, history_turns=2)
    m.reset("Be brief.", 7)
    first = [m.reply(turn(s, 0.3), 16_000) for s in (1.0, 2.0, 1.5)]
    model = m.parts.model
    assert [len(c["audios"]) for c in model.calls] == [1, 2, 2]  # this turn and the one before it
    assert all(c["prompt"].count("Be brief.") == 1 for c in model.calls)
    # One 25 Hz token per 40 ms of speech heard, 24 kHz out.
    assert [r.audio.size for r in first] == [25 * TOKEN_SAMPLES, 50 * TOKEN_SAMPLES, 38 * TOKEN_SAMPLES]
    assert {r.sample_rate for r in first} == {24_000} and all(r.text in SENTENCES for r in first)
    m.reset("Be brief.", 7)
    again = [m.reply(turn(s, 0.3), 16_000) for s in (1.0, 2.0, 1.5)]
    assert all(np.array_equal(a.audio, b.audio) and a.text == b.text for a, b in zip(first, again, strict=True))
    m.reset("Be brief.", 8)  # another seed: another sampling draw
    assert not np.array_equal(m.reply(turn(1.0, 0.3), 16_000).audio, first[0].audio)
    m.reset(None, 7)  # no prompt: the mode prompt alone, no history; 5 s of quiet after the turn cut to 1.0 s
    m.reply(np.concatenate([turn(1.0, 0.3), np.zeros(4 * 16_000, np.float32)]), 16_000)
    assert model.calls[-1]["prompt"].startswith(f"<|im_start|>system\n{S2M_PROMPT}<|im_end|>\n")
    assert len(model.calls[-1]["audios"]) == 1 and np.array_equal(model.calls[-1]["audios"][0], turn(1.0, 0.3))
    assert m.reply(np.zeros(16_000, np.float32), 16_000) is None  # no speech tokens: nothing to play


def test_arguments_registry_and_loader_error(tmp_path: Path) -> None:
    assert adapter_target("fun-audio-chat") == "adapters.fun_audio_chat:FunAudioChatAgent"
    agent = load_adapter("fun-audio-chat", parts=PARTS, end_of_turn_s=0.8, barge_in_stop_s=0.4, max_new_tokens=64)
    assert (agent.end_of_turn_s, agent.barge_in_stop_s, agent.model.gen_kwargs["max_new_tokens"]) == (0.8, 0.4, 64)
    with pytest.raises(UsageError, match=r"does not take \['temprature'\]"):
        load_adapter("fun-audio-chat", parts=PARTS, temprature=0.5)
    with pytest.raises(UsageError, match="dtype must be"):
        FunAudioChat(parts=PARTS, dtype="bf16")
    with pytest.raises(UsageError, match="not an importable 'module:function'"):
        FunAudioChat(parts="tests.fake_fun_audio_chat:missing")
    with pytest.raises(UsageError) as err:
        FunAudioChat(repo_dir=str(tmp_path))  # an empty folder: no Fun-Audio-Chat code anywhere
    assert "needs Fun-Audio-Chat's code" in str(err.value) and "\n" not in str(err.value)


@pytest.fixture
def clean_imports() -> Iterator[None]:
    """The stand-in checkout's modules and sys.path entries are gone after the test."""
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        del sys.modules[name]


def test_the_loader_imports_cosyvoice_the_way_the_repository_does(tmp_path: Path, clean_imports: None) -> None:
    """With the README's set-up (the checkout alone on the path) CosyVoice can be imported only once
    utils.cosyvoice_detokenizer has put third_party/CosyVoice on sys.path: the old first import of
    `cosyvoice.cli.cosyvoice` fails there, the loader's order does not."""
    root = fake_checkout(tmp_path / "Fun-Audio-Chat")
    sys.path.insert(0, str(root))
    with pytest.raises(ModuleNotFoundError, match="cosyvoice"):
        importlib.import_module("cosyvoice.cli.cosyvoice")  # what the adapter used to import first
    register, cosyvoice3, token2wav = import_code(None)
    register()
    assert sys.modules["funaudiochat.register"].REGISTERED == [True]
    assert cosyvoice3 is sys.modules["cosyvoice.cli.cosyvoice"].CosyVoice3 and token2wav.__name__ == "token2wav"
    assert Path(sys.modules["cosyvoice"].__file__).resolve().is_relative_to(root / "third_party" / "CosyVoice")


def test_a_checkout_at_another_commit_is_said_in_one_line_and_recorded(tmp_path: Path, clean_imports: None,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    root = fake_checkout(tmp_path / "Fun-Audio-Chat")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    with caplog.at_level(logging.WARNING, logger="duplex_eval.upstream"):
        found = upstream_of(root, str(tmp_path / "weights"), str(tmp_path / "detok"))
    repo, cosy = found[0], found[1]
    assert repo == {"repo": "FunAudioLLM/Fun-Audio-Chat", "kind": "git", "pinned": UPSTREAM[0].ref, "used": head,
                    "matches": False}
    # The submodule folder is inside the same git checkout here, so it reports the same commit, not CosyVoice's.
    assert cosy["repo"] == "FunAudioLLM/CosyVoice" and cosy["matches"] is False
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "Fun-Audio-Chat checkout is at " + head in lines[0] and "8ba984b6" in lines[0]
    assert [f["used"] for f in found[2:]] == [None, None]  # plain folders: the revision cannot be told


def test_default_handover_is_the_papers_and_recorded() -> None:
    agent = load_adapter("fun-audio-chat", parts=PARTS)
    runtime = agent.runtime()
    assert (agent.end_of_turn_s, runtime["handover"], runtime["end_of_turn_s"]) == (1.0, "paper", 1.0)
    assert agent.frame_size == 480  # DSB-IFEval D.1: 20 ms frames at 24 kHz
    assert runtime["upstream"] == []  # a test double: nothing was loaded
    whole = load_adapter("fun-audio-chat", parts=PARTS, handover="whole-turn")
    assert whole.end_of_turn_s == END_OF_TURN_S
    with pytest.raises(UsageError, match="handover must be one of"):
        load_adapter("fun-audio-chat", parts=PARTS, handover="vad")


def test_paper_handover_answers_inside_a_pause_of_the_turn(speak) -> None:
    """DSB-IFEval scores TAKE_TURN inside a pause of the user's turn (dataset_builder/ifeval/DESIGN.md): with the
    paper's handover the input before the pause reaches the model after 1.0 s of quiet (as the VAD hears it) with
    that 1.0 s, and the reply starts in the pause; with whole-turn handover nothing is said there."""
    said = speak("Let me think about what I want to order for dinner tonight.")
    pause = np.zeros(round(3.5 * SESSION_SR), np.float32)
    user = np.concatenate([said, pause, said, np.zeros(2 * SESSION_SR, np.float32)])
    user = np.pad(user, (0, -user.size % FRAME_SIZE))
    onsets = {}
    for handover in ("paper", "whole-turn"):
        agent = load_adapter("fun-audio-chat", parts=PARTS, handover=handover)
        agent.reset(None, 0)
        out = np.concatenate([agent.step(user[i:i + FRAME_SIZE]).audio for i in range(0, user.size, FRAME_SIZE)])
        agent.close()
        in_pause = out[said.size:said.size + pause.size]
        onsets[handover] = np.flatnonzero(in_pause)[0] / SESSION_SR if in_pause.any() else None
        heard = agent.model.parts.model.calls
        if handover == "paper":
            first = heard[0]["audios"][-1]
            assert np.abs(first[-16_000:]).max() <= 1e-3 < np.abs(first[-16_001])  # its 1.0 s trailing segment
    assert onsets["whole-turn"] is None
    assert onsets["paper"] is not None and 1.0 < onsets["paper"] < 1.6


def test_the_fake_refuses_what_fun_audio_chat_refuses_and_the_adapter_sends_none_of_it() -> None:
    """The processor refuses a count of `<|AUDIO|>` placeholders other than the audios given
    (funaudiochat/processing_funaudiochat.py:211-216 at 8ba984b6) and a call without text (163); CosyVoice3 cannot
    embed a token outside its 0..6560 vocabulary (infer_s2s.py:75 filters them). The adapter gives every turn of its
    history its audio and hands token2wav only vocabulary tokens."""
    from tests.fake_fun_audio_chat import fake_parts

    parts = fake_parts()
    one = turn(1.0, 0.3)
    two_turns = parts.processor.apply_chat_template(
        [{"role": "user", "content": AUDIO_TEMPLATE}, {"role": "assistant", "content": "Hi."},
         {"role": "user", "content": AUDIO_TEMPLATE}], add_generation_prompt=True, tokenize=False)
    with pytest.raises(ValueError, match="Found 2 <\\|AUDIO\\|> tokens in provided text but received 1 audios"):
        parts.processor(text=two_turns, audio=[one], return_tensors="pt")
    with pytest.raises(ValueError, match="specify `text`"):
        parts.processor(audio=[one])
    with pytest.raises(IndexError, match="outside CosyVoice3's vocabulary"):
        parts.token2wav(parts.detokenizer, [SPEECH_VOCAB], embedding=None)
    m = FunAudioChat(parts=PARTS)
    m.reset(None, 0)
    for seconds in (1.0, 2.0, 1.5):
        m.reply(turn(seconds, 0.3), 16_000)
    calls = m.parts.model.calls
    assert [c["prompt"].count("<|AUDIO|>") for c in calls] == [len(c["audios"]) for c in calls] == [1, 2, 3]
    assert all(tokens and all(0 <= t < SPEECH_VOCAB for t in tokens) for tokens, _ in m.parts.detokenizer.waves)
    assert any(not 0 <= t < SPEECH_VOCAB for c in calls for t in c["speech"])  # the model's control ids, filtered
