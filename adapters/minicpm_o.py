"""`minicpm-o`: MiniCPM-o 4.5 in its full-duplex mode (docs/adding-a-model.md), adapted to the frame protocol by
buffering; or turn-based, as DSB-IFEval's harness ran it ("Modes" below; the default on DSB-IFEval).

The model's own duplex loop, as OpenBMB's code at OpenBMB/minicpm-o-4_5-pytorch-simple-demo@c7e16605 drives it
(`UPSTREAM`; its MiniCPMO45/ package holds the model code, MiniCPMO45/README.md "Duplex Streaming" and
core/processors/unified.py its callers; docs/models.md lists each file:line read):

    duplex = MiniCPMODuplex.from_pretrained(weights, device=..., attn_implementation=..., n_timesteps=5)
                                                               # bf16, init_tts(streaming=True) inside
    duplex.prepare(prefix_system_prompt="<|im_start|>system\n" + prompt + "\n<|audio_start|>",
                   suffix_system_prompt="<|audio_end|><|im_end|>", ref_audio=<16 kHz voice>, prompt_wav_path=<its wav>)
    for every 1 s of 16 kHz user audio:
        duplex.streaming_prefill(audio_waveform=chunk)           # {"success": bool, "reason": str, ...}
        duplex.streaming_generate(prompt_wav_path=..., max_new_speak_tokens_per_chunk=20, decode_mode=...)
            # {"is_listen": bool, "text": str, "audio_waveform": 24 kHz float32 | None, "end_of_turn": bool, ...}

`prepare` feeds its prefix's tokens verbatim (modeling_minicpmo.py:2584-2587), then the reference voice's audio
embedding, then the suffix: the system turn's markup is the caller's, and every OpenBMB caller writes it
(core/processors/unified.py:881-882, MiniCPMO45/README.md:199-200, modeling_minicpmo_unified.py:835-836), so the
voice sits inside `<|audio_start|>...<|audio_end|>` of the system turn. The adapter wraps the case's prompt the same
way (`system_turn`). The MiniCPM-o README's `AutoModel.from_pretrained(...).as_duplex()` path (OpenBMB/MiniCPM-o
README.md:1552-1567) runs the Hugging Face repository's remote code, which no copy readable here contains (its
`as_duplex` is in neither stored copy of the model code): this adapter drives the demo's own copy of the class
instead, whose every line was read, with the weights of `openbmb/MiniCPM-o-4_5`.

Here: 24 kHz session frames are gathered into 1 s chunks, resampled to 16 kHz and given to the model when a chunk
is complete (its mel processor takes the first padded chunk floored to its 160-sample hop, so 80 samples of every
second are heard with the next: processing_minicpmo.py:743-749); what it says (24 kHz, the session rate) is played
from a queue frame by frame, as the official demo's player plays speak results back to back and nothing for listen
results. The model decides once per second
on what it has heard, so a reply to speech that ends inside chunk k can start no earlier than the end of chunk k:
that 1 s chunking latency belongs to the model and is declared (`chunk_s`), not compensated. Audio the model
returns after chunk k starts exactly at session sample (k + 1) * 24000 (adapters/chunking.py): never in a frame
whose user audio it depends on (the one timing rule of docs/adding-a-model.md).

Modes (`mode`). DSB-IFEval's harness ran MiniCPM-o 4.5 "in turn-based streaming mode" (its appendix D.5: user audio
at 16 kHz, the conditioning prompt appended once to the system prompt, the response placed after generation,
sampling at temperature 0.5 with at most 4096 new tokens, each case stateless; D.1: it responds after the full input,
given with a 1.0 s trailing segment). "turn-based" is that: the `turn-based` wrapper (adapters/turn_based.py) hands
over the user's input once 1.0 s of quiet has followed it, with that 1.0 s trailing segment, and never cuts the reply
(`barge_in_stop_s=-1`: "it never suppresses, truncates, or constrains model output", D.2); the reply comes from
`MiniCPMOTurns`, OpenBMB's half-duplex speech conversation on the same weights:

    model = duplex.model          # the MiniCPMO inside MiniCPMODuplex (modeling_minicpmo.py:2361-2406)
    per case:  model.reset_session(reset_token2wav_cache=True); model.init_token2wav_cache(prompt_speech_16k=voice)
               model.streaming_prefill(session_id=..., msgs=[{"role": "system", "content": [
                   VOICE_PREFIX, voice, VOICE_SUFFIX, <the case's prompt>]}], omni_mode=False, is_last_chunk=True)
    per turn:  for every 1 s of the turn at 16 kHz (the last padded to 1 s):
                   model.streaming_prefill(session_id=..., msgs=[{"role": "user", "content": [chunk]}],
                                           omni_mode=False, is_last_chunk=<last>)
               for wav, text in model.streaming_generate(session_id=..., generate_audio=True, use_tts_template=True,
                                                         enable_thinking=False, do_sample=True, temperature=0.5,
                                                         max_new_tokens=4096, length_penalty=1.1): ...  # 24 kHz

as OpenBMB/MiniCPM-o README.md:1814-1933 ("Half-Duplex Realtime Speech Conversation Mode") drives it, with the
demo's English half-duplex preset as the system message (assets/presets/half_duplex_audio/english_call.yaml) and
`length_penalty` 1.1 as OpenBMB asks for this mode (README.md:1914; the demo's HalfDuplexView.generate default,
core/processors/unified.py:590). Driving `duplex.model` is what the demo server does: its half-duplex view and its
duplex capability share one `MiniCPMO` (modeling_minicpmo_unified.py:4293-4298, core/processors/unified.py:1335-1402),
so one load serves both modes, with the streaming vocoder `MiniCPMODuplex` set up (`init_tts(streaming=True)`, as
MiniCPMO45/README.md:108 does; the MiniCPM-o README snippet's `init_tts()` would select CosyVoice2, which this
`streaming_generate` refuses, modeling_minicpmo.py:2223,2293). The session lives for the case (its turns are one
conversation) and is started afresh at every reset (G.3: "a stateless chat/generate per case with fresh messages").
"auto" (default) runs turn-based on DSB-IFEval and duplex elsewhere (`for_benchmark`, called by `duplex-eval run`;
Duplex-MPE evaluated the duplex model); a mode named as an adapter-arg wins. rec.json records the mode and its
settings (`runtime`).

Tested against an API fake (tests/fake_minicpm_o.py), not the real weights: see docs/models.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from adapters.chunking import ChunkedAgent, ChunkGatherer, Playback
from adapters.model_code import model_code
from adapters.protocol import Frame
from adapters.turn_based import Reply, TurnBasedAgent, with_trailing
from adapters.upstream import Pin, git_head, hf_snapshot_revision, provenance
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError

# The code this adapter was written against. The weights' Hugging Face revision is not pinned (no commit of
# openbmb/MiniCPM-o-4_5 could be read here): `revision=` picks one, and the one loaded is recorded.
UPSTREAM: tuple[Pin, ...] = (Pin("git", "OpenBMB/minicpm-o-4_5-pytorch-simple-demo",
                                 "c7e16605c3ae9623a0caee5845bd0183b1d6d5b3"),)
MODEL_ID = "openbmb/MiniCPM-o-4_5"
IN_RATE = 16_000  # the model's audio encoder (Whisper) rate
OUT_RATE = 24_000  # its token2wav output rate
# The voice the model's repository ships as its default reference (the README's example and the demo's default).
DEFAULT_REF = "assets/HT_ref_audio.wav"
# The README's generic duplex preamble (MiniCPMO45/README.md:273); used when a case gives no system prompt (M3 plays
# with none).
DEFAULT_PROMPT = "Streaming Duplex Conversation! You are a helpful assistant."
# The system turn every OpenBMB caller writes around the prompt and the reference voice (core/processors/unified.py:
# 881-882): `prepare` feeds the prefix, then the voice's audio embedding, then the suffix.
PREFIX, SUFFIX = "<|im_start|>system\n{}\n<|audio_start|>", "<|audio_end|><|im_end|>"
DECODE_MODES = ("sampling", "greedy")
# The streaming vocoder's flow-matching steps: MiniCPMO45/README.md:191 loads the duplex class with 5, and the demo
# server's token2wav takes 5 (modeling_minicpmo_unified.py:275, 354); the class's own default is 10
# (modeling_minicpmo.py:2375-2379, `kwargs.get("n_timesteps", 10)`).
N_TIMESTEPS = 5
MODES = ("duplex", "turn-based")
# The mode each benchmark's paper ran it in, for mode="auto": DSB-IFEval's harness ran it turn-based (its appendix
# D.5); Duplex-MPE evaluated the duplex model; elsewhere duplex.
BENCHMARK_MODES = {"ifeval": "turn-based"}
# Turn-based: the system message around the voice, the demo's English half-duplex preset
# (assets/presets/half_duplex_audio/english_call.yaml:5-11); the case's prompt is appended after it, once.
VOICE_PREFIX = "Clone the voice in the provided audio prompt."
VOICE_SUFFIX = ("Please assist users while maintaining this voice style. Please answer the user's questions seriously "
                "and in a high quality. Please chat with the user in a highly human-like and oral style.")
# DSB-IFEval's harness (D.5): sampling at temperature 0.5, at most 4096 new tokens; length_penalty 1.1 as OpenBMB
# asks for in its half-duplex speech conversation (MiniCPM-o README.md:1914, core/processors/unified.py:590).
TURN_GENERATE: dict[str, Any] = {"do_sample": True, "temperature": 0.5, "max_new_tokens": 4096,
                                 "length_penalty": 1.1}
# DSB-IFEval's harness gave a turn-based model its input after 1.0 s of quiet, with that trailing segment (D.1).
TRAILING_S = 1.0


class MiniCPMOError(RuntimeError):
    """The model refused a chunk or answered outside its API: the episode fails with this reason."""


def system_turn(prompt: str) -> tuple[str, str]:
    """`prepare`'s prefix and suffix for a system prompt, as OpenBMB's callers write them."""
    return PREFIX.format(prompt), SUFFIX


def model_dir(model_path: str, revision: str | None = None) -> Path:
    """A local model folder as it is, a hub repo id as its local snapshot at `revision` (None: the newest;
    downloaded once), so the weights and the reference voice come from the same revision."""
    if Path(model_path).is_dir():
        return Path(model_path)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model_path, revision=revision))


def import_code(code_dir: str | None) -> Any:
    """The demo's model code, `MiniCPMO45.modeling_minicpmo` (from `code_dir`, else PYTHONPATH): first, so that a
    missing checkout is one line before any weights are downloaded."""
    with model_code("minicpm-o", code_dir, "the MiniCPM-o 4.5 model code (MiniCPMO45/)",
                    "a checkout of github.com/OpenBMB/minicpm-o-4_5-pytorch-simple-demo as code_dir=DIR, with its "
                    "requirements (pip install -e \".[minicpm-o]\")"):
        from MiniCPMO45 import modeling_minicpmo  # type: ignore[import-not-found]
    return modeling_minicpmo


def load_duplex(code: Any, path: Path, device: str = "cuda", attn_implementation: str = "sdpa",
                force_listen_count: int = 0, n_timesteps: int = N_TIMESTEPS) -> tuple[Any, dict[str, Any]]:
    """The real model in duplex mode, loaded as MiniCPMO45/README.md's "Duplex Streaming" does
    (`MiniCPMODuplex.from_pretrained`, which casts to bf16 and calls `init_tts(streaming=True, n_timesteps=...)`
    itself), and the record of the code (`import_code`'s module) it came from against `UPSTREAM`."""
    duplex = code.MiniCPMODuplex.from_pretrained(str(path), device=device, attn_implementation=attn_implementation,
                                                 force_listen_count=force_listen_count, n_timesteps=n_timesteps)
    checkout = Path(code.__file__).resolve().parent.parent
    return duplex, provenance("minicpm-o", UPSTREAM[0], git_head(checkout), f"the model code at {checkout}")


def read_voice(path: Path) -> np.ndarray:
    """A reference voice as the README passes it (librosa.load(sr=16000, mono=True)): mono float32 at 16 kHz."""
    try:
        audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as err:
        raise UsageError(f"minicpm-o: cannot read the reference voice {path}: {err}") from err
    return resample(audio.mean(axis=1), sr, IN_RATE)


class MiniCPMOTurns:
    """The inner model of `turn-based` for MiniCPM-o's turn-based mode: one user turn at 16 kHz in, its spoken reply
    (24 kHz) and text out, through the half-duplex streaming API of `MiniCPMO` (the module docstring). `bind` gives
    it the loaded model and the voice; `generate_kwargs` are added to `streaming_generate`'s (TURN_GENERATE)."""

    sample_rate = IN_RATE
    capabilities = frozenset({"system_prompt", "text_output"})
    version = "4.5-turn-based"

    def __init__(self, trailing_s: float = TRAILING_S, generate_kwargs: dict[str, Any] | None = None) -> None:
        if trailing_s < 0:
            raise UsageError(f"minicpm-o: trailing_s must be >= 0, got {trailing_s}")
        self.trailing_s = trailing_s
        self.generate_kwargs = {**TURN_GENERATE, **(generate_kwargs or {})}
        self.model: Any = None
        self.voice = np.zeros(0, np.float32)
        self.sessions = 0
        self.replies = 0

    def bind(self, model: Any, voice: np.ndarray) -> None:
        self.model, self.voice = model, voice

    def describe(self) -> dict[str, Any]:
        return {"system_message": [VOICE_PREFIX, "{ref_audio}", VOICE_SUFFIX, "{prompt, when the case has one}"],
                "omni_mode": False, "chunk_samples": IN_RATE, "trailing_s": self.trailing_s,
                "generate_kwargs": {"generate_audio": True, "use_tts_template": True, "enable_thinking": False,
                                    **self.generate_kwargs},
                "session": "one per case (its turns in one conversation), started afresh at each reset"}

    @property
    def session_id(self) -> str:
        return f"case-{self.sessions}"

    def _model(self) -> Any:
        if self.model is None:
            raise MiniCPMOError("the turn-based model is not bound to a loaded MiniCPM-o")
        return self.model

    def reset(self, system_prompt: str | None, seed: int) -> None:
        import torch

        torch.manual_seed(seed)  # the model samples its tokens and speech with torch
        model = self._model()
        self.sessions += 1
        model.reset_session(reset_token2wav_cache=True)
        model.init_token2wav_cache(prompt_speech_16k=self.voice)
        content: list[Any] = [VOICE_PREFIX, self.voice, VOICE_SUFFIX] + ([system_prompt] if system_prompt else [])
        model.streaming_prefill(session_id=self.session_id, msgs=[{"role": "system", "content": content}],
                                omni_mode=False, is_last_chunk=True)

    def reply(self, audio: np.ndarray, sr: int) -> Reply | None:
        model = self._model()
        turn = with_trailing(resample(np.asarray(audio, np.float32).reshape(-1), sr, IN_RATE), IN_RATE,
                             self.trailing_s)
        starts = range(0, max(turn.size, 1), IN_RATE)
        for i in starts:  # one prefill a second, the last padded to a whole second (README.md:1887-1901)
            chunk = turn[i:i + IN_RATE]
            chunk = np.pad(chunk, (0, IN_RATE - chunk.size))
            model.streaming_prefill(session_id=self.session_id, msgs=[{"role": "user", "content": [chunk]}],
                                    omni_mode=False, is_last_chunk=i == starts[-1])
        self.replies += 1
        waves: list[np.ndarray] = []
        text: list[str] = []
        for wav, piece in model.streaming_generate(session_id=self.session_id, generate_audio=True,
                                                   use_tts_template=True, enable_thinking=False,
                                                   **self.generate_kwargs):
            said = _waveform(wav, f"reply {self.replies}")
            if said is not None:
                waves.append(said)
            text.append(piece or "")
        words = "".join(text).strip() or None
        return Reply(np.concatenate(waves), OUT_RATE, words) if waves else None


class MiniCPMOAgent(ChunkedAgent):
    """MiniCPM-o 4.5, duplex or turn-based (`mode`, the module docstring). `model` is a model already in duplex mode
    (a `MiniCPMODuplex`, whose `.model` serves the turn-based mode); without it the real one is loaded from
    `model_path` (a hub id at `revision`, or a local folder) with the model code of `code_dir` (a checkout of the
    demo repository; else on PYTHONPATH). `ref_audio` is the voice to speak in (a wav file; default: the model's own
    assets/HT_ref_audio.wav). `end_of_turn_s`, `trailing_s` and `turn_generate_kwargs` set the turn-based mode."""

    name = "minicpm-o"
    error = MiniCPMOError
    version = "4.5-duplex"
    sample_rate = SESSION_SR
    realtime = False
    capabilities = frozenset({"system_prompt", "text_output"})
    chunk_s = 1.0  # the model hears and decides once per second: its inherent latency

    def __init__(self, model_path: str = MODEL_ID, code_dir: str | None = None, revision: str | None = None,
                 ref_audio: str | None = None, device: str = "cuda", attn_implementation: str = "sdpa",
                 frame_size: int = 480, decode_mode: str = "sampling", max_new_speak_tokens_per_chunk: int = 20,
                 force_listen_count: int = 0, n_timesteps: int = N_TIMESTEPS, default_prompt: str = DEFAULT_PROMPT,
                 generate_kwargs: dict[str, Any] | None = None, mode: str = "auto",
                 end_of_turn_s: float = TRAILING_S, trailing_s: float = TRAILING_S,
                 turn_generate_kwargs: dict[str, Any] | None = None, model: Any = None) -> None:
        if decode_mode not in DECODE_MODES:
            raise UsageError(f"minicpm-o: decode_mode must be one of {DECODE_MODES}, got {decode_mode!r}")
        if mode != "auto" and mode not in MODES:
            raise UsageError(f"minicpm-o: mode must be 'auto' or one of {MODES}, got {mode!r}")
        self.mode_arg = mode
        self.turn_args: dict[str, Any] = {"trailing_s": trailing_s, "generate_kwargs": turn_generate_kwargs or {}}
        self.end_of_turn_s = end_of_turn_s
        self.frame_size = frame_size
        self.gatherer = ChunkGatherer(self.chunk_s, self.sample_rate, frame_size, IN_RATE)
        self.playback = Playback()
        self.default_prompt = default_prompt
        self.generate_kwargs: dict[str, Any] = {"max_new_speak_tokens_per_chunk": max_new_speak_tokens_per_chunk,
                                                "decode_mode": decode_mode, **(generate_kwargs or {})}
        self.force_listen_count = force_listen_count
        self.n_timesteps = n_timesteps
        code = import_code(code_dir) if model is None else None
        if ref_audio is None and model is None:
            folder = model_dir(model_path, revision)
            ref = folder / DEFAULT_REF
        else:
            folder, ref = None, Path(ref_audio) if ref_audio else None
        # Without a reference the model's token2wav is never initialised and it would speak no audio at all: a
        # silent model that is really a broken set-up, so it is refused here.
        if ref is None or not ref.is_file():
            raise UsageError(f"minicpm-o: no reference voice at {ref}; pass ref_audio=PATH to a wav file "
                             f"(the model's repository ships {DEFAULT_REF})")
        self.ref_path = str(ref)
        self.ref_audio = read_voice(ref)
        self.upstream: list[dict[str, Any]] = []  # a model passed in (a test double): no code or weights loaded
        self.duplex: Any = model
        if model is None:
            weights = folder or model_dir(model_path, revision)
            self.duplex, found = load_duplex(code, weights, device, attn_implementation, force_listen_count,
                                             n_timesteps)
            self.upstream = [found, {"repo": model_path, "kind": "hf", "pinned": revision,
                                    "used": hf_snapshot_revision(weights), "matches": None}]
        self.turns: TurnBasedAgent | None = None
        self._use_mode("duplex" if mode == "auto" else mode)

    def _use_mode(self, mode: str) -> None:
        self.mode, self.version = mode, f"4.5-{mode}"
        self.turns = None
        if mode == "turn-based":
            # The wrapper builds the inner model from its arguments (so rec.json can record them), then it is given
            # the MiniCPMO that the duplex class loaded, and the voice.
            self.turns = TurnBasedAgent(inner=f"{__name__}:MiniCPMOTurns", inner_args=self.turn_args,
                                        frame_size=self.frame_size, end_of_turn_s=self.end_of_turn_s,
                                        barge_in_stop_s=-1.0, response_delay_s=0.0)
            self.turns.model.bind(self._model().model, self.ref_audio)  # type: ignore[attr-defined]

    def for_benchmark(self, benchmark: str) -> None:
        """The run names the benchmark before the first case: with `mode="auto"`, the mode its paper ran."""
        if self.mode_arg == "auto":
            self._use_mode(BENCHMARK_MODES.get(benchmark, "duplex"))

    def runtime(self) -> dict[str, Any]:
        """The mode, how the session is prepared and stepped in it, and the code and weights it came from, for each
        rec.json."""
        common = {"mode": self.mode, "mode_arg": self.mode_arg, "ref_audio": self.ref_path, "upstream": self.upstream,
                  "n_timesteps": self.n_timesteps}
        if self.turns is not None:
            return {**common, "turn_based": self.turns.runtime()}
        return {**common, "system_turn": PREFIX.format("{prompt}") + "{ref_audio}" + SUFFIX,
                "default_prompt": self.default_prompt, "generate_kwargs": self.generate_kwargs,
                "force_listen_count": self.force_listen_count, "chunk_s": self.chunk_s}

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        if self.turns is None:
            return super().step(user_frame, forced_model_frame)
        if forced_model_frame is not None:
            raise self.error(f"{self.name} has no teacher forcing; the runner should have skipped this case")
        return self.turns.step(user_frame)

    def _model(self) -> Any:
        if self.duplex is None:
            raise MiniCPMOError("the agent is closed")
        return self.duplex

    def reset(self, system_prompt: str | None, seed: int) -> None:
        if self.turns is not None:
            self._model()
            self.turns.reset(system_prompt, seed)
            return
        import torch

        torch.manual_seed(seed)  # the model samples its tokens and speech with torch
        self.gatherer.reset()
        self.playback.stop()
        prefix, suffix = system_turn(system_prompt or self.default_prompt)
        self._model().prepare(prefix_system_prompt=prefix, suffix_system_prompt=suffix, ref_audio=self.ref_audio,
                              prompt_wav_path=self.ref_path)

    def _hear(self, chunk: np.ndarray) -> None:
        """One second of the model's loop: prefill the chunk, let it decide, queue what it says."""
        model = self._model()
        k = self.gatherer.chunks - 1
        prefill = model.streaming_prefill(audio_waveform=chunk)
        if isinstance(prefill, dict) and not prefill.get("success", True):
            # A whole 1 s chunk always suffices (the first is padded to the model's 1.035 s): a refusal is a fault.
            raise MiniCPMOError(f"streaming_prefill refused chunk {k}: {prefill.get('reason') or 'no reason given'}")
        result = model.streaming_generate(prompt_wav_path=self.ref_path, **self.generate_kwargs)
        finalize = getattr(model, "finalize_unit", None)
        if callable(finalize):  # versions that defer the unit's end to a separate call want it before next prefill
            finalize()
        if not isinstance(result, dict) or "is_listen" not in result:
            raise MiniCPMOError(f"streaming_generate returned {type(result).__name__} without is_listen at chunk {k}")
        if result["is_listen"]:
            return  # its audio is a placeholder second of silence; the demo's player plays nothing for it
        self.playback.say(_waveform(result.get("audio_waveform"), f"chunk {k}"), result.get("text") or None)

    def close(self) -> None:
        if self.turns is not None:
            self.turns.close()
        self.duplex = None
        self.playback.stop()


def _waveform(audio: Any, where: str) -> np.ndarray | None:
    """The model's 24 kHz audio as float32 (it may be a numpy array or a tensor), checked."""
    if audio is None:
        return None
    if hasattr(audio, "detach"):
        audio = audio.detach().float().cpu().numpy()
    audio = np.asarray(audio, np.float32)
    if audio.ndim > 1 and sum(d > 1 for d in audio.shape) <= 1:
        audio = audio.reshape(-1)  # [1, n]: the same samples
    if audio.ndim != 1 or not np.all(np.isfinite(audio)):
        raise MiniCPMOError(f"streaming_generate gave audio of shape {audio.shape} (finite: "
                            f"{bool(np.all(np.isfinite(audio)))}) at {where}; expected 1-D finite 24 kHz samples")
    return audio
