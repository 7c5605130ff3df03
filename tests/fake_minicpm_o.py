"""An API fake of MiniCPM-o 4.5 in duplex mode, for testing adapters/minicpm_o.py without the weights.

A contract of OpenBMB/minicpm-o-4_5-pytorch-simple-demo@c7e16605: MiniCPMO45/modeling_minicpmo.py (class
`MiniCPMODuplex`: `from_pretrained` 2480-2493, `prepare` 2561-2637, `streaming_prefill` 2639-3012,
`streaming_generate` 3014-3268) and its callers (core/processors/unified.py 862-898, MiniCPMO45/README.md "Duplex
Streaming"): the same method names, keyword arguments and return shapes —
- `modeling_module(duplex, file)`: a stand-in of the `MiniCPMO45.modeling_minicpmo` module whose
  `MiniCPMODuplex.from_pretrained(pretrained_model_name_or_path, device="cuda", pt_path=None, **kwargs)` returns
  `duplex` (the loader's one call), recording its arguments;
- `prepare(prefix_system_prompt=None, suffix_system_prompt=None, ref_audio=None, prompt_wav_path=None,
  context_previous_marker=...) -> str` starts a fresh session (its `_reset_streaming_state`). The real one feeds
  the prefix's tokens verbatim (2584-2587), so a prompt without the system turn every OpenBMB caller writes
  (`<|im_start|>system\n...\n<|audio_start|>`, then the voice, then `<|audio_end|><|im_end|>`; unified.py:881-882)
  is taken silently and the model hears a prompt outside the format it was trained on: this fake refuses it
  (`ValueError`), so a test fails where the real model would quietly mis-hear;
- `streaming_prefill(audio_waveform=None, frame_list=None, text_list=None, max_slice_nums=1,
  batch_vision_feed=False) -> {"success", "reason", "cost_*"}`: audio is buffered as the real one buffers it —
  the first chunk padded in front to 1.035 s (16560 samples) and consumed whole, then 16000 samples a chunk;
  too little audio is refused with success False;
- `streaming_generate(prompt_wav_path=None, max_new_speak_tokens_per_chunk=20, decode_mode="sampling", ...)
  -> {"is_listen", "text", "audio_waveform", "end_of_turn", "current_time", "cost_*", "n_tokens",
  "n_tts_tokens"}`: a listen result carries one second of 24 kHz zeros, a speak result 24 kHz float32 audio.

Its behaviour is deterministic and easy to place: it listens until it has heard the user (a chunk above an RMS
floor) and then a silent chunk; at that chunk it starts saying its `voice`, one second per chunk, with a CLICK
on the reply's first sample. Its text pieces carry a number drawn with torch's generator, so an unseeded run
differs. `spoke_at` records the chunk of each reply's start (since the last `prepare`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import torch

IN_RATE, OUT_RATE = 16_000, 24_000
SYSTEM_START, AUDIO_START, SUFFIX = "<|im_start|>system\n", "\n<|audio_start|>", "<|audio_end|><|im_end|>"
FIRST_CHUNK = 16_560  # 1035 ms at 16 kHz, aligned to the 160-sample hop (StreamingMelProcessorExact)
CHUNK = 16_000
HEARD_RMS = 0.01
CLICK, REPLY_LEVEL = 0.9, 0.25


def square(n: int) -> np.ndarray:
    return np.where(np.arange(n) % 2 == 0, REPLY_LEVEL, -REPLY_LEVEL).astype(np.float32)


class FakeMiniCPMODuplex:
    def __init__(self, voice: np.ndarray | None = None, generate_error_at: int | None = None,
                 refuse_prefill_at: int | None = None, tensor_audio: bool = False) -> None:
        # What it says (24 kHz): `voice` (real speech, so the runner's VAD hears it) or 2 s of square wave.
        self.voice = np.asarray(voice, np.float32).copy() if voice is not None else square(2 * OUT_RATE)
        self.voice[0] = CLICK
        self.reply_chunks = -(-len(self.voice) // OUT_RATE)
        self.generate_error_at = generate_error_at
        self.refuse_prefill_at = refuse_prefill_at
        self.tensor_audio = tensor_audio
        self.prompts: list[str | None] = []
        self.prepare_calls: list[dict[str, Any]] = []
        self.generate_calls: list[dict[str, Any]] = []
        self.received: list[np.ndarray] = []  # every consumed chunk (16 kHz), since the last prepare
        self.spoke_at: list[int] = []
        self._reset_streaming_state()

    def _reset_streaming_state(self) -> None:
        self.audio_chunk_idx = 0
        self.audio_buffer = np.zeros(0, np.float32)
        self.pending: np.ndarray | None = None  # the chunk a prefill left for generate (the real "pending logits")
        self.heard = False
        self.speaking_left = 0
        self.received = []
        self.spoke_at = []

    def prepare(self, prefix_system_prompt: str | None = None, suffix_system_prompt: str | None = None,
                ref_audio: np.ndarray | None = None, prompt_wav_path: str | None = None,
                context_previous_marker: str = "\n\nprevious: ") -> str:
        wrapped = (prefix_system_prompt or "").startswith(SYSTEM_START) and \
            (prefix_system_prompt or "").endswith(AUDIO_START) and suffix_system_prompt == SUFFIX
        if not wrapped:
            raise ValueError(f"prepare: the system turn is not written as OpenBMB's callers write it "
                             f"({SYSTEM_START!r}...{AUDIO_START!r}, voice, {SUFFIX!r}): got prefix "
                             f"{prefix_system_prompt!r}, suffix {suffix_system_prompt!r}")
        self._reset_streaming_state()
        self.prompts.append(prefix_system_prompt[len(SYSTEM_START):-len(AUDIO_START)])
        self.prepare_calls.append({"prefix_system_prompt": prefix_system_prompt,
                                   "suffix_system_prompt": suffix_system_prompt, "ref_audio": ref_audio,
                                   "prompt_wav_path": prompt_wav_path})
        return prefix_system_prompt + ("[audio embedding]" if ref_audio is not None else "") + suffix_system_prompt

    def streaming_prefill(self, audio_waveform: np.ndarray | None = None, frame_list: list | None = None,
                          text_list: list | None = None, max_slice_nums: int | list[int] = 1,
                          batch_vision_feed: bool = False) -> dict[str, Any]:
        def result(success: bool, reason: str = "") -> dict[str, Any]:
            return {"success": success, "reason": reason, "cost_vision_process": 0.0, "cost_vision_embed": 0.0,
                    "cost_vision_feed": 0.0, "cost_audio_process": 0.0, "cost_audio_embed": 0.0,
                    "cost_audio_feed": 0.0, "cost_all": 0.0}

        if audio_waveform is None or len(audio_waveform) == 0:
            return result(False)
        if self.refuse_prefill_at == self.audio_chunk_idx:
            return result(False, "streaming audio processing returned empty")
        self.audio_buffer = np.concatenate([self.audio_buffer, np.asarray(audio_waveform, np.float32)])
        need = FIRST_CHUNK if self.audio_chunk_idx == 0 else CHUNK
        if self.audio_chunk_idx == 0 and len(self.audio_buffer) < FIRST_CHUNK:
            self.audio_buffer = np.concatenate([np.zeros(FIRST_CHUNK - len(self.audio_buffer), np.float32),
                                                self.audio_buffer])
        if len(self.audio_buffer) < need:
            return result(False, f"audio not enough: need {need} samples, only {len(self.audio_buffer)}")
        self.pending = self.audio_buffer[:need]
        self.received.append(self.pending[-CHUNK:].copy())  # the first chunk's front padding is not the user's
        self.audio_buffer = self.audio_buffer[need:]
        self.audio_chunk_idx += 1
        return result(True)

    def streaming_generate(self, prompt_wav_path: str | None = None, max_new_speak_tokens_per_chunk: int = 20,
                           decode_mode: str = "sampling", temperature: float = 0.7, top_k: int = 20,
                           top_p: float = 0.8, listen_prob_scale: float = 1.0, listen_top_k: int | None = None,
                           text_repetition_penalty: float = 1.05,
                           text_repetition_window_size: int = 512) -> dict[str, Any]:
        self.generate_calls.append({"prompt_wav_path": prompt_wav_path, "decode_mode": decode_mode,
                                    "max_new_speak_tokens_per_chunk": max_new_speak_tokens_per_chunk,
                                    "temperature": temperature})
        k = self.audio_chunk_idx - 1
        if self.generate_error_at == k:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if self.pending is None:  # nothing prefilled: the real one answers listen with a second of silence
            return self._listen(k)
        loud = float(np.sqrt(np.mean(self.pending[-CHUNK:] ** 2))) > HEARD_RMS
        self.pending = None
        if self.speaking_left == 0 and self.heard and not loud:
            self.speaking_left = self.reply_chunks
            self.spoke_at.append(k)
            self.heard = False
        self.heard = self.heard or loud
        if self.speaking_left == 0:
            return self._listen(k)
        part = self.reply_chunks - self.speaking_left
        self.speaking_left -= 1
        token = int(torch.randint(0, 1000, (1,)).item())  # the real one samples its tokens with torch
        audio = self.voice[part * OUT_RATE:(part + 1) * OUT_RATE]
        if self.speaking_left:  # the real one left-pads a short piece to 1 s, except a turn's last
            audio = np.pad(audio, (OUT_RATE - len(audio), 0))
        return {"is_listen": False, "text": f" reply{len(self.spoke_at)}.{part}#{token}",
                "audio_waveform": torch.from_numpy(audio) if self.tensor_audio else audio,
                "end_of_turn": self.speaking_left == 0, "current_time": k, "cost_llm": 0.0, "cost_tts_prep": 0.0,
                "cost_tts": 0.0, "cost_token2wav": 0.0, "cost_all": 0.0, "n_tokens": 3, "n_tts_tokens": 25}

    def _listen(self, k: int) -> dict[str, Any]:
        return {"is_listen": True, "text": "", "audio_waveform": np.zeros(OUT_RATE, np.float32), "end_of_turn": False,
                "current_time": k, "cost_llm": 0.0, "cost_tts_prep": 0.0, "cost_tts": 0.0, "cost_token2wav": 0.0,
                "cost_all": 0.0, "n_tokens": 0, "n_tts_tokens": 0}


def modeling_module(duplex: FakeMiniCPMODuplex, file: str) -> ModuleType:
    """A stand-in `MiniCPMO45.modeling_minicpmo` (at `file`, so the loader can find its checkout) whose
    `MiniCPMODuplex.from_pretrained` returns `duplex`; each call's arguments are in `module.loads`."""
    module = ModuleType("MiniCPMO45.modeling_minicpmo")
    module.__file__ = file
    loads: list[dict[str, Any]] = []

    class MiniCPMODuplex:
        @classmethod
        def from_pretrained(cls, pretrained_model_name_or_path: str, device: str = "cuda", pt_path: str | None = None,
                            **kwargs: Any) -> FakeMiniCPMODuplex:
            loads.append({"path": pretrained_model_name_or_path, "device": device, "pt_path": pt_path, **kwargs})
            return duplex

    module.MiniCPMODuplex = MiniCPMODuplex  # type: ignore[attr-defined]
    module.loads = loads  # type: ignore[attr-defined]
    return module
