"""A fake of FLM-Audio's streaming `LMGen` and the loader's imports, a contract of cofe-ai/flm-audio@41d768c9
(flmaudio/models/streaming_flmaudio.py, flmaudio/models/__init__.py, flmaudio/server.py), with the real tiny Mimi of
the `moshi` package (FLM-Audio vendors moshi's Mimi), for the `flm-audio` adapter's tests (tests/test_flm_audio.py,
tests/test_check_adapter.py).

What the fake keeps of the real `LMGen`: `LMGen(lm_model, *, use_sampling=True, temp_audio=0.5, temp_text=0.01,
top_k_audio=1, top_k_text=1, top_p_audio=0.9, top_p_text=0.9, repetition_penalty_audio=1.2,
repetition_penalty_text=1.03, repetition_penalty_window_audio=50, repetition_penalty_window_text=50)`, every setting
keyword-only (streaming_flmaudio.py:32-47), so the older API's `LMGen(lm, tokenizer)` (35fbe685) is a TypeError, as
there; `streaming_forever(1)` / `reset_streaming()`; `step(codes [1, K, 1])` refuses K other than
`lm_model.config.aud_channel` (8) and a call outside streaming, returns None on the first step after a reset (one
frame of acoustic delay, 154-155) and [1, 9, 1] long tokens (text, then 8 audio codebooks) on every later one; its
draws come from torch's global generator (the real `sample_token` does); what it returns depends only on the user
codes it has been given so far. Its "model": a running hash of the user's codes; every 6th frame it says a word (a
text token) and otherwise the wait token, and its audio tokens are the hash plus a random draw, so what it says
depends on what it heard and on the seed.

`fake_checkout(root)` writes a stand-in checkout whose `flmaudio.models` exports what the server imports
(`FLMAudioForCausalLM`, `LMGen`, `loaders`; models/__init__.py) with these fakes inside, for the loader's test.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from tests.stand_in_checkout import write_checkout

WAIT = 7  # the fake checkpoint's text_wait_token_id
WORDS = {10: " hello", 11: " there", 12: " twelve", 13: " yes"}
CARD = 64  # the tiny Mimi's codebook size


class FakeTokenizer:
    def decode(self, ids: list[int]) -> str:
        return "".join(WORDS.get(int(i), "") for i in ids)


class FakeFLMAudioLM:
    """What LMGen reads of the model: `config.aud_channel`, `config.mm_token_info.text_wait_token_id`, `device`."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(aud_channel=8, mm_token_info=SimpleNamespace(text_wait_token_id=WAIT))
        self.device = torch.device("cpu")


class FakeLMGen:
    def __init__(self, lm_model: Any, *, use_sampling: bool = True, temp_audio: float = 0.5, temp_text: float = 0.01,
                 top_k_audio: int = 1, top_k_text: int = 1, top_p_audio: float = 0.9, top_p_text: float = 0.9,
                 repetition_penalty_audio: float = 1.2, repetition_penalty_text: float = 1.03,
                 repetition_penalty_window_audio: int = 50, repetition_penalty_window_text: int = 50) -> None:
        self.lm_model = lm_model
        self.settings = {"use_sampling": use_sampling, "temp_audio": temp_audio, "temp_text": temp_text,
                         "top_k_audio": top_k_audio, "top_k_text": top_k_text}
        self.steps: list[torch.Tensor] = []  # every input, for the tests
        self._state: int | None = None

    def streaming_forever(self, batch_size: int) -> None:
        assert batch_size == 1, "FLM-Audio's depformer_step is written for a batch of one"
        self.reset_streaming()

    def reset_streaming(self) -> None:
        self._state, self._offset = 0, 0

    def step(self, codes: torch.Tensor) -> torch.Tensor | None:
        if self._state is None:
            raise RuntimeError("You should wrap those calls with a `with lm_gen.streaming(): ...`.")
        assert codes.dim() == 3 and codes.shape[2] == 1, "Only support being given steps one by one."
        assert codes.shape[1] == self.lm_model.config.aud_channel, \
            f"We expect {self.lm_model.config.aud_channel} tokens from the user stream, got {codes.shape[1]}."
        assert codes.shape[0] == 1 and codes.dtype == torch.long, codes.shape
        self.steps.append(codes.clone())
        self._state = (self._state * 31 + int(codes.sum())) % 100_003
        self._offset += 1
        if self._offset <= 1:
            return None
        draw = torch.randint(0, CARD, (8,))
        audio = (draw + self._state) % CARD
        text = 10 + int(torch.randint(0, 4, ())) if self._offset % 6 == 0 else WAIT
        return torch.cat([torch.tensor([text]), audio]).view(1, 9, 1)


def fake_parts() -> Any:
    """FLMParts with the fake LMGen, the fake tokenizer and a fresh tiny Mimi (the same weights every time)."""
    from adapters.flm_audio import FLMParts
    from adapters.moshi import build_tiny

    return FLMParts(build_tiny("cpu").mimi, FakeLMGen(FakeFLMAudioLM()), FakeTokenizer(), WAIT)


CHECKOUT_FILES = {
    "flmaudio/__init__.py": "",
    "flmaudio/models/__init__.py": (
        "from types import SimpleNamespace\n\n"
        "from tests.fake_flm_audio import FakeFLMAudioLM, FakeLMGen as LMGen  # noqa: F401\n\n"
        "LOADS = []\n\n\n"
        "class FLMAudioForCausalLM(FakeFLMAudioLM):\n"
        "    @classmethod\n"
        "    def from_pretrained(cls, path, **kwargs):\n"
        "        LOADS.append(('lm', path, kwargs))\n"
        "        return cls()\n\n\n"
        "def get_mimi(mimi_path, device='cpu'):\n"
        "    from adapters.moshi import build_tiny\n\n"
        "    LOADS.append(('mimi', mimi_path, device))\n"
        "    return build_tiny('cpu').mimi\n\n\n"
        "loaders = SimpleNamespace(get_mimi=get_mimi)\n"),
}


def fake_checkout(root: Path) -> Path:
    """A stand-in checkout of cofe-ai/flm-audio (its import layout only) under `root`."""
    return write_checkout(root, CHECKOUT_FILES)
