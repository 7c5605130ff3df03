"""A fake of Voila's autonomous API, a contract of maitrix-org/Voila@6ba63bf6 (`model.py`, `voila_tokenizer.py`,
`tokenize_func.py`, `spkr.py`, `infer.py`), for the `voila` adapter's tests (tests/test_voila.py,
tests/test_check_adapter.py): `model.VoilaAutonomousModel` (`from_pretrained`, `run_generate`),
`voila_tokenizer.VoilaTokenizer`, `tokenize_func.voila_input_format` with its token names, `spkr.SpeakerEmbedding`,
and a text tokenizer.

What the fakes keep of the real ones:
- `run_generate(input_ids [1, seq, 2 * num_codebooks], input_generator, ref_embs, ref_embs_mask, max_new_tokens,
  pad_token_id, eos_token_id, streamer, llm_audio_token_id, min_audio_token_id, llm_assistant_token_id, temperature,
  top_k, audio_temperature, audio_top_k)` (model.py:1248-1265): at each position it emits either a text token or
  the audio token, whose place takes `num_codebooks` audio ids (codebook n's code c is min_audio_token_id +
  n * codebook_size + c); only an audio position pulls a user frame from `input_generator` (and ends when that is
  exhausted), after the position's audio frame was sampled (model.py:1306-1317, 1359-1368); every position goes to
  `streamer.put` as [1, 1, num_codebooks] ids, then `streamer.end()`; a reply starts with the assistant token (the
  real loop forces it when its voila head says to speak, model.py:1341-1343) and ends with eos; its draws come from
  torch's global generator; it stops after `max_new_tokens` positions.
  Its refusals: no eos or pad id, no audio or first-audio id (AssertionError, model.py:1266-1267); no assistant id
  (TypeError when its head first fires: `next_tokens[0] = None`, model.py:1342); a user frame that is not the 1-D
  [num_codebooks] ids of one frame (RuntimeError: `torch.cat` of `frame[None, None, :]` with the model's
  [1, 1, num_codebooks], model.py:1365-1368).
- `VoilaTokenizer`: `encode(wav, sr)` -> codes [num_codebooks, T] long, `decode(codes)` -> wav [T * hop] (2-D codes
  only, voila_tokenizer.py:48), `sampling_rate` 16 kHz, `model.config.upsampling_ratios` (hop 640: 25 code frames a
  second), `device`. (It refuses another input rate, where the real one resamples: the adapter never sends one.)
- `voila_input_format` for the autonomous input type (tokenize_func.py:209-268): the task must be
  `chat_aiao_auto` (AssertionError otherwise); the system block (task and voice-reference tokens) with the
  instruction's ids before its closing token (an instruction that is not a str is refused by the tokenizer, as
  `tokenizer.encode(None)` is), then the human token, copied into every codebook row of both channels; the first
  turn's audio (an array with its `sr`) tokenized with the audio tokenizer into the streaming ids.
- `SpeakerEmbedding(model_path, device)(wav, sr)` -> a 256-d embedding (spkr.py:9-39), `from_pretrained(path,
  torch_dtype=, use_cache=, attn_implementation=)` (infer.py:47-53), both recording how they were called.

The fake "model": its codec is a real tiny residual VQ (4 random codebooks of 64 vectors of 640 samples, vector 0
silent) applied frame by frame; its LM is a running hash of every id it has seen (prompt, voice, both channels).
While listening it emits silent audio frames. Its voila head fires once it has heard at least 3 frames with sound
since its last reply and then 2 silent frames: it says the assistant token, then 2-4 words, each followed by 3
audio frames whose codes are the hash plus a random draw, then eos. So what it says and when depends on what it
heard, on the prompt, the voice and the seed.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

# tokenize_func.py's token names
AUDIO_TOKEN_FORMAT = "<|{}|>"
DEFAULT_SYSTEM_START_TOKEN, DEFAULT_SYSTEM_END_TOKEN = "<SYSTEM>", "</SYSTEM>"
DEFAULT_CHAT_REF_START_TOKEN, DEFAULT_CHAT_REF_TOKEN = "<au_chat_ref_start>", "<au_chat_ref>"
DEFAULT_CHAT_REF_END_TOKEN = "<au_chat_ref_end>"
DEFAULT_HUMAN_TOKEN, DEFAULT_ASSISTANT_TOKEN = "<|HUMAN|>", "<|VOILA|>"
DEFAULT_AUDIO_TOKEN = "<au_token>"
TASK_STREAM_CHAT_TOKEN, TASK_CHAT_AUDIO_OUTPUT = "<stream_chat>", "<chat_audio_output>"

NUM_CODEBOOKS, CODEBOOK_SIZE, HOP, RATE = 4, 64, 640, 16_000
SPECIALS = (DEFAULT_SYSTEM_START_TOKEN, DEFAULT_SYSTEM_END_TOKEN, TASK_STREAM_CHAT_TOKEN, TASK_CHAT_AUDIO_OUTPUT,
            DEFAULT_CHAT_REF_START_TOKEN, DEFAULT_CHAT_REF_TOKEN, DEFAULT_CHAT_REF_END_TOKEN, DEFAULT_HUMAN_TOKEN,
            DEFAULT_ASSISTANT_TOKEN, DEFAULT_AUDIO_TOKEN, "</s>", "<pad>")
WORDS = {20: " hello", 21: " there", 22: " twelve", 23: " yes"}
CHAR_BASE, AUDIO_BASE = 1000, 200_000  # a character's id is CHAR_BASE + ord(c); audio id n is AUDIO_BASE + n
_AUDIO_NAME = re.compile(r"<\|(\d+)\|>")
_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """The fake codec's products are tiny: on a shared, loaded CPU waking torch's thread pool for them costs far
    more than the work (measured here: 290 ms against 0.9 ms per window encode on two threads vs one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class FakeTokenizer:
    """The checkpoint's text tokenizer, as much of it as the adapter and `voila_input_format` use."""

    eos_token = "</s>"

    def __init__(self) -> None:
        self.specials = {name: i for i, name in enumerate(SPECIALS)}
        self.eos_token_id = self.specials["</s>"]
        self.pad_token_id = self.specials["<pad>"]

    def convert_tokens_to_ids(self, name: str) -> int:
        audio = _AUDIO_NAME.fullmatch(name)
        return AUDIO_BASE + int(audio.group(1)) if audio else self.specials[name]

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text input must be of type `str`, got {type(text).__name__}")
        ids: list[int] = []
        for piece in _SPLIT.split(text):
            ids += [self.specials[piece]] if piece in self.specials else [CHAR_BASE + ord(c) for c in piece]
        return ids

    def decode(self, ids: list[int]) -> str:
        names = {i: name for name, i in self.specials.items()}
        out = []
        for i in map(int, ids):
            if i >= AUDIO_BASE:
                out.append(AUDIO_TOKEN_FORMAT.format(i - AUDIO_BASE))
            elif i >= CHAR_BASE:
                out.append(chr(i - CHAR_BASE))
            else:
                out.append(names.get(i) or WORDS[i])
        return "".join(out)


class VoilaTokenizer:
    """voila_tokenizer.VoilaTokenizer's interface over a tiny residual VQ (the fake's codec, applied per frame)."""

    def __init__(self, model_path: str = "maitrix-org/Voila-Tokenizer", bandwidth_id: int = 0,
                 device: str = "cpu") -> None:
        self.device = torch.device(device)
        self.sampling_rate = RATE
        self.model = SimpleNamespace(config=SimpleNamespace(upsampling_ratios=[8, 5, 4, 4]))  # hop 640
        books = torch.randn(NUM_CODEBOOKS, CODEBOOK_SIZE, HOP, generator=torch.Generator().manual_seed(0)) * 0.01
        books[:, 0] = 0.0  # code 0 is silence
        self.books = books
        self.norms = (books * books).sum(dim=2)
        self.encoded: list[torch.Tensor] = []  # every encode's codes, for the tests

    @torch.no_grad()
    def encode(self, wav: Any, sr: int) -> torch.Tensor:
        if sr != self.sampling_rate:
            raise ValueError(f"the fake codec does not resample: {sr} Hz given, {self.sampling_rate} Hz wanted")
        with one_thread():
            return self._encode(torch.as_tensor(np.asarray(wav, np.float32)).reshape(-1))

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        frames = -(-x.numel() // HOP)
        residual = torch.nn.functional.pad(x, (0, frames * HOP - x.numel())).view(frames, HOP)
        codes = []
        for book, norms in zip(self.books, self.norms, strict=True):
            idx = (norms[None] - 2 * residual @ book.T).argmin(dim=1)  # nearest vector: |r - b|^2 less |r|^2
            residual = residual - book[idx]
            codes.append(idx)
        out = torch.stack(codes)
        self.encoded.append(out)
        return out

    @torch.no_grad()
    def decode(self, audio_codes: torch.Tensor) -> torch.Tensor:
        assert audio_codes.dim() == 2 and audio_codes.shape[0] == NUM_CODEBOOKS, audio_codes.shape
        with one_thread():
            frames = [book[codes.long().cpu()] for book, codes in zip(self.books, audio_codes, strict=True)]
            return sum(frames).reshape(-1)


def voila_input_format(item: dict[str, Any], tokenizer: FakeTokenizer, tokenizer_voila: VoilaTokenizer,
                       dataset_cfg: dict[str, Any]) -> tuple[list[list[list[int]]], None, None, list[list[int]]]:
    """tokenize_func.voila_input_format for the autonomous input type (the only one the adapter uses)."""
    if dataset_cfg["input_type"] != "autonomous":
        raise NotImplementedError("the fake has the autonomous input type only")
    task_type = dataset_cfg["task_type"]
    assert task_type == "chat_aiao_auto", f"only support chat_aiao_auto, {task_type} is invalid"
    nc, cs = dataset_cfg["num_codebooks"], dataset_cfg["codebook_size"]
    system = (DEFAULT_SYSTEM_START_TOKEN + TASK_STREAM_CHAT_TOKEN + TASK_CHAT_AUDIO_OUTPUT
              + DEFAULT_CHAT_REF_START_TOKEN + DEFAULT_CHAT_REF_TOKEN + DEFAULT_CHAT_REF_END_TOKEN
              + DEFAULT_SYSTEM_END_TOKEN)
    ids = tokenizer.encode(system, add_special_tokens=False)
    instruction = tokenizer.encode(item["instruction"], add_special_tokens=False) if item["instruction"] != "" else []
    row = ids[:-1] + instruction + ids[-1:] + [tokenizer.convert_tokens_to_ids(DEFAULT_HUMAN_TOKEN)]
    channels = [[list(row) for _ in range(nc)] for _ in range(2)]
    audio = item["conversations"][0]["audio"]
    assert "sr" in audio and audio["array"].ndim == 1, "a mono array and its rate"
    codes = tokenizer_voila.encode(audio["array"], sr=audio["sr"]).tolist()
    first = tokenizer.convert_tokens_to_ids(AUDIO_TOKEN_FORMAT.format(0))
    streaming = [[c + n * cs + first for c in codes[n]] for n in range(nc)]
    return channels, None, None, streaming


@dataclass
class Run:
    """One run_generate call, for the tests: the prompt it started from and the user ids it pulled."""

    prompt: torch.Tensor
    heard: list[list[int]] = field(default_factory=list)


class SpeakerEmbedding:
    """spkr.SpeakerEmbedding: pyannote's wespeaker; here a fixed 256-d vector of the input's length and rate."""

    calls: list[tuple[Any, ...]] = []

    def __init__(self, model_path: str = "pyannote/wespeaker-voxceleb-resnet34-LM", device: str = "cuda") -> None:
        self.device = torch.device(device)
        SpeakerEmbedding.calls.append(("init", model_path, device))

    def __call__(self, wav: Any, sr: int) -> torch.Tensor:
        SpeakerEmbedding.calls.append(("embed", tuple(torch.as_tensor(wav).shape), sr))
        return torch.randn(256, generator=torch.Generator().manual_seed(int(sr) + torch.as_tensor(wav).numel()))


class VoilaAutonomousModel:
    """model.VoilaAutonomousModel's `from_pretrained` and `run_generate`, with the fake LM described in the module
    docstring."""

    loads: list[tuple[str, dict[str, Any]]] = []

    def __init__(self) -> None:
        self.config = SimpleNamespace(num_codebooks=NUM_CODEBOOKS, codebook_size=CODEBOOK_SIZE)
        self.device = torch.device("cpu")
        self.runs: list[Run] = []

    @classmethod
    def from_pretrained(cls, path: str, **kwargs: Any) -> VoilaAutonomousModel:
        cls.loads.append((path, kwargs))
        return cls()

    def to(self, device: Any) -> VoilaAutonomousModel:
        self.device = torch.device(device)
        return self

    def eval(self) -> VoilaAutonomousModel:
        return self

    @torch.inference_mode()
    def run_generate(self, input_ids: torch.Tensor, input_generator: Any, ref_embs: Any = None,
                     ref_embs_mask: Any = None, max_new_tokens: int = 128, pad_token_id: int | None = None,
                     eos_token_id: int | None = None, streamer: Any = None, llm_audio_token_id: int | None = None,
                     min_audio_token_id: int | None = None, llm_assistant_token_id: int | None = None,
                     temperature: float = 0.2, top_k: int = 50, audio_temperature: float = 0.8,
                     audio_top_k: int = 50) -> torch.Tensor:
        assert eos_token_id is not None and pad_token_id is not None, "eos_token_id and pad_token_id are required"
        assert llm_audio_token_id is not None and min_audio_token_id is not None
        nc, cs = NUM_CODEBOOKS, CODEBOOK_SIZE
        assert input_ids.dim() == 3 and input_ids.shape[0] == 1 and input_ids.shape[2] == 2 * nc, input_ids.shape
        run = Run(input_ids.clone())
        self.runs.append(run)
        offsets = min_audio_token_id + cs * torch.arange(nc)
        state = int(input_ids[0, :, 0].sum()) % 1_000_003
        if ref_embs is not None:
            state = (state + int(ref_embs.float().abs().sum() * 1000)) % 1_000_003
        rows, plan, sounded, quiet = [], [], 0, 0
        while len(rows) < max_new_tokens:
            if not plan and sounded >= 3 and quiet >= 2:  # the voila head: speak now
                if llm_assistant_token_id is None:
                    raise TypeError("can't assign a NoneType to a torch.LongTensor")  # next_tokens[0] = None
                words = torch.randint(20, 20 + len(WORDS), (2 + int(torch.randint(0, 3, ())),))
                plan = [int(llm_assistant_token_id)] + [t for w in words.tolist() for t in (w, -1, -1, -1)]
                plan.append(int(eos_token_id))
                sounded = 0
            token = plan.pop(0) if plan else -1  # -1: the audio token here
            draw = torch.randint(0, cs - 1, (nc,))
            if token == -1:
                speaking = bool(plan)
                codes = (draw + state) % (cs - 1) + 1 if speaking else torch.zeros(nc, dtype=torch.long)
                out = (codes + offsets).view(1, 1, nc)
                try:
                    user = next(input_generator)
                except StopIteration:
                    break
                if user.shape != (nc,):
                    raise RuntimeError(f"Tensors must have same number of dimensions: a user frame of shape "
                                       f"{tuple(user.shape)} beside the model's [1, 1, {nc}]")
                heard = (user.view(-1).cpu() - offsets).tolist()
                run.heard.append(heard)
                loud = any(heard)
                sounded, quiet = sounded + loud, 0 if loud else quiet + 1
                row = torch.cat([user.view(-1).cpu(), out.view(-1)])
            else:
                out = torch.full((1, 1, nc), token)
                row = torch.full((2 * nc,), token)
            state = (state * 31 + int(row.sum())) % 1_000_003
            rows.append(row)
            if streamer is not None:
                streamer.put(out)
        if streamer is not None:
            streamer.end()
        return torch.cat([input_ids, torch.stack(rows)[None]], dim=1) if rows else input_ids


def fake_parts(ref_embs: torch.Tensor | None = None) -> Any:
    """VoilaParts over the fakes, with a fixed 256-d voice embedding (pyannote wespeaker's size)."""
    from adapters.voila import VoilaParts

    voice = torch.randn(256, generator=torch.Generator().manual_seed(1)) if ref_embs is None else ref_embs
    return VoilaParts(VoilaAutonomousModel(), FakeTokenizer(), VoilaTokenizer(), voila_input_format,
                      AUDIO_TOKEN_FORMAT, DEFAULT_AUDIO_TOKEN, DEFAULT_ASSISTANT_TOKEN, voice)
