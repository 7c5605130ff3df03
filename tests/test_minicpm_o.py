"""The MiniCPM-o 4.5 duplex adapter (adapters/minicpm_o.py) against an API fake of the model
(tests/fake_minicpm_o.py): real mini sets, real plans, the real orchestrator — not the real weights.

The fake answers at a chunk it records (`spoke_at`), with a click on its reply's first sample, so where that
reply must sit in the recording is known exactly: chunk k ends at session sample (k + 1) * 24000.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from adapters.minicpm_o import (
    DEFAULT_PROMPT,
    DEFAULT_REF,
    TURN_GENERATE,
    UPSTREAM,
    VOICE_PREFIX,
    VOICE_SUFFIX,
    MiniCPMOAgent,
    system_turn,
)
from adapters.protocol import DuplexAgent
from adapters.registry import load_adapter
from dataset_builder.audio import SESSION_SR, resample, to_pcm16
from dataset_builder.benchmarks import benchmark_for_config
from dataset_builder.errors import UsageError
from eval.run import RunConfig, _load
from tests.adapter_episodes import CONFIGS, Ran, first_cases, run_cases, shortest_cases
from tests.fake_minicpm_o import CLICK, FIRST_CHUNK, FIRST_PAD, FakeMiniCPMODuplex, modeling_module

SECOND = SESSION_SR  # one model chunk on the session clock
# A level the fake hears as talk, while the 80 samples of it that the next chunk carries (FIRST_CHUNK) stay below its
# floor: that next chunk counts as the silence after the talk.
LOUD = 0.1


@pytest.fixture(scope="module")
def voice_wav(tmp_path_factory, speak) -> Path:
    """The reference voice file (any wav: the adapter reads it to 16 kHz mono, as the README's librosa.load)."""
    path = tmp_path_factory.mktemp("voice") / "ref.wav"
    sf.write(path, speak("This is how I sound."), SESSION_SR)
    return path


@pytest.fixture(scope="module")
def reply(speak) -> np.ndarray:
    return speak("Sure, I can help with that. What do you need?")


def agent_with(voice_wav: Path, reply: np.ndarray | None = None, **fake: Any) -> tuple[MiniCPMOAgent,
                                                                                        FakeMiniCPMODuplex]:
    model = FakeMiniCPMODuplex(voice=reply, **fake)
    return MiniCPMOAgent(model=model, ref_audio=str(voice_wav)), model


def expected_model_channel(n: int, starts: list[int], voice: np.ndarray) -> np.ndarray:
    """The model channel a correct adapter records: silence, and the model's whole reply from each start."""
    out = np.zeros(n, np.int16)
    said = to_pcm16(voice)
    for s in starts:
        out[s:s + len(said)] = said[: max(0, n - s)]
    return out


@pytest.mark.parametrize("config", CONFIGS)
def test_one_episode_of_every_config(config: str, voice_wav: Path, reply: np.ndarray,
                                     mini_sets: Mapping[str, Path], tmp_path: Path) -> None:
    folder = mini_sets[config.split("_")[0]]
    agent, model = agent_with(voice_wav, reply)

    def taken(_ep: Any) -> dict[str, Any]:
        return {"spoke_at": list(model.spoke_at), "received": list(model.received), "prepare": model.prepare_calls[-1]}

    ids = shortest_cases(folder, config)
    runs: list[Ran] = list(run_cases(agent, folder, config, tmp_path, ids, after=taken))
    replies = 0
    for r in runs:
        ep = r.episode
        if r.plan.forced is not None:  # M3 Full: teacher forcing, which this model has not
            assert ep.status == "skipped" and ep.failure == (
                "adapter minicpm-o lacks teacher_forcing, which this case (full) needs")
            continue
        assert ep.status == "ok", ep.failure
        got = r.extra
        # The case's system prompt (or the duplex preamble when it has none), in the system turn OpenBMB's callers
        # write, and the voice reached prepare.
        prefix, suffix = system_turn(r.plan.system_prompt or DEFAULT_PROMPT)
        assert (got["prepare"]["prefix_system_prompt"], got["prepare"]["suffix_system_prompt"]) == (prefix, suffix)
        assert got["prepare"]["prompt_wav_path"] == str(voice_wav)
        # Every whole second of the user channel reached the model as one 16 kHz chunk, in order; the model's mel
        # processor keeps 80 samples of the first back (FIRST_CHUNK), so each chunk it takes starts 5 ms early.
        user = r.pcm[:, 0].astype(np.float32) / 32768
        assert len(got["received"]) == len(user) // SECOND
        heard = np.concatenate([np.zeros(FIRST_PAD - FIRST_CHUNK, np.float32)] + [
            resample(user[k * SECOND:(k + 1) * SECOND], SESSION_SR, 16_000) for k in range(len(user) // SECOND)])
        for k, chunk in enumerate(got["received"]):
            assert chunk.shape == (16_000,)
            np.testing.assert_allclose(chunk, heard[k * 16_000:(k + 1) * 16_000], atol=2e-3)
        # Each reply starts, click first, exactly where the chunk that prompted it ends; nothing else is said.
        starts = [(k + 1) * SECOND for k in got["spoke_at"]]
        assert all(r.pcm[s, 1] == to_pcm16(np.float32(CLICK)) for s in starts if s < len(r.pcm))
        np.testing.assert_array_equal(r.pcm[:, 1], expected_model_channel(len(r.pcm), starts, model.voice))
        # Its text is stamped where the audio it came with starts: one piece per second of reply.
        pieces = -(-len(model.voice) // SECOND)
        text_times = sorted(round((k + 1 + i) * 1.0, 3) for k in got["spoke_at"] for i in range(pieces)
                            if (k + 1 + i) * SECOND < len(r.pcm))
        assert [t for t, _ in ep.model_text] == text_times
        replies += len(starts)
    assert replies, f"the fake never answered in {config}: the timing checks above checked nothing"


@pytest.fixture(scope="module")
def mpe_case(mini_dataset: Path) -> tuple[Path, str]:
    return mini_dataset, first_cases(mini_dataset, "mpe", 1)[0]


def test_reset_gives_a_fresh_session(voice_wav: Path, reply: np.ndarray, mini_dataset: Path,
                                     tmp_path: Path) -> None:
    agent, model = agent_with(voice_wav, reply)
    a, b = first_cases(mini_dataset, "mpe", 2)
    runs = {}
    for name, cid, seed in (("a0", a, 0), ("b", b, 0), ("a0 again", a, 0), ("a1", a, 1)):
        out = tmp_path / name.replace(" ", "_")
        out.mkdir()
        (r,) = run_cases(agent, mini_dataset, "mpe", out, [cid], seed=seed)
        assert r.episode.status == "ok", r.episode.failure
        runs[name] = r
    np.testing.assert_array_equal(runs["a0"].pcm, runs["a0 again"].pcm)
    assert runs["a0"].episode.model_text == runs["a0 again"].episode.model_text
    # The seed reaches the model's sampler: same audio here (the fake's speech is fixed), other words.
    np.testing.assert_array_equal(runs["a0"].pcm, runs["a1"].pcm)
    assert runs["a0"].episode.model_text != runs["a1"].episode.model_text
    assert model.prompts[-4:] == [DEFAULT_PROMPT] * 4  # MPE plays no system prompt: the model's preamble


def test_reset_drops_half_heard_chunks_and_unplayed_speech(voice_wav: Path) -> None:
    agent, model = agent_with(voice_wav)
    n = agent.frame_size
    loud = np.full(n, LOUD, np.float32)
    quiet = np.zeros(n, np.float32)
    agent.reset(None, 0)
    for _ in range(2 * SECOND // n):  # a second of talk, then a silent second: the fake starts answering
        agent.step(loud if model.audio_chunk_idx == 0 else quiet)
    assert model.spoke_at == [1] and agent.playback.speaking
    for _ in range(SECOND // n // 2):  # half a chunk of talk the model has not heard yet
        agent.step(loud)
    agent.reset(None, 0)
    frames = [agent.step(quiet) for _ in range(SECOND // n)]
    assert all(not f.audio.any() and f.text is None for f in frames)  # nothing left over plays
    assert len(model.received) == 1 and not model.received[0].any()  # the half chunk never reached the model


def test_model_errors_fail_the_episode_with_the_reason(voice_wav: Path, mpe_case: tuple[Path, str],
                                                       tmp_path: Path) -> None:
    folder, cid = mpe_case

    class NoAnswer(FakeMiniCPMODuplex):
        def streaming_generate(self, **kwargs: Any) -> Any:
            return None

    class BrokenPrepare(FakeMiniCPMODuplex):
        def prepare(self, **kwargs: Any) -> str:
            raise FileNotFoundError("assets/token2wav/flow.pt")

    cases: list[tuple[Any, str]] = [
        (FakeMiniCPMODuplex(generate_error_at=1),
         "step raised RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB at t=1.980s"),
        (FakeMiniCPMODuplex(refuse_prefill_at=2),
         "step raised MiniCPMOError: streaming_prefill refused chunk 2: streaming audio processing returned empty "
         "at t=2.980s"),
        (NoAnswer(), "step raised MiniCPMOError: streaming_generate returned NoneType without is_listen at chunk 0 "
                     "at t=0.980s"),
        (BrokenPrepare(), "reset raised FileNotFoundError: assets/token2wav/flow.pt"),
    ]
    for i, (model, reason) in enumerate(cases):
        agent = MiniCPMOAgent(model=model, ref_audio=str(voice_wav))
        out = tmp_path / str(i)
        out.mkdir()
        (r,) = run_cases(agent, folder, "mpe", out, [cid])
        assert r.episode.status == "failed" and r.episode.failure == reason


def test_tensor_audio_is_taken_as_it_comes(voice_wav: Path) -> None:
    agent, model = agent_with(voice_wav, tensor_audio=True)
    agent.reset(None, 0)
    n = agent.frame_size
    out = [agent.step(np.full(n, LOUD if i < SECOND // n else 0.0, np.float32)).audio for i in range(3 * SECOND // n)]
    said = np.concatenate(out)
    assert model.spoke_at == [1] and said[2 * SECOND] == np.float32(CLICK) and not said[:2 * SECOND].any()


def test_frames_must_tile_the_one_second_chunk(voice_wav: Path) -> None:
    with pytest.raises(ValueError, match="does not divide"):
        MiniCPMOAgent(model=FakeMiniCPMODuplex(), ref_audio=str(voice_wav), frame_size=1920)
    agent, _ = agent_with(voice_wav)
    agent.reset(None, 0)
    with pytest.raises(RuntimeError, match="no teacher forcing"):
        agent.step(np.zeros(480, np.float32), np.zeros(480, np.float32))


def test_registered_and_a_duplex_agent(voice_wav: Path) -> None:
    agent = load_adapter("minicpm-o", model=FakeMiniCPMODuplex(), ref_audio=str(voice_wav))
    assert isinstance(agent, DuplexAgent) and agent.name == "minicpm-o"
    assert agent.capabilities == {"system_prompt", "text_output"} and agent.chunk_s == 1.0


def test_the_loader_makes_the_demo_calls(tmp_path: Path, voice_wav: Path, monkeypatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """MiniCPMODuplex.from_pretrained(weights, device=, attn_implementation=, force_listen_count=, n_timesteps=5, as
    MiniCPMO45/README.md:184-192 passes it) from the demo's
    model code, with the weights from a local folder or a hub id's snapshot at `revision`, the voice the model ships
    (assets/HT_ref_audio.wav) by default; a checkout at another commit than the pin is said in one line and
    recorded."""
    import huggingface_hub

    folder = tmp_path / "MiniCPM-o-4_5"
    (folder / "assets").mkdir(parents=True)
    (folder / DEFAULT_REF).write_bytes(voice_wav.read_bytes())
    checkout = tmp_path / "minicpm-o-4_5-pytorch-simple-demo"
    (checkout / "MiniCPMO45").mkdir(parents=True)
    (checkout / "MiniCPMO45" / "modeling_minicpmo.py").write_text("")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "x"]):
        subprocess.run([*git, *args], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    duplex = FakeMiniCPMODuplex()
    module = modeling_module(duplex, str(checkout / "MiniCPMO45" / "modeling_minicpmo.py"))
    package = type(sys)("MiniCPMO45")
    package.modeling_minicpmo = module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "MiniCPMO45", package)
    monkeypatch.setitem(sys.modules, "MiniCPMO45.modeling_minicpmo", module)
    snapshots: list[tuple[str, str | None]] = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda repo, revision=None: snapshots.append((repo, revision)) or str(folder))
    for path in (str(folder), "openbmb/MiniCPM-o-4_5"):
        with caplog.at_level(logging.WARNING, logger="duplex_eval.upstream"):
            caplog.clear()
            agent = MiniCPMOAgent(model_path=path, device="cpu", revision="0123abcd", force_listen_count=3)
        assert agent.duplex is duplex and agent.ref_path == str(folder / DEFAULT_REF)
        assert module.loads[-1] == {"path": str(folder), "device": "cpu", "pt_path": None,
                                    "attn_implementation": "sdpa", "force_listen_count": 3, "n_timesteps": 5}
        code, weights = agent.runtime()["upstream"]
        assert code == {"repo": UPSTREAM[0].repo, "kind": "git", "pinned": UPSTREAM[0].ref, "used": head,
                        "matches": False}
        assert weights == {"repo": path, "kind": "hf", "pinned": "0123abcd", "used": None, "matches": None}
        assert len(caplog.records) == 1 and "c7e16605" in caplog.records[0].getMessage()
    assert snapshots == [("openbmb/MiniCPM-o-4_5", "0123abcd")]
    (folder / DEFAULT_REF).unlink()
    with pytest.raises(UsageError, match="ref_audio=PATH"):
        MiniCPMOAgent(model_path=str(folder), device="cpu")


def test_the_fake_refuses_an_unwrapped_prompt_and_the_adapter_wraps_it(voice_wav: Path) -> None:
    """The real `prepare` feeds the prefix verbatim (a bare prompt would be heard outside the system turn the model
    was trained with); the fake refuses it, and the adapter writes the system turn as OpenBMB's callers do."""
    model = FakeMiniCPMODuplex()
    ref = np.zeros(16_000, np.float32)
    with pytest.raises(ValueError, match="system turn"):
        model.prepare(prefix_system_prompt="You are a helpful assistant.", ref_audio=ref)
    with pytest.raises(ValueError, match="system turn"):  # the prefix alone, without the suffix
        model.prepare(prefix_system_prompt="<|im_start|>system\nBe brief.\n<|audio_start|>", ref_audio=ref)
    agent = MiniCPMOAgent(model=model, ref_audio=str(voice_wav))
    agent.reset("Be brief.", 0)
    assert model.prepare_calls[-1]["prefix_system_prompt"] == "<|im_start|>system\nBe brief.\n<|audio_start|>"
    assert model.prepare_calls[-1]["suffix_system_prompt"] == "<|audio_end|><|im_end|>"
    assert agent.runtime()["system_turn"] == "<|im_start|>system\n{prompt}\n<|audio_start|>{ref_audio}" \
                                             "<|audio_end|><|im_end|>"


def test_without_the_model_code_the_error_is_one_line_before_any_download(tmp_path: Path, monkeypatch) -> None:
    import huggingface_hub

    def no_download(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("weights downloaded before the code was found")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_download)
    for name in [m for m in sys.modules if m.split(".")[0] == "MiniCPMO45"]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(UsageError) as err:
        MiniCPMOAgent(code_dir=str(tmp_path), device="cpu")
    assert "minicpm-o needs the MiniCPM-o 4.5 model code" in str(err.value) and "\n" not in str(err.value)


# -- turn-based mode: DSB-IFEval's harness (its appendix D.5) -------------------------------------------------------

def turn_agent(voice_wav: Path, reply: np.ndarray | None = None, **args: Any) -> tuple[Any, FakeMiniCPMODuplex]:
    """The adapter as `duplex-eval run` loads it for a config (`_load`: constructed, then told its benchmark)."""
    model = FakeMiniCPMODuplex(voice=reply)
    config = args.pop("config", "ifeval")
    agent = _load(RunConfig(dataset="unused", adapter="minicpm-o", out="unused", config=config,
                            adapter_args={"model": model, "ref_audio": str(voice_wav), **args}))
    return agent, model


def test_dsb_ifeval_runs_turn_based_as_its_paper_did(voice_wav: Path, reply: np.ndarray,
                                                     mini_sets: Mapping[str, Path], tmp_path: Path) -> None:
    """On DSB-IFEval the adapter is MiniCPM-o's half-duplex speech conversation behind the turn-based wrapper, with
    the harness's settings: the system message with the voice and the case's prompt once, each input handed over
    after 1.0 s of quiet with that 1.0 s trailing segment, 1 s prefills at 16 kHz, sampling at temperature 0.5 with
    at most 4096 new tokens, a fresh session per case, every reply played whole after the input it answers."""
    folder, config = mini_sets["ifeval"], "ifeval"
    agent, duplex = turn_agent(voice_wav, reply)
    half = duplex.model
    bench = benchmark_for_config(config)
    ids = [next(c.case_id for c in bench.function("cases")(folder, config)
                if c.case.level == "L1" and c.timed.conversation.turn2.mode != "barge_in")]
    (r,) = run_cases(agent, folder, config, tmp_path, ids, seed=2,
                     after=lambda _ep: (list(half.prefills), list(half.generates), half.session_id))
    ep = r.episode
    assert ep.status == "ok", ep.failure
    prefills, generates, session = r.extra
    assert session == "case-1" and len(half.voice_prompts) == 1
    np.testing.assert_array_equal(half.voice_prompts[0], agent.ref_audio)  # init_token2wav_cache got the voice
    prompt = r.plan.system_prompt
    assert prompt
    system, *user = prefills
    assert system["role"] == "system" and system["prompt"] == "\n".join(
        [VOICE_PREFIX, "<audio>./</audio>", VOICE_SUFFIX, prompt])
    np.testing.assert_array_equal(system["audios"][0], agent.ref_audio)
    assert not system["omni_mode"] and system["is_last_chunk"]
    assert duplex.prepare_calls == []  # the duplex session is never opened in this mode
    # Each turn: whole seconds at 16 kHz, the last marked and padded to a second; the input with 1.0 s of quiet.
    turns: list[list[dict[str, Any]]] = [[]]
    for p in user:
        assert p["role"] == "user" and p["prompt"] == "<audio>./</audio>" and p["audios"][0].shape == (16_000,)
        turns[-1].append(p)
        if p["is_last_chunk"]:
            turns.append([])
    assert turns.pop() == [] and len(turns) == len(generates) >= 1
    for heard in (np.concatenate([p["audios"][0] for p in t]) for t in turns):
        loud = np.flatnonzero(np.abs(heard) > 1e-3)
        assert loud.size and heard.size - 16_000 <= loud[-1] + 16_000 <= heard.size  # 1.0 s of quiet, then padding
    for g in generates:
        assert g == {"session_id": "case-1", "generate_audio": True, "max_new_tokens": 4096, "enable_thinking": False,
                     "use_tts_template": True, "do_sample": True, "temperature": 0.5, "length_penalty": 1.1}
    # Every reply plays whole, click first, from the frame after the one that ended the input (1.0 s of quiet after
    # the user's last sound), its text stamped where it starts; nothing else is said.
    user_ch = r.pcm[:, 0].astype(np.float32) / 32768
    voice = half.voice.copy()
    voice[0] = CLICK
    starts = [round(t * SESSION_SR) for t, _ in ep.model_text]
    assert len(starts) == len(generates)
    for s in starts:
        last_sound = np.flatnonzero(np.abs(user_ch[:s]) > 1e-3)[-1] / SESSION_SR
        assert 1.0 <= s / SESSION_SR - last_sound < 1.0 + 0.4  # the VAD's hangover and a 20 ms frame at most
    np.testing.assert_array_equal(r.pcm[:, 1], expected_model_channel(len(r.pcm), starts, voice))
    pieces = -(-len(voice) // SECOND)
    for k, (_, text) in enumerate(ep.model_text):
        assert re.fullmatch(" ".join(rf"turn{k + 1}\.{i}#\d+" for i in range(pieces)), text), text
    # rec.json records the mode and every setting.
    rec = json.loads((tmp_path / f"{ids[0]}.rec.json").read_text())
    runtime = rec["adapter"]["runtime"]
    assert (runtime["mode"], runtime["mode_arg"], rec["adapter"]["version"]) == ("turn-based", "auto",
                                                                                 "4.5-turn-based")
    tb = runtime["turn_based"]
    assert {k: tb[k] for k in ("inner", "inner_sample_rate", "end_of_turn_s", "barge_in_stop_s",
                               "response_delay_s")} == {"inner": "adapters.minicpm_o:MiniCPMOTurns",
                                                        "inner_sample_rate": 16_000, "end_of_turn_s": 1.0,
                                                        "barge_in_stop_s": -1.0, "response_delay_s": 0.0}
    assert tb["inner_describe"]["generate_kwargs"] == {"generate_audio": True, "use_tts_template": True,
                                                       "enable_thinking": False, **TURN_GENERATE}
    assert tb["inner_describe"]["trailing_s"] == 1.0 and runtime["upstream"] == []


def test_auto_picks_the_papers_mode_and_a_named_mode_wins(voice_wav: Path) -> None:
    """`mode="auto"`: turn-based on DSB-IFEval (`ifeval` and `ifeval_matched`), duplex on Duplex-MPE and M3 and
    when no benchmark is named; `mode=` given as an adapter-arg is used whatever the benchmark."""
    for config, mode in (("ifeval", "turn-based"), ("ifeval_matched", "turn-based"), ("mpe", "duplex"),
                         ("m3_chat_en", "duplex")):
        agent, _ = turn_agent(voice_wav, config=config)
        assert (agent.mode, agent.runtime()["mode"], agent.runtime()["mode_arg"]) == (mode, mode, "auto")
        assert ("turn_based" in agent.runtime()) == (mode == "turn-based")
    assert MiniCPMOAgent(model=FakeMiniCPMODuplex(), ref_audio=str(voice_wav)).mode == "duplex"
    agent, _ = turn_agent(voice_wav, mode="duplex")
    assert agent.mode == "duplex" and agent.runtime()["system_turn"]
    agent, _ = turn_agent(voice_wav, mode="turn-based", config="mpe")
    assert agent.mode == "turn-based" and agent.runtime()["mode_arg"] == "turn-based"
    agent, _ = turn_agent(voice_wav, end_of_turn_s=0.8, trailing_s=0.5,
                          turn_generate_kwargs={"temperature": 0.7, "top_p": 0.9})
    tb = agent.runtime()["turn_based"]
    assert tb["end_of_turn_s"] == 0.8 and tb["inner_describe"]["trailing_s"] == 0.5
    assert tb["inner_describe"]["generate_kwargs"]["temperature"] == 0.7
    assert tb["inner_describe"]["generate_kwargs"]["top_p"] == 0.9
    with pytest.raises(UsageError, match="mode must be"):
        MiniCPMOAgent(model=FakeMiniCPMODuplex(), ref_audio=str(voice_wav), mode="half")


def test_turn_based_seeds_and_starts_each_case_afresh(voice_wav: Path, speak) -> None:
    """Each reset is a new session (a new session_id, the voice's cache set again, the system message first); the
    seed reaches the sampler; a reply is never cut by the user talking over it; closing refuses further cases."""
    said = speak("Could you tell me how long the pharmacy stays open tonight?")
    user = np.concatenate([said, np.zeros(3 * SESSION_SR, np.float32)])
    user = np.pad(user, (0, -user.size % 480))
    texts = []
    agent, duplex = turn_agent(voice_wav)
    half = duplex.model
    for seed in (0, 0, 1):
        agent.reset("Be brief.", seed)
        assert half.prefills[0]["role"] == "system" and half.prefills[0]["prompt"].endswith("\nBe brief.")
        out = [agent.step(user[i:i + 480]) for i in range(0, user.size, 480)]
        texts.append("".join(f.text or "" for f in out))
        assert len(half.generates) == 1 and half.generates[0]["session_id"] == f"case-{len(texts)}"
    assert len(half.voice_prompts) == 3
    assert texts[0] == texts[1] != texts[2]
    # Without a prompt the system message is the voice preset alone.
    agent.reset(None, 0)
    assert half.prefills[0]["prompt"] == "\n".join([VOICE_PREFIX, "<audio>./</audio>", VOICE_SUFFIX])
    agent.close()
    with pytest.raises(Exception, match="closed"):
        agent.reset(None, 0)


def test_the_half_duplex_fake_refuses_what_the_real_one_refuses(voice_wav: Path) -> None:
    """MiniCPMO's streaming_prefill asserts a session_id, one message and a known role (modeling_minicpmo.py:1848,
    1857, 1861); streaming_generate cannot speak before init_token2wav_cache (2224); a str content would be read
    character by character (1866). The adapter makes none of these calls (the episode tests above run it)."""
    model = FakeMiniCPMODuplex().model
    system = {"role": "system", "content": ["Be brief."]}
    with pytest.raises(AssertionError, match="session_id"):
        model.streaming_prefill(session_id=None, msgs=[system])
    with pytest.raises(AssertionError):
        model.streaming_prefill(session_id="s", msgs=[system, system])
    with pytest.raises(AssertionError):
        model.streaming_prefill(session_id="s", msgs=[{"role": "tool", "content": ["x"]}])
    with pytest.raises(TypeError, match="character by character"):
        model.streaming_prefill(session_id="s", msgs=[{"role": "system", "content": "Be brief."}])
    model.reset_session(reset_token2wav_cache=True)
    model.streaming_prefill(session_id="s", msgs=[system])
    with pytest.raises(TypeError, match="not subscriptable"):
        next(model.streaming_generate(session_id="s"))
    # The adapter sets the voice before the system message, and every content is a list.
    agent, duplex = turn_agent(voice_wav)
    agent.reset("Be brief.", 0)
    assert duplex.model.token2wav_cache is not None and duplex.model.session_id == "case-1"


def test_check_adapter_passes_in_turn_based_mode(voice_wav: Path, reply: np.ndarray, tmp_path: Path) -> None:
    from eval.conformance import FAIL, check_agent

    agent = MiniCPMOAgent(model=FakeMiniCPMODuplex(voice=reply), ref_audio=str(voice_wav), mode="turn-based")
    results = check_agent(agent, out_dir=tmp_path)
    assert not [r for r in results if r.status == FAIL], [(r.name, r.reason) for r in results if r.status == FAIL]
