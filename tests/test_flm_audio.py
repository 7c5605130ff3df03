"""The `flm-audio` adapter (adapters/flm_audio.py) against a fake of FLM-Audio's `LMGen` written from its public
code and the real tiny Mimi (tests/fake_flm_audio.py): whole episodes of every English config through the real plans
and orchestrator, the one-frame offset (the first frame fed twice), the text stream, reset isolation, and the
loader's clear error without FLM-Audio's code. `check-adapter` runs on it in tests/test_check_adapter.py."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("NO_TORCH_COMPILE", "1")
pytest.importorskip("moshi", reason="the fake uses the `moshi` package's tiny Mimi: `make setup`")

import torch  # noqa: E402

from adapters.flm_audio import FRAME_SIZE, FLMAudioAgent  # noqa: E402
from adapters.registry import load_adapter  # noqa: E402
from dataset_builder.audio import SESSION_SR, to_pcm16  # noqa: E402
from dataset_builder.errors import UsageError  # noqa: E402
from tests.adapter_episodes import CONFIGS, run_cases, shortest_cases  # noqa: E402
from tests.fake_flm_audio import WORDS, fake_parts  # noqa: E402

N = FRAME_SIZE
ENGLISH = tuple(c for c in CONFIGS if not c.endswith("_ja"))


def noise(frames: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(frames * N) * 0.1).astype(np.float32)


def play(agent: FLMAudioAgent, user: np.ndarray, seed: int) -> list:
    agent.reset(None, seed)
    return [agent.step(user[k:k + N]) for k in range(0, len(user), N)]


@pytest.mark.parametrize("config", ENGLISH)
def test_runs_every_english_config(config: str, mini_sets: Mapping[str, Path], tmp_path: Path) -> None:
    folder = mini_sets[config.split("_")[0]]
    agent = load_adapter("flm-audio", parts=fake_parts(), device="cpu")
    ids = shortest_cases(folder, config)
    for r in run_cases(agent, folder, config, tmp_path, ids, seed=5):
        if r.episode.condition == "full":  # no teacher forcing: M3 Full is skipped and counted
            assert r.episode.status == "skipped"
            continue
        assert r.episode.status == "ok", r.episode.failure
        assert np.abs(r.pcm[:, 1]).max() > 0
        said = [t for _, t in r.episode.model_text]
        assert said and set(said) <= set(WORDS.values())


def test_first_frame_fed_twice_and_every_step_decoded() -> None:
    """Step t hands the LM user frame t (frame 0 twice), and returns the decode of the tokens that step gave."""
    parts = fake_parts()
    agent = FLMAudioAgent(parts=parts, device="cpu")
    user = noise(12, 1)
    decoded = []
    decode = parts.mimi.decode
    parts.mimi.decode = lambda tokens: decoded.append(tokens.clone()) or decode(tokens)
    frames = play(agent, user, 3)
    lm = parts.lm_gen
    assert len(lm.steps) == 13 and torch.equal(lm.steps[0], lm.steps[1])
    assert len(decoded) == 12 and all(f.audio.shape == (N,) and f.audio.dtype == np.float32 for f in frames)
    texts = [(k, f.text) for k, f in enumerate(frames) if f.text]
    # The fake speaks a word when its offset is a multiple of 6: steps 6, 12 -> episode frames 4 and 10.
    assert [k for k, _ in texts] == [4, 10]


def test_reset_gives_fresh_state_and_the_seed_decides_the_samples() -> None:
    agent = FLMAudioAgent(parts=fake_parts(), device="cpu")
    a, b = noise(20, 1), noise(20, 2)
    first = np.concatenate([f.audio for f in play(agent, a, 3)])
    play(agent, b, 4)
    assert np.array_equal(np.concatenate([f.audio for f in play(agent, a, 3)]), first)
    assert not np.array_equal(np.concatenate([f.audio for f in play(agent, a, 9)]), first)
    assert to_pcm16(first).any() and agent.sample_rate == SESSION_SR


def test_without_flm_audio_code_the_error_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="flm-audio needs FLM-Audio's code"):
        FLMAudioAgent(device="cpu", repo_dir=str(tmp_path))
