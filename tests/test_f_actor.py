"""The `f-actor` adapter (adapters/f_actor.py) against a double written from F-Actor's public code
(tests/fake_f_actor.py: a tiny random DSULlama-shaped model, its tokenizer's surface, a NanoCodec-shaped codec):
a DSB-IFEval mini case through the real plan and orchestrator, the token layout per step (the user as the partner
stream, the model's own codes, the two-frame audio delay), teacher forcing, the prompt it reads, reset isolation,
the text stream, and the loader. `check-adapter` runs on it in tests/test_check_adapter.py."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from adapters.f_actor import SOS, UPSTREAM, FActorAgent, TextStream, filtered_probs, read_speaker
from adapters.registry import load_adapter
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError
from metrics.ifeval.score import has_text_output
from tests.adapter_episodes import run_cases
from tests.fake_f_actor import CODES, HOP, RESERVED, SPECIALS, VOCAB, DSULlama, FakeNanoCodec, FakeTokenizer, fake_parts

N = HOP  # one NanoCodec frame: 80 ms at 22.05 kHz
DELAY = CODES  # the model's audio delay id


def noise(frames: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(frames * N) * 0.1).astype(np.float32)


def play(agent: FActorAgent, user: np.ndarray, seed: int, prompt: str | None = None,
         forced: np.ndarray | None = None) -> list[Any]:
    agent.parts.model.forget()
    agent.reset(prompt, seed)
    return [agent.step(user[k:k + N], None if forced is None or k >= len(forced) else forced[k:k + N])
            for k in range(0, len(user), N)]


def codes_of(codec: FakeNanoCodec, frame: np.ndarray) -> np.ndarray:
    tokens, _ = codec.encode(audio=torch.from_numpy(frame)[None], audio_len=torch.tensor([len(frame)]))
    return tokens[0, :, -1].numpy()


def decoded(codec: FakeNanoCodec, codes: np.ndarray) -> np.ndarray:
    """The whole own stream decoded in one go: what a streaming decoder gives."""
    audio, _ = codec.decode(tokens=torch.from_numpy(codes.T)[None], tokens_len=torch.tensor([len(codes)]))
    return audio[0].numpy()


def test_one_ifeval_case_through_the_plan_and_orchestrator(mini_sets: Mapping[str, Path], tmp_path: Path) -> None:
    """The case's instruction is what the model reads; the recording's model channel is its own codes decoded."""
    from dataset_builder.ifeval.rows import list_items

    folder = mini_sets["ifeval"]
    case = next(c for c in list_items(folder, "ifeval") if c.case.system_prompt)
    parts = fake_parts()
    agent = load_adapter("f-actor", parts=parts, device="cpu")
    assert agent.sample_rate == 22_050 and agent.frame_size == N and N * SESSION_SR % agent.sample_rate == 0

    def taken(_ep: Any) -> dict[str, Any]:
        return {"read": parts.tokenizer.texts[-1], "fed": parts.model.fed()}

    (r,) = run_cases(agent, folder, "ifeval", tmp_path, [case.case_id], seed=5, after=taken)
    assert r.episode.status == "ok", r.episode.failure
    # DSB-IFEval's way (App. D.3): no text of its own, so the scorer's ASR transcribes its speech for the judge.
    assert not r.episode.model_text and not has_text_output(r.episode)
    adapter = r.episode.adapter
    assert adapter["runtime"]["transcript"] == "asr" and "text_output" not in adapter["capabilities"]
    assert r.extra["read"] == case.case.system_prompt + "\n" + SOS == r.plan.system_prompt + "\n" + SOS
    fed = r.extra["fed"]
    frames = len(r.pcm) // (N * SESSION_SR // agent.sample_rate)
    assert len(fed) == frames + 2 and (fed[:2] == DELAY).all()  # two delay positions, then one per frame
    own = fed[2:, :4]
    assert own.max() < CODES
    # The model channel is the model's own codes decoded, sample for sample before the recording's resampling.
    expected = resample(decoded(parts.codec, own), agent.sample_rate, SESSION_SR)
    np.testing.assert_allclose(r.pcm[:, 1] / 32768, expected[:len(r.pcm)], atol=1e-4)


def test_the_user_is_the_partner_stream_and_its_own_codes_are_what_it_plays() -> None:
    """Position k + 2 holds own frame k (the frame step k returned) and user frame k, each codebook at its head."""
    parts = fake_parts()
    agent = FActorAgent(parts=parts, device="cpu")
    user = noise(12, 1)
    frames = play(agent, user, 3, "Backchannel often.")
    fed = parts.model.fed()
    assert fed.shape == (14, 8) and (fed[:2] == DELAY).all()
    for k in range(12):
        np.testing.assert_array_equal(fed[k + 2, 4:], codes_of(parts.codec, user[k * N:(k + 1) * N]))
    said = np.concatenate([f.audio for f in frames])
    assert all(f.audio.shape == (N,) and f.audio.dtype == np.float32 for f in frames)
    np.testing.assert_allclose(said, decoded(parts.codec, fed[2:, :4]), atol=1e-6)
    # Without left context each frame is decoded alone: its predecessor's ring is missing (the fake's decoder has
    # one frame of memory), so the stream differs from frame 1 on, and frame 0 is the same.
    alone = FActorAgent(parts=parts, device="cpu", codec_context_frames=0)
    cut = np.concatenate([f.audio for f in play(alone, user, 3, "Backchannel often.")])
    assert np.array_equal(cut[:N], said[:N]) and not np.allclose(cut[N:2 * N], said[N:2 * N], atol=1e-3)


def test_its_own_codebooks_never_draw_the_delay_or_end_ids() -> None:
    """Even a model that all but insists on them (delay id on even heads, end id on odd ones) plays audio codes."""
    parts = fake_parts()
    with torch.no_grad():
        for h in range(8):
            parts.model.dsu_head.bias[h * (CODES + 2) + CODES + h % 2] = 1e4
    agent = FActorAgent(parts=parts, device="cpu")
    frames = play(agent, noise(6, 1), 0)
    assert parts.model.fed()[2:, :4].max() < CODES and all(np.isfinite(f.audio).all() for f in frames)


def test_forced_frames_are_its_own_codes_and_come_back_as_given() -> None:
    parts = fake_parts()
    agent = FActorAgent(parts=parts, device="cpu")
    user, forced = noise(10, 1), noise(4, 7)
    frames = play(agent, user, 3, forced=forced)
    fed = parts.model.fed()
    for k in range(4):
        assert np.array_equal(frames[k].audio, forced[k * N:(k + 1) * N])
        np.testing.assert_array_equal(fed[k + 2, :4], codes_of(parts.codec, forced[k * N:(k + 1) * N]))
    # Free running again: each frame is what the model sampled, decoded after the forced codes before it.
    np.testing.assert_allclose(np.concatenate([f.audio for f in frames[4:]]),
                               decoded(parts.codec, fed[2:, :4])[4 * N:], atol=1e-6)


def test_reset_gives_fresh_state_and_the_seed_and_prompt_decide_the_samples() -> None:
    agent = FActorAgent(parts=fake_parts(), device="cpu")
    a, b = noise(16, 1), noise(16, 2)

    def audio(user: np.ndarray, seed: int, prompt: str | None = None) -> np.ndarray:
        return np.concatenate([f.audio for f in play(agent, user, seed, prompt)])

    first = audio(a, 3)
    audio(b, 4, "Interrupt the caller.")
    assert np.array_equal(audio(a, 3), first)
    assert not np.array_equal(audio(a, 9), first)
    assert not np.array_equal(audio(a, 3, "Never backchannel."), first)
    np.testing.assert_array_equal(audio(a[:N], 3), first[:N])  # a frame depends on nothing after it


def test_what_the_model_reads() -> None:
    parts = fake_parts()
    agent = FActorAgent(parts=parts, device="cpu")
    assert agent.prompt_text(None) == agent.prompt_text("") == SOS
    assert agent.prompt_text("You are a 911 dispatcher.") == "You are a 911 dispatcher.\n<|SOS|>"
    agent.reset("Listen.", 0)
    assert parts.tokenizer.texts[-1] == "Listen.\n<|SOS|>"
    framed = FActorAgent(parts=parts, device="cpu", prompt_template="Narrative:\n- {prompt}\n<|SOS|>")
    assert framed.prompt_text("Listen.") == "Narrative:\n- Listen.\n<|SOS|>"
    with pytest.raises(UsageError, match="prompt_template must contain"):
        FActorAgent(parts=parts, device="cpu", prompt_template="no placeholder")
    with pytest.raises(UsageError, match="0 < top_p <= 1"):
        FActorAgent(parts=parts, device="cpu", top_p=0)
    with pytest.raises(UsageError, match=r"transcript must be one of \['asr', 'text-stream'\]"):
        FActorAgent(parts=parts, device="cpu", transcript="text")


def test_by_default_it_gives_no_text_and_its_text_stream_on_request() -> None:
    """DSB-IFEval transcribed F-Actor's speech with ASR (App. D.3): by default it declares no text output and gives
    none; `transcript="text-stream"` gives its text head's words, never a pad or marker token."""
    parts = fake_parts()
    user = noise(20, 1)
    quiet = FActorAgent(parts=parts, device="cpu")
    assert quiet.capabilities == {"system_prompt", "teacher_forcing"} and quiet.runtime()["transcript"] == "asr"
    assert all(f.text is None for f in play(quiet, user, 0))
    talking = FActorAgent(parts=parts, device="cpu", transcript="text-stream")
    assert "text_output" in talking.capabilities and talking.runtime()["transcript"] == "text-stream"
    said = [f.text for f in play(talking, user, 0) if f.text]
    assert said and not any(s in t for t in said for s in SPECIALS)


def test_sampling_filters_as_f_actor_does() -> None:
    """Softmax at the temperature, then top-k, then the head of the rest reaching top-p (crossing token kept)."""
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))

    def probs(**kw: Any) -> list[float]:
        return [round(p, 6) for p in filtered_probs(logits, **kw)[0].tolist()]

    assert probs(temperature=1.0, top_k=0, top_p=1.0) == [0.5, 0.3, 0.15, 0.05]
    assert probs(temperature=1.0, top_k=3, top_p=1.0) == [round(p / 0.95, 6) for p in (0.5, 0.3, 0.15)] + [0.0]
    assert probs(temperature=1.0, top_k=40, top_p=0.7) == [0.625, 0.375, 0.0, 0.0]
    assert probs(temperature=1.0, top_k=40, top_p=0.4) == [1.0, 0.0, 0.0, 0.0]
    root = [p**0.5 for p in (0.5, 0.3, 0.15, 0.05)]
    assert probs(temperature=2.0, top_k=0, top_p=1.0) == [round(r / sum(root), 6) for r in root]


def test_the_text_stream_gives_words_spaced_and_markers_as_notes() -> None:
    tok = FakeTokenizer()
    stream = TextStream(tok)
    seq = ["[SILENCE_PAD]", "yes", "[WORD_PAD]", " hello", "[UTTERANCE_PAD]", "[SILENCE_PAD]", "okay", " there",
           "[INTER]", " twelve", "[BC]", "<|eot_id|>"]
    got = [stream.piece(VOCAB.index(t)) for t in seq]
    assert got == [(None, None), ("yes", None), (None, None), (" hello", None), (None, None), (None, None),
                   (" okay", None), (" there", None), (None, "interruption marker [INTER]"), (" twelve", None),
                   (None, "backchannel marker [BC]"), (None, None)]
    stream.reset()
    assert stream.piece(VOCAB.index("okay")) == ("okay", None)  # nothing said yet: no space
    assert stream.piece(VOCAB.index(RESERVED)) == (None, None)  # a special token all_special_ids does not list
    assert stream.piece(VOCAB.index("yes")) == (" yes", None)  # is a pause too


def test_speaker_embeddings_are_read_by_name(tmp_path: Path) -> None:
    table = tmp_path / "speaker_embeddings.json"
    table.write_text(json.dumps({"brian": [0.5] * 192, "tom": [1.0] * 3}))
    assert read_speaker(table, "Brian").tolist() == [0.5] * 192
    with pytest.raises(UsageError, match=r"speaker 'gweneth' is not in .* \(it has \['brian', 'tom'\]\)"):
        read_speaker(table, "gweneth")
    with pytest.raises(UsageError, match=r"has shape \(3,\), expected \(192,\)"):
        read_speaker(table, "tom")


@pytest.fixture
def clean_imports() -> Iterator[None]:
    """A test that imports from a stand-in checkout leaves neither its modules nor its path behind."""
    modules, path = set(sys.modules), list(sys.path)
    yield
    for name in set(sys.modules) - modules:
        if name.split(".")[0] in ("modeling_dsu", "nemo"):
            del sys.modules[name]
    sys.path[:] = path


def test_without_f_actor_code_the_error_says_what_to_install(tmp_path: Path, clean_imports: None) -> None:
    with pytest.raises(UsageError, match="f-actor needs F-Actor's code") as err:
        FActorAgent(device="cpu", repo_dir=str(tmp_path))
    assert "\n" not in str(err.value) and "MaikeZuefle/f-actor" in str(err.value)


STAND_IN = "from tests.fake_f_actor import DSULlama  # noqa: F401\n"
CODEC_STAND_IN = '''
from tests.fake_f_actor import FakeNanoCodec

loaded = []


class AudioCodecModel:
    @classmethod
    def from_pretrained(cls, name):
        loaded.append(name)
        return FakeNanoCodec()
'''


def stand_in_checkout(root: Path) -> Path:
    """A checkout of F-Actor's shape (training/modeling_dsu.py, a `nemo` package, the speaker table) committed in
    a git repository of its own: a commit other than the pinned one."""
    training = root / "training"
    (training / "example_speakers").mkdir(parents=True)
    (training / "modeling_dsu.py").write_text(STAND_IN)
    (training / "example_speakers" / "speaker_embeddings.json").write_text(json.dumps({"brian": [0.25] * 192}))
    models = training / "nemo" / "collections" / "tts"
    models.mkdir(parents=True)
    (models / "models.py").write_text(CODEC_STAND_IN)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "stand-in"]):
        subprocess.run(git + cmd, check=True, capture_output=True)
    return root


def test_the_stand_in_refuses_a_config_without_f_actors_fields_and_positional_codec_calls() -> None:
    """DSUModel.__init__ refuses a config without num_dsus (the checkpoint's config.json alone), and NeMo's typed
    encode/decode refuse positional arguments; the adapter makes neither call (the tests above run through both)."""
    with pytest.raises(ValueError, match="config.num_dsus must be set"):
        DSULlama.from_pretrained("weights", config=SimpleNamespace())
    codec, frame = FakeNanoCodec(), torch.zeros(1, N)
    with pytest.raises(TypeError, match="kwargs only"):
        codec.encode(frame, torch.tensor([N]))
    codes, _ = codec.encode(audio=frame, audio_len=torch.tensor([N]))
    with pytest.raises(TypeError, match="kwargs only"):
        codec.decode(codes, torch.tensor([1]))
    assert codec.decode(tokens=codes, tokens_len=torch.tensor([1]))[0].shape == (1, N)


def test_the_loader_follows_f_actors_inference_example(tmp_path: Path, clean_imports: None, monkeypatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A stand-in checkout: the config fields its inference example sets, the three head loaders from the local
    snapshot (so they load rather than make new heads), NanoCodec by name, the checkout's speaker table; the
    checkout is at another commit than the pinned one, which is said in one line and recorded."""
    import transformers

    checkout = stand_in_checkout(tmp_path / "f-actor")
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda path, **kw: FakeTokenizer())
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", lambda path, **kw: SimpleNamespace())
    DSULlama.calls.clear()
    with caplog.at_level(logging.WARNING, logger="duplex_eval.upstream"):
        agent = FActorAgent(model_path=str(weights), device="cpu", repo_dir=str(checkout))
    from nemo.collections.tts import models as codec_models

    assert DSULlama.calls == [
        ("from_pretrained", str(weights), {"num_dsus": 4, "text_stream": True, "multi_text_stream": False,
                                           "audio_vocab_size": 4032, "use_speaker_embedding": True,
                                           "calc_loss_on_c1_only": False}, ["torch_dtype"]),
        ("init_or_load_speaker_embed_proj", str(weights), "loaded"), ("init_or_load_audio_heads", str(weights),
                                                                      "loaded"),
        ("init_or_load_audio_embeds", str(weights), "loaded")]
    assert codec_models.loaded == ["nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps"]
    assert agent.parts.speaker.tolist() == [0.25] * 192 and agent.parts.tokenizer.pad_token == "<|eot_id|>"
    assert agent.version == f"f-actor:{weights}"
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    code, hub = agent.runtime()["upstream"]
    assert code == {"repo": "MaikeZuefle/f-actor", "kind": "git", "pinned": UPSTREAM[0].ref, "used": head,
                    "matches": False}
    assert hub == {"repo": str(weights), "kind": "hf", "pinned": None, "used": None, "matches": None}
    said = [r.getMessage() for r in caplog.records if r.name == "duplex_eval.upstream"]
    assert len(said) == 1 and "MaikeZuefle/f-actor@2efa25d5" in said[0] and head in said[0]
