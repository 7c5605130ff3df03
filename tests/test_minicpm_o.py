"""The MiniCPM-o 4.5 duplex adapter (adapters/minicpm_o.py) against an API fake of the model
(tests/fake_minicpm_o.py): real mini sets, real plans, the real orchestrator — not the real weights.

The fake answers at a chunk it records (`spoke_at`), with a click on its reply's first sample, so where that
reply must sit in the recording is known exactly: chunk k ends at session sample (k + 1) * 24000.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from adapters.minicpm_o import DEFAULT_PROMPT, DEFAULT_REF, UPSTREAM, MiniCPMOAgent, system_turn
from adapters.protocol import DuplexAgent
from adapters.registry import load_adapter
from dataset_builder.audio import SESSION_SR, resample, to_pcm16
from dataset_builder.errors import UsageError
from tests.adapter_episodes import CONFIGS, Ran, first_cases, run_cases, shortest_cases
from tests.fake_minicpm_o import CLICK, FakeMiniCPMODuplex, modeling_module

SECOND = SESSION_SR  # one model chunk on the session clock


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
        # Every whole second of the user channel reached the model as one 16 kHz chunk, in order.
        user = r.pcm[:, 0].astype(np.float32) / 32768
        assert len(got["received"]) == len(user) // SECOND
        for k, chunk in enumerate(got["received"]):
            assert chunk.shape == (16_000,)
            np.testing.assert_allclose(chunk, resample(user[k * SECOND:(k + 1) * SECOND], SESSION_SR, 16_000),
                                       atol=2e-3)
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
    loud = np.full(n, 0.3, np.float32)
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
    out = [agent.step(np.full(n, 0.3 if i < SECOND // n else 0.0, np.float32)).audio for i in range(3 * SECOND // n)]
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
    """MiniCPMODuplex.from_pretrained(weights, device=, attn_implementation=, force_listen_count=) from the demo's
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
                                    "attn_implementation": "sdpa", "force_listen_count": 3}
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
