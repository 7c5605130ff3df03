"""The oracle's M3-DuplexBench behaviour: the right move at each event, in the row's own system voice.

It speaks only audio from the row's reference system channel (no TTS at run time), laid on a track on the stream
clock when it is bound to the case (`eval.plans.m3.M3Bound`) and edited by the timeline cues it hears (one frame
late, like a listener):

- SHIFT: says the reference reply `answer_delay_s` after s (the start of the "window" clip). Under Full, when
  the reference reply already began before s (an overlapping SHIFT) and was forced, it carries on with it from s.
- PAUSE: stays silent through W.
- BC: is speaking at s and talks on through W: the system speech under way at s, then more of its own speech
  from the row (later, then earlier utterances) with short gaps, so no gap splits its segment.
- BARGE_IN: is speaking at s and stops `stop_delay_s` after it hears the user start (the "window" clip start).

Under User it replays the reference system channel through C and P itself before a BC or BARGE_IN, so that it is
speaking at s; under Full those frames are forced and the agent returns the forced frames (`OracleAgent.step`).
Utterances are tightened (`adapters.base.tighten`: inner pauses shortened) so that each is one VAD segment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from adapters.base import MAX_INNER_GAP_S, Say, tighten
from adapters.protocol import TimelineCue
from dataset_builder.audio import seconds_to_samples

if TYPE_CHECKING:
    from adapters.oracle import OracleAgent

WINDOW_CLIP = "window"  # the plan's clip id of W (eval/plans/m3.py)
SHIFT_OVERLAP_S = 0.4  # a SHIFT's reply may start this much before s (DESIGN.md)
BC_MARGIN_S = 1.0  # a BC continuation outlasts the window by this much


class BoundM3(Protocol):
    """What the M3 plan binds a gold-aware agent to (eval.plans.m3.M3Bound)."""

    case: Any  # dataset_builder.m3.schema.M3Case
    system: np.ndarray
    sample_rate: int
    clip_start: int
    event_start: int
    window_end: int

    def clip_sample(self, t_s: float) -> int: ...


class M3OracleScript:
    """The oracle's model channel for one M3 case: a track on the stream clock, cut and extended by cues."""

    def __init__(self, view: BoundM3, answer_delay_s: float, stop_delay_s: float) -> None:
        self.view = view
        self.sr = view.sample_rate
        self.event = view.case.event
        self.condition: str = view.case.condition
        self.answer_delay = seconds_to_samples(answer_delay_s, self.sr)
        self.stop_delay = seconds_to_samples(stop_delay_s, self.sr)
        self.track = np.zeros(view.window_end, np.float32)
        self.texts: list[tuple[int, str]] = []  # (stream sample, text said from there)
        self.t = 0
        self.carried_on = False  # SHIFT under Full: the forced reference reply is continued from s
        self._prepare()

    # --- the row's system speech -------------------------------------------------------------------------------
    def _system_utts(self) -> list[Any]:
        return [u for u in self.event.utterances if u.speaker == "system"]

    def _audio(self, a_s: float, b_s: float) -> np.ndarray:
        v = self.view
        return v.system[v.clip_sample(a_s):v.clip_sample(b_s)]

    def _put(self, at: int, audio: np.ndarray, text: str | None = None) -> None:
        """Lay `audio` on the track from stream sample `at` (replacing what was there), extending it as needed."""
        if at + len(audio) > len(self.track):
            self.track = np.concatenate([self.track, np.zeros(at + len(audio) - len(self.track), np.float32)])
        self.track[at:at + len(audio)] = audio
        if text:
            self.texts.append((at, text))

    def _prepare(self) -> None:
        ev, v = self.event, self.view
        s = ev.event_start_s
        speaking_at_s = next((u for u in self._system_utts() if u.start_s < s < u.end_s), None)
        if ev.event_type in ("BC", "BARGE_IN"):
            # Its own side of the context (forced under Full, replayed by itself under User).
            self._put(v.clip_start, v.system[:v.event_start - v.clip_start])
            if ev.event_type == "BC":
                self._put(v.event_start, self._bc_continuation(speaking_at_s))
            elif speaking_at_s is not None:  # talks on until it hears the barge-in
                self._put(v.event_start, self._audio(s, speaking_at_s.end_s))
        elif ev.event_type == "SHIFT" and self.condition == "full":
            reply = self._reply()
            if reply is not None and reply.start_s < s:
                self.carried_on = True
                self._put(v.event_start, tighten(self._audio(s, reply.end_s), self.sr), ev.reply)

    def _reply(self) -> Any:
        """The reference reply: the system TURN starting closest to t, at most 0.4 s before s."""
        ev = self.event
        turns = [u for u in self._system_utts()
                 if u.kind == "turn" and u.start_s >= ev.event_start_s - SHIFT_OVERLAP_S - 1e-6]
        return min(turns, key=lambda u: abs(u.start_s - ev.event_end_s), default=None)

    def _bc_continuation(self, current: Any) -> np.ndarray:
        """Speech from s for at least the window and a margin: the utterance under way, then its own later and
        earlier utterances, joined by gaps short enough that the VAD hears one segment."""
        ev = self.event
        need = seconds_to_samples(ev.window_end_s - ev.event_start_s + BC_MARGIN_S, self.sr)
        gap = np.zeros(seconds_to_samples(MAX_INNER_GAP_S, self.sr), np.float32)
        parts: list[np.ndarray] = []
        if current is not None:
            parts.append(tighten(self._audio(ev.event_start_s, current.end_s), self.sr))
        later = [u for u in self._system_utts() if u.start_s >= ev.event_start_s]
        earlier = [u for u in self._system_utts() if u.end_s <= ev.event_start_s]
        pool = [tighten(self._audio(u.start_s, u.end_s), self.sr) for u in later + earlier]
        pool = [p for p in pool if len(p)]
        if not pool and not parts:
            raise ValueError(f"{self.view.case.case_id}: the row has no system speech to talk on with")
        i = 0
        while sum(len(p) for p in parts) < need:
            parts += [gap, pool[i % len(pool)]] if parts else [pool[i % len(pool)]]
            i += 1
        return np.concatenate(parts)

    # --- what it hears and says --------------------------------------------------------------------------------
    def on_cue(self, cue: TimelineCue) -> list[Say]:
        """Edits its own track; nothing for the agent's speech queue."""
        if cue.turn_id != WINDOW_CLIP or cue.kind != "clip_start":
            return []
        ev = self.event
        if ev.event_type == "SHIFT" and not self.carried_on:
            reply = self._reply()
            audio = (tighten(self._audio(reply.start_s, reply.end_s), self.sr) if reply is not None
                     else tighten(self._audio(ev.event_end_s, ev.window_end_s), self.sr))
            self._put(max(self.t, cue.sample + self.answer_delay), audio, ev.reply)
        elif ev.event_type == "BARGE_IN":
            self.track[max(self.t, cue.sample + self.stop_delay):] = 0.0
        return []

    def frame(self, n: int) -> tuple[np.ndarray, str | None]:
        """The next n samples of the track, and the text of anything that starts in them."""
        t, self.t = self.t, self.t + n
        out = np.zeros(n, np.float32)
        chunk = self.track[t:t + n]
        out[:len(chunk)] = chunk
        said = [text for at, text in self.texts if t <= at < t + n]
        return out, " ".join(said) or None


def oracle_script(case: BoundM3, agent: OracleAgent) -> M3OracleScript:
    """Bound to the plan's M3Bound: the case and its reference audio."""
    return M3OracleScript(case, agent.answer_delay_s, agent.stop_delay_s)
