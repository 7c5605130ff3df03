"""`flm-audio`: FLM-Audio (CofeAI), a native full-duplex model with an internal monologue, English and Chinese,
through its own streaming loop (docs/models.md#flm-audio-flm-audio).

FLM-Audio's code (the `flmaudio` package of github.com/cofe-ai/flm-audio, mirrored as elpsykongloo/flm-audio) runs
one 80 ms frame per step the way Moshi does: Mimi (its vendored copy of moshi's codec, 24 kHz, 12.5 Hz, 8 codebooks)
encodes the user's frame, its `LMGen` (a Hugging Face `AutoModelForCausalLM` with `trust_remote_code`, stepped with
a `DynamicCache`) takes one step and returns [text, 8 audio] tokens, and Mimi decodes the 8 audio tokens. Its
server (`flmaudio/server.py`) does exactly that per frame; this adapter does the same without the websocket.

The one-frame offset is Moshi's: `LMGen` delays the acoustic codebooks by one frame and returns nothing on the first
step, so the adapter feeds an episode's first user frame twice (as the Moshi adapter does, adapters/moshi.py) and
the frame `step(user_t)` returns is the model's frame t (`model_delay_frames = 1` declared).

Text: the monologue's tokens, decoded one at a time with the checkpoint's tokenizer; padding (0, 3) and the model's
wait token (`config.mm_token_info.text_wait_token_id`) are not words. Sampling draws from torch's global generator
(FLM-Audio's `sample_token`), so `reset` seeds it: the same input and seed give the same samples in one process.
One episode at a time: its `depformer_step` is written for a batch of one.

`parts=` takes already built (mimi, lm_gen, tokenizer, wait token) objects: the tests pass a fake `LMGen` written
from its public code and a real tiny Mimi (tests/fake_flm_audio.py); without it the real ones are loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from adapters.model_code import model_code
from adapters.protocol import Frame

SAMPLE_RATE = 24_000
FRAME_SIZE = 1920  # Mimi's 80 ms frame
TEXT_PADDING = (0, 3)  # FLM-Audio's server skips these text tokens
DEFAULT_REPO = "CofeAI/FLM-Audio"


@dataclass
class FLMParts:
    mimi: Any  # a streaming Mimi: encode [1, 1, 1920] -> [1, 8, 1], decode [1, 8, 1] -> [1, 1, 1920]
    lm_gen: Any  # flmaudio.models.LMGen: step([1, 8, 1]) -> [1, 9, 1] or None
    tokenizer: Any  # decode([id]) -> str
    wait_token: int  # the monologue's "no word here" token


def load_parts(model_path: str, mimi_path: str | None, device: str, repo_dir: str | None) -> FLMParts:
    """The real model as FLM-Audio's server loads it."""
    with model_code("flm-audio", repo_dir, "FLM-Audio's code", "a checkout of github.com/cofe-ai/flm-audio on "
                    "PYTHONPATH or repo_dir=DIR, and its requirements-server.txt"):
        import torch
        from flmaudio.models import LMGen, loaders
        from transformers import AutoModelForCausalLM, AutoTokenizer
    mimi = loaders.get_mimi(mimi_path or model_path, device)
    lm = AutoModelForCausalLM.from_pretrained(model_path, trust_remote_code=True, device_map=device,
                                              torch_dtype=torch.bfloat16, low_cpu_mem_usage=True)
    tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=True)
    return FLMParts(mimi, LMGen(lm, tokenizer), tokenizer, int(lm.config.mm_token_info.text_wait_token_id))


class FLMAudioAgent:
    """FLM-Audio through its `LMGen` streaming loop, one 80 ms frame per step."""

    name = "flm-audio"
    version = "flm-audio"
    sample_rate = SAMPLE_RATE
    frame_size = FRAME_SIZE
    realtime = False
    capabilities = frozenset({"text_output"})
    model_delay_frames = 1  # compensated: see the module docstring

    def __init__(self, model_path: str = DEFAULT_REPO, mimi_path: str | None = None, device: str | None = None,
                 repo_dir: str | None = None, parts: FLMParts | None = None) -> None:
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.parts = parts or load_parts(model_path, mimi_path, self.device, repo_dir)
        self.version = f"flm-audio:{model_path}" if parts is None else f"flm-audio:{type(self.parts.lm_gen).__name__}"
        self.parts.mimi.streaming_forever(1)
        self.parts.lm_gen.streaming_forever(1)
        self._started = False

    def reset(self, system_prompt: str | None, seed: int) -> None:
        import torch

        torch.manual_seed(int(seed))
        self.parts.mimi.reset_streaming()
        self.parts.lm_gen.reset_streaming()
        self._started = False

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        import torch

        frame = np.asarray(user_frame, np.float32)
        if frame.shape != (FRAME_SIZE,):
            raise ValueError(f"user_frame must be [{FRAME_SIZE}], got {frame.shape}")
        mimi, lm_gen = self.parts.mimi, self.parts.lm_gen
        with torch.no_grad():
            x = torch.from_numpy(frame).to(self._mimi_device())[None, None]
            codes = mimi.encode(x)[:, :, :1]
            if not self._started:  # the first frame twice: step t then returns the model's frame t
                if lm_gen.step(codes) is not None:
                    raise RuntimeError("FLM-Audio's LMGen returned tokens on its first step; expected none "
                                       "(one frame of acoustic delay)")
                self._started = True
            tokens = lm_gen.step(codes)
            if tokens is None:
                raise RuntimeError("FLM-Audio's LMGen returned no tokens after its first step")
            pcm = mimi.decode(tokens[:, 1:9].to(self._mimi_device()))
        audio = pcm[0, 0].float().cpu().numpy().astype(np.float32)
        return Frame(audio, self._text(int(tokens[0, 0, 0])))

    def _mimi_device(self) -> Any:
        return next(self.parts.mimi.parameters()).device

    def _text(self, token: int) -> str | None:
        if token in TEXT_PADDING or token == self.parts.wait_token:
            return None
        return self.parts.tokenizer.decode([token]) or None

    def close(self) -> None:
        pass
