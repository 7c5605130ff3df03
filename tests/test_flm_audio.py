"""The `flm-audio` adapter (adapters/flm_audio.py) against a fake of FLM-Audio's `LMGen` written from its code at
cofe-ai/flm-audio@41d768c9 and the real tiny Mimi (tests/fake_flm_audio.py): whole episodes of every English config
through the real plans and orchestrator, the alignments (live: a step's tokens are heard from the next slot;
offline: beside the frame they heard), the text stream, reset isolation, the keyword-only `LMGen` the fake enforces
as upstream does, the loader's calls and pin record, and its clear error without FLM-Audio's code. `check-adapter`
runs on it in tests/test_check_adapter.py."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("NO_TORCH_COMPILE", "1")
pytest.importorskip("moshi", reason="the fake uses the `moshi` package's tiny Mimi: `make setup`")

import torch  # noqa: E402

from adapters.flm_audio import FRAME_SIZE, UPSTREAM, FLMAudioAgent  # noqa: E402
from adapters.registry import load_adapter  # noqa: E402
from dataset_builder.audio import SESSION_SR, to_pcm16  # noqa: E402
from dataset_builder.errors import UsageError  # noqa: E402
from tests.adapter_episodes import CONFIGS, run_cases, shortest_cases  # noqa: E402
from tests.fake_flm_audio import (  # noqa: E402
    WAIT,
    WORDS,
    FakeFLMAudioLM,
    FakeLMGen,
    FakeTokenizer,
    fake_checkout,
    fake_parts,
)

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


def test_each_step_is_heard_from_the_next_slot_or_beside_its_frame_offline() -> None:
    """As the server does, step t hands the LM user frame t (no frame twice) and the first step returns nothing.
    Live: slot t plays the decode of step t - 1's tokens; offline: slot t plays step t's."""
    frames, decoded = {}, {}
    user = noise(14, 1)
    for alignment in ("live", "offline"):
        parts = fake_parts()
        agent = FLMAudioAgent(parts=parts, device="cpu", alignment=alignment)
        got: list[torch.Tensor] = []
        decode = parts.mimi.decode
        parts.mimi.decode = lambda tokens, got=got, decode=decode: got.append(tokens.clone()) or decode(tokens)
        frames[alignment], decoded[alignment] = play(agent, user, 3), got
        lm = parts.lm_gen
        assert len(lm.steps) == 14 and not torch.equal(lm.steps[0], lm.steps[1])
        assert len(got) == 13  # every step but the first
        assert agent.runtime() == {"alignment": alignment, "upstream": []}
    live, offline = frames["live"], frames["offline"]
    assert all(f.audio.shape == (N,) and f.audio.dtype == np.float32 for f in live + offline)
    assert not live[0].audio.any() and not live[1].audio.any() and not offline[0].audio.any()
    for t in range(1, 14):
        assert np.array_equal(live[t].audio, offline[t - 1].audio) and live[t].text == offline[t - 1].text
    # The fake speaks a word at steps 5 and 11 (its offset a multiple of 6).
    assert [k for k, f in enumerate(offline) if f.text] == [5, 11]
    assert [k for k, f in enumerate(live) if f.text] == [6, 12]
    with pytest.raises(UsageError, match="alignment must be one of"):
        FLMAudioAgent(parts=fake_parts(), device="cpu", alignment="paper")


def test_lmgen_is_keyword_only_as_upstream() -> None:
    """At 41d768c9 `LMGen.__init__(self, lm_model, *, ...)`: the older `LMGen(lm, tokenizer)` is refused."""
    lm = FakeFLMAudioLM()
    with pytest.raises(TypeError):
        FakeLMGen(lm, FakeTokenizer())  # type: ignore[misc]
    assert FakeLMGen(lm, use_sampling=False).settings["use_sampling"] is False
    gen = FakeLMGen(lm)
    gen.streaming_forever(1)
    with pytest.raises(AssertionError, match="We expect 8 tokens"):
        gen.step(torch.zeros(1, 7, 1, dtype=torch.long))


def test_the_loader_makes_the_servers_calls_and_records_the_commit(tmp_path: Path, monkeypatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import subprocess
    import sys

    root = fake_checkout(tmp_path / "flm-audio")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "x"]):
        subprocess.run([*git, *args], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    weights = tmp_path / "FLM-Audio"
    weights.mkdir()
    monkeypatch.setattr(sys, "path", list(sys.path))
    import transformers

    tokenizers: list[str] = []
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda path: tokenizers.append(path) or FakeTokenizer())
    try:
        with caplog.at_level(logging.WARNING, logger="duplex_eval.upstream"):
            agent = FLMAudioAgent(model_path=str(weights), device="cpu", repo_dir=str(root))
        models = sys.modules["flmaudio.models"]
        assert models.LOADS[0] == ("mimi", str(weights), "cpu")
        assert models.LOADS[1][:2] == ("lm", str(weights)) and models.LOADS[1][2] == {
            "device_map": "cpu", "torch_dtype": torch.bfloat16, "low_cpu_mem_usage": True}
        assert tokenizers == [str(weights)] and agent.parts.lm_gen.settings["use_sampling"] is True
        code, hf = agent.runtime()["upstream"]
        assert code == {"repo": "cofe-ai/flm-audio", "kind": "git", "pinned": UPSTREAM[0].ref, "used": head,
                        "matches": False}
        assert hf == {"repo": str(weights), "kind": "hf", "pinned": None, "used": None, "matches": None}
        assert len(caplog.records) == 1 and "41d768c9" in caplog.records[0].getMessage()
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "flmaudio"]:
            sys.modules.pop(name, None)


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


class ByteTokenizer:
    """A byte-level tokenizer, whose one-token decode can cut a character: token i is byte i - 100 (cut: U+FFFD)."""

    def decode(self, ids: list[int]) -> str:
        return bytes(int(i) - 100 for i in ids).decode("utf-8", errors="replace")


def test_text_is_decoded_as_the_servers_streamer_does() -> None:
    """The server decodes the tokens since the last wait token together (flmaudio/server.py:153-161): a character
    whose bytes span two tokens comes out whole with its last one, never as U+FFFD; a wait token starts afresh."""
    parts = fake_parts()
    parts.tokenizer = ByteTokenizer()
    agent = FLMAudioAgent(parts=parts, device="cpu")
    agent.reset(None, 0)
    ids = [100 + b for b in " 你好".encode()] + [3, WAIT] + [100 + b for b in b" ok"]
    said = [agent._text(i) for i in ids]
    assert "".join(t for t in said if t) == " 你好 ok"
    assert "\ufffd" not in "".join(t for t in said if t)
    assert said[:4] == [" ", None, None, "你"]  # the character's three bytes: out with the third
