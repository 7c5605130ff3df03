"""The `voila` adapter (adapters/voila.py) against a fake of Voila's autonomous API written from its public code
(tests/fake_voila.py): one Duplex-MPE mini episode through the real plan and orchestrator, the step's timing (user
frame k handed over before the model's frame k is taken; text stamped on the audio frame it precedes), the persona
instruction in the prompt, reset isolation, and the loader's clear error without Voila's code. `check-adapter`
runs on it in tests/test_check_adapter.py."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
from collections.abc import Iterator, Mapping
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest
import torch

from adapters.registry import load_adapter
from adapters.voila import UPSTREAM, VoilaAgent
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError
from tests.adapter_episodes import first_cases, run_cases
from tests.fake_voila import (
    HOP,
    NUM_CODEBOOKS,
    RATE,
    WORDS,
    FakeTokenizer,
    SpeakerEmbedding,
    VoilaAutonomousModel,
    fake_parts,
)

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


def test_the_fake_refuses_what_voilas_code_refuses_and_the_adapter_makes_none_of_those_calls() -> None:
    """Each wrong call Voila@6ba63bf6 refuses (a task other than chat_aiao_auto, an instruction that is not a str,
    no eos/pad or assistant id, a user frame of the wrong shape, 3-D codes to decode); the episodes above run
    through every one of these entry points without tripping them."""
    parts = fake_parts()
    tok, codec = parts.tokenizer, parts.audio_tokenizer
    item = {"instruction": "", "conversations": [{"from": "user", "audio": {"array": np.zeros(HOP), "sr": RATE}}]}
    cfg = {"input_type": "autonomous", "task_type": "chat_aiao", "num_codebooks": NUM_CODEBOOKS,
           "codebook_size": 64}
    with pytest.raises(AssertionError, match="only support chat_aiao_auto"):
        parts.input_format(item, tok, codec, cfg)
    with pytest.raises(TypeError, match="must be of type `str`"):
        parts.input_format(item | {"instruction": None}, tok, codec, cfg | {"task_type": "chat_aiao_auto"})
    agent = VoilaAgent(parts=parts, device="cpu")
    prompt = agent._prompt("")
    base = {"input_ids": prompt, "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id,
            "llm_audio_token_id": agent.audio_token_id, "min_audio_token_id": agent.audio_min,
            "llm_assistant_token_id": agent.assistant_id}
    frame = torch.as_tensor(agent.offsets + 1, dtype=torch.long)  # one loud frame's ids
    with pytest.raises(AssertionError, match="eos_token_id and pad_token_id are required"):
        parts.model.run_generate(**(base | {"eos_token_id": None}), input_generator=iter([frame]))
    with pytest.raises(TypeError, match="NoneType"):
        parts.model.run_generate(**(base | {"llm_assistant_token_id": None}), input_generator=iter(
            [frame] * 3 + [frame * 0 + torch.as_tensor(agent.offsets)] * 3))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        parts.model.run_generate(**base, input_generator=iter([frame[None]]))
    with pytest.raises(AssertionError):
        codec.decode(torch.zeros(1, NUM_CODEBOOKS, 2, dtype=torch.long))
    # The adapter's own calls: the autonomous task, "" for no prompt, every id, one [num_codebooks] frame a step.
    frames = play(agent, np.concatenate([noise(3, 1), np.zeros(6 * N, np.float32)]), 3)
    assert any(np.any(f.audio) for f in frames) and len(parts.model.runs[-1].heard) == 9


class CacheOfItsEra:
    """transformers' DynamicCache as Voila's loop reads it (4.46 to 4.53): `seen_tokens`, `get_max_cache_shape`."""

    seen_tokens = 0

    def get_max_cache_shape(self) -> None:
        return None


STAND_INS = {
    "model.py": "from tests.fake_voila import VoilaAutonomousModel  # noqa: F401\n",
    "spkr.py": "from tests.fake_voila import SpeakerEmbedding  # noqa: F401\n",
    "voila_tokenizer.py": "from tests.fake_voila import VoilaTokenizer  # noqa: F401\n",
    "tokenize_func.py": ("from tests.fake_voila import (AUDIO_TOKEN_FORMAT, DEFAULT_ASSISTANT_TOKEN,  # noqa: F401\n"
                         "                              DEFAULT_AUDIO_TOKEN, voila_input_format)\n"),
    "torchaudio.py": "import torch\n\ndef load(path):\n    return torch.zeros(1, 16000), 16000\n",
}


@pytest.fixture
def clean_imports() -> Iterator[None]:
    """A test that imports from a stand-in checkout leaves neither its modules nor its path behind."""
    modules, path = set(sys.modules), list(sys.path)
    yield
    for name in set(sys.modules) - modules:
        if name.split(".")[0] in {Path(f).stem for f in STAND_INS}:
            del sys.modules[name]
    sys.path[:] = path


def test_the_loader_follows_infer_py_and_records_a_checkout_at_another_commit(
        tmp_path: Path, clean_imports: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A stand-in checkout of Voila's shape, committed in a git repository of its own (so at another commit than
    the pinned one): the model loaded as infer.py loads it (bf16, use_cache), the text tokenizer from the model's
    folder, the audio tokenizer from its own, the voice from the checkout's examples/test1.mp3; the other commit is
    said in one line and recorded with matches=False."""
    import transformers

    checkout = tmp_path / "Voila"
    (checkout / "examples").mkdir(parents=True)
    (checkout / "examples" / "test1.mp3").write_bytes(b"")
    for name, text in STAND_INS.items():
        (checkout / name).write_text(text)
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "stand-in"]):
        subprocess.run(git + cmd, check=True, capture_output=True)
    weights, codec = tmp_path / "weights", tmp_path / "codec"
    weights.mkdir()
    codec.mkdir()
    texts: list[str] = []
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda path, **kw: texts.append(path) or FakeTokenizer())
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else
                        find_spec(name, *a))
    monkeypatch.setattr(transformers, "DynamicCache", CacheOfItsEra)
    VoilaAutonomousModel.loads.clear()
    SpeakerEmbedding.calls.clear()
    with caplog.at_level(logging.WARNING, logger="duplex_eval.upstream"):
        agent = VoilaAgent(model_path=str(weights), tokenizer_path=str(codec), device="cpu", repo_dir=str(checkout))
    assert VoilaAutonomousModel.loads == [(str(weights), {"torch_dtype": torch.bfloat16, "use_cache": True})]
    assert texts == [str(weights)] and SpeakerEmbedding.calls == [
        ("init", "pyannote/wespeaker-voxceleb-resnet34-LM", "cpu"), ("embed", (1, 16000), 16000)]
    head = subprocess.run(git[:3] + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    run = agent.runtime()
    assert run["upstream"] == [
        {"repo": "maitrix-org/Voila", "kind": "git", "pinned": UPSTREAM[0].ref, "used": head, "matches": False},
        {"repo": str(weights), "kind": "hf", "pinned": None, "used": None, "matches": None},
        {"repo": str(codec), "kind": "hf", "pinned": None, "used": None, "matches": None}]
    assert run["attn_implementation"] == "transformers default" and run["temperature"] == 0.2
    assert run["ref_audio"] == str(checkout.resolve() / "examples" / "test1.mp3")
    said = [r.getMessage() for r in caplog.records if r.name == "duplex_eval.upstream"]
    assert len(said) == 1 and "maitrix-org/Voila@6ba63bf6" in said[0] and head in said[0]
    VoilaAgent(model_path=str(weights), tokenizer_path=str(codec), device="cpu", repo_dir=str(checkout),
               attn_implementation="sdpa")
    assert VoilaAutonomousModel.loads[-1][1]["attn_implementation"] == "sdpa"


def test_a_transformers_without_what_voilas_loop_reads_is_one_line_at_load(
        tmp_path: Path, clean_imports: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Voila's run_generate reads DynamicCache.seen_tokens (gone in transformers 4.54) and get_max_cache_shape (new
    in 4.46), model.py:1156-1158; its requirements.txt pins no version. A load with a cache lacking them stops with
    one line naming the range, before any download, instead of failing at the second position of an episode."""
    import transformers

    checkout = tmp_path / "Voila"
    checkout.mkdir()
    for name, text in STAND_INS.items():
        (checkout / name).write_text(text)
    monkeypatch.setattr(transformers, "DynamicCache", type("DynamicCache", (), {"get_max_cache_shape": None}))
    wanted = r"reads DynamicCache\.seen_tokens .*install transformers>=4\.46,<4\.54"
    with pytest.raises(UsageError, match=wanted) as err:
        VoilaAgent(model_path="maitrix-org/Voila-autonomous-preview", device="cpu", repo_dir=str(checkout))
    assert "\n" not in str(err.value)
