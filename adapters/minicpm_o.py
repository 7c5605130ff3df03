"""`minicpm-o`: MiniCPM-o 4.5 in its full-duplex mode (docs/adding-a-model.md), adapted to the frame protocol by
buffering.

The model's own duplex loop, as OpenBMB's code at OpenBMB/minicpm-o-4_5-pytorch-simple-demo@c7e16605 drives it
(`UPSTREAM`; its MiniCPMO45/ package holds the model code, MiniCPMO45/README.md "Duplex Streaming" and
core/processors/unified.py its callers; docs/models.md lists each file:line read):

    duplex = MiniCPMODuplex.from_pretrained(weights, device=..., attn_implementation=...)   # bf16, init_tts inside
    duplex.prepare(prefix_system_prompt="<|im_start|>system\n" + prompt + "\n<|audio_start|>",
                   suffix_system_prompt="<|audio_end|><|im_end|>", ref_audio=<16 kHz voice>, prompt_wav_path=<its wav>)
    for every 1 s of 16 kHz user audio:
        duplex.streaming_prefill(audio_waveform=chunk)           # {"success": bool, "reason": str, ...}
        duplex.streaming_generate(prompt_wav_path=..., max_new_speak_tokens_per_chunk=20, decode_mode=...)
            # {"is_listen": bool, "text": str, "audio_waveform": 24 kHz float32 | None, "end_of_turn": bool, ...}

`prepare` feeds its prefix's tokens verbatim (modeling_minicpmo.py:2584-2587), then the reference voice's audio
embedding, then the suffix: the system turn's markup is the caller's, and every OpenBMB caller writes it
(core/processors/unified.py:881-882, MiniCPMO45/README.md:199-200, modeling_minicpmo_unified.py:835-836), so the
voice sits inside `<|audio_start|>...<|audio_end|>` of the system turn. The adapter wraps the case's prompt the same
way (`system_turn`). The MiniCPM-o README's `AutoModel.from_pretrained(...).as_duplex()` path (OpenBMB/MiniCPM-o
README.md:1552-1567) runs the Hugging Face repository's remote code, which no copy readable here contains (its
`as_duplex` is in neither stored copy of the model code): this adapter drives the demo's own copy of the class
instead, whose every line was read, with the weights of `openbmb/MiniCPM-o-4_5`.

Here: 24 kHz session frames are gathered into 1 s chunks, resampled to 16 kHz and given to the model when a chunk
is complete; what it says (24 kHz, the session rate) is played from a queue frame by frame, as the official
demo's player plays speak results back to back and nothing for listen results. The model decides once per second
on what it has heard, so a reply to speech that ends inside chunk k can start no earlier than the end of chunk k:
that 1 s chunking latency belongs to the model and is declared (`chunk_s`), not compensated. Audio the model
returns after chunk k starts exactly at session sample (k + 1) * 24000 (adapters/chunking.py): never in a frame
whose user audio it depends on (the one timing rule of docs/adding-a-model.md).

Tested against an API fake (tests/fake_minicpm_o.py), not the real weights: see docs/models.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from adapters.chunking import ChunkedAgent, ChunkGatherer, Playback
from adapters.model_code import model_code
from adapters.upstream import Pin, git_head, hf_snapshot_revision, provenance
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError

# The code this adapter was written against. The weights' Hugging Face revision is not pinned (no commit of
# openbmb/MiniCPM-o-4_5 could be read here): `revision=` picks one, and the one loaded is recorded.
UPSTREAM: tuple[Pin, ...] = (Pin("git", "OpenBMB/minicpm-o-4_5-pytorch-simple-demo",
                                 "c7e16605c3ae9623a0caee5845bd0183b1d6d5b3"),)
MODEL_ID = "openbmb/MiniCPM-o-4_5"
IN_RATE = 16_000  # the model's audio encoder (Whisper) rate
OUT_RATE = 24_000  # its token2wav output rate
# The voice the model's repository ships as its default reference (the README's example and the demo's default).
DEFAULT_REF = "assets/HT_ref_audio.wav"
# The README's generic duplex preamble (MiniCPMO45/README.md:273); used when a case gives no system prompt (M3 plays
# with none).
DEFAULT_PROMPT = "Streaming Duplex Conversation! You are a helpful assistant."
# The system turn every OpenBMB caller writes around the prompt and the reference voice (core/processors/unified.py:
# 881-882): `prepare` feeds the prefix, then the voice's audio embedding, then the suffix.
PREFIX, SUFFIX = "<|im_start|>system\n{}\n<|audio_start|>", "<|audio_end|><|im_end|>"
DECODE_MODES = ("sampling", "greedy")


class MiniCPMOError(RuntimeError):
    """The model refused a chunk or answered outside its API: the episode fails with this reason."""


def system_turn(prompt: str) -> tuple[str, str]:
    """`prepare`'s prefix and suffix for a system prompt, as OpenBMB's callers write them."""
    return PREFIX.format(prompt), SUFFIX


def model_dir(model_path: str, revision: str | None = None) -> Path:
    """A local model folder as it is, a hub repo id as its local snapshot at `revision` (None: the newest;
    downloaded once), so the weights and the reference voice come from the same revision."""
    if Path(model_path).is_dir():
        return Path(model_path)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model_path, revision=revision))


def import_code(code_dir: str | None) -> Any:
    """The demo's model code, `MiniCPMO45.modeling_minicpmo` (from `code_dir`, else PYTHONPATH): first, so that a
    missing checkout is one line before any weights are downloaded."""
    with model_code("minicpm-o", code_dir, "the MiniCPM-o 4.5 model code (MiniCPMO45/)",
                    "a checkout of github.com/OpenBMB/minicpm-o-4_5-pytorch-simple-demo as code_dir=DIR, with its "
                    "requirements (pip install -e \".[minicpm-o]\")"):
        from MiniCPMO45 import modeling_minicpmo  # type: ignore[import-not-found]
    return modeling_minicpmo


def load_duplex(code: Any, path: Path, device: str = "cuda", attn_implementation: str = "sdpa",
                force_listen_count: int = 0) -> tuple[Any, dict[str, Any]]:
    """The real model in duplex mode, loaded as MiniCPMO45/README.md's "Duplex Streaming" does
    (`MiniCPMODuplex.from_pretrained`, which casts to bf16 and calls `init_tts(streaming=True)` itself), and the
    record of the code (`import_code`'s module) it came from against `UPSTREAM`."""
    duplex = code.MiniCPMODuplex.from_pretrained(str(path), device=device, attn_implementation=attn_implementation,
                                                 force_listen_count=force_listen_count)
    checkout = Path(code.__file__).resolve().parent.parent
    return duplex, provenance("minicpm-o", UPSTREAM[0], git_head(checkout), f"the model code at {checkout}")


def read_voice(path: Path) -> np.ndarray:
    """A reference voice as the README passes it (librosa.load(sr=16000, mono=True)): mono float32 at 16 kHz."""
    try:
        audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as err:
        raise UsageError(f"minicpm-o: cannot read the reference voice {path}: {err}") from err
    return resample(audio.mean(axis=1), sr, IN_RATE)


class MiniCPMOAgent(ChunkedAgent):
    """MiniCPM-o 4.5 duplex. `model` is a model already in duplex mode (a `MiniCPMODuplex`); without it the real one
    is loaded from `model_path` (a hub id at `revision`, or a local folder) with the model code of `code_dir` (a
    checkout of the demo repository; else on PYTHONPATH). `ref_audio` is the voice to speak in (a wav file; default:
    the model's own assets/HT_ref_audio.wav)."""

    name = "minicpm-o"
    error = MiniCPMOError
    version = "4.5-duplex"
    sample_rate = SESSION_SR
    realtime = False
    capabilities = frozenset({"system_prompt", "text_output"})
    chunk_s = 1.0  # the model hears and decides once per second: its inherent latency

    def __init__(self, model_path: str = MODEL_ID, code_dir: str | None = None, revision: str | None = None,
                 ref_audio: str | None = None, device: str = "cuda", attn_implementation: str = "sdpa",
                 frame_size: int = 480, decode_mode: str = "sampling", max_new_speak_tokens_per_chunk: int = 20,
                 force_listen_count: int = 0, default_prompt: str = DEFAULT_PROMPT,
                 generate_kwargs: dict[str, Any] | None = None, model: Any = None) -> None:
        if decode_mode not in DECODE_MODES:
            raise UsageError(f"minicpm-o: decode_mode must be one of {DECODE_MODES}, got {decode_mode!r}")
        self.frame_size = frame_size
        self.gatherer = ChunkGatherer(self.chunk_s, self.sample_rate, frame_size, IN_RATE)
        self.playback = Playback()
        self.default_prompt = default_prompt
        self.generate_kwargs: dict[str, Any] = {"max_new_speak_tokens_per_chunk": max_new_speak_tokens_per_chunk,
                                                "decode_mode": decode_mode, **(generate_kwargs or {})}
        self.force_listen_count = force_listen_count
        code = import_code(code_dir) if model is None else None
        if ref_audio is None and model is None:
            folder = model_dir(model_path, revision)
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
        self.upstream: list[dict[str, Any]] = []  # a model passed in (a test double): no code or weights loaded
        self.duplex: Any = model
        if model is None:
            weights = folder or model_dir(model_path, revision)
            self.duplex, found = load_duplex(code, weights, device, attn_implementation, force_listen_count)
            self.upstream = [found, {"repo": model_path, "kind": "hf", "pinned": revision,
                                    "used": hf_snapshot_revision(weights), "matches": None}]

    def runtime(self) -> dict[str, Any]:
        """How the session is prepared and stepped, and the code and weights it came from, for each rec.json."""
        return {"system_turn": PREFIX.format("{prompt}") + "{ref_audio}" + SUFFIX,
                "default_prompt": self.default_prompt, "ref_audio": self.ref_path,
                "generate_kwargs": self.generate_kwargs, "force_listen_count": self.force_listen_count,
                "chunk_s": self.chunk_s, "upstream": self.upstream}

    def _model(self) -> Any:
        if self.duplex is None:
            raise MiniCPMOError("the agent is closed")
        return self.duplex

    def reset(self, system_prompt: str | None, seed: int) -> None:
        import torch

        torch.manual_seed(seed)  # the model samples its tokens and speech with torch
        self.gatherer.reset()
        self.playback.stop()
        prefix, suffix = system_turn(system_prompt or self.default_prompt)
        self._model().prepare(prefix_system_prompt=prefix, suffix_system_prompt=suffix, ref_audio=self.ref_audio,
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
