"""The `voila` adapter (adapters/voila.py) against a fake of Voila's autonomous API written from its public code
(tests/fake_voila.py): one Duplex-MPE mini episode through the real plan and orchestrator, the step's timing (user
frame k handed over before the model's frame k is taken; text stamped on the audio frame it precedes), the persona
instruction in the prompt, reset isolation, and the loader's clear error without Voila's code. `check-adapter`
runs on it in tests/test_check_adapter.py."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
import torch

from adapters.registry import load_adapter
from adapters.voila import VoilaAgent
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError
from tests.adapter_episodes import first_cases, run_cases
from tests.fake_voila import HOP, NUM_CODEBOOKS, RATE, WORDS, FakeTokenizer, fake_parts

N = 960  # one 40 ms code frame (640 samples at 16 kHz) on the 24 kHz session clock
PROMPT = "You are Aria, a helpful voice assistant. Answer in one short sentence."


def noise(frames: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(frames * N) * 0.1).astype(np.float32)


def play(agent: VoilaAgent, user: np.ndarray, seed: int, prompt: str | None = None) -> list:
    agent.reset(prompt, seed)
    return [agent.step(user[k:k + N]) for k in range(0, len(user), N)]


def audio(frames: list) -> np.ndarray:
    return np.concatenate([f.audio for f in frames])


def test_one_mpe_mini_episode(mini_sets: Mapping[str, Path], tmp_path: Path) -> None:
    agent = load_adapter("voila", parts=fake_parts(), device="cpu")
    assert agent.frame_size == N and agent.sample_rate == SESSION_SR
    folder = mini_sets["mpe"]
    [ran] = run_cases(agent, folder, "mpe", tmp_path, first_cases(folder, "mpe", 1), seed=5)
    assert ran.episode.status == "ok", ran.episode.failure
    assert np.abs(ran.pcm[:, 1]).max() > 0  # it spoke
    said = [t for _, t in ran.episode.model_text]
    assert said and set(said) <= set(WORDS.values())
    run = agent.parts.model.runs[-1]
    assert len(run.heard) == len(ran.pcm) // N  # one user frame per step, none skipped or repeated
    # Duplex-MPE gives no text prompt (its duty preamble is spoken): the instruction is empty
    prompt = FakeTokenizer().decode(run.prompt[0, :, 0].tolist())
    assert prompt.endswith("<au_chat_ref_end></SYSTEM><|HUMAN|>")
    agent.close()


def test_each_step_hands_over_its_frame_and_takes_the_frame_the_model_said_before_it() -> None:
    """The fake speaks after 3 loud frames and 2 silent ones: frames 0-4 are silent, its reply (the assistant
    token, a word, 3 audio frames per word) starts at frame 5 with the word stamped there."""
    parts = fake_parts()
    agent = VoilaAgent(parts=parts, device="cpu")
    user = np.concatenate([noise(3, 1), np.zeros(12 * N, np.float32)])
    frames = play(agent, user, 3)
    heard = parts.model.runs[-1].heard
    assert len(heard) == 15 and all(any(h) for h in heard[:3]) and not any(map(any, heard[3:]))
    # what the model heard at step 0 is the fake codec's code of user frame 0 at 16 kHz
    codes = parts.audio_tokenizer.encode(resample(user[:N], SESSION_SR, RATE)[:HOP], sr=RATE)[:, 0]
    assert heard[0] == codes.tolist() and len(heard[0]) == NUM_CODEBOOKS
    loud = [k for k, f in enumerate(frames) if np.any(f.audio)]
    assert loud[0] == 5 and all(f.audio.shape == (N,) and f.audio.dtype == np.float32 for f in frames)
    texts = [k for k, f in enumerate(frames) if f.text]
    assert texts[0] == 5 and all(frames[k].text in WORDS.values() for k in texts)
    assert np.diff(texts).tolist() == [3] * (len(texts) - 1)  # each word is followed by its 3 audio frames


def test_the_persona_instruction_reaches_the_model_and_changes_its_reply() -> None:
    parts = fake_parts()
    agent = VoilaAgent(parts=parts, device="cpu")
    user = np.concatenate([noise(4, 1), np.zeros(10 * N, np.float32)])
    with_prompt = audio(play(agent, user, 3, PROMPT))
    tok, prompt = FakeTokenizer(), parts.model.runs[-1].prompt
    assert prompt.shape[2] == 2 * NUM_CODEBOOKS
    for row in range(2 * NUM_CODEBOOKS):  # every codebook row of both channels
        assert f"<au_chat_ref_end>{PROMPT}</SYSTEM><|HUMAN|>" in tok.decode(prompt[0, :, row].tolist())
    without = audio(play(agent, user, 3, None))
    assert PROMPT not in tok.decode(parts.model.runs[-1].prompt[0, :, 0].tolist())
    assert np.any(with_prompt) and not np.array_equal(with_prompt, without)


def test_reset_gives_fresh_state_and_the_seed_decides_the_samples() -> None:
    agent = VoilaAgent(parts=fake_parts(), device="cpu")
    a = np.concatenate([noise(4, 1), np.zeros(12 * N, np.float32)])
    b = np.concatenate([noise(6, 2), np.zeros(3 * N, np.float32)])  # cut off mid-reply
    first = audio(play(agent, a, 3))
    play(agent, b, 4)
    assert np.array_equal(audio(play(agent, a, 3)), first)
    assert np.any(first) and not np.array_equal(audio(play(agent, a, 9)), first)
    assert len(agent.parts.model.runs) == 4  # one generation per episode
    agent.close()
    assert agent._worker is None


def test_a_model_that_stops_generating_fails_the_step_with_the_reason() -> None:
    agent = VoilaAgent(parts=fake_parts(), device="cpu", max_new_tokens=3)
    agent.reset(None, 0)
    for _ in range(3):
        agent.step(np.zeros(N, np.float32))
    with pytest.raises(RuntimeError, match=r"ended after 3 positions \(max_new_tokens=3\)"):
        agent.step(np.zeros(N, np.float32))


def test_without_voila_code_the_error_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="voila needs Voila's code .*github.com/maitrix-org/Voila"):
        VoilaAgent(device="cpu", repo_dir=str(tmp_path))


def test_the_fake_codec_is_a_residual_vq_that_silence_maps_to_code_zero() -> None:
    codec = fake_parts().audio_tokenizer
    assert torch.equal(codec.encode(np.zeros(2 * HOP, np.float32), sr=RATE), torch.zeros(NUM_CODEBOOKS, 2,
                                                                                          dtype=torch.long))
    x = noise(1, 7)[:HOP]
    err = np.abs(codec.decode(codec.encode(x, sr=RATE)).numpy() - x).mean()
    assert err < np.abs(x).mean()  # the codes describe the input better than silence does
