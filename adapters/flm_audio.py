"""`flm-audio`: FLM-Audio (CofeAI), a native full-duplex model with an internal monologue, English and Chinese,
through its own streaming loop (docs/models.md#flm-audio-flm-audio).

Written against cofe-ai/flm-audio@41d768c9 (`UPSTREAM`; its `flmaudio` package, docs/models.md lists each file:line).
Its server (flmaudio/server.py:36-57, 138-162, 252-271) runs one 80 ms frame per step the way Moshi does: Mimi (its
vendored copy of moshi's codec, 24 kHz, 12.5 Hz, 8 codebooks; `loaders.get_mimi`) encodes the user's frame,
`LMGen(lm)` (flmaudio/models/streaming_flmaudio.py:31-46: `LMGen.__init__(self, lm_model, *, use_sampling=True,
...)`, every setting keyword-only and the server's defaults used; the `text_tokenizer` argument of the older API at
35fbe685 is gone since 28 Nov 2025) takes one step and returns [text, 8 audio] tokens, or None on the first step of
a session (streaming_flmaudio.py:154-155), which the server skips; Mimi decodes the 8 audio tokens. The model is
`FLMAudioForCausalLM.from_pretrained(path, device_map=, torch_dtype=bfloat16, low_cpu_mem_usage=True)` and its
tokenizer `AutoTokenizer.from_pretrained(path)` (server.py:261-267). This adapter does the same without the
websocket, one session at a time (its `depformer_step` is written for a batch of one).

Timing (the one rule of docs/adding-a-model.md): the tokens of the step that consumed user frame t were computed
after hearing it, so with `alignment="live"` (the default) they are played in slot t + 1, where the server's client
would hear them at the earliest: slot t plays what the step of frame t - 1 returned (silence for the first two slots:
nothing before the first frame, and the first step's None). `alignment="offline"` plays them in slot t, beside the
frame they heard (the Moshi family's offline alignment, 80 ms earlier than any live path); `runtime()` records which.

Text: the monologue's tokens; padding (0, 3) and the model's wait token (`config.mm_token_info.text_wait_token_id`)
are not words (server.py:153-156). As the server's `AsyncTextIteratorStreamer` does (server.py:153-161), the tokens
since the last wait token are decoded together, so a character whose bytes span two tokens (Chinese, its other
language) comes out whole, in the step of its last token; each step records the new text at once rather than at
the streamer's word boundaries (finer timing, the same words). Sampling draws from
torch's global generator (FLM-Audio's `sample_token`), so `reset` seeds it: the same input and seed give the same
samples in one process.

`parts=` takes already built (mimi, lm_gen, tokenizer, wait token) objects: the tests pass a fake `LMGen` written
from its code at the pinned commit and a real tiny Mimi (tests/fake_flm_audio.py); without it the real ones are
loaded.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adapters.model_code import model_code
from adapters.protocol import Frame
from adapters.upstream import Pin, git_head, hf_snapshot_revision, provenance
from dataset_builder.errors import UsageError

# The code this adapter was written against (HEAD of cofe-ai/flm-audio when read). The weights' Hugging Face revision
# is not pinned (none could be read here): `revision=` picks one, and the one loaded is recorded.
UPSTREAM: tuple[Pin, ...] = (Pin("git", "cofe-ai/flm-audio", "41d768c9f61d954907c1c518709f2d9239de46a8"),)
ALIGNMENTS = ("live", "offline")

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
    # What was loaded against `UPSTREAM` (load_parts fills it; built parts, a test double, have none).
    upstream: list[dict[str, Any]] = field(default_factory=list)


def load_parts(model_path: str, mimi_path: str | None, device: str, repo_dir: str | None,
               revision: str | None = None) -> FLMParts:
    """The real model as FLM-Audio's server loads it (server.py:256-271), its weights from one folder: a local one
    as it is, a hub id's snapshot at `revision` (None: the newest)."""
    with model_code("flm-audio", repo_dir, "FLM-Audio's code", "a checkout of github.com/cofe-ai/flm-audio at "
                    f"{UPSTREAM[0].ref[:8]} on PYTHONPATH or repo_dir=DIR, and its requirements-server.txt"):
        import torch
        from flmaudio.models import FLMAudioForCausalLM, LMGen, loaders  # type: ignore[import-not-found]
        from transformers import AutoTokenizer
    folder = model_path
    if not Path(model_path).is_dir():
        from huggingface_hub import snapshot_download

        folder = str(snapshot_download(model_path, revision=revision))
    mimi = loaders.get_mimi(mimi_path or folder, device)
    lm = FLMAudioForCausalLM.from_pretrained(folder, device_map=device, torch_dtype=torch.bfloat16,
                                             low_cpu_mem_usage=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    checkout = Path(sys.modules["flmaudio"].__file__ or ".").resolve().parent.parent
    upstream = [provenance("flm-audio", UPSTREAM[0], git_head(checkout), f"the FLM-Audio code at {checkout}"),
                {"repo": model_path, "kind": "hf", "pinned": revision, "used": hf_snapshot_revision(folder),
                 "matches": None}]
    return FLMParts(mimi, LMGen(lm), tokenizer, int(lm.config.mm_token_info.text_wait_token_id), upstream)


class FLMAudioAgent:
    """FLM-Audio through its `LMGen` streaming loop, one 80 ms frame per step."""

    name = "flm-audio"
    version = "flm-audio"
    sample_rate = SAMPLE_RATE
    frame_size = FRAME_SIZE
    realtime = False
    capabilities = frozenset({"text_output"})

    def __init__(self, model_path: str = DEFAULT_REPO, mimi_path: str | None = None, device: str | None = None,
                 repo_dir: str | None = None, revision: str | None = None, alignment: str = "live",
                 parts: FLMParts | None = None) -> None:
        import torch

        if alignment not in ALIGNMENTS:
            raise UsageError(f"flm-audio: alignment must be one of {ALIGNMENTS}, got {alignment!r}")
        self.alignment = alignment
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.parts = parts or load_parts(model_path, mimi_path, self.device, repo_dir, revision)
        self.version = f"flm-audio:{model_path}" if parts is None else f"flm-audio:{type(self.parts.lm_gen).__name__}"
        self.parts.mimi.streaming_forever(1)
        self.parts.lm_gen.streaming_forever(1)
        self._held = self._silence()
        self._ids: list[int] = []  # text tokens since the last wait token (the server's streamer's cache)
        self._said = ""  # what they decoded to, already returned

    def runtime(self) -> dict[str, Any]:
        """The alignment used and what was loaded against `UPSTREAM`, for each rec.json."""
        return {"alignment": self.alignment, "upstream": self.parts.upstream}

    def _silence(self) -> Frame:
        return Frame(np.zeros(FRAME_SIZE, np.float32))

    def reset(self, system_prompt: str | None, seed: int) -> None:
        import torch

        torch.manual_seed(int(seed))
        self.parts.mimi.reset_streaming()
        self.parts.lm_gen.reset_streaming()
        self._held = self._silence()
        self._ids, self._said = [], ""

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        frame = np.asarray(user_frame, np.float32)
        if frame.shape != (FRAME_SIZE,):
            raise ValueError(f"user_frame must be [{FRAME_SIZE}], got {frame.shape}")
        heard = self._model_step(frame)
        if self.alignment == "offline":
            return heard
        out, self._held = self._held, heard  # live: what this frame made the model say is heard from the next slot
        return out

    def _model_step(self, frame: np.ndarray) -> Frame:
        """One step of the server's loop (server.py:138-162): encode, LMGen.step, decode; the first step of a
        session returns no tokens, and then nothing is said."""
        import torch

        mimi, lm_gen = self.parts.mimi, self.parts.lm_gen
        with torch.no_grad():
            x = torch.from_numpy(frame).to(self._mimi_device())[None, None]
            tokens = lm_gen.step(mimi.encode(x)[:, :, :1])
            if tokens is None:
                return self._silence()
            if tokens.shape[1] != 9:
                raise RuntimeError(f"FLM-Audio's LMGen returned {tokens.shape[1]} token streams; expected 9 "
                                   "(text and 8 audio codebooks)")
            pcm = mimi.decode(tokens[:, 1:9].to(self._mimi_device()))
        audio = pcm[0, 0].float().cpu().numpy().astype(np.float32)
        return Frame(audio, self._text(int(tokens[0, 0, 0])))

    def _mimi_device(self) -> Any:
        return next(self.parts.mimi.parameters()).device

    def _text(self, token: int) -> str | None:
        """The new text this token completes (module docstring: decoded with the tokens since the last wait token,
        as the server's streamer does, server.py:153-161)."""
        if token in TEXT_PADDING:
            return None
        if token == self.parts.wait_token:  # the server ends its streamer here
            self._ids, self._said = [], ""
            return None
        self._ids.append(token)
        text = self.parts.tokenizer.decode(self._ids)
        if text.endswith("\ufffd"):  # a character cut between tokens: its last bytes come with a later token
            return None
        new, self._said = text[len(self._said):], text
        return new or None

    def close(self) -> None:
        pass
