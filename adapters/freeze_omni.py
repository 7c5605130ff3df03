"""`freeze-omni`: Freeze-Omni (VITA-MLLM/Freeze-Omni) run the way its real-time server runs one user
(docs/adding-a-model.md).

Freeze-Omni is not a pip package: its code is the repository's top-level `models` and `web` packages, imported
with the repository on PYTHONPATH (its README: `export PYTHONPATH=./:$PYTHONPATH`), or `repo_dir=` here. What is
loaded is what bin/server.py loads:
- `models.pipeline.inferencePipeline(args)` — speech encoder + frozen LLM + state head; `args` carries
  model_path (the checkpoint folder), llm_path (Qwen2-7B-Instruct), top_p, top_k, temperature;
- `models.decoder.llm2tts.llm2TTS(model_path)` — the AR speech decoder and codec (24 kHz out);
- `web.vad.VAD()` — Silero VAD plus the 80-bin fbank features of each 160 ms chunk (2560 samples at 16 kHz);
- `<model_path>/server.json` — the speech decoder's chunking settings.

Its duplex state machine (bin/server.py `send_pcm` / `llm_prefill` / `generate` / `decoder`), replayed here on
the virtual clock, one 160 ms chunk at a time:
- listen: on the VAD's speech start ("sl") the LLM is fed the last 6 cached chunks and this one, then every chunk
  while the VAD hears the user ("cl"); after each, its state head says keep listening ("cl"), the user's turn is
  over and it should speak ("ss"), or this speech is not for it ("el"). The VAD ending ("el", 2 s of silence)
  also ends listening.
- speak: on "ss" the LLM writes its answer token by token ("cs") until it ends ("sl") or 500 tokens; the text is
  cut at punctuation and each piece is spoken by the speech decoder; its audio is played frame by frame.
- interrupt: an "ss" while the model is still being played stops that playback (the server's `interrupt()` and
  the client's `stop_tts`) and the new answer starts.

The role: the server prefills its own assistant role for every user (web/parms.py:43-49, "You are a helpful voice
assistant. ... Your name is Xiao Yun. Your inventor is Tencent.", the indentation of its continued string literal
included) and replaces it only when the client sends a prompt (`set_prompt`, web/parms.py:54-55, bin/server.py:377-383).
A case's system prompt is that client prompt; without one the server's role is prefilled (`default_role`), never
`role=None`, which would select the checkpoint's training role instead (models/audioLLM.py:219-225), a prefix no
entry point of the repository uses (bin/inference.py:120 prefills "You are a helpful assistant.").

Checked against VITA-MLLM/Freeze-Omni@3e17af43 (`UPSTREAM`; docs/models.md#freeze-omni lists each file:line).

On the virtual clock the model is infinitely fast: its whole answer is written and spoken the moment it decides
to speak, and it starts at the end of the 160 ms chunk that made it decide (adapters/chunking.py): chunk k ends
at session sample (k + 1) * 3840. So the context it listens with afterwards holds its whole answer, even when
the user cuts the playback short; a live server would have written less by then. The per-step compute time of
that step shows what it cost.

Tested against an API fake (tests/fake_freeze_omni.py), not the real weights: see docs/models.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adapters.chunking import ChunkedAgent, ChunkGatherer, Playback
from adapters.model_code import model_code
from adapters.upstream import Pin, git_head, hf_snapshot_revision, provenance
from dataset_builder.audio import SESSION_SR
from dataset_builder.errors import UsageError

# The code this adapter was written against. The checkpoint (VITA-MLLM/Freeze-Omni on the hub) and Qwen2-7B-Instruct
# are local folders; their hub revision is recorded when they are hub cache snapshots.
UPSTREAM: tuple[Pin, ...] = (Pin("git", "VITA-MLLM/Freeze-Omni", "3e17af43b4fe64ba9609b4e1ba94c443c45101c0"),)
# web/parms.py:44-48: the role the server prefills for every user. Its string literal continues over four lines with
# a backslash, so each line's 77 spaces of indentation are part of the role the model hears.
SERVER_ROLE = (" " * 77).join(("You are a helpful voice assistant.",
                                "Your answer should be coherent, natural, simple, complete.",
                                "Your name is Xiao Yun.", "Your inventor is Tencent."))
IN_RATE = 16_000
CHUNK_S = 0.16  # web/vad.py: CHUNK = frame_shift (160) * chunk_size (16) samples at 16 kHz
TTS_DIM = 896  # bin/server.py decoder(): the speech decoder reads the LLM's states as rows of 896
MAX_TOKENS = 500  # bin/server.py generate(): an answer stops after this many tokens
HISTORY_CHUNKS = 6  # web/vad.py: on speech start the last 6 cached chunks are fed first (in predict())
FIRST_SPLIT_LEVEL = 0.03  # bin/server.py decoder(): the first audio of an answer starts at its first |x| > 0.03
# bin/server.py generate(): the first piece (or a long one) may end at a comma, the others at a sentence end.
ANY_BREAK = (",", "，", "。", "：", "？", "！", ".", ":", "?", "!", "\n")
SENTENCE_BREAK = ("。", "：", "？", "！", ".", "?", "!", "\n")
MIN_PIECE_TOKENS = 4
LONG_PIECE_TOKENS = 20
SERVER_KEYS = ("decoder_first_chunk_size", "decoder_chunk_size", "decoder_chunk_overlap_size", "decoder_top_k",
               "decoder_penalty_window_size", "decoder_penalty", "decoder_N", "decoder_seg_threshold_first_pack",
               "decoder_seg_threshold")


class FreezeOmniError(RuntimeError):
    """The model answered outside its API: the episode fails with this reason."""


@dataclass
class FreezeOmniParts:
    """What bin/server.py builds for one user: the pipeline, the speech decoder, the VAD, and server.json."""

    pipeline: Any
    tts: Any
    vad: Any
    server: dict[str, Any]
    # What was loaded against `UPSTREAM` (load_parts fills it; built parts, a test double, have none).
    upstream: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        missing = [k for k in SERVER_KEYS if k not in self.server]
        if missing:
            raise UsageError(f"freeze-omni: server.json lacks {missing}")


def load_parts(checkpoint_dir: str, llm_path: str, repo_dir: str | None = None, top_p: float = 0.8,
               top_k: int = 20, temperature: float = 0.8) -> FreezeOmniParts:
    """The real model from its checkpoint folder and the Qwen2-7B-Instruct folder, with the repository's code
    (on PYTHONPATH, or `repo_dir`). Its pipeline and decoder place themselves on CUDA."""
    if repo_dir is not None and not (Path(repo_dir) / "models" / "pipeline.py").is_file():
        raise UsageError(f"freeze-omni: repo_dir {repo_dir} is not a Freeze-Omni checkout (no models/pipeline.py)")
    with model_code("freeze-omni", repo_dir, "Freeze-Omni's code", "a checkout of github.com/VITA-MLLM/Freeze-Omni "
                    "on PYTHONPATH or repo_dir=DIR, and its requirements.txt"):
        from models.decoder.llm2tts import llm2TTS
        from models.pipeline import inferencePipeline
        from web.vad import VAD
    server_json = Path(checkpoint_dir) / "server.json"
    if not server_json.is_file():
        raise UsageError(f"freeze-omni: no {server_json}; checkpoint_dir must be the downloaded checkpoints folder")
    args = argparse.Namespace(model_path=str(checkpoint_dir), llm_path=str(llm_path), top_p=top_p, top_k=top_k,
                              temperature=temperature)
    parts = FreezeOmniParts(pipeline=inferencePipeline(args), tts=llm2TTS(str(checkpoint_dir)), vad=VAD(),
                            server=json.loads(server_json.read_text()))
    checkout = Path(sys.modules["models.pipeline"].__file__ or ".").resolve().parent.parent
    parts.upstream = [provenance("freeze-omni", UPSTREAM[0], git_head(checkout), f"the Freeze-Omni code at {checkout}")]
    parts.upstream += [{"repo": str(path), "kind": "hf", "pinned": None, "used": hf_snapshot_revision(path),
                        "matches": None} for path in (checkpoint_dir, llm_path)]
    return parts


class FreezeOmniAgent(ChunkedAgent):
    """Freeze-Omni, one user per case. `parts` are built parts (what `load_parts` returns); without them the real
    model is loaded from `checkpoint_dir` and `llm_path`."""

    name = "freeze-omni"
    error = FreezeOmniError
    version = "1"
    sample_rate = SESSION_SR
    realtime = False
    capabilities = frozenset({"system_prompt", "text_output"})
    chunk_s = CHUNK_S  # it hears, and can decide, every 160 ms: its inherent latency

    def __init__(self, checkpoint_dir: str = "checkpoints", llm_path: str = "Qwen2-7B-Instruct",
                 repo_dir: str | None = None, top_p: float = 0.8, top_k: int = 20, temperature: float = 0.8,
                 frame_size: int = 480, device: str = "cuda", default_role: str = SERVER_ROLE,
                 parts: FreezeOmniParts | None = None) -> None:
        if not default_role.strip():
            raise UsageError("freeze-omni: default_role must be a role text (the server always prefills one)")
        self.default_role = default_role
        self.sampling = {"top_p": top_p, "top_k": top_k, "temperature": temperature}
        self.frame_size = frame_size
        self.device = device
        self.gatherer = ChunkGatherer(CHUNK_S, self.sample_rate, frame_size, IN_RATE)
        self.playback = Playback()
        self.parts: FreezeOmniParts | None = parts or load_parts(checkpoint_dir, llm_path, repo_dir, top_p, top_k,
                                                                 temperature)
        self.listening: dict[str, Any] | None = None
        self.spoken: dict[str, Any] = {}

    def runtime(self) -> dict[str, Any]:
        """The role prefilled without a case prompt, the sampling, the speech decoder's settings, and what was
        loaded against `UPSTREAM`, for each rec.json."""
        parts = self._parts()
        return {"default_role": self.default_role, "sampling": self.sampling, "server_json": parts.server,
                "chunk_s": CHUNK_S, "upstream": parts.upstream}

    def _parts(self) -> FreezeOmniParts:
        if self.parts is None:
            raise FreezeOmniError("the agent is closed")
        return self.parts

    def reset(self, system_prompt: str | None, seed: int) -> None:
        import torch

        torch.manual_seed(seed)  # the LLM and the speech decoder sample with torch
        parts = self._parts()
        self.gatherer.reset()
        self.playback.stop()
        parts.vad.reset_vad()
        # A new user: the system role is prefilled (stat "pre"): the case's prompt, as the client's set_prompt sends
        # it, else the server's own role (web/parms.py:43-55).
        self.spoken = parts.pipeline.speech_dialogue(None, stat="pre", role=system_prompt or self.default_role)
        self.listening = None

    def _hear(self, chunk: np.ndarray) -> None:
        """One 160 ms chunk through the VAD and, while the user talks, the LLM (server.py send_pcm)."""
        parts = self._parts()
        res = parts.vad.predict(np.float32(chunk))
        status = res.get("status")
        if status == "sl":
            # Listening starts from the state after the model's last answer, with fresh encoder caches.
            state = deepcopy(self.spoken)
            for key in ("text", "hidden_state"):
                state.pop(key, None)
            state.update(adapter_cache=None, encoder_cache=None, pe_index=0, stat="sl", last_id=None)
            self.listening = state
            for i, feature in enumerate(res["feature_last_chunk"]):
                self._prefill("sl" if i == 0 else "cl", feature, first_pack=True)
            self._prefill("cl", res["feature"])
        elif status in ("cl", "el"):
            if self.listening is None:
                raise FreezeOmniError(f"the VAD said {status!r} at chunk {self.gatherer.chunks - 1} before any "
                                      "speech start")
            self._prefill(status, res["feature"])

    def _prefill(self, status: str, feature: Any, first_pack: bool = False) -> None:
        """One chunk of features into the LLM and what its state head decides (server.py llm_prefill)."""
        import torch

        parts = self._parts()
        state = self.listening
        assert state is not None
        if status == "sl":
            state = parts.pipeline.speech_dialogue(torch.tensor(feature), **state)
        elif status == "el":
            parts.vad.in_dialog = False
        elif status == "cl":
            if state["stat"] == "cl":
                state = parts.pipeline.speech_dialogue(torch.tensor(feature), **state)
            if first_pack:
                state["stat"] = "cl"  # the cached chunks before speech start never end a turn
            if state["stat"] == "el":  # heard, judged not to be a turn for the model
                parts.vad.in_dialog = False
            if state["stat"] == "ss":
                self.playback.stop()  # interrupt: what is still queued of an earlier answer is never played
                parts.vad.in_dialog = False
                self.listening = state
                self._answer(deepcopy(state))
                return
        self.listening = state

    def _answer(self, state: dict[str, Any]) -> None:
        """Write the whole answer and speak it piece by piece (server.py generate)."""
        pipeline = self._parts().pipeline
        state = pipeline.speech_dialogue(None, **state)  # "ss": the chat suffix, then the first token
        hidden: list[Any] = []
        piece, last_text, n_audio = "", "", 0
        if state.get("stat") == "cs":
            hidden.append(state["hidden_state"])
            while len(state["past_tokens"]) <= MAX_TOKENS:
                state.pop("text")
                state.pop("hidden_state")
                state = pipeline.speech_dialogue(None, **state)
                if state.get("stat") != "cs":
                    break
                hidden.append(state["hidden_state"])
                delta = state["text"][len(last_text):]
                if "\ufffd" in delta:
                    continue  # a token that ends inside a character: wait for the rest of it
                piece += delta
                breaks = ANY_BREAK if n_audio == 0 or len(hidden) >= LONG_PIECE_TOKENS else SENTENCE_BREAK
                if delta.endswith(breaks) and len(hidden) >= MIN_PIECE_TOKENS \
                        and not (delta.endswith(".") and last_text[-1:].isdigit()):
                    n_audio = self._say(hidden, piece, n_audio)
                    piece, hidden = "", []
                last_text = state["text"]
        if hidden:
            self._say(hidden, piece, n_audio)
        self.spoken = state

    def _say(self, hidden: list[Any], text: str, n_audio: int) -> int:
        """One piece of text through the speech decoder into the playback (server.py decoder); returns the number
        of audio segments of this answer so far."""
        import torch

        parts = self._parts()
        spoken = parts.pipeline.post_process(text)
        if not spoken.strip():
            return n_audio  # nothing to say (a piece of bare special tokens)
        states = torch.cat(hidden).squeeze(1)
        ids = torch.tensor(parts.pipeline.model.tokenizer.encode(spoken)).to(self.device)
        embeddings = parts.pipeline.model.llm_decoder.model.embed_tokens(ids)
        first = n_audio == 0
        cfg = parts.server
        segments = parts.tts.run(
            embeddings.reshape(-1, TTS_DIM).unsqueeze(0), cfg["decoder_top_k"],
            states.reshape(-1, TTS_DIM).unsqueeze(0),
            cfg["decoder_first_chunk_size"] if first else cfg["decoder_chunk_size"], cfg["decoder_chunk_overlap_size"],
            cfg["decoder_penalty_window_size"], cfg["decoder_penalty"], cfg["decoder_N"],
            cfg["decoder_seg_threshold_first_pack"] if first else cfg["decoder_seg_threshold"])
        mark: str | None = text
        for seg in segments:
            audio = np.asarray(seg.squeeze().float().cpu().numpy(), np.float32).reshape(-1)
            if n_audio == 0:
                loud = np.flatnonzero(np.abs(audio) > FIRST_SPLIT_LEVEL)
                if loud.size:
                    audio = audio[loud[0]:]
            if not np.all(np.isfinite(audio)):
                raise FreezeOmniError("the speech decoder gave non-finite samples")
            n_audio += 1
            self.playback.say(audio, mark)
            mark = None
        self.playback.say(None, mark)  # text whose audio never came still lands where its audio would have
        return n_audio

    def close(self) -> None:
        self.parts = None
        self.playback.stop()
