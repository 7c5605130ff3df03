"""`fun-audio-chat`: Fun-Audio-Chat (FunAudioLLM), DSB-IFEval's turn-based speech-to-speech system, through the
generic `turn-based` wrapper with the settings of the paper's harness (docs/models.md#fun-audio-chat-fun-audio-chat).

Its public code (github.com/FunAudioLLM/Fun-Audio-Chat: `funaudiochat/`, `utils/cosyvoice_detokenizer.py`,
`examples/infer_s2s.py`) answers one user turn like this: `register_funaudiochat()` registers its classes with
transformers; `AutoProcessor` and `AutoModelForSeq2SeqLM.from_pretrained(path, torch_dtype=bfloat16)` load the
processor and the model; the conversation (a system message, then per user turn the audio placeholder, with the
earlier replies' text as assistant messages) goes through `processor.apply_chat_template(..., tokenize=False)` and
`processor(text=..., audio=[16 kHz float arrays, one per placeholder])`; `model.generate(**inputs, **gen_kwargs)`
returns (text ids after the prompt, speech ids); the speech ids in CosyVoice3's vocabulary (0-6560) become audio
through `token2wav(cosyvoice3, tokens, embedding=None, token_hop_len=750, pre_lookahead_len=3)` with a
`CosyVoice3` detokenizer (`Fun-CosyVoice3-0.5B-2512`, its own `sample_rate`, 24 kHz). Sampling draws from torch's
global generator, so `reset` seeds it.

What DSB-IFEval's harness did (its appendix D.5, and D.1: the turn-based adapters "respond after the full input" and
"use a 1.0 s trailing segment"; it reports Take Turn 50.0 for this model): bf16 `AutoModelForSeq2SeqLM`, CosyVoice3
detokenizer, user audio at 16 kHz, the conditioning prompt appended once to the system prompt, at most 2048 new
tokens with the repository's decoding defaults, the reply resampled to 24 kHz; the reply is never cut (it cannot
listen while it speaks). `FunAudioChatAgent` is `turn-based` with exactly that by default (`handover="paper"`): a
user's input is handed over once it has been followed by 1.0 s of quiet, with that 1.0 s trailing segment, and the
reply follows at once (`barge_in_stop_s=-1`). TAKE_TURN is scored inside a pause of the user's turn
(dataset_builder/ifeval/DESIGN.md, "Trigger events and windows"), so the paper's 50.0 is reachable only by a model
that was handed the input before the pause; `handover="whole-turn"` instead waits `END_OF_TURN_S` = 16 s of quiet
(longer than any pause DSB-IFEval puts inside a turn), so each scripted turn reaches the model whole and Take Turn
is 0 by construction.

Checked against FunAudioLLM/Fun-Audio-Chat@8ba984b6 (`UPSTREAM`; docs/models.md#fun-audio-chat-fun-audio-chat lists
each file:line): the loader imports `utils.cosyvoice_detokenizer` before anything of CosyVoice's, because that module
is what puts `third_party/CosyVoice` and its Matcha-TTS on sys.path (utils/cosyvoice_detokenizer.py:24-30) and the
README's set-up puts only the checkout itself there (README.md:123, `export PYTHONPATH` to its folder); `CosyVoice3` is
taken from that module, as examples/infer_s2s.py's `get_audio_detokenizer` does.

`parts="module:function"` names a function that returns already built `FunAudioChatParts` (the tests name a fake
of the library written from its public code, tests/fake_fun_audio_chat.py); without it the real ones are loaded
from a checkout of the repository (`repo_dir=` or PYTHONPATH).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adapters.model_code import model_code
from adapters.turn_based import Reply, TurnBasedAgent, with_trailing
from adapters.upstream import Pin, git_head, hf_snapshot_revision, provenance
from dataset_builder.audio import resample
from dataset_builder.errors import UsageError

# What this adapter was written against: the repository and its CosyVoice submodule (third_party/CosyVoice at that
# commit). The weights' Hugging Face revision is not pinned (none could be read here): what was loaded is recorded.
UPSTREAM: tuple[Pin, ...] = (Pin("git", "FunAudioLLM/Fun-Audio-Chat", "8ba984b64b4880918db2807e08d795475481200c"),
                             Pin("git", "FunAudioLLM/CosyVoice", "2db78e705835e56778f69b80cae51e4314d635b0"))
MODEL_REPO = "FunAudioLLM/Fun-Audio-Chat-8B"
DETOKENIZER_REPO = "FunAudioLLM/Fun-CosyVoice3-0.5B-2512"
INPUT_SR = 16_000  # the model's audio encoder (Whisper features) and DSB-IFEval's harness
# Fun-Audio-Chat's utils/constant.py: the mode prompt that asks for a spoken reply, the audio placeholder of a user
# turn, and the decoding defaults (DEFAULT_S2M_GEN_KWARGS, DEFAULT_SP_GEN_KWARGS) as examples/infer_s2s.py sets
# them (greedy text, max_new_tokens 2048, which DSB-IFEval's harness also used).
S2M_PROMPT = "You are asked to generate both text and speech tokens at the same time."
AUDIO_TEMPLATE = "<|audio_bos|><|AUDIO|><|audio_eos|>"
GEN_KWARGS: dict[str, Any] = {"do_sample": True, "temperature": 0.8, "top_p": 0.9, "top_k": 0, "num_beams": 1,
                              "max_new_tokens": 2048, "repetition_penalty": 1.2, "length_penalty": 1.0,
                              "eos_token_id": 151645, "pad_token_id": 151643}
SP_GEN_KWARGS: dict[str, Any] = {"text_greedy": True, "only_crq_sampling": True, "disable_speech": False,
                                 "force_text_abos": True}
SPEECH_VOCAB = 6561  # CosyVoice3's speech tokens are 0..6560; the other ids the model emits are control tokens
TOKEN_HOP_LEN, PRE_LOOKAHEAD_LEN = 25 * 30, 3  # token2wav as the example calls it: 30 s of 25 Hz tokens per chunk
HISTORY_TURNS = 8  # the repository's web demo keeps the latest 8 rounds (utils/constant.py MAX_HISTORY_TURNS)
# DSB-IFEval's harness gave a turn-based model each turn with a 1.0 s trailing segment (DSB-IFEval D.1); the wrapper
# hands over the turn with all the quiet that ended it, so the quiet after the last sound above -60 dBFS is cut to this
# (`with_trailing`).
TRAILING_S = 1.0
# DSB-IFEval's longest pause inside a user turn is R4_A's 12 s, drawn up to 1.3x (15.6 s;
# dataset_builder/ifeval/DESIGN.md "Written durations"): the quiet after which "whole-turn" hands a turn over.
END_OF_TURN_S = 16.0
# DSB-IFEval's harness streamed user audio to every model in 20 ms PCM16 frames of 480 samples (its appendix D.1): the
# wrapper hears, and can end a turn and start a reply, at that granularity.
FRAME_SIZE = 480
# The end-of-turn quiet of each handover: the paper's harness (input, then its 1.0 s trailing segment), or whole turns.
HANDOVERS = {"paper": TRAILING_S, "whole-turn": END_OF_TURN_S}


@dataclass
class FunAudioChatParts:
    model: Any  # FunAudioChatForConditionalGeneration: sp_gen_kwargs, device, generate(**inputs, **gen_kwargs)
    processor: Any  # FunAudioChatProcessor: apply_chat_template, __call__(text=, audio=), decode
    detokenizer: Any  # CosyVoice3: sample_rate
    token2wav: Callable[..., Any]  # utils.cosyvoice_detokenizer.token2wav(detokenizer, tokens, ...) -> [1, n]


def import_code(repo_dir: str | None) -> tuple[Callable[[], None], Any, Callable[..., Any]]:
    """`register_funaudiochat`, `CosyVoice3` and `token2wav` from a checkout, in the repository's own order:
    CosyVoice3 comes from `utils.cosyvoice_detokenizer`, never from `cosyvoice` directly: importing that module is
    what puts third_party/CosyVoice (and its Matcha-TTS) on sys.path (utils/cosyvoice_detokenizer.py:24-30 at the
    pinned commit), and CosyVoice3 is a name it imported."""
    with model_code("fun-audio-chat", repo_dir and Path(repo_dir).resolve(), "Fun-Audio-Chat's code",
                    "a checkout of github.com/FunAudioLLM/Fun-Audio-Chat with its submodules, as repo_dir=DIR or on "
                    "PYTHONPATH, and its requirements.txt"):
        from funaudiochat.register import register_funaudiochat  # type: ignore[import-not-found]
        from utils import cosyvoice_detokenizer  # type: ignore[import-not-found]
    return register_funaudiochat, cosyvoice_detokenizer.CosyVoice3, cosyvoice_detokenizer.token2wav


def checkout_of(module: Any) -> Path:
    """The checkout a module of the repository was imported from (utils/ is at its top)."""
    return Path(module.__file__).resolve().parent.parent


def local_weights(path: str, revision: str | None) -> str:
    """A local folder as it is; a hub id as its snapshot at `revision` (None: the newest), downloaded once."""
    if Path(path).is_dir():
        return path
    from huggingface_hub import snapshot_download

    return str(snapshot_download(path, revision=revision))


def load_parts(code: tuple[Callable[[], None], Any, Callable[..., Any]], model_path: str, detokenizer_path: str,
               device: str, dtype: str) -> FunAudioChatParts:
    """The real model, processor and detokenizer (`code` from `import_code`), loaded as the repository's
    examples/infer_s2s.py loads them."""
    register_funaudiochat, cosyvoice3, token2wav = code
    import torch
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoProcessor

    register_funaudiochat()
    config = AutoConfig.from_pretrained(model_path)
    processor = AutoProcessor.from_pretrained(model_path)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_path, config=config, torch_dtype=getattr(torch, dtype),
                                                  device_map=device)
    detokenizer = cosyvoice3(detokenizer_path, load_trt=False, load_vllm=False, fp16=False)
    # As the repository's get_audio_detokenizer() sets it for its token hop.
    detokenizer.model.flow.decoder.estimator.static_chunk_size = 2 * TOKEN_HOP_LEN
    return FunAudioChatParts(model, processor, detokenizer, token2wav)


def upstream_of(code: Path | None, model_path: str, detokenizer_path: str) -> list[dict[str, Any]]:
    """What was loaded against `UPSTREAM` (one log line for each that differs), and the weights' revisions as found."""
    repo, cosy = UPSTREAM
    found = [provenance("fun-audio-chat", repo, code and git_head(code), "the Fun-Audio-Chat checkout"),
             provenance("fun-audio-chat", cosy, code and git_head(code / "third_party" / "CosyVoice"),
                        "its third_party/CosyVoice")]
    return found + [{"repo": path, "kind": "hf", "pinned": None, "used": hf_snapshot_revision(path), "matches": None}
                    for path in (model_path, detokenizer_path)]


def built_parts(target: str) -> FunAudioChatParts:
    """`parts="module:function"`: the function's already built parts (a name, so it can travel in rec.json)."""
    module, _, func = target.partition(":")
    try:
        parts = getattr(importlib.import_module(module), func)()
    except (ImportError, AttributeError, ValueError) as err:
        raise UsageError(f"fun-audio-chat: parts={target!r} is not an importable 'module:function': {err}") from None
    if not isinstance(parts, FunAudioChatParts):
        raise UsageError(f"fun-audio-chat: parts={target!r} returned {type(parts).__name__}, not FunAudioChatParts")
    return parts


class FunAudioChat:
    """The inner model of `turn-based`: one user turn of 16 kHz audio in, Fun-Audio-Chat's spoken reply out.

    Within an episode the conversation goes on as in the repository's multi-turn example: each earlier turn's
    audio and the text of its reply stay in the prompt (the latest `history_turns` rounds, this one included).
    """

    sample_rate = INPUT_SR
    capabilities = frozenset({"system_prompt", "text_output"})

    def __init__(self, model_path: str | None = None, detokenizer_path: str | None = None, device: str | None = None,
                 dtype: str = "bfloat16", repo_dir: str | None = None, base_prompt: str = S2M_PROMPT,
                 max_new_tokens: int = 2048, gen_kwargs: dict[str, Any] | None = None,
                 history_turns: int = HISTORY_TURNS, trailing_s: float | None = TRAILING_S,
                 revision: str | None = None, parts: str | None = None) -> None:
        if history_turns < 1 or max_new_tokens < 1 or (trailing_s is not None and trailing_s < 0):
            raise UsageError("fun-audio-chat: history_turns and max_new_tokens must be >= 1, trailing_s >= 0")
        if dtype not in ("bfloat16", "float16", "float32"):
            raise UsageError(f"fun-audio-chat: dtype must be bfloat16, float16 or float32, got {dtype!r}")
        self.model_path = model_path or _in_checkout(repo_dir, "Fun-Audio-Chat-8B", MODEL_REPO)
        self.detokenizer_path = detokenizer_path or _in_checkout(repo_dir, "Fun-CosyVoice3-0.5B-2512",
                                                                 DETOKENIZER_REPO)
        self.revision = revision
        if parts is None:
            import torch

            self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
            code = import_code(repo_dir)  # first: without the code nothing is downloaded
            self.model_path = local_weights(self.model_path, revision)
            self.detokenizer_path = local_weights(self.detokenizer_path, None)
            self.parts = load_parts(code, self.model_path, self.detokenizer_path, self.device, dtype)
            self.version = f"fun-audio-chat:{self.model_path}"
            self.upstream = upstream_of(checkout_of(sys.modules["utils.cosyvoice_detokenizer"]), self.model_path,
                                        self.detokenizer_path)
        else:
            self.device, self.parts, self.version = device or "cpu", built_parts(parts), f"fun-audio-chat:{parts}"
            self.upstream = []  # built parts (a test double): no checkout or weights were loaded
        self.dtype, self.parts_target, self.base_prompt = dtype, parts, base_prompt
        self.gen_kwargs = {**GEN_KWARGS, "max_new_tokens": int(max_new_tokens), **(gen_kwargs or {})}
        self.history_turns, self.trailing_s = history_turns, trailing_s
        self.parts.model.sp_gen_kwargs.update(SP_GEN_KWARGS)
        self.system = base_prompt
        self.history: list[tuple[np.ndarray, str]] = []  # (16 kHz user turn, the text of the reply to it)

    def describe(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "detokenizer_path": self.detokenizer_path, "device": self.device,
                "dtype": self.dtype,
                "parts": self.parts_target, "base_prompt": self.base_prompt, "gen_kwargs": self.gen_kwargs,
                "sp_gen_kwargs": dict(self.parts.model.sp_gen_kwargs), "history_turns": self.history_turns,
                "trailing_s": self.trailing_s, "input_sr": INPUT_SR, "token_hop_len": TOKEN_HOP_LEN,
                "pre_lookahead_len": PRE_LOOKAHEAD_LEN, "speaker": "token2wav's default (embedding=None)",
                "revision": self.revision}

    def reset(self, system_prompt: str | None, seed: int) -> None:
        import torch

        torch.manual_seed(int(seed))
        # DSB-IFEval's harness: the case's conditioning prompt appended once to the system prompt.
        self.system = f"{self.base_prompt} {system_prompt}" if system_prompt else self.base_prompt
        self.history = []

    def reply(self, audio: np.ndarray, sr: int) -> Reply | None:
        import torch

        turn = resample(np.asarray(audio, np.float32).reshape(-1), sr, INPUT_SR)
        if self.trailing_s is not None:
            turn = with_trailing(turn, INPUT_SR, self.trailing_s)
        past = self.history[-(self.history_turns - 1):] if self.history_turns > 1 else []
        conversation: list[dict[str, str]] = [{"role": "system", "content": self.system}]
        for _, said in past:
            conversation += [{"role": "user", "content": AUDIO_TEMPLATE}, {"role": "assistant", "content": said}]
        conversation.append({"role": "user", "content": AUDIO_TEMPLATE})
        p = self.parts
        prompt = p.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
        inputs = p.processor(text=prompt, audio=[a for a, _ in past] + [turn], return_tensors="pt",
                             return_token_type_ids=False).to(p.model.device)
        with torch.no_grad():
            text_ids, speech_ids = p.model.generate(**inputs, **self.gen_kwargs)
        text = p.processor.decode(text_ids[0, inputs.input_ids.size(1):], skip_special_tokens=True).strip()
        self.history.append((turn, text))
        tokens = [t for t in speech_ids[0].tolist() if 0 <= t < SPEECH_VOCAB]
        if not tokens:
            return None
        with torch.no_grad():
            speech = p.token2wav(p.detokenizer, tokens, embedding=None, token_hop_len=TOKEN_HOP_LEN,
                                 pre_lookahead_len=PRE_LOOKAHEAD_LEN)
        return Reply(speech[0].float().cpu().numpy().astype(np.float32), int(p.detokenizer.sample_rate), text or None)

    def close(self) -> None:
        pass


def _in_checkout(repo_dir: str | None, name: str, repo_id: str) -> str:
    """The repository's README downloads the weights into its `pretrained_models/`; else the hub id."""
    local = Path(repo_dir or ".") / "pretrained_models" / name
    return str(local) if repo_dir and local.is_dir() else repo_id


class FunAudioChatAgent(TurnBasedAgent):
    """`turn-based` with Fun-Audio-Chat inside and DSB-IFEval's harness settings: the reply is never cut
    (`barge_in_stop_s=-1`) and a user's input is handed over after the quiet its `handover` names ("paper": the
    harness's 1.0 s trailing segment; "whole-turn": 16 s, each scripted turn whole), or after `end_of_turn_s` when
    given. Every other argument is Fun-Audio-Chat's own (`FunAudioChat`), recorded as the wrapper's `inner_args`."""

    name = "fun-audio-chat"

    def __init__(self, handover: str = "paper", end_of_turn_s: float | None = None, barge_in_stop_s: float = -1.0,
                 response_delay_s: float = 0.0, frame_size: int = FRAME_SIZE, **model_args: Any) -> None:
        if handover not in HANDOVERS:
            raise UsageError(f"fun-audio-chat: handover must be one of {sorted(HANDOVERS)}, got {handover!r}")
        known = set(inspect.signature(FunAudioChat).parameters)
        if unknown := sorted(set(model_args) - known):
            raise UsageError(f"fun-audio-chat does not take {unknown}; it takes handover, end_of_turn_s, "
                             f"barge_in_stop_s, response_delay_s, frame_size and Fun-Audio-Chat's {sorted(known)}")
        self.handover = handover
        super().__init__(inner=f"{__name__}:FunAudioChat", inner_args=model_args, frame_size=frame_size,
                         end_of_turn_s=HANDOVERS[handover] if end_of_turn_s is None else end_of_turn_s,
                         barge_in_stop_s=barge_in_stop_s, response_delay_s=response_delay_s)

    def runtime(self) -> dict[str, Any]:
        """The wrapper's record, the handover, and what was loaded against `UPSTREAM`."""
        return {**super().runtime(), "handover": self.handover, "upstream": self.model.upstream}
