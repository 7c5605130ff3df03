"""A fake of FLM-Audio's streaming `LMGen` (flmaudio/models/streaming_flmaudio.py of github.com/cofe-ai/flm-audio),
written from its public code, and the real tiny Mimi of the `moshi` package (FLM-Audio vendors moshi's Mimi), for
the `flm-audio` adapter's tests (tests/test_flm_audio.py, tests/test_check_adapter.py).

What the fake keeps of the real `LMGen`: `streaming_forever(1)` / `reset_streaming()`; `step(codes [1, 8, 1])`
returns None on the first step after a reset (one frame of acoustic delay) and [1, 9, 1] long tokens (text, then 8
audio codebooks) on every later one; its draws come from torch's global generator (the real `sample_token` does);
what it returns depends only on the user codes it has been given so far. Its "model": a running hash of the user's
codes; every 6th frame it says a word (a text token) and otherwise the wait token, and its audio tokens are the
hash plus a random draw, so what it says depends on what it heard and on the seed.
"""

from __future__ import annotations

from typing import Any

import torch

WAIT = 7  # the fake checkpoint's text_wait_token_id
WORDS = {10: " hello", 11: " there", 12: " twelve", 13: " yes"}
CARD = 64  # the tiny Mimi's codebook size


class FakeTokenizer:
    def decode(self, ids: list[int]) -> str:
        return "".join(WORDS.get(int(i), "") for i in ids)


class FakeLMGen:
    def __init__(self) -> None:
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
        assert codes.shape == (1, 8, 1) and codes.dtype == torch.long, codes.shape
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

    return FLMParts(build_tiny("cpu").mimi, FakeLMGen(), FakeTokenizer(), WAIT)
