"""Every registry entry resolves and steps, so a name cannot drift from its class (STYLE, lm-eval's flaw)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from adapters.protocol import CAPABILITIES, DuplexAgent, Frame
from adapters.registry import adapter_names, load_adapter
from dataset_builder.errors import UsageError

# The reference agents that speak through the project's TTS take a cache folder.
NEEDS_CACHE = {"oracle", "cascade"}
# Adapters that cannot be built without a model, weights or a server: tests/test_check_adapter.py builds each
# in its test construction (its SETUPS table: a tiny random model, an API fake, a local server) and steps it
# through every conformance check.
NEEDS_SETUP = {"moshi", "personaplex", "minicpm-o", "freeze-omni", "openai-realtime", "moshi-server",
               "vllm-omni-duplex", "turn-based"}
NEEDS_SETUP |= {"moshiko", "moshika", "j-moshi", "llm-jp-moshi"}  # Moshi-family presets: weights
NEEDS_SETUP |= {"flm-audio"}  # its code and weights: a fake LMGen in the tests
NEEDS_SETUP |= {"voila"}  # its code and weights: a fake of its API in the tests
NEEDS_SETUP |= {"fun-audio-chat"}  # its code and weights: a fake of its library in the tests
NEEDS_SETUP |= {"f-actor"}  # its code and weights: a tiny model of its shape and a fake codec in the tests


def test_adapters_needing_setup_are_built_by_the_conformance_tests() -> None:
    from tests.test_check_adapter import SETUPS

    assert NEEDS_SETUP <= set(adapter_names()), NEEDS_SETUP - set(adapter_names())
    assert NEEDS_SETUP <= set(SETUPS), NEEDS_SETUP - set(SETUPS)


@pytest.mark.parametrize("name", [n for n in adapter_names() if n not in NEEDS_SETUP])
def test_every_registered_adapter_loads_and_steps(name: str, tmp_path: Path) -> None:
    kwargs = {"cache_dir": tmp_path / "tts"} if name in NEEDS_CACHE else {}
    agent = load_adapter(name, **kwargs)
    assert isinstance(agent, DuplexAgent)
    assert agent.capabilities <= CAPABILITIES, agent.capabilities - CAPABILITIES
    assert agent.name == name and agent.sample_rate > 0 and agent.frame_size > 0
    agent.reset(None, 0)
    zeros = np.zeros(agent.frame_size, np.float32)
    try:
        for _ in range(30):
            frame = agent.step(zeros)
            assert isinstance(frame, Frame)
            assert frame.audio.shape == (agent.frame_size,) and np.all(np.isfinite(frame.audio))
    finally:
        agent.close()


def test_module_class_path_loads_a_fake() -> None:
    from tests.fake_agents import MimiStyleAgent

    agent = load_adapter("tests.fake_agents:MimiStyleAgent")
    assert type(agent) is MimiStyleAgent and isinstance(agent, DuplexAgent)
    assert agent.capabilities <= CAPABILITIES


def test_module_class_path_passes_kwargs() -> None:
    agent = load_adapter("tests.fake_agents:BrokenAgent", mode="nan", at_frame=3)
    assert (agent.mode, agent.at_frame) == ("nan", 3)


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(UsageError) as info:
        load_adapter("no-such-model")
    message = str(info.value)
    assert "no-such-model" in message
    for name in adapter_names():
        assert name in message


def test_non_agent_class_is_rejected() -> None:
    # A class that does not implement the protocol must not slip through a "module:Class" path.
    with pytest.raises(UsageError, match="DuplexAgent"):
        load_adapter("adapters.base:SpeechQueue")


@pytest.mark.parametrize("cls", ["MimiStyleAgent", "ChunkedAgent", "RealtimeAgent", "BrokenAgent"])
def test_fake_agents_satisfy_the_protocol(cls: str) -> None:
    agent = load_adapter(f"tests.fake_agents:{cls}")
    assert agent.capabilities <= CAPABILITIES
    agent.reset(None, 0)
    frame = agent.step(np.zeros(agent.frame_size, np.float32))
    assert frame.audio.shape == (agent.frame_size,)
