"""An API fake of Freeze-Omni's three run-time objects, for testing adapters/freeze_omni.py without the weights.

A contract of VITA-MLLM/Freeze-Omni@3e17af43 (models/pipeline.py, models/audioLLM.py, models/decoder/llm2tts.py,
web/vad.py, web/parms.py, bin/server.py): the same method names, arguments, return shapes and refusals —
- `FakePipeline.speech_dialogue(audio, role=None, stat="sl", past_key_values=None, last_id=None, past_tokens=None,
  adapter_cache=None, encoder_cache=None, pe_index=0) -> dict` (inferencePipeline, models/pipeline.py:25-86): "pre"
  prefills the role (recorded in `roles`; `role=None` selects the checkpoint's training role,
  models/audioLLM.py:219-225, recorded as `CHECKPOINT_ROLE`), and refuses a "pre" on a session that already has past
  key values (AssertionError, audioLLM.py:217); "sl"/"cl" take one chunk's fbank features ([1, 19, 80]) and return
  the state head's "cl", "ss" or "el"; "ss"/"cs" return one token ("cs", with last_id, hidden_state [1, 1, D], text
  of all past_tokens, past_tokens) or the end ("sl"). Like the real pipeline it keeps no state of its own:
  everything rides in the returned dict (the caches), and it takes no other keyword (a stray "text" key is a
  TypeError, as there).
  `post_process(text)`, `model.tokenizer.encode(text)`, `model.llm_decoder.model.embed_tokens(ids)` as used by
  the server's decoder().
- `FakeTTS.run(hidden, top_k, prefix, codec_chunk_size=40, codec_padding_size=10, penalty_window_size=-1,
  penalty=1.1, N=2401, seg_threshold=0.01)` (llm2TTS) yields 24 kHz tensors [1, 1, n].
- `FakeVAD.predict(audio)` (web.vad.VAD) on 2560 samples at 16 kHz -> {"status": "sl"/"cl"/"el"/None,
  "feature_last_chunk", "feature", "history_feature"}; `reset_vad()`, `get_chunk_size()`, `in_dialog`.

Deterministic behaviour, easy to place in time. The VAD hears a chunk above an RMS floor; it says "sl" at speech
start and "el" after 13 quiet chunks (about its 2 s), like Silero's iterator. The state head says "ss" once it has
heard at least MIN_TURN loud chunks and then END_QUIET quiet ones, "el" for a shorter burst. An answer is one of
two scripts, drawn with torch's generator; the speech decoder says each character in SAMPLES_PER_CHAR samples:
LEAD quiet samples (below the server's 0.03 split level) then CLICK, then its voice (real speech, repeated as
needed, so the runner's VAD hears it) or a square wave of LEVEL.
`clock.decisions` records (chunk, "ss"/"el") with the chunk index counted by the VAD.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from adapters.freeze_omni import FreezeOmniParts

CHUNK = 2560
HEARD_RMS = 0.01
MIN_TURN, END_QUIET, VAD_END_QUIET = 4, 3, 13
DIM = 896
CHECKPOINT_ROLE = "<the checkpoint's chat_template role>"  # what role=None selects (models/audioLLM.py:224-225)
SAMPLES_PER_CHAR = 3600
LEAD, LEAD_LEVEL, CLICK, LEVEL = 240, 0.001, 0.9, 0.25
SCRIPTS = (
    ["Sure", ",", " I", " can", " help", " with", " that", ".", " What", " do", " you", " need", "?"],
    ["Of", " course", ",", " go", " ahead", ".", " I", " am", " listening", "."],
)
VOCAB = ["<eod>"] + sorted({p for s in SCRIPTS for p in s})
EOD = 0
SERVER = {"decoder_top_k": 2, "decoder_first_chunk_size": 20, "decoder_chunk_size": 40,
          "decoder_chunk_overlap_size": 10, "decoder_penalty_window_size": -1, "decoder_penalty": 1.1,
          "decoder_N": 2401, "decoder_seg_threshold_first_pack": 0.1, "decoder_seg_threshold": 0.015}


@dataclass
class Clock:
    chunk: int = -1  # index of the chunk the VAD last saw
    decisions: list[tuple[int, str]] = field(default_factory=list)


class FakeTokenizer:
    eod_id = EOD

    def encode(self, text: str) -> list[int]:
        return [1 + ord(c) % 997 for c in text]

    def decode(self, ids: list[Any], skip_special_tokens: bool = True) -> str:
        return "".join(VOCAB[int(i)] for i in ids if not (skip_special_tokens and int(i) == EOD))


class FakeEmbedding:
    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.dim() != 1:
            raise ValueError(f"embed_tokens got ids of shape {tuple(ids.shape)}")
        return ids.float().unsqueeze(-1).expand(-1, DIM) / 1000.0


class _Namespace:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class FakePipeline:
    def __init__(self, clock: Clock, generate_error: bool = False) -> None:
        self.clock = clock
        self.generate_error = generate_error
        self.roles: list[str | None] = []
        self.model = _Namespace(tokenizer=FakeTokenizer(),
                                llm_decoder=_Namespace(model=_Namespace(embed_tokens=FakeEmbedding())))

    def speech_dialogue(self, audio: Any, role: str | None = None, stat: str = "sl", past_key_values: Any = None,
                        last_id: Any = None, past_tokens: list[Any] | None = None, adapter_cache: Any = None,
                        encoder_cache: Any = None, pe_index: int = 0) -> dict[str, Any]:
        if stat == "pre":
            if past_key_values is not None:
                raise AssertionError("past key values already exist!!!")
            self.roles.append(CHECKPOINT_ROLE if role is None else role)
            return dict(past_key_values={"role": role, "n": 1}, stat="sl", last_id=None, adapter_cache=None,
                        encoder_cache=None, pe_index=0)
        if past_key_values is None:
            raise AssertionError("must set system role first!!!")
        kv = dict(past_key_values, n=past_key_values["n"] + 1)
        if stat in ("sl", "cl"):
            if not isinstance(audio, torch.Tensor) or tuple(audio.shape) != (1, 19, 80):
                raise ValueError(f"expected fbank features [1, 19, 80], got {getattr(audio, 'shape', audio)}")
            heard = dict(encoder_cache or {"loud": 0, "quiet": 0})
            if float(audio.mean()) > HEARD_RMS:
                heard["loud"], heard["quiet"] = heard["loud"] + 1, 0
            elif heard["loud"]:
                heard["quiet"] += 1
            new = "cl"
            if heard["loud"] and heard["quiet"] >= END_QUIET:
                new = "ss" if heard["loud"] >= MIN_TURN else "el"
                self.clock.decisions.append((self.clock.chunk, new))
            return dict(past_key_values=kv, stat=new, last_id=None, adapter_cache=heard["loud"],
                        encoder_cache=heard, pe_index=pe_index + 1)
        if self.generate_error:
            raise RuntimeError("CUDA error: device-side assert triggered")
        if stat == "ss":
            kv["script"], kv["pos"] = int(torch.randint(0, len(SCRIPTS), (1,)).item()), 0
        elif stat != "cs" or last_id is None:
            raise ValueError(f"speech_dialogue: stat {stat!r} with last_id {last_id!r}")
        script = SCRIPTS[kv["script"]]
        if kv["pos"] >= len(script):  # the end of the answer: back to listening
            return dict(past_key_values=kv, stat="sl", last_id=None, adapter_cache=adapter_cache,
                        encoder_cache=encoder_cache, pe_index=pe_index)
        token = VOCAB.index(script[kv["pos"]])
        kv["pos"] += 1
        tokens = (past_tokens if past_tokens is not None else []) + [torch.tensor(token)]
        return dict(past_key_values=kv, stat="cs", last_id=torch.tensor([[token]]), adapter_cache=adapter_cache,
                    encoder_cache=encoder_cache, pe_index=pe_index,
                    hidden_state=torch.full((1, 1, DIM), token / 100.0), text=self.model.tokenizer.decode(tokens),
                    past_tokens=tokens)

    def post_process(self, text: str) -> str:
        text = text.replace("\n", "").strip()
        return text if not text or text[-1] in ".?!" else text + "."


class FakeTTS:
    def __init__(self, voice: np.ndarray | None = None, clock: Clock | None = None) -> None:
        self.voice = voice  # what it sounds like (24 kHz, repeated as needed): real speech or a square wave
        self.clock = clock
        self.calls: list[dict[str, Any]] = []
        self.said: list[tuple[int, np.ndarray]] = []  # (chunk of the VAD clock, audio) per call

    def run(self, hidden: torch.Tensor, top_k: int, prefix: torch.Tensor, codec_chunk_size: int = 40,
            codec_padding_size: int = 10, penalty_window_size: int = -1, penalty: float = 1.1, N: int = 2401,
            seg_threshold: float = 0.01) -> Any:
        for what, x in (("hidden", hidden), ("prefix", prefix)):
            if x.dim() != 3 or x.shape[0] != 1 or x.shape[2] != DIM:
                raise ValueError(f"{what} must be [1, T, {DIM}], got {tuple(x.shape)}")
        self.calls.append({"chars": hidden.shape[1], "chunk": codec_chunk_size, "threshold": seg_threshold,
                           "top_k": top_k, "padding": codec_padding_size, "N": N})
        n = hidden.shape[1] * SAMPLES_PER_CHAR
        if self.voice is None:
            x = np.where(np.arange(n) % 2 == 0, LEVEL, -LEVEL).astype(np.float32)
        else:
            x = np.resize(np.asarray(self.voice, np.float32), n)
        x[:LEAD] = LEAD_LEVEL
        x[LEAD] = CLICK
        self.said.append((self.clock.chunk if self.clock else -1, x.copy()))
        step = codec_chunk_size * 600
        for a in range(0, n, step):
            yield torch.from_numpy(x[a:a + step].copy()).reshape(1, 1, -1)


class FakeVAD:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.in_dialog = False
        self.reset_vad()

    def get_chunk_size(self) -> int:
        return CHUNK

    def reset_vad(self) -> None:
        self.heard: list[np.ndarray] = []  # every chunk given to predict since the reset
        self.history: list[np.ndarray] = [np.zeros((1, 19, 80), np.float32) for _ in range(10)]
        self.triggered = False
        self.quiet = 0
        self.in_dialog = False
        self.clock.chunk = -1

    def _iterate(self, loud: bool) -> str | None:
        """Silero's VADIterator in short: "start" on the first loud chunk, "end" after VAD_END_QUIET quiet ones."""
        if loud:
            self.quiet = 0
            if not self.triggered:
                self.triggered = True
                return "start"
            return None
        if self.triggered:
            self.quiet += 1
            if self.quiet >= VAD_END_QUIET:
                self.triggered, self.quiet = False, 0
                return "end"
        return None

    def predict(self, audio: np.ndarray) -> dict[str, Any]:
        audio = np.asarray(audio)
        if audio.dtype != np.float32 or audio.shape != (CHUNK,):
            raise ValueError(f"VAD.predict wants {CHUNK} float32 samples at 16 kHz, got {audio.dtype} {audio.shape}")
        self.clock.chunk += 1
        self.heard.append(audio.copy())
        rms = float(np.sqrt(np.mean(audio.astype(np.float64) ** 2)))
        feature = np.full((1, 19, 80), rms, np.float32)
        event = self._iterate(rms > HEARD_RMS)
        status = None
        if self.in_dialog:
            status = "el" if event == "end" else "cl"
        else:
            if event == "start":
                status, self.in_dialog = "sl", True
            else:
                self.history = self.history[1:] + [feature]
        out: dict[str, Any] = {"status": status}
        if status == "sl":
            out["feature_last_chunk"] = [h.tolist() for h in self.history[-6:]]
        elif status in ("cl", "el"):
            out["feature_last_chunk"] = None
        if status is not None:
            out["feature"] = feature.tolist()
            out["history_feature"] = [h.tolist() for h in self.history]
        return out


@dataclass
class FakeFreezeOmni:
    clock: Clock
    pipeline: FakePipeline
    tts: FakeTTS
    vad: FakeVAD

    def parts(self) -> FreezeOmniParts:
        return FreezeOmniParts(pipeline=self.pipeline, tts=self.tts, vad=self.vad, server=dict(SERVER))


def fake_freeze_omni(voice: np.ndarray | None = None, generate_error: bool = False) -> FakeFreezeOmni:
    clock = Clock()
    return FakeFreezeOmni(clock, FakePipeline(clock, generate_error), FakeTTS(voice, clock), FakeVAD(clock))
