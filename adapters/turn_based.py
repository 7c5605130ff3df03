"""`turn-based`: any half-duplex speech model as a duplex agent (docs/models.md, docs/adding-a-model.md).

A half-duplex speech-to-speech model answers a whole user turn with a whole reply. This wrapper gives it the turn
machinery a live voice front end would: it listens with the streaming Silero VAD, ends the user's turn after
`end_of_turn_s` of quiet, hands the turn's audio (with 0.5 s heard before the VAD confirmed the onset) to the inner
model, waits `response_delay_s`, and plays the reply frame by frame; when the user speaks over the reply for
`barge_in_stop_s` (the reaction time) it stops the playback, as a voice front end with barge-in does, or never when
`barge_in_stop_s` is negative (a front end without barge-in). With barge-in, a reply that comes while another still
plays is lost (the front end does not talk over itself); without it nothing the model says is suppressed: that reply
is queued after the one playing, as DSB-IFEval's harness places a turn-based model's audio (its appendix D.2-D.3,
"pos = max(t, cursor)"). Every parameter, and the inner model's own `describe()` when it has one, is recorded in
each rec.json (`runtime`).

The inner model is anything with `reply(audio, sr)` (`SpeechModel`): float32 mono audio of one user turn at its
`sample_rate`, returning the reply as float32 audio at that rate, or a `Reply` (audio, its rate, optional text), or
None for no reply. It is named as "module:Class" (`inner`), with its arguments as a JSON object (`inner_args`).
On the virtual clock the model is infinitely fast: its reply plays from the frame after the one that ended the turn
(the one timing rule of docs/adding-a-model.md: a frame never depends on the user audio of its own slot) plus
`response_delay_s`; its compute time is the step's, so the run's live feasibility says whether it would have
kept up.
"""

from __future__ import annotations

import importlib
import json
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from adapters.base import SpeechQueue
from adapters.protocol import Frame
from dataset_builder.audio import SESSION_SR, resample, seconds_to_samples
from dataset_builder.errors import UsageError
from metrics.vad import StreamingVAD, VADParams

PREROLL_S = 0.5  # kept before a confirmed onset: the VAD confirms speech only after it has started
QUIET_LEVEL = 1e-3  # -60 dBFS: quieter samples at a turn's end are its trailing segment (`with_trailing`)


class Reply(NamedTuple):
    audio: np.ndarray  # float32 mono
    sample_rate: int | None = None  # None: the rate the turn was given at
    text: str | None = None


@runtime_checkable
class SpeechModel(Protocol):
    """The inner model of `turn-based`: one user turn in, one reply out."""

    sample_rate: int  # the rate it hears at
    # Optional: `capabilities` (a subset of {"system_prompt", "text_output"}), `reset(system_prompt, seed)`,
    # `describe() -> dict` (recorded in rec.json), `version`, `close()`.

    def reply(self, audio: np.ndarray, sr: int) -> np.ndarray | Reply | None: ...


def with_trailing(turn: np.ndarray, sr: int, trailing_s: float) -> np.ndarray:
    """A handed-over turn with its quiet after the last sound above QUIET_LEVEL cut to `trailing_s`: the wrapper
    hands a turn over with all the quiet that ended it, and DSB-IFEval's harness gave its turn-based models each
    input with a 1.0 s trailing segment (its appendix D.1)."""
    loud = np.flatnonzero(np.abs(turn) > QUIET_LEVEL)
    return turn[:(int(loud[-1]) + 1 if loud.size else 0) + round(trailing_s * sr)]


def load_inner(target: str, args: dict[str, Any]) -> SpeechModel:
    module, _, cls = target.partition(":")
    if not module or not cls:
        raise UsageError(f"turn-based: inner must be 'module:Class', got {target!r}")
    try:
        model = getattr(importlib.import_module(module), cls)(**args)
    except (ImportError, AttributeError) as err:
        raise UsageError(f"turn-based: cannot load inner model {target!r}: {err}") from None
    if not isinstance(model, SpeechModel):
        raise UsageError(f"turn-based: {target} has no sample_rate and reply(audio, sr): it is not a SpeechModel")
    return model


class TurnBasedAgent:
    name = "turn-based"
    realtime = False
    sample_rate = SESSION_SR

    def __init__(self, inner: str = "", inner_args: str | dict[str, Any] | None = None, frame_size: int = 1920,
                 end_of_turn_s: float = 0.6, barge_in_stop_s: float = 0.4, response_delay_s: float = 0.0) -> None:
        if not inner:
            raise UsageError("turn-based: name the half-duplex model with --adapter-arg inner=module:Class")
        if inner_args is None:
            inner_args = {}
        if isinstance(inner_args, str):
            try:
                inner_args = json.loads(inner_args) if inner_args else {}
            except json.JSONDecodeError as err:
                raise UsageError(f"turn-based: inner_args is not JSON: {err}") from None
        if not isinstance(inner_args, dict):
            raise UsageError("turn-based: inner_args must be a JSON object of the inner model's arguments")
        if end_of_turn_s <= 0 or response_delay_s < 0 or frame_size <= 0:
            raise UsageError("turn-based: end_of_turn_s and frame_size must be > 0, response_delay_s >= 0")
        self.inner_target, self.inner_args = inner, inner_args
        self.model = load_inner(inner, inner_args)
        self.frame_size = frame_size
        self.end_of_turn_s, self.barge_in_stop_s, self.response_delay_s = end_of_turn_s, barge_in_stop_s, \
            response_delay_s
        # The inner model says what it does with a prompt and whether its replies carry text.
        self.capabilities: frozenset[str] = frozenset(getattr(self.model, "capabilities", ())) & {"system_prompt",
                                                                                                  "text_output"}
        self.version = f"1/{getattr(self.model, 'version', inner)}"
        self.vad = StreamingVAD(VADParams(min_speech_ms=150, merge_gap_ms=300), sr=SESSION_SR)
        self.queue = SpeechQueue()
        self.pending_text: list[tuple[int, str]] = []  # (samples still queued ahead of it, text)
        self._clear()

    def _clear(self) -> None:
        self.utterance: list[np.ndarray] = []
        self.preroll: list[np.ndarray] = []
        self.user_speech_s = 0.0
        self.quiet_s = 0.0
        self.pending_text = []

    def runtime(self) -> dict[str, Any]:
        """Every turn-taking parameter and the inner model, recorded in each rec.json."""
        describe = getattr(self.model, "describe", None)
        return {"inner": self.inner_target, "inner_args": self.inner_args,
                "inner_describe": describe() if callable(describe) else None,
                "inner_sample_rate": self.model.sample_rate, "end_of_turn_s": self.end_of_turn_s,
                "barge_in_stop_s": self.barge_in_stop_s, "response_delay_s": self.response_delay_s,
                "preroll_s": PREROLL_S, "vad": {"min_speech_ms": 150, "merge_gap_ms": 300}}

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.vad.reset()
        self.queue.stop()
        self._clear()
        reset = getattr(self.model, "reset", None)
        if callable(reset):
            reset(system_prompt, seed)

    def _end_of_turn(self) -> None:
        turn = np.concatenate(self.preroll + self.utterance)
        self.utterance, self.preroll = [], []
        sr = int(self.model.sample_rate)
        out = self.model.reply(resample(turn, SESSION_SR, sr), sr)
        if out is None:
            return
        reply = out if isinstance(out, Reply) else Reply(np.asarray(out, np.float32))
        audio = resample(np.asarray(reply.audio, np.float32).reshape(-1), reply.sample_rate or sr, SESSION_SR)
        queued = self.queue.pending.size
        if not audio.size or (queued and self.barge_in_stop_s >= 0):
            return  # a front end with barge-in does not talk over itself: the reply that comes while one plays is lost
        # Without barge-in nothing the model says is suppressed (DSB-IFEval D.2): a reply that comes while another
        # plays is queued after it, as its harness places audio at max(now, end of what is queued) (D.3).
        lead = max(0, seconds_to_samples(self.response_delay_s, SESSION_SR) - queued)
        self.queue.say(np.concatenate([np.zeros(lead, np.float32), audio]))
        if reply.text:
            self.pending_text.append((queued + lead, reply.text))

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        # One timing rule for every adapter (docs/adding-a-model.md): the frame played in this slot depends only on
        # the user audio before it, so it is taken from the queue before this frame is heard; a reply to a turn
        # that this frame ends, or a barge-in this frame completes, is heard from the next frame on.
        # The reply's text is stamped on the frame where its audio starts.
        text = [t for ahead, t in self.pending_text if ahead < self.frame_size]
        self.pending_text = [(ahead - self.frame_size, t) for ahead, t in self.pending_text if ahead >= self.frame_size]
        out = Frame(self.queue.next_frame(self.frame_size), "".join(text) or None)
        self._hear(user_frame)
        return out

    def _hear(self, user_frame: np.ndarray) -> None:
        self.vad.push(user_frame)
        frame_s = self.frame_size / SESSION_SR
        if self.vad.speaking:
            self.utterance.append(user_frame)
            self.user_speech_s += frame_s
            self.quiet_s = 0.0
            if self.queue.speaking and 0 <= self.barge_in_stop_s <= self.user_speech_s:
                self.queue.stop()  # barge-in: the user has held the floor for the reaction time
                self.pending_text = []
        else:
            self.user_speech_s = 0.0
            if self.utterance:
                self.utterance.append(user_frame)
                self.quiet_s += frame_s
                if self.quiet_s >= self.end_of_turn_s:
                    self._end_of_turn()
            else:
                self.preroll = (self.preroll + [user_frame])[-max(1, int(PREROLL_S / frame_s)):]

    def close(self) -> None:
        self.queue.stop()
        close = getattr(self.model, "close", None)
        if callable(close):
            close()
