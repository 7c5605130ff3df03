"""`minicpm-o`: MiniCPM-o 4.5 in its full-duplex mode (docs/adding-a-model.md), adapted to the frame protocol by
buffering.

The model's own duplex loop (OpenBMB/MiniCPM-o README, "Duplex Omni Mode"; the model's trusted code,
modeling_minicpmo.py, class `MiniCPMODuplex`):

    model = AutoModel.from_pretrained(path, trust_remote_code=True, attn_implementation=..., torch_dtype=...)
    model.eval().cuda(); model.init_tts(); duplex = model.as_duplex()
    duplex.prepare(prefix_system_prompt=..., ref_audio=<16 kHz voice reference>, prompt_wav_path=<its wav>)
    for every 1 s of 16 kHz user audio:
        duplex.streaming_prefill(audio_waveform=chunk)           # {"success": bool, "reason": str, ...}
        duplex.streaming_generate(prompt_wav_path=..., max_new_speak_tokens_per_chunk=20, decode_mode=...)
            # {"is_listen": bool, "text": str, "audio_waveform": 24 kHz float32 | None, "end_of_turn": bool, ...}

Here: 24 kHz session frames are gathered into 1 s chunks, resampled to 16 kHz and given to the model when a chunk
is complete; what it says (24 kHz, the session rate) is played from a queue frame by frame, as the official
demo's player plays speak results back to back and nothing for listen results. The model decides once per second
on what it has heard, so a reply to speech that ends inside chunk k can start no earlier than the end of chunk k:
that 1 s chunking latency belongs to the model and is declared (`chunk_s`), not compensated. Audio the model
returns after chunk k starts exactly at session sample (k + 1) * 24000 (adapters/chunking.py).

Tested against an API fake (tests/fake_minicpm_o.py), not the real weights: see docs/models.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from adapters.chunking import ChunkedAgent, ChunkGatherer, Playback
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError

MODEL_ID = "openbmb/MiniCPM-o-4_5"
IN_RATE = 16_000  # the model's audio encoder (Whisper) rate
OUT_RATE = 24_000  # its token2wav output rate
# The voice the model's repository ships as its default reference (the README's example and the demo's default).
DEFAULT_REF = "assets/HT_ref_audio.wav"
# The README's generic duplex preamble; used when a case gives no system prompt (M3 plays with none).
DEFAULT_PROMPT = "Streaming Duplex Conversation! You are a helpful assistant."
DECODE_MODES = ("sampling", "greedy")


class MiniCPMOError(RuntimeError):
    """The model refused a chunk or answered outside its API: the episode fails with this reason."""


def model_dir(model_path: str) -> Path:
    """A local model folder as it is, a hub repo id as its local snapshot (downloaded once, like from_pretrained
    would), so the weights and the reference voice come from the same revision."""
    if Path(model_path).is_dir():
        return Path(model_path)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model_path))


def load_duplex(path: Path, device: str = "cuda", dtype: str = "bfloat16", attn_implementation: str = "sdpa") -> Any:
    """The real model in duplex mode, loaded as the MiniCPM-o README's "Model Initialization" does (audio only:
    no vision tower)."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(path), trust_remote_code=True, attn_implementation=attn_implementation,
                                      torch_dtype=getattr(torch, dtype), init_vision=False, init_audio=True,
                                      init_tts=True)
    model.eval().to(device)
    model.init_tts()
    return model.as_duplex()


def read_voice(path: Path) -> np.ndarray:
    """A reference voice as the README passes it (librosa.load(sr=16000, mono=True)): mono float32 at 16 kHz."""
    try:
        audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as err:
        raise UsageError(f"minicpm-o: cannot read the reference voice {path}: {err}") from err
    return resample(audio.mean(axis=1), sr, IN_RATE)


class MiniCPMOAgent(ChunkedAgent):
    """MiniCPM-o 4.5 duplex. `model` is a model already in duplex mode (what `as_duplex()` returns); without it the
    real one is loaded from `model_path` (a hub id or a local folder). `ref_audio` is the voice to speak in (a wav
    file; default: the model's own assets/HT_ref_audio.wav)."""

    name = "minicpm-o"
    error = MiniCPMOError
    version = "4.5-duplex"
    sample_rate = SESSION_SR
    realtime = False
    capabilities = frozenset({"system_prompt", "text_output"})
    chunk_s = 1.0  # the model hears and decides once per second: its inherent latency

    def __init__(self, model_path: str = MODEL_ID, ref_audio: str | None = None, device: str = "cuda",
                 dtype: str = "bfloat16", attn_implementation: str = "sdpa", frame_size: int = 480,
                 decode_mode: str = "sampling", max_new_speak_tokens_per_chunk: int = 20,
                 default_prompt: str = DEFAULT_PROMPT, generate_kwargs: dict[str, Any] | None = None,
                 model: Any = None) -> None:
        if decode_mode not in DECODE_MODES:
            raise UsageError(f"minicpm-o: decode_mode must be one of {DECODE_MODES}, got {decode_mode!r}")
        self.frame_size = frame_size
        self.gatherer = ChunkGatherer(self.chunk_s, self.sample_rate, frame_size, IN_RATE)
        self.playback = Playback()
        self.default_prompt = default_prompt
        self.generate_kwargs: dict[str, Any] = {"max_new_speak_tokens_per_chunk": max_new_speak_tokens_per_chunk,
                                                "decode_mode": decode_mode, **(generate_kwargs or {})}
        if ref_audio is None and model is None:
            folder = model_dir(model_path)
            ref = folder / DEFAULT_REF
        else:
            folder, ref = None, Path(ref_audio) if ref_audio else None
        # Without a reference the model's token2wav is never initialised and it would speak no audio at all: a
        # silent model that is really a broken set-up, so it is refused here.
        if ref is None or not ref.is_file():
            raise UsageError(f"minicpm-o: no reference voice at {ref}; pass ref_audio=PATH to a wav file "
                             f"(the model's repository ships {DEFAULT_REF})")
        self.ref_path = str(ref)
        self.ref_audio = read_voice(ref)
        self.duplex: Any = model if model is not None else load_duplex(folder or model_dir(model_path), device,
                                                                       dtype, attn_implementation)

    def _model(self) -> Any:
        if self.duplex is None:
            raise MiniCPMOError("the agent is closed")
        return self.duplex

    def reset(self, system_prompt: str | None, seed: int) -> None:
        import torch

        torch.manual_seed(seed)  # the model samples its tokens and speech with torch
        self.gatherer.reset()
        self.playback.stop()
        self._model().prepare(prefix_system_prompt=system_prompt or self.default_prompt, ref_audio=self.ref_audio,
                              prompt_wav_path=self.ref_path)

    def _hear(self, chunk: np.ndarray) -> None:
        """One second of the model's loop: prefill the chunk, let it decide, queue what it says."""
        model = self._model()
        k = self.gatherer.chunks - 1
        prefill = model.streaming_prefill(audio_waveform=chunk)
        if isinstance(prefill, dict) and not prefill.get("success", True):
            # A whole 1 s chunk always suffices (the first is padded to the model's 1.035 s): a refusal is a fault.
            raise MiniCPMOError(f"streaming_prefill refused chunk {k}: {prefill.get('reason') or 'no reason given'}")
        result = model.streaming_generate(prompt_wav_path=self.ref_path, **self.generate_kwargs)
        finalize = getattr(model, "finalize_unit", None)
        if callable(finalize):  # versions that defer the unit's end to a separate call want it before next prefill
            finalize()
        if not isinstance(result, dict) or "is_listen" not in result:
            raise MiniCPMOError(f"streaming_generate returned {type(result).__name__} without is_listen at chunk {k}")
        if result["is_listen"]:
            return  # its audio is a placeholder second of silence; the demo's player plays nothing for it
        self.playback.say(_waveform(result.get("audio_waveform"), k), result.get("text") or None)

    def close(self) -> None:
        self.duplex = None
        self.playback.stop()


def _waveform(audio: Any, k: int) -> np.ndarray | None:
    """The model's 24 kHz audio as float32 (it may be a numpy array or a tensor), checked."""
    if audio is None:
        return None
    if hasattr(audio, "detach"):
        audio = audio.detach().float().cpu().numpy()
    audio = np.asarray(audio, np.float32)
    if audio.ndim > 1 and sum(d > 1 for d in audio.shape) <= 1:
        audio = audio.reshape(-1)  # [1, n]: the same samples
    if audio.ndim != 1 or not np.all(np.isfinite(audio)):
        raise MiniCPMOError(f"streaming_generate gave audio of shape {audio.shape} (finite: "
                            f"{bool(np.all(np.isfinite(audio)))}) at chunk {k}; expected 1-D finite 24 kHz samples")
    return audio
