"""A test double of F-Actor, a contract of MaikeZuefle/f-actor@2efa25d5 (`training/modeling_dsu.py`,
`training/load_dsu_model.py`, `training/inference_example.py`, `training/inference_audio/nano_decode.py`,
`dsu_preprocessing/nanocodec_preproc.py`) and of the NeMo `AudioCodecModel` surface those files call, for the
`f-actor` adapter's tests (tests/test_f_actor.py, tests/test_check_adapter.py).

- `TinyDSULlama`: what `DSULlama` is after its loader's `init_or_load_*` calls, at toy size: a real `transformers`
  Llama (randomly initialised from a fixed seed) plus `audio_embeds` (8 embedding tables of 4032 + 2 codes:
  codebooks 0-3 the model's own stream, 4-7 the partner's; modeling_dsu.py:25), `dsu_head` (hidden -> 8 x 4034),
  `speaker_embed_proj` (192 -> hidden), `num_dsu_heads`, `audio_delay_id`, `audio_eos_id` (modeling_dsu.py:49-50).
  Its outputs are real attention over the speaker, the prompt and every position fed, so they depend on the prompt
  and what it heard. It records the codes each position was given (`fed`), for the tests.
- `DSULlama.from_pretrained(path, config=...)`: the loading surface. It refuses a config without `num_dsus`, as
  `DSUModel.__init__` does (modeling_dsu.py:12-15: the checkpoint's config.json alone does not carry it), and
  its `init_or_load_*(model_path=...)` load the heads only from a local folder of safetensors, else make new random
  ones (load_dsu_model.py:10-77: `checkpoint_has_weights` joins the path with the file names), which it records.
- `FakeTokenizer`: the checkpoint's tokenizer's surface: `tok(text, return_tensors="pt").input_ids` (BOS first),
  `decode`, `convert_ids_to_tokens`, `all_special_ids` (the text-stream pads and markers are special tokens, as
  F-Actor's `add_new_tokens` adds them, training/model.py:10-28). One token per character for prompts, plus a few
  whole words.
- `FakeNanoCodec`: NeMo's `AudioCodecModel` surface as F-Actor calls it: `sample_rate` 22050, `samples_per_frame`
  1764 (12.5 frames a second), `encode(audio=[B, T], audio_len=[B]) -> (codes [B, 4, frames], lengths)` and
  `decode(tokens=[B, 4, L], tokens_len=[B]) -> (audio [B, L * 1764], lengths)`, both keyword-only: NeMo's
  `typecheck` raises "All arguments must be passed by kwargs only for typed methods" on a positional argument
  (nemo/core/classes/common.py; `encode`/`decode` are typed in nemo/collections/tts/models/audio_codec.py, which
  also sets `sample_rate` and `samples_per_frame` from the checkpoint's config). Encoding is per frame (a fixed
  random projection, quantised to 4032 codes); decoding is causal with one frame of memory (each frame rings on
  into the next), so a frame decoded without its predecessor differs from the same frame decoded in sequence.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

SR, HOP, BOOKS, CODES = 22_050, 1764, 4, 4032
SPECIALS = ["<|begin_of_text|>", "<|eot_id|>", "[SILENCE_PAD]", "[UTTERANCE_PAD]", "[WORD_PAD]", "[BC]", "[INTER]"]
WORDS = [" hello", " there", "yes", " twelve", "okay"]
RESERVED = "<|reserved_special_token_0|>"  # special (decode skips it) but not in all_special_ids, as Llama 3's
CHARS = [chr(c) for c in range(32, 127)] + ["\n"]
VOCAB = SPECIALS + WORDS + [RESERVED] + CHARS


class FakeTokenizer:
    eos_token = "<|eot_id|>"
    pad_token: str | None = None

    def __init__(self) -> None:
        self.ids = {t: i for i, t in enumerate(VOCAB)}
        self.all_special_ids = [self.ids[t] for t in SPECIALS]
        self.texts: list[str] = []  # every text tokenized, for the tests

    @property
    def pad_token_id(self) -> int:
        return self.ids[self.pad_token or self.eos_token]

    def __call__(self, text: str, return_tensors: str = "pt") -> Any:
        self.texts.append(text)
        ids = [0] + [self.ids.get(c, self.ids["?"]) for c in text]
        return SimpleNamespace(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long))

    def convert_ids_to_tokens(self, i: int) -> str:
        return VOCAB[int(i)]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        skip = set(self.all_special_ids) | {self.ids[RESERVED]} if skip_special_tokens else set()
        return "".join(VOCAB[int(i)] for i in ids if int(i) not in skip)


class RecordingEmbedding(torch.nn.Embedding):
    def __init__(self, n: int, dim: int, log: list[int]) -> None:
        super().__init__(n, dim)
        self.log = log

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.log.extend(int(i) for i in ids.view(-1))
        return super().forward(ids)


class TinyDSULlama(LlamaForCausalLM):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.num_dsus = BOOKS
        self.num_dsu_heads = 2 * BOOKS
        self.audio_vocab_size = CODES + 2
        self.audio_eos_id, self.audio_delay_id = CODES + 1, CODES
        self.logs: list[list[int]] = [[] for _ in range(self.num_dsu_heads)]
        self.audio_embeds = torch.nn.ModuleList(RecordingEmbedding(self.audio_vocab_size, config.hidden_size, log)
                                                for log in self.logs)
        self.dsu_head = torch.nn.Linear(config.hidden_size, self.audio_vocab_size * self.num_dsu_heads)
        self.speaker_embed_proj = torch.nn.Linear(192, config.hidden_size)
        for table in self.audio_embeds:  # as F-Actor's init_audio_embeds
            torch.nn.init.xavier_uniform_(table.weight)

    def fed(self) -> np.ndarray:
        """[positions, 8]: the codes every audio position was given, since the last `forget`."""
        return np.array(self.logs).T.reshape(-1, self.num_dsu_heads)

    def forget(self) -> None:
        for log in self.logs:
            log.clear()


def tiny_model() -> TinyDSULlama:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096)
    model = TinyDSULlama(config).eval()
    with torch.no_grad():  # logits with some spread, so the top-k/top-p draws have a shape to cut
        model.dsu_head.weight.mul_(40.0)
        model.lm_head.weight.mul_(40.0)
    return model


class DSULlama:
    """modeling_dsu.DSULlama's loading surface; what it loads is `tiny_model()`. `calls` records each call."""

    calls: list[tuple[Any, ...]] = []

    @classmethod
    def from_pretrained(cls, path: str, *args: Any, config: Any = None, **kwargs: Any) -> TinyDSULlama:
        if config is None or not hasattr(config, "num_dsus"):
            raise ValueError("config.num_dsus must be set before initializing DSU model")
        cls.calls.append(("from_pretrained", path, dict(vars(config)), sorted(kwargs)))
        model = tiny_model()
        for name in ("init_or_load_speaker_embed_proj", "init_or_load_audio_heads", "init_or_load_audio_embeds"):
            setattr(model, name, cls._head_loader(name))
        return model

    @classmethod
    def _head_loader(cls, name: str) -> Any:
        def load(model_path: str | None = None) -> None:
            folder = model_path is not None and (Path(model_path) / "model.safetensors").is_file()
            cls.calls.append((name, model_path, "loaded" if folder else "random init"))
        return load


def nemo_typecheck(args: tuple[Any, ...]) -> None:
    """NeMo's `typecheck` on a typed method (nemo/core/classes/common.py): keyword arguments only."""
    if args:
        raise TypeError("All arguments must be passed by kwargs only for typed methods")


class FakeNanoCodec(torch.nn.Module):
    sample_rate = SR
    samples_per_frame = HOP

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.proj = torch.nn.Parameter(torch.randn(HOP, BOOKS, generator=g) / HOP**0.5, requires_grad=False)

    def encode(self, *args: Any, audio: Any = None, audio_len: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        nemo_typecheck(args)
        assert audio is not None and audio_len is not None, "encode needs audio= and audio_len="
        assert audio.ndim == 2 and int(audio_len[0]) == audio.shape[1] and audio.shape[1] % HOP == 0, audio.shape
        frames = audio.shape[1] // HOP
        feats = audio.view(audio.shape[0], frames, HOP) @ self.proj
        codes = ((torch.tanh(20 * feats) + 1) / 2 * (CODES - 1)).round().long()
        return codes.transpose(1, 2), torch.tensor([frames])

    def decode(self, *args: Any, tokens: Any = None, tokens_len: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        nemo_typecheck(args)
        assert tokens is not None and tokens_len is not None, "decode needs tokens= and tokens_len="
        assert tokens.ndim == 3 and tokens.shape[1] == BOOKS and int(tokens_len[0]) == tokens.shape[2], tokens.shape
        assert int(tokens.max()) < CODES and int(tokens.min()) >= 0, "not an audio code"
        n = torch.arange(HOP, dtype=torch.float32)
        out, ring = [], torch.zeros(HOP)
        for t in range(tokens.shape[2]):
            c = tokens[0, :, t].float()
            amp = 0.05 + 0.4 * c[0] / CODES
            tone = amp * torch.sin(2 * torch.pi * (100 + c[1] / 8) * n / SR + c[2] / CODES * 6.28)
            out.append(tone + ring)
            ring = 0.5 * amp * torch.exp(-n / 300)
        return torch.cat(out)[None], torch.tensor([tokens.shape[2] * HOP])


def fake_parts() -> Any:
    """FActorParts with the tiny model, the fake tokenizer and codec, and a fixed speaker embedding."""
    from adapters.f_actor import FActorParts

    speaker = np.random.default_rng(2).standard_normal(192).astype(np.float32)
    return FActorParts(tiny_model(), FakeTokenizer(), FakeNanoCodec(), speaker)
