"""The Moshi family adapters (`moshi`, `personaplex`, adapters/moshi.py) on the tiny random model (`tiny=True`):
whole episodes of every benchmark config through the real plans and orchestrator, the model channel's time
alignment (a planted click lands on its frame's first sample), reset isolation, teacher forcing, PersonaPlex's
prompts, batched stepping against one at a time, and the real loading code reading a weights folder.

Skipped, with the reason, where the `moshi` package is not installed (`make setup` installs it).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("NO_TORCH_COMPILE", "1")  # before moshi is imported: compiling costs ~17 s on CPU
pytest.importorskip("moshi", reason="the `moshi` package is not installed: `make setup`, or pip install -e "
                                    "'.[moshi]' && pip install --no-deps moshi==0.2.13")

from adapters.moshi import FRAME_SIZE, TINY_TEXT, MoshiAgent, PersonaPlexAgent  # noqa: E402
from adapters.protocol import BatchedDuplexAgent  # noqa: E402
from adapters.registry import load_adapter  # noqa: E402
from dataset_builder.audio import SESSION_SR, to_pcm16, write_wav  # noqa: E402
from tests.adapter_episodes import CONFIGS, Ran, first_cases, run_cases, shortest_cases  # noqa: E402

N = FRAME_SIZE
# PersonaPlex is an English model: the Japanese M3 configs are Moshi's (J-Moshi loads through `moshi`).
PERSONAPLEX_CONFIGS = tuple(c for c in CONFIGS if not c.endswith("_ja"))


class Spy:
    """Wraps an agent's reset/step and keeps what went in and came out of each episode, for a replay."""

    def __init__(self, agent: Any) -> None:
        self.agent, self.calls = agent, []
        reset, step = agent.reset, agent.step

        def spy_reset(prompt: str | None, seed: int) -> None:
            self.calls.append({"prompt": prompt, "seed": seed, "user": [], "forced": [], "out": []})
            reset(prompt, seed)

        def spy_step(user: np.ndarray, forced: np.ndarray | None = None) -> Any:
            frame = step(user, forced)
            call = self.calls[-1]
            call["user"].append(np.array(user, np.float32))
            call["forced"].append(None if forced is None else np.array(forced, np.float32))
            call["out"].append(frame)
            return frame

        agent.reset, agent.step = spy_reset, spy_step
        self.reset, self.step = reset, step

    def replay(self, call: dict[str, Any]) -> list[Any]:
        self.reset(call["prompt"], call["seed"])
        return [self.step(u, f) for u, f in zip(call["user"], call["forced"], strict=True)]


@pytest.fixture(scope="module")
def voice_wav(speak, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("voice") / "voice.wav"
    write_wav(path, speak("Hello, this is my voice."))
    return path


def check_episodes(spy: Spy, runs: list[Ran]) -> None:
    for i, (r, call) in enumerate(zip(runs, spy.calls[-len(runs):], strict=True)):
        ep = r.episode
        assert ep.status == "ok", ep.failure
        assert call["prompt"] == r.plan.system_prompt
        model = np.concatenate([f.audio for f in call["out"]])
        # The recording's model channel is exactly what the agent returned, frame for frame.
        np.testing.assert_array_equal(r.pcm[:, 1], to_pcm16(model))
        assert np.abs(model).max() > 0, "the model channel is digital silence"
        # The same inputs and seed after a reset give the same samples, with the other episodes run since (the
        # first episode's replay follows them all; tests/test_check_adapter.py covers reset on every adapter).
        if i == 0:
            again = spy.replay(call)
            assert all(np.array_equal(a.audio, b.audio) for a, b in zip(again, call["out"], strict=True))
        # Its text is the tokenizer's pieces, stamped on the frames that said them.
        said = [(k, f.text) for k, f in enumerate(call["out"]) if f.text]
        assert [[round(k * N / SESSION_SR, 3), t] for k, t in said] == ep.model_text
        assert said and all(set(t) <= set(TINY_TEXT) for _, t in said)
        if r.plan.forced is not None:  # M3 Full: the forced context is returned as it came, then the model's own
            k = len(r.plan.forced)
            np.testing.assert_array_equal(r.pcm[:k, 1], to_pcm16(r.plan.forced))
            assert not np.array_equal(r.pcm[k:, 1], np.zeros_like(r.pcm[k:, 1]))


@pytest.mark.parametrize("config", CONFIGS)
def test_moshi_runs_every_config(config: str, mini_sets: Mapping[str, Path], tmp_path: Path) -> None:
    folder = mini_sets[config.split("_")[0]]
    spy = Spy(MoshiAgent(tiny=True))
    ids = shortest_cases(folder, config)
    runs = list(run_cases(spy.agent, folder, config, tmp_path, ids, seed=5))
    if config.startswith("m3"):
        assert {r.episode.condition for r in runs} == {"none", "user", "full"}
    check_episodes(spy, runs)


@pytest.mark.parametrize("config", PERSONAPLEX_CONFIGS)
def test_personaplex_runs_every_config(config: str, mini_sets: Mapping[str, Path], voice_wav: Path,
                                       tmp_path: Path) -> None:
    folder = mini_sets[config.split("_")[0]]
    spy = Spy(PersonaPlexAgent(tiny=True, voice_prompt=str(voice_wav)))
    ids = shortest_cases(folder, config)
    check_episodes(spy, list(run_cases(spy.agent, folder, config, tmp_path, ids, seed=5)))


# --- time alignment: a click the model says at frame K lands at sample K * 1920 of the recording --------------------
K = 40
CLICK_CODES = [5, 17, 29, 41, 53, 2, 14, 26]  # the model's 8 audio tokens at frame K
OTHER_ACOUSTIC = [5, 60, 50, 40, 30, 20, 10, 0]  # same semantic token, other acoustic tokens


@pytest.fixture(scope="module")
def m3_case(mini_sets: Mapping[str, Path]) -> tuple[Path, str]:
    folder = mini_sets["m3"]
    (none,) = [c for c in first_cases(folder, "m3_chat_en", 3) if c.endswith("-none")]
    return folder, none


def test_a_click_the_model_says_at_frame_k_lands_at_its_first_sample(m3_case, tmp_path: Path) -> None:
    folder, cid = m3_case
    agent = MoshiAgent(tiny=True)
    decode = agent.mimi.decode

    def decode_with_click(codes: Any) -> Any:
        pcm = decode(codes)
        for s in range(codes.shape[0]):  # the decoded frame whose tokens are the click's begins with a full-scale click
            if codes[s, :, 0].tolist() == CLICK_CODES:
                pcm[s, 0, 0] = 1.0
        return pcm

    agent.mimi.decode = decode_with_click
    reset = agent.reset

    def reset_and_plant(prompt: str | None, seed: int) -> None:
        reset(prompt, seed)
        agent.plant_tokens(K, CLICK_CODES)

    agent.reset = reset_and_plant
    (r,) = run_cases(agent, folder, "m3_chat_en", tmp_path, [cid])
    assert r.episode.status == "ok" and len(r.pcm) > (K + 1) * N
    model = r.pcm[:, 1].astype(np.int32)
    assert model[K * N] == 32767 and np.flatnonzero(model == 32767).tolist() == [K * N]


def test_the_codec_path_is_aligned_too(m3_case, tmp_path: Path) -> None:
    """Without the click: frame K's tokens differ only in their acoustic codebooks, and the two recordings differ
    from sample K * 1920 on, not a sample earlier (nothing leaks back) and not a frame later (no offset)."""
    folder, cid = m3_case
    said = []
    for codes in (CLICK_CODES, OTHER_ACOUSTIC):
        agent = MoshiAgent(tiny=True)
        reset = agent.reset
        agent.reset = lambda p, s, reset=reset, agent=agent, codes=codes: (reset(p, s), agent.plant_tokens(K, codes))
        spy = Spy(agent)
        (r,) = run_cases(agent, folder, "m3_chat_en", tmp_path / str(codes[1]), [cid])
        model = np.concatenate([f.audio for f in spy.calls[-1]["out"]])
        np.testing.assert_array_equal(r.pcm[:, 1], to_pcm16(model))  # what was said is what was recorded
        said.append(model)
    assert agent.model_delay_frames == 1  # the LM's acoustic delay the adapter compensates
    differ = np.flatnonzero(said[0] != said[1])
    assert differ.size and differ[0] == K * N


# --- reset, seeds, teacher forcing ----------------------------------------------------------------------------------
def noise(seconds: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(int(seconds * SESSION_SR) // N * N) * 0.1).astype(np.float32)


def play(agent: Any, user: np.ndarray, seed: int, prompt: str | None = None,
         forced: np.ndarray | None = None) -> np.ndarray:
    agent.reset(prompt, seed)
    frames = [agent.step(user[k:k + N], None if forced is None or k >= len(forced) else forced[k:k + N])
              for k in range(0, len(user), N)]
    return np.concatenate([f.audio for f in frames])


@pytest.fixture(scope="module")
def tiny() -> MoshiAgent:
    return MoshiAgent(tiny=True)


def test_reset_gives_fresh_state_and_the_seed_decides_the_samples(tiny: MoshiAgent) -> None:
    a, b = noise(2, 1), noise(2, 2)
    first = play(tiny, a, seed=3)
    play(tiny, b, seed=4)
    assert np.array_equal(play(tiny, a, seed=3), first)
    assert not np.array_equal(play(tiny, a, seed=9), first)


def test_teacher_forcing_reaches_the_model(tiny: MoshiAgent) -> None:
    user, k = noise(3, 1), 15 * N
    forced = [noise(3, 7)[:k], noise(3, 8)[:k]]
    runs = [play(tiny, user, 3, forced=f) for f in forced]
    for run, f in zip(runs, forced, strict=True):
        assert np.array_equal(run[:k], f)  # the forced frames come back as they went in
    assert not np.array_equal(runs[0][k:], runs[1][k:])  # and what the model says after them depends on them
    assert np.array_equal(play(tiny, user, 3, forced=forced[0]), runs[0])


# --- PersonaPlex: the role prompt and the voice prompt --------------------------------------------------------------
def test_personaplex_hears_its_role_prompt_and_its_voice(voice_wav: Path, speak, tmp_path: Path) -> None:
    agent = PersonaPlexAgent(tiny=True, voice_prompt=str(voice_wav))
    assert {"system_prompt", "teacher_forcing", "text_output"} <= agent.capabilities
    user = noise(2, 1)
    teacher = play(agent, user, 3, "you are a teacher.")
    assert np.array_equal(play(agent, user, 3, "you are a teacher."), teacher)
    assert not np.array_equal(play(agent, user, 3, "you are a pirate."), teacher)
    other = tmp_path / "other.wav"
    write_wav(other, speak("A different voice sample, longer than the first one."))
    assert not np.array_equal(play(PersonaPlexAgent(tiny=True, voice_prompt=str(other)), user, 3,
                                   "you are a teacher."), teacher)
    with pytest.raises(Exception, match="embeddings"):
        PersonaPlexAgent(tiny=True, voice_prompt=str(tmp_path / "NATF2.pt"))


# --- batched lockstep -----------------------------------------------------------------------------------------------
def test_step_batch_gives_each_slot_the_samples_of_a_run_one_at_a_time() -> None:
    """Three slots, reset at different ticks, neighbours hearing other things, one slot teacher-forced: each slot's
    samples equal the same case and seed stepped one at a time (`step`, slot 0) on the same agent, bit for bit; an
    agent of batch_size 1 gives them to float rounding (matrix kernels round differently per batch size)."""
    B, frames = 3, 25
    agent = MoshiAgent(tiny=True, batch_size=B)
    assert isinstance(agent, BatchedDuplexAgent)
    users = [noise(frames * N / SESSION_SR, s) for s in range(B)]
    forced = noise(10 * N / SESSION_SR, 9)
    seeds, starts = [11, 12, 13], [0, 4, 2]
    single = [play(agent, users[s], seeds[s], forced=forced if s == 1 else None) for s in range(B)]
    outs: list[list[np.ndarray]] = [[] for _ in range(B)]
    rng = np.random.default_rng(0)
    for tick in range(frames + max(starts)):
        u = (rng.standard_normal((B, N)) * 0.1).astype(np.float32)  # idle slots hear noise
        f, mask = np.zeros((B, N), np.float32), np.zeros(B, bool)
        for s in range(B):
            k = tick - starts[s]
            if k == 0:
                agent.reset_slot(s, None, seeds[s])
            if 0 <= k < frames:
                u[s] = users[s][k * N:(k + 1) * N]
                if s == 1 and k < 10:
                    f[s], mask[s] = forced[k * N:(k + 1) * N], True
        out = agent.step_batch(u, f, mask)
        assert len(out) == B and all(fr.audio.shape == (N,) and fr.audio.dtype == np.float32 for fr in out)
        for s in range(B):
            if 0 <= tick - starts[s] < frames:
                outs[s].append(out[s].audio)
    for s in range(B):
        np.testing.assert_array_equal(np.concatenate(outs[s]), single[s])
    one = MoshiAgent(tiny=True, batch_size=1)
    np.testing.assert_allclose(play(one, users[0], seeds[0]), single[0], atol=1e-5)


# --- registry and the loading code ----------------------------------------------------------------------------------
def test_registered_by_name() -> None:
    for name, cls in (("moshi", MoshiAgent), ("personaplex", PersonaPlexAgent)):
        agent = load_adapter(name, tiny=True, batch_size=2)
        assert type(agent) is cls and agent.name == name and isinstance(agent, BatchedDuplexAgent)
        assert (agent.sample_rate, agent.frame_size, agent.realtime) == (24_000, 1920, False)


def write_weights_folder(tiny: MoshiAgent, folder: Path) -> None:
    """The tiny model written as a moshi weights folder: config.json naming the LM config, the Mimi config and the
    three files."""
    from moshi.models import loaders
    from safetensors.torch import save_file

    from adapters.moshi import TINY_LM, TINY_MIMI

    folder.mkdir(parents=True, exist_ok=True)
    base = loaders._mimi_config
    mimi_cfg = dict(base, **{part: dict(base[part], **TINY_MIMI[part]) for part in TINY_MIMI})
    (folder / "mimi.json").write_text(json.dumps(mimi_cfg))
    lm_cfg = dict(loaders._lm_kwargs, **TINY_LM, text_card=tiny.lm_gen.lm_model.text_card)
    (folder / "config.json").write_text(json.dumps(lm_cfg | {
        "moshi_name": "lm.safetensors", "mimi_name": "mimi.safetensors", "tokenizer_name": "tok.model",
        "mimi_config_name": "mimi.json"}))
    save_file({k: v.contiguous() for k, v in tiny.mimi.state_dict().items()}, folder / "mimi.safetensors")
    save_file({k: v.contiguous() for k, v in tiny.lm_gen.lm_model.state_dict().items()}, folder / "lm.safetensors")
    (folder / "tok.model").write_bytes(tiny.tokenizer.serialized_model_proto())


def test_loads_weights_from_a_folder_as_moshi_lays_them_out(tiny: MoshiAgent, tmp_path: Path) -> None:
    """The tiny model written as a moshi weights folder and read back through the real loading code gives the same
    samples."""
    write_weights_folder(tiny, tmp_path)
    loaded = MoshiAgent(weights_dir=str(tmp_path), device="cpu", dtype="float32")
    assert loaded.capabilities == tiny.capabilities and str(tmp_path) in loaded.version
    assert loaded.runtime()["weights"] == {"repo": None, "requested_revision": None, "revision": None}
    user = noise(2, 1)
    assert np.array_equal(play(loaded, user, 3), play(tiny, user, 3))


def test_a_hub_load_asks_for_the_revision_and_records_the_snapshot_it_read(
        tiny: MoshiAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`revision=` reaches moshi's `hf_get` for every file, and rec.json records the revision of the Hugging Face
    cache snapshot the weights were read from."""
    from moshi.models import loaders

    snapshot = "0123456789abcdef0123456789abcdef01234567"
    folder = tmp_path / "models--kyutai--moshiko-pytorch-bf16" / "snapshots" / snapshot
    write_weights_folder(tiny, folder)
    asked: list[tuple[str, str | None, str | None]] = []

    def hf_get(name: Any, repo: str | None = None, check_local_file_exists: bool = False,
               revision: str | None = None) -> Path:
        asked.append((str(name), repo, revision))
        return name if isinstance(name, Path) else folder / name

    monkeypatch.setattr(loaders, "hf_get", hf_get)
    agent = MoshiAgent(hf_repo="kyutai/moshiko-pytorch-bf16", revision="v1", device="cpu", dtype="float32")
    assert {r for _, _, r in asked} == {"v1"} and {n for n, _, _ in asked} >= {"config.json", "lm.safetensors"}
    assert agent.runtime()["weights"] == {"repo": "kyutai/moshiko-pytorch-bf16", "requested_revision": "v1",
                                          "revision": snapshot}


def test_missing_weights_say_what_to_do(tmp_path: Path) -> None:
    from dataset_builder.errors import UsageError

    with pytest.raises(UsageError, match="has no model.safetensors"):
        MoshiAgent(weights_dir=str(tmp_path), device="cpu")


# --- the timing rule (docs/adding-a-model.md): slot t plays what the model said before hearing user frame t --------
def test_live_alignment_is_run_inference_one_frame_later_and_causal() -> None:
    """`alignment="live"` (the default) plays kyutai run_inference's frame t in slot t + 1, bit for bit, slot 0 being
    silence; its output up to and including slot t never changes when the user audio changes from frame t on, where
    run_inference's does for some t (its frame t's acoustic tokens heard user frame t)."""
    live, offline = MoshiAgent(tiny=True), MoshiAgent(tiny=True, alignment="run_inference")
    assert (live.runtime()["alignment"], offline.runtime()["alignment"]) == ("live", "run_inference")
    a = noise(2, 1)
    first_live, first_ri = [], []
    for t in range(5, 12):
        b = np.concatenate([a[:t * N], -3 * a[t * N:]])
        (la, lb), (ra, rb) = ([play(agent, x, seed=3) for x in (a, b)] for agent in (live, offline))
        np.testing.assert_array_equal(la[:N], np.zeros(N, np.float32))
        np.testing.assert_array_equal(la[N:], ra[:-N])
        first_live.append(int(np.flatnonzero(la != lb)[0]) // N - t)
        first_ri.append(int(np.flatnonzero(ra != rb)[0]) // N - t)
    assert min(first_live) >= 1, first_live  # heard from the slot after, never within the frame
    assert min(first_ri) == 0, first_ri  # the offline alignment answers within the frame it is hearing
    with pytest.raises(Exception, match="alignment must be one of"):
        MoshiAgent(tiny=True, alignment="offline")


def test_live_forcing_then_the_models_own_frames(tiny: MoshiAgent) -> None:
    """Forced frames come back as they went in; the first free slot would replay the last forced frame (the model's
    frame before it) and is silence; the model's own audio follows."""
    user, k = noise(3, 1), 15 * N
    forced = noise(3, 7)[:k]
    out = play(tiny, user, 3, forced=forced)
    np.testing.assert_array_equal(out[:k], forced)
    np.testing.assert_array_equal(out[k:k + N], np.zeros(N, np.float32))
    assert np.abs(out[k + N:]).max() > 0


# --- PersonaPlex as NVIDIA's fork runs it ---------------------------------------------------------------------------
def test_personaplex_never_runs_without_a_role_prompt(voice_wav: Path) -> None:
    """NVIDIA's server and offline.py turn an empty role prompt into None and then iterate it: a case without one
    (M3, Duplex-MPE) gets NVIDIA's default role prompt, recorded in runtime(); an empty default is refused."""
    from adapters.moshi import DEFAULT_ROLE_PROMPT
    from dataset_builder.errors import UsageError

    agent = PersonaPlexAgent(tiny=True, voice_prompt=str(voice_wav))
    user = noise(1, 1)
    default = play(agent, user, 3, None)
    np.testing.assert_array_equal(play(agent, user, 3, ""), default)
    np.testing.assert_array_equal(play(agent, user, 3, DEFAULT_ROLE_PROMPT), default)
    assert not np.array_equal(play(agent, user, 3, "you are a pirate."), default)
    assert agent.runtime()["default_role_prompt"] == DEFAULT_ROLE_PROMPT
    # DSB-IFEval's harness (appendix D.5): audio/text temperatures 0.8/0.8, top-k 250/25; Moshi keeps 0.8/0.7.
    assert agent.runtime()["sampling"] == {"temp": 0.8, "temp_text": 0.8, "top_k": 250, "top_k_text": 25}
    assert agent.runtime()["sampling_source"]["temp_text"] == "DSB-IFEval's harness (its App. D.5)"
    assert PersonaPlexAgent(tiny=True, voice_prompt=None, temp_text=0.7).runtime()["sampling_source"]["temp_text"] \
        == "adapter-arg"
    assert MoshiAgent(tiny=True).runtime()["sampling"]["temp_text"] == 0.7
    assert agent.runtime()["written_against"][-1]["repo"] == "NVIDIA/personaplex"
    with pytest.raises(UsageError, match="default_role_prompt must not be empty"):
        PersonaPlexAgent(tiny=True, voice_prompt=str(voice_wav), default_role_prompt=" ")


def test_personaplex_silence_and_sine_are_nvidias_fixed_tokens() -> None:
    from adapters.moshi import SILENCE_TOKENS, SINE_TOKENS

    # NVIDIA's fork, models/lm.py 56-57 at 3428dfd9.
    assert SILENCE_TOKENS == (948, 243, 1178, 546, 1736, 1030, 1978, 2008)
    assert SINE_TOKENS == (430, 1268, 381, 1611, 1095, 1495, 56, 472)
    agent = PersonaPlexAgent.__new__(PersonaPlexAgent)
    agent.tiny, agent.voice_prompt, agent.frame_size = False, None, N

    class Lm:
        device = "cpu"

    agent._prompt_codes(type("M", (), {"lm": Lm(), "mimi": None})())  # the real model's path encodes nothing
    assert agent._silence_code.tolist() == list(SILENCE_TOKENS) and agent._sine_code.tolist() == list(SINE_TOKENS)


def nvidia_layout(state: dict[str, Any]) -> dict[str, Any]:
    """A 0.2.13 LM state dict written as NVIDIA's fork keys it: the depformer's per-step attention weights fused
    into `self_attn.in_proj_weight` / `self_attn.out_proj.weight`, one block of rows per step (fork
    modules/transformer.py 176-200, 360-368 at 3428dfd9)."""
    import torch

    out: dict[str, Any] = {}
    fused: dict[str, list[Any]] = {}
    for name, tensor in state.items():
        m = re.match(r"(depformer\..*\.self_attn)\.(in|out)_projs\.(\d+)\.weight$", name)
        if m:
            key = f"{m.group(1)}.in_proj_weight" if m.group(2) == "in" else f"{m.group(1)}.out_proj.weight"
            fused.setdefault(key, []).append((int(m.group(3)), tensor))
        else:
            out[name] = tensor
    for key, parts in fused.items():
        out[key] = torch.cat([t for _, t in sorted(parts, key=lambda p: p[0])])
    return out


def test_a_16_step_personaplex_checkpoint_loads_its_model_steps_strictly(tmp_path: Path) -> None:
    """NVIDIA builds PersonaPlex's LM with a 16-step depformer and loads non-strictly (fork loaders.py 166-260); a
    stock 8-step strict load refuses such a file. `load_lm_model_steps` maps it onto the 8 model steps, whose
    weights are the file's steps 0..7, in either key layout; an 8-step file loads unchanged."""
    import torch
    from moshi.models import loaders
    from safetensors.torch import save_file

    from adapters.moshi import TINY_LM, load_lm_model_steps, model_steps_only

    cfg = dict(loaders._lm_kwargs, **TINY_LM, text_card=40)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        lm16 = loaders.get_moshi_lm(None, lm_kwargs=dict(cfg, dep_q=16), device="cpu", dtype=torch.float32)
    state16 = {k: v.contiguous() for k, v in lm16.state_dict().items()}
    for name, state in (("split", state16), ("fused", nvidia_layout(state16))):
        path = tmp_path / f"{name}.safetensors"
        save_file(state, path)
        with pytest.raises(RuntimeError, match="Unexpected key|size mismatch"):
            loaders.get_moshi_lm(path, lm_kwargs=cfg, device="cpu", dtype=torch.float32)  # stock: strict, 8 steps
        lm8 = load_lm_model_steps(loaders, path, cfg, "cpu", torch.float32)
        assert lm8.dep_q == 8
        got = lm8.state_dict()
        assert got.keys() == model_steps_only(state16).keys()
        for key, value in got.items():  # each of the model's steps holds the file's same step
            np.testing.assert_array_equal(value.numpy(), state16[key].numpy(), err_msg=key)
        assert not [k for k in got if re.search(r"(linears|depformer_in|gating)\.(8|9|1[0-5])\.", k)]
    lm8_file = tmp_path / "eight.safetensors"
    save_file({k: v.contiguous() for k, v in lm8.state_dict().items()}, lm8_file)
    again = load_lm_model_steps(loaders, lm8_file, cfg, "cpu", torch.float32)
    assert all(torch.equal(again.state_dict()[k], v) for k, v in lm8.state_dict().items())


def test_the_runtime_records_the_moshi_release_and_a_differing_one_in_one_line(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import adapters.moshi as moshi_adapter

    agent = MoshiAgent(tiny=True)
    (pin,) = agent.runtime()["upstream"]
    assert (pin["repo"], pin["pinned"], pin["used"], pin["matches"]) == ("moshi", "0.2.13", "0.2.13", True)
    assert agent.runtime()["written_against"][1] == {"repo": "kyutai-labs/moshi", "kind": "git",
                                                     "pinned": "e6a55d2722a65870ef52a6c9f6ecfc0e90f38362"}
    monkeypatch.setattr(moshi_adapter, "_installed_moshi", lambda: "0.2.14")
    caplog.clear()
    with caplog.at_level("WARNING", logger="duplex_eval.upstream"):
        other = MoshiAgent(tiny=True)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "duplex_eval.upstream"]
    assert "0.2.14" in line and "moshi@0.2.13" in line
    assert other.runtime()["upstream"][0]["matches"] is False


def test_the_checkpoints_lm_gen_config_sets_the_sampling_as_kyutais_tools_do(
        tiny: MoshiAgent, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Kyutai's server and run_inference build `LMGen(lm, **checkpoint_info.lm_gen_config)` (server.py 237,
    run_inference.py 300): a checkpoint's sampling settings apply unless an adapter-arg is given, rec.json says where
    each came from, and a setting the adapter cannot apply is said in one line."""
    write_weights_folder(tiny, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["lm_gen_config"] = {"temp_text": 0.5, "top_k": 100, "cfg_coef": 2.0}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with caplog.at_level("WARNING", logger="adapters.moshi"):
        loaded = MoshiAgent(weights_dir=str(tmp_path), device="cpu", dtype="float32", temp=0.6)
    runtime = loaded.runtime()
    assert runtime["sampling"] == {"temp": 0.6, "temp_text": 0.5, "top_k": 100, "top_k_text": 25}
    assert runtime["sampling_source"] == {"temp": "adapter-arg", "temp_text": "checkpoint lm_gen_config",
                                          "top_k": "checkpoint lm_gen_config", "top_k_text": "LMGen default"}
    assert [r.getMessage() for r in caplog.records] == [
        "moshi: the checkpoint's lm_gen_config sets cfg_coef=2.0, which this adapter does not apply"]
    assert tiny.runtime()["sampling_source"]["temp"] == "LMGen default"
