"""The Moshi-family presets (adapters/moshi.py `PRESETS`, docs/models.md): each preset, by registered name and by
`--adapter moshi --adapter-arg preset=NAME`, builds the right agent class with its checkpoint repo, language and
prompt handling, and runs on the tiny random model (the preset's code path; no weights are read). The conformance
checks of each registered preset are run by tests/test_check_adapter.py.

Skipped, with the reason, where the `moshi` package is not installed (`make setup` installs it).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("NO_TORCH_COMPILE", "1")  # before moshi is imported: compiling costs ~17 s on CPU
pytest.importorskip("moshi", reason="the `moshi` package is not installed: `make setup`")

from adapters.moshi import FRAME_SIZE, PRESETS, MoshiAgent, PersonaPlexAgent  # noqa: E402
from adapters.protocol import BatchedDuplexAgent  # noqa: E402
from adapters.registry import adapter_names, load_adapter  # noqa: E402
from dataset_builder.benchmark_params import M3Protocol  # noqa: E402
from dataset_builder.errors import UsageError  # noqa: E402

# What each preset must be: (repo id, language, agent class). Written out, not read from PRESETS, so a changed
# repo id is a deliberate edit of both.
EXPECTED = {
    "moshiko": ("kyutai/moshiko-pytorch-bf16", "en", MoshiAgent),
    "moshika": ("kyutai/moshika-pytorch-bf16", "en", MoshiAgent),
    "j-moshi": ("nu-dialogue/j-moshi-ext", "ja", MoshiAgent),
    "llm-jp-moshi": ("llm-jp/llm-jp-moshi-v1", "ja", MoshiAgent),
    "personaplex": ("nvidia/personaplex-7b-v1", "en", PersonaPlexAgent),
}


def test_every_preset_is_listed_and_registered() -> None:
    assert set(PRESETS) == set(EXPECTED)
    assert set(PRESETS) <= set(adapter_names())


@pytest.mark.parametrize("preset", sorted(EXPECTED))
def test_preset_by_name_and_by_argument(preset: str) -> None:
    repo, language, cls = EXPECTED[preset]
    for agent in (load_adapter(preset, tiny=True), load_adapter("moshi", tiny=True, preset=preset)):
        assert isinstance(agent, cls) and isinstance(agent, BatchedDuplexAgent)
        assert agent.name == preset and agent.preset == preset
        assert (agent.default_repo, agent.language) == (repo, language)
        assert (agent.sample_rate, agent.frame_size, agent.realtime) == (24_000, FRAME_SIZE, False)
        # Every Moshi-family checkpoint models the model's own stream: teacher forcing (M3 Full) works for all;
        # only PersonaPlex has a conditioning pathway for the case's prompt.
        assert "teacher_forcing" in agent.capabilities and "text_output" in agent.capabilities
        assert ("system_prompt" in agent.capabilities) == (cls is PersonaPlexAgent)
        # M3's authors prepend 5 s of silence in None/User for the Moshi family (M3-DuplexBench V-A, footnote 2).
        assert M3Protocol().for_agent(agent).greets_first == 1
        agent.reset("you are a teacher.", 3)
        out = [agent.step(np.zeros(FRAME_SIZE, np.float32)).audio for _ in range(3)]
        assert all(a.shape == (FRAME_SIZE,) and np.isfinite(a).all() for a in out)


def test_plain_moshi_keeps_its_name_and_moshiko_weights() -> None:
    agent = MoshiAgent(tiny=True)
    assert (agent.name, agent.preset, agent.default_repo) == ("moshi", "moshiko", "kyutai/moshiko-pytorch-bf16")


@pytest.mark.parametrize("preset", ["moshiko", "moshika", "j-moshi", "llm-jp-moshi"])
def test_the_preset_and_the_tiny_model_give_the_same_samples_as_plain_moshi(preset: str) -> None:
    """A non-persona preset changes only where the weights come from: on the same (tiny) weights, it steps exactly
    as moshi does, text included, through two resets (so `moshi`'s conformance checks are its own:
    tests/test_check_adapter.py)."""
    user = (np.random.default_rng(1).standard_normal(10 * FRAME_SIZE) * 0.1).astype(np.float32)
    runs = []
    for agent in (MoshiAgent(tiny=True), load_adapter(preset, tiny=True)):
        frames = []
        for seed in (4, 9):
            agent.reset(None, seed)
            frames += [agent.step(user[k:k + FRAME_SIZE]) for k in range(0, len(user), FRAME_SIZE)]
        runs.append(frames)
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a.audio, b.audio)
        assert a.text == b.text


def test_wrong_preset_says_what_to_do() -> None:
    with pytest.raises(UsageError, match=r"unknown moshi preset 'j-mosh'.*'j-moshi'"):
        MoshiAgent(tiny=True, preset="j-mosh")
    with pytest.raises(UsageError, match="use --adapter moshiko"):
        PersonaPlexAgent(tiny=True, preset="moshiko")
    with pytest.raises(UsageError, match="use --adapter personaplex"):
        load_adapter("j-moshi", tiny=True, preset="personaplex")
