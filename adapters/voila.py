"""`voila`: Voila's autonomous (full-duplex) variant, `VoilaAutonomousModel` (maitrix-org), through its own
generation loop (docs/models.md#voila-voila).

Voila's code (github.com/maitrix-org/Voila: `model.py`, `voila_tokenizer.py`, `tokenize_func.py`, `spkr.py`, top-level
modules imported with the checkout on PYTHONPATH) runs the autonomous model with `run_generate`, a loop that pulls
the user's audio tokens from an `input_generator` and reports every token it emits to a `streamer`. Its token
stream has two channels, the user's and the model's, each `num_codebooks` wide. At each position the LM either
says a text token (the first one of a reply is its assistant token `<|VOILA|>`, forced when its "voila head" says
to start speaking; the last one is eos) or the audio token `<au_token>`, whose place its audio transformer fills
with one codec frame. Only an audio position consumes a user frame (the user channel holds that frame's tokens);
at a text position no time passes and the user channel repeats the model's text token.

Here: one codec frame per step. The audio tokenizer (`VoilaTokenizer`, a Hugging Face Encodec at its own rate,
16 kHz for `maitrix-org/Voila-Tokenizer`, the rate infer.py writes) sets the frame: one code frame per `hop`
samples (the product of its upsampling ratios, read when it is loaded), which on the 24 kHz session clock is
`hop * 24000 / rate` samples: 960 (40 ms) for the 640-sample hop (25 Hz) that `tokenize_func.py`'s SEG_LEN points
to, which has not been checked against the checkpoint's config here. `run_generate` runs in a worker thread that
runs only while `step` waits for it, so the whole generation is one deterministic sequence of draws:
- `reset` builds the prompt, starts the loop, and lets it run until it asks for the first user frame;
- `step(user_k)` encodes user frame k, hands its tokens to the loop, takes the model's audio frame k (the frame the
  loop emitted before it asked for user frame k: sampled having heard user frames < k, as the model's own
  positions pair them), and lets the loop run on until it asks for frame k + 1. The text tokens emitted before audio
  frame k are frame k's text. So `step(user_k)` returns the model's frame k with no offset to compensate
  (`model_delay_frames = 0`); the model can react to user frame k from frame k + 1 on.

The codec is Voila's non-streaming Encodec, which its own scripts run on whole files. To stream it, each step
encodes the last `context_frames` user frames (resampled as one piece) and keeps the last code frame, and decodes
the last `context_frames` model code frames and keeps the last frame of audio: only past audio is ever used, at the
cost of re-running the codec on the window every step.

Persona: the case's system prompt is the autonomous format's instruction, written into the system block of the
prompt by Voila's own `voila_input_format` (`tokenize_func.py`); that function also tokenizes a whole user
recording, so it is given one silent code frame and only its prompt is kept. Voice: the speaker embedding
(`spkr.SpeakerEmbedding`, pyannote's wespeaker) of `ref_audio`, by default the checkout's `examples/test1.mp3`, the
reference `infer.py` uses. Sampling: `infer.py`'s defaults (text temperature 0.2, top-k 50; audio temperature 0.8,
top-k 50) from torch's global generator, which `reset` seeds. One episode at a time: the loop reads its voila
head for batch row 0 only.

Timing: `run_generate` samples the audio frame of a position before it pulls that position's user frame
(model.py:1306-1317, then 1359-1368), so the model's frame k depends on user frames before k only: Voila's own
pairing already is the one timing rule of docs/adding-a-model.md, and no delay is added or option needed.

Upstream: written against maitrix-org/Voila@6ba63bf6 (`UPSTREAM`); the checkout a load imports is compared with it
and recorded, as are the Hub revisions of the model and the audio tokenizer (`revision`, `tokenizer_revision`,
unpinned: none could be read here). Entry points checked there (docs/models.md#voila-voila has the table):
`infer.py:47-55` (bf16, `use_flash_attention_2=True`, `use_cache=True`; the text tokenizer; `VoilaTokenizer`),
`:66-73` (audio/assistant token ids), `:84-122` (the autonomous input, the `[1, seq, 2 * num_codebooks]` prompt, the
sampling defaults), `:186-191` (the voice), `model.py:1248-1397` (`run_generate`: its asserts, the voila head, the
user frame pulled only at an audio position, `streamer.put`/`end`), `tokenize_func.py:209-268` (the autonomous
format: task `chat_aiao_auto` asserted, the instruction inside the system block), `voila_tokenizer.py:28-50`,
`spkr.py:17-39`. Its loop reads `DynamicCache.seen_tokens` and `get_max_cache_shape` (`model.py:1156-1158`), which
exist together only in transformers 4.46 to 4.53, while its `requirements.txt` pins no version: the load checks
for them and says so in one line. Duplex-MPE, the one paper that evaluated Voila, gives it no text prompt (its
duty preamble is spoken) and states no Voila-specific setting; neither M3-DuplexBench nor DSB-IFEval evaluated it.

`parts=` takes already built objects: the tests pass a fake of Voila's API written from its public code
(tests/fake_voila.py); without it the real ones are loaded.
"""

from __future__ import annotations

import importlib.util
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from adapters.model_code import model_code
from adapters.protocol import Frame
from adapters.upstream import Pin, git_head, hf_snapshot_revision, provenance
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError

DEFAULT_MODEL = "maitrix-org/Voila-autonomous-preview"
DEFAULT_TOKENIZER = "maitrix-org/Voila-Tokenizer"
TASK_TYPE = "chat_aiao_auto"  # tokenize_func.TASK_TYPE_CONF: the autonomous (streaming chat) task
# infer.py's gen_params, the defaults the released demo samples with
TEMPERATURE, TOP_K, AUDIO_TEMPERATURE, AUDIO_TOP_K = 0.2, 50, 0.8, 50
CONTEXT_FRAMES = 25  # codec window per step (1 s at 25 Hz)
MAX_NEW_TOKENS = 200_000  # positions (audio frames and text tokens) one episode may take before the loop ends
# The code this adapter was written against (docs/models.md#voila-voila). No Hub revision of the weights could be
# read here: `revision=` / `tokenizer_revision=` pick them, and the ones a run loaded are recorded.
UPSTREAM: tuple[Pin, ...] = (Pin("git", "maitrix-org/Voila", "6ba63bf6d20cac0d88b78bb2158ddcb9f94aec26"),)
# What run_generate reads of transformers' DynamicCache (model.py:1156-1158): `get_max_cache_shape` came in
# transformers 4.46 and `seen_tokens` went in 4.54, and Voila's requirements.txt pins no version, so a fresh install
# fails at its second position. The load says so in one line instead.
CACHE_NEEDS = ("seen_tokens", "get_max_cache_shape")
TRANSFORMERS_RANGE = ">=4.46,<4.54"


@dataclass
class VoilaParts:
    model: Any  # model.VoilaAutonomousModel: .config.num_codebooks/.codebook_size, run_generate(...)
    tokenizer: Any  # its text tokenizer: convert_tokens_to_ids, decode, eos_token_id, pad_token_id
    audio_tokenizer: Any  # voila_tokenizer.VoilaTokenizer: encode(wav, sr) -> [nc, T], decode([nc, T]) -> wav
    input_format: Callable[..., Any]  # tokenize_func.voila_input_format
    audio_token_format: str  # tokenize_func.AUDIO_TOKEN_FORMAT: "<|{}|>", the name of audio token id n
    audio_token: str  # tokenize_func.DEFAULT_AUDIO_TOKEN: "<au_token>", the LM's "an audio frame here"
    assistant_token: str  # tokenize_func.DEFAULT_ASSISTANT_TOKEN: "<|VOILA|>", the start of a reply
    ref_embs: Any  # the voice: a speaker embedding tensor, or None for none
    loaded: dict[str, Any] = field(default_factory=dict)  # what a load used and found against UPSTREAM (none: built)


def snapshot(path: str, revision: str | None) -> str:
    """A local folder as it is; a hub id as its local snapshot at `revision` (None: the newest), downloaded once, so
    the revision that was loaded can be recorded."""
    if Path(path).is_dir():
        return path
    from huggingface_hub import snapshot_download

    return str(snapshot_download(path, revision=revision))


def attention(asked: str) -> str | None:
    """"auto": FlashAttention 2 where `flash_attn` is installed, as infer.py:50 asks for it, else `transformers`'
    default (None); any other value as given."""
    if asked != "auto":
        return asked
    return "flash_attention_2" if importlib.util.find_spec("flash_attn") is not None else None


def check_cache(cache_cls: Any, version: str) -> None:
    """A one-line UsageError when `cache_cls` (transformers' DynamicCache) lacks what Voila's loop reads."""
    missing = [name for name in CACHE_NEEDS if not hasattr(cache_cls, name)]
    if missing:
        raise UsageError(f"voila: Voila's run_generate reads DynamicCache.{', .'.join(missing)} (model.py:1156-1158), "
                         f"which transformers {version} lacks: install transformers{TRANSFORMERS_RANGE} in its "
                         "environment")


def load_parts(model_path: str, tokenizer_path: str, ref_audio: str | None, device: str, repo_dir: str | None,
               attn_implementation: str = "auto", revision: str | None = None,
               tokenizer_revision: str | None = None) -> VoilaParts:
    """The real model as Voila's infer.py loads it (bf16), its text tokenizer, audio tokenizer and a voice."""
    with model_code("voila", repo_dir, "Voila's code", "a checkout of github.com/maitrix-org/Voila on PYTHONPATH "
                    "or repo_dir=DIR, and its requirements.txt"):
        import tokenize_func
        import torch
        import torchaudio
        import transformers
        from model import VoilaAutonomousModel
        from spkr import SpeakerEmbedding
        from transformers import AutoTokenizer, DynamicCache
        from voila_tokenizer import VoilaTokenizer
    check_cache(DynamicCache, transformers.__version__)
    checkout = Path(tokenize_func.__file__).resolve().parent
    ref = Path(ref_audio) if ref_audio else checkout / "examples" / "test1.mp3"
    if not ref.is_file():
        raise UsageError(f"voila: ref_audio {ref} is not a file (the voice's reference recording)")
    weights, codec = snapshot(model_path, revision), snapshot(tokenizer_path, tokenizer_revision)
    attn = attention(attn_implementation)
    extra = {"attn_implementation": attn} if attn else {}
    model = VoilaAutonomousModel.from_pretrained(weights, torch_dtype=torch.bfloat16, use_cache=True, **extra)
    model = model.to(device).eval()
    wav, sr = torchaudio.load(str(ref))
    ref_embs = SpeakerEmbedding(device=device)(wav, sr)
    (repo,) = UPSTREAM
    upstream = [provenance("voila", repo, git_head(checkout), f"the Voila checkout at {checkout}")]
    upstream += [{"repo": path, "kind": "hf", "pinned": None, "used": hf_snapshot_revision(folder), "matches": None}
                 for path, folder in ((model_path, weights), (tokenizer_path, codec))]
    return VoilaParts(model, AutoTokenizer.from_pretrained(weights),
                      VoilaTokenizer(model_path=codec, device=device), tokenize_func.voila_input_format,
                      tokenize_func.AUDIO_TOKEN_FORMAT, tokenize_func.DEFAULT_AUDIO_TOKEN,
                      tokenize_func.DEFAULT_ASSISTANT_TOKEN, ref_embs,
                      {"upstream": upstream, "attn_implementation": attn or "transformers default",
                       "ref_audio": str(ref)})


class _Streamer:
    """What `run_generate` reports to: every emitted position ([1, 1, num_codebooks] ids) as an event."""

    def __init__(self, events: queue.SimpleQueue) -> None:
        self.events = events

    def put(self, tokens: Any) -> None:
        self.events.put(("tokens", tokens))

    def end(self) -> None:
        pass  # the worker reports the end once run_generate has returned


class VoilaAgent:
    """Voila-autonomous through its `run_generate` loop, one codec frame per step."""

    name = "voila"
    version = "voila"
    sample_rate = SESSION_SR
    realtime = False
    capabilities = frozenset({"system_prompt", "text_output"})
    model_delay_frames = 0  # step(user_k) returns the model's frame k: see the module docstring

    def __init__(self, model_path: str = DEFAULT_MODEL, tokenizer_path: str = DEFAULT_TOKENIZER,
                 ref_audio: str | None = None, device: str | None = None, repo_dir: str | None = None,
                 context_frames: int = CONTEXT_FRAMES, max_new_tokens: int = MAX_NEW_TOKENS,
                 temperature: float = TEMPERATURE, top_k: int = TOP_K, audio_temperature: float = AUDIO_TEMPERATURE,
                 audio_top_k: int = AUDIO_TOP_K, attn_implementation: str = "auto", revision: str | None = None,
                 tokenizer_revision: str | None = None, parts: VoilaParts | None = None) -> None:
        import torch

        if int(context_frames) < 1:
            raise UsageError(f"voila: context_frames must be at least 1, got {context_frames}")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.parts = parts or load_parts(model_path, tokenizer_path, ref_audio, self.device, repo_dir,
                                         attn_implementation, revision, tokenizer_revision)
        self.version = f"voila:{model_path}" if parts is None else f"voila:{type(self.parts.model).__name__}"
        p = self.parts
        self.codec_rate = int(p.audio_tokenizer.sampling_rate)
        self.hop = int(np.prod(p.audio_tokenizer.model.config.upsampling_ratios))
        frame = Fraction(self.hop * SESSION_SR, self.codec_rate)
        if frame.denominator != 1:
            raise UsageError(f"voila: a code frame of {self.hop} samples at {self.codec_rate} Hz is not a whole "
                             f"number of samples at {SESSION_SR} Hz")
        self.frame_size = int(frame)
        self.context_frames = int(context_frames)
        self.sampling = {"max_new_tokens": int(max_new_tokens), "temperature": float(temperature),
                         "top_k": int(top_k), "audio_temperature": float(audio_temperature),
                         "audio_top_k": int(audio_top_k)}
        self.num_codebooks = int(p.model.config.num_codebooks)
        self.codebook_size = int(p.model.config.codebook_size)
        tok = p.tokenizer
        self.audio_min = int(tok.convert_tokens_to_ids(p.audio_token_format.format(0)))
        self.audio_max = int(tok.convert_tokens_to_ids(
            p.audio_token_format.format(self.codebook_size * self.num_codebooks - 1)))
        self.audio_token_id = int(tok.convert_tokens_to_ids(p.audio_token))
        self.assistant_id = int(tok.convert_tokens_to_ids(p.assistant_token))
        if tok.eos_token_id is None or tok.pad_token_id is None:
            raise UsageError("voila: its tokenizer must define eos and pad tokens (run_generate needs both)")
        self.not_words = {int(tok.eos_token_id), int(tok.pad_token_id), self.assistant_id}
        # codebook n's code c is the LM's audio token id audio_min + n * codebook_size + c (tokenize_func's layout)
        self.offsets = self.audio_min + self.codebook_size * np.arange(self.num_codebooks)
        self._worker: threading.Thread | None = None

    def runtime(self) -> dict[str, Any]:
        """For rec.json: the sampling, the codec window, and what a load used and found against `UPSTREAM`."""
        return {**self.sampling, "context_frames": self.context_frames, "upstream": [], **self.parts.loaded}

    # -- the generation loop in its worker thread ------------------------------------------------------------------
    def reset(self, system_prompt: str | None, seed: int) -> None:
        import torch

        self._stop()
        self._user: deque[np.ndarray] = deque(maxlen=self.context_frames)
        self._codes: deque[np.ndarray] = deque(maxlen=self.context_frames)
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._inputs: queue.SimpleQueue = queue.SimpleQueue()
        self._positions = 0
        self._ended: RuntimeError | None = None
        self.prompt_ids = self._prompt(system_prompt or "")
        torch.manual_seed(int(seed))  # run_generate samples from torch's global generator
        self._worker = threading.Thread(target=self._generate, args=(self.prompt_ids,), name="voila-generate",
                                        daemon=True)
        self._worker.start()
        self._text = self._until_input()  # what it says before its first audio frame

    def _prompt(self, instruction: str) -> Any:
        """[1, seq, 2 * num_codebooks]: the user channel's prompt ids beside the model channel's, as infer.py
        lays them out; Voila's `voila_input_format` writes the instruction into the system block."""
        import torch

        p = self.parts
        silence = {"array": np.zeros(self.hop, np.float32), "sr": self.codec_rate}  # one code frame, unused
        item = {"instruction": instruction, "conversations": [{"from": "user", "audio": silence}]}
        cfg = {"input_type": "autonomous", "task_type": TASK_TYPE, "num_codebooks": self.num_codebooks,
               "codebook_size": self.codebook_size}
        channels = p.input_format(item, p.tokenizer, p.audio_tokenizer, cfg)[0]
        ids = [torch.as_tensor([ch], dtype=torch.long).transpose(1, 2) for ch in channels]
        return torch.cat(ids, dim=2).to(self._model_device())

    def _generate(self, input_ids: Any) -> None:
        import torch

        p, tok = self.parts, self.parts.tokenizer
        ref_embs, mask = p.ref_embs, None
        if ref_embs is not None:
            ref_embs = ref_embs.to(self._model_device())
            mask = torch.tensor([1], device=self._model_device())
        try:
            p.model.run_generate(input_ids=input_ids, input_generator=self._frames(), ref_embs=ref_embs,
                                 ref_embs_mask=mask, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                                 streamer=_Streamer(self._events), llm_audio_token_id=self.audio_token_id,
                                 min_audio_token_id=self.audio_min, llm_assistant_token_id=self.assistant_id,
                                 **self.sampling)
            self._events.put(("end", None))
        except BaseException as err:  # noqa: BLE001 - handed to the step that waits for it
            self._events.put(("error", err))

    def _frames(self) -> Any:
        """The loop's input_generator: says when it waits, then yields the user frame `step` hands over; None
        ends it (run_generate stops when its generator is exhausted)."""
        events, inputs = self._events, self._inputs
        while True:
            events.put(("input", None))
            frame = inputs.get()
            if frame is None:
                return
            yield frame

    def _next_event(self) -> tuple[str, Any]:
        kind, value = self._events.get()
        if kind == "error":
            raise RuntimeError(f"Voila's run_generate failed: {type(value).__name__}: {value}") from value
        if kind == "end":
            raise RuntimeError(f"Voila's run_generate ended after {self._positions} positions "
                               f"(max_new_tokens={self.sampling['max_new_tokens']})")
        return kind, value

    def _until_input(self) -> list[int]:
        """Text ids the loop emits until it asks for the next user frame. If it ends (or fails) instead, the
        reason is kept for the next step: the frame this step took is still the model's."""
        text: list[int] = []
        while True:
            try:
                kind, value = self._next_event()
            except RuntimeError as err:
                self._ended = err
                return text
            if kind == "input":
                return text
            ids = self._ids(value)
            self._positions += 1
            if self._is_audio(ids):
                raise RuntimeError("Voila's run_generate emitted an audio frame without taking a user frame")
            if ids[0] not in self.not_words:
                text.append(ids[0])

    def _ids(self, tokens: Any) -> list[int]:
        return [int(t) for t in tokens.reshape(-1)[: self.num_codebooks].tolist()]

    def _is_audio(self, ids: list[int]) -> bool:
        return self.audio_min <= ids[0] <= self.audio_max

    def _stop(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            self._inputs.put(None)
            self._worker.join(timeout=30)
        self._worker = None

    # -- one step --------------------------------------------------------------------------------------------------
    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        import torch

        if forced_model_frame is not None:
            raise RuntimeError("voila has no teacher forcing; the runner should have skipped this case")
        if self._worker is None:
            raise RuntimeError("voila: step before reset")
        if self._ended is not None:
            raise self._ended
        frame = np.asarray(user_frame, np.float32)
        if frame.shape != (self.frame_size,):
            raise ValueError(f"user_frame must be [{self.frame_size}], got {frame.shape}")
        self._user.append(frame.copy())
        codes = self._encode_last()
        self._inputs.put(torch.as_tensor(codes + self.offsets, dtype=torch.long, device=self._model_device()))
        kind, value = self._next_event()
        ids = self._ids(value) if kind == "tokens" else []
        if not ids or not self._is_audio(ids):
            raise RuntimeError(f"Voila's run_generate took a user frame but emitted {ids or kind}, not audio")
        self._positions += 1
        self._codes.append((np.asarray(ids) - self.audio_min) % self.codebook_size)
        text, self._text = self._text, self._until_input()
        return Frame(self._decode_last(), self._words(text))

    def _encode_last(self) -> np.ndarray:
        """The codes [num_codebooks] of the newest user frame, encoded with the frames before it as context."""
        window = resample(np.concatenate(self._user), SESSION_SR, self.codec_rate)
        want = len(self._user) * self.hop
        window = np.pad(window, (0, max(0, want - window.size)))[:want]  # soxr rounds; the codec is owed whole frames
        codes = self.parts.audio_tokenizer.encode(window, sr=self.codec_rate)
        codes = np.asarray(codes.cpu().numpy() if hasattr(codes, "cpu") else codes)
        if codes.ndim != 2 or codes.shape[0] != self.num_codebooks:
            raise RuntimeError(f"Voila's audio tokenizer gave codes of shape {codes.shape}; the model takes "
                               f"{self.num_codebooks} codebooks")
        return codes[:, -1].astype(np.int64)

    def _decode_last(self) -> np.ndarray:
        """The newest model code frame as session-rate audio, decoded with the frames before it as context."""
        import torch

        codes = torch.as_tensor(np.stack(self._codes, axis=1), dtype=torch.long, device=self._codec_device())
        with torch.no_grad():
            wav = self.parts.audio_tokenizer.decode(codes)
        wav = wav.float().cpu().numpy().reshape(-1)
        audio = resample(wav, self.codec_rate, SESSION_SR)[-self.frame_size:]
        return np.pad(audio, (self.frame_size - audio.size, 0)).astype(np.float32)

    def _words(self, ids: list[int]) -> str | None:
        return (self.parts.tokenizer.decode(ids) or None) if ids else None

    def _model_device(self) -> Any:
        return self.parts.model.device

    def _codec_device(self) -> Any:
        return getattr(self.parts.audio_tokenizer, "device", "cpu")

    def close(self) -> None:
        self._stop()
