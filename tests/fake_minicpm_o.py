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
  batch_vision_feed=False) -> {"success", "reason", "cost_*"}`: audio is buffered as the real one buffers it
  (2908-2976) — the first chunk padded in front to int(1035 ms) = 16560 samples, of which the streaming mel
  processor takes and consumes 1035 ms floored to its 160-sample hop, 16480 (processing_minicpmo.py:743-749,777;
  `effective_first_chunk_ms` 1030, 928-932), so 80 samples of the user's first second stay in the buffer and every
  later chunk of 16000 starts 80 samples (5 ms) before its second; too little audio is refused with success False;
- `streaming_generate(prompt_wav_path=None, max_new_speak_tokens_per_chunk=20, decode_mode="sampling", ...)
  -> {"is_listen", "text", "audio_waveform", "end_of_turn", "current_time", "cost_*", "n_tokens",
  "n_tts_tokens"}`: a listen result carries one second of 24 kHz zeros, a speak result 24 kHz float32 audio.

- `FakeMiniCPMODuplex.model`: the `MiniCPMO` a `MiniCPMODuplex` holds (`self.model`, modeling_minicpmo.py:2361-2406:
  bf16, `init_tts(streaming=True)`, the chunk constants set), whose half-duplex API `FakeMiniCPMO` mirrors (see there).

Its behaviour is deterministic and easy to place: it listens until it has heard the user (a chunk above an RMS
floor) and then a silent chunk; at that chunk it starts saying its `voice`, one second per chunk, with a CLICK
on the reply's first sample. Its text pieces carry a number drawn with torch's generator, so an unseeded run
differs. `spoke_at` records the chunk of each reply's start (since the last `prepare`).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import torch

IN_RATE, OUT_RATE = 16_000, 24_000
SYSTEM_START, AUDIO_START, SUFFIX = "<|im_start|>system\n", "\n<|audio_start|>", "<|audio_end|><|im_end|>"
FIRST_PAD = 16_560  # int(FIRST_CHUNK_MS 1035 * 16000 / 1000): the first chunk is front-padded to this (2914-2918)
FIRST_CHUNK = 16_480  # what the mel processor takes of it: 16560 floored to its 160-sample hop (processing:747-749)
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
        self.model = FakeMiniCPMO(self.voice)  # the MiniCPMO it wraps, with the same voice
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
        if self.audio_chunk_idx == 0 and len(self.audio_buffer) < FIRST_PAD:
            self.audio_buffer = np.concatenate([np.zeros(FIRST_PAD - len(self.audio_buffer), np.float32),
                                                self.audio_buffer])
        if len(self.audio_buffer) < need:
            return result(False, f"audio not enough: need {need} samples, only {len(self.audio_buffer)}")
        self.pending = self.audio_buffer[:need]
        self.received.append(self.pending[-CHUNK:].copy())  # the last 16000 samples the model was given
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


class FakeMiniCPMO:
    """The half-duplex ("turn-based") API of `MiniCPMO` in MiniCPMO45/modeling_minicpmo.py at c7e16605, as OpenBMB's
    "Half-Duplex Realtime Speech Conversation Mode" drives it (OpenBMB/MiniCPM-o@3ec4cb0e README.md:1814-1933) and
    the demo's HalfDuplexView (core/processors/unified.py:463-813):
    - `reset_session(reset_token2wav_cache=True)` (174-197): a fresh session; the voice's cache is dropped unless
      told not to;
    - `init_token2wav_cache(prompt_speech_16k)` (1388-1430): the voice (16 kHz) the reply is spoken in;
    - `streaming_prefill(session_id, msgs, omni_mode=True, max_slice_nums=None, use_tts_template=True,
      enable_thinking=False, is_last_chunk=False, **kwargs) -> str` (1835-1991): refuses a None session_id (1848),
      more or fewer than one message (1857) and a role outside system/user/assistant (1861) with AssertionError; a
      new session_id starts a session (1849, 1884-1886); the message's items are joined with "\n" unless omni_mode
      (1878); the first user audio chunk is front-padded to 1035 ms inside (1923-1929; `prefills` keeps the audio
      as given). A `content` that is a str rather than a list is iterated character by character there (1866), which
      the real one takes silently: this fake refuses it (TypeError), so a test fails where the real model would hear
      a garbled prompt;
    - `streaming_generate(session_id, bos_input=None, generate_audio=True, audio_token_chunk_size=25,
      tts_sampling_params=TTSSamplingParams(), max_new_tokens=256, enable_thinking=False, use_tts_template=True,
      do_sample=True, enable_speculative_snapshot=False, **kwargs)` (1994-2300), a generator: sampling keywords
      (`temperature`, `top_p`, `top_k`, `repetition_penalty`, `length_penalty`) come through **kwargs (2106-2115);
      with audio it yields (`torch.from_numpy(...)` waveform of shape [1, n] at 24 kHz, the new text) pairs
      (2250-2289), and without `init_token2wav_cache` it fails at its first step reading `token2wav_cache` (2224,
      TypeError).

    It answers every generate with its `voice`, one second per yielded chunk, the first sample a CLICK; each text
    piece carries a number drawn from torch's generator. `prefills` and `generates` record every call's arguments
    since the last `reset_session`."""

    def __init__(self, voice: np.ndarray) -> None:
        self.voice = np.asarray(voice, np.float32)
        self.token2wav_cache: dict[str, Any] | None = None
        self.voice_prompts: list[np.ndarray] = []
        self.reset_session(reset_token2wav_cache=True)

    def reset_session(self, reset_token2wav_cache: bool = True) -> None:
        self.session_id: str | None = None
        self.audio_chunk_idx = 0
        self.prefills: list[dict[str, Any]] = []
        self.generates: list[dict[str, Any]] = []
        if reset_token2wav_cache:
            self.token2wav_cache = None

    def init_token2wav_cache(self, prompt_speech_16k: np.ndarray) -> None:
        self.token2wav_cache = {"prompt_speech_16k": np.asarray(prompt_speech_16k, np.float32)}
        self.voice_prompts.append(self.token2wav_cache["prompt_speech_16k"])

    def streaming_prefill(self, session_id: str | None, msgs: list[dict[str, Any]], omni_mode: bool = True,
                          max_slice_nums: int | None = None, use_tts_template: bool = True,
                          enable_thinking: bool = False, is_last_chunk: bool = False, **kwargs: Any) -> str:
        assert session_id is not None, "session_id cannot be None"
        if session_id != self.session_id:  # the real one's is_first: a new session, the voice's cache kept
            cache = self.token2wav_cache
            self.reset_session(reset_token2wav_cache=False)
            self.token2wav_cache, self.session_id = cache, session_id
        assert len(msgs) == 1
        msg = msgs[0]
        assert msg["role"] in ["system", "user", "assistant"]
        if not isinstance(msg["content"], list):
            raise TypeError(f"streaming_prefill: content must be a list of items (text, 16 kHz audio), got "
                            f"{type(msg['content']).__name__}: the real one would read it character by character")
        texts = [c if isinstance(c, str) else "<audio>./</audio>" for c in msg["content"]]
        audios = [np.asarray(c, np.float32).copy() for c in msg["content"] if isinstance(c, np.ndarray)]
        if msg["role"] != "system" and audios:
            # The real one front-pads the first to 1035 ms inside (the model's matter); `audios` keeps what was given.
            self.audio_chunk_idx += 1
        prompt = ("" if omni_mode else "\n").join(texts)
        self.prefills.append({"role": msg["role"], "prompt": prompt, "audios": audios, "omni_mode": omni_mode,
                              "is_last_chunk": is_last_chunk, **kwargs})
        return prompt

    def streaming_generate(self, session_id: str | None, bos_input: str | None = None, generate_audio: bool = True,
                           audio_token_chunk_size: int = 25, tts_sampling_params: Any = None,
                           max_new_tokens: int = 256, enable_thinking: bool = False, use_tts_template: bool = True,
                           do_sample: bool = True, enable_speculative_snapshot: bool = False,
                           **kwargs: Any) -> Iterator[tuple[Any, str]]:
        self.generates.append({"session_id": session_id, "generate_audio": generate_audio,
                               "max_new_tokens": max_new_tokens, "enable_thinking": enable_thinking,
                               "use_tts_template": use_tts_template, "do_sample": do_sample, **kwargs})
        if generate_audio and self.token2wav_cache is None:
            raise TypeError("'NoneType' object is not subscriptable")
        self.audio_chunk_idx = 0  # the real one re-inits its streaming processor for the next turn (2035)
        voice = self.voice.copy()
        voice[0] = CLICK
        for i in range(0, len(voice), OUT_RATE):
            token = int(torch.randint(0, 1000, (1,)).item())
            piece = f" turn{len(self.generates)}.{i // OUT_RATE}#{token}"
            yield torch.from_numpy(voice[i:i + OUT_RATE].reshape(1, -1)), piece


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
