"""The M3-DuplexBench user-stream plan (docs/benchmarks/m3.md; dataset_builder/m3/DESIGN.md "Conditions", "rec.json
gold").

A fixed schedule: the row's user channel is played as it was recorded, whatever the model does.

    [lead silence] [pad < 1 frame] | C (user audio; not under None) | P = [b, s) | W = [s, s + Δ)

- In W the user audio is kept only inside the event interval [s, t] and zeroed elsewhere (SHIFT / PAUSE: W's user
  side is silent; BC / BARGE_IN: the user's IPU plays).
- None: the stream starts at b (the paper's single-turn setting: the model receives user audio in P and W only), so
  clip time 0 lies before the recording and `context_start_s` is negative.
- Full: the model channel is teacher-forced to the row's system channel over [0, s) (`EpisodePlan.forced`, which
  also makes the case need "teacher_forcing"); the model runs free from s.
- `lead_silence_s` is prepended in None/User for an adapter that greets first (`M3Protocol.greets_first`).
- The start is padded with fewer than one frame of silence (`M3Protocol.frame_size`) so that s falls on a frame
  boundary: forcing ends exactly at s, and the model's first free frame starts there.

Clip ids are "context", "prompt" and "window" (labels C, P, W) so the realised timeline shows the regions; rec.json's
gold holds every region on the stream clock. Agents with "gold_cues" are bound to an `M3Bound`, which adds the
row's reference system channel (the oracle replays it; no TTS at run time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dataset_builder.atomic import round_ms
from dataset_builder.audio import SESSION_SR, resample, seconds_to_samples
from dataset_builder.benchmark_params import M3Protocol
from dataset_builder.m3.schema import SYSTEM_CHANNEL, USER_CHANNEL, M3Case
from eval.schedule import EpisodePlan, Play, Silence, Step
from metrics.vad import VADParams, vad_of

VAD_PRESET = "m3"
# M3 gives the model no text instructions (the paper prompts none), but the session is one to one: the empty prompt
# (as DSB-IFEval's L0) rather than None, which marks a multi-party session whose duty is spoken (Duplex-MPE).
NO_INSTRUCTIONS = ""
CLIPS = {"context": "C", "prompt": "P", "window": "W"}


@dataclass(frozen=True)
class M3Bound:
    """What a gold-aware agent (the oracle) is bound to: the case, the row's reference system channel and where
    the regions fall on the stream. Sample positions are at the agent's rate on the stream clock."""

    case: M3Case
    system: np.ndarray  # the row's system channel at the agent's rate; sample 0 = clip time 0
    sample_rate: int
    clip_start: int  # stream sample of clip time 0 (lead silence + pad)
    event_start: int  # s
    window_end: int  # s + Δ: the stream ends here

    @property
    def benchmark(self) -> str:
        return self.case.benchmark

    @property
    def case_id(self) -> str:
        return self.case.case_id

    def clip_sample(self, t_s: float) -> int:
        """A clip-clock time as a sample of `system`."""
        return seconds_to_samples(t_s, self.sample_rate)


def vad_params(protocol: M3Protocol) -> VADParams:
    return vad_of(protocol)


def _channel(audio: np.ndarray, channel: int, n: int) -> np.ndarray:
    """One channel of the row's audio, cut or zero-padded to exactly n samples (the rows round to ms)."""
    x = np.zeros(n, np.float32)
    src = np.asarray(audio[:n, channel], np.float32)
    x[: len(src)] = src
    return x


def _fit(x: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, np.float32)
    out[: min(n, len(x))] = x[:n]
    return out


def needs(case: M3Case) -> frozenset[str]:
    """What the case needs of an adapter: Full context teacher-forces the model channel up to s."""
    return frozenset({"teacher_forcing"}) if case.condition == "full" else frozenset()


def strata(case: M3Case) -> tuple[tuple[str], str]:
    """`run --sample`: whole dialogues (every event of one under every context condition: the conditions are
    compared on the same events), spread over languages and domains."""
    return (f"{case.event.language} {case.event.domain}",), case.event.dialogue_id


def plan(case: M3Case, audio: np.ndarray, protocol: M3Protocol, sr: int) -> EpisodePlan:
    """The episode of one case: `audio` is the row's (n, 2) 24 kHz clip (ch0 user, ch1 system, clip clock)."""
    ev, cond = case.event, case.condition
    if audio.ndim != 2 or audio.shape[1] != 2:
        raise ValueError(f"{case.case_id}: expected (n, 2) audio (ch0 user, ch1 system), got {audio.shape}")
    frame = protocol.frame_size
    if cond == "full" and frame <= 0:
        raise ValueError(f"{case.case_id}: Full context needs the adapter's frame size (M3Protocol.for_agent)")
    # Region edges on the 24 kHz clip clock; W is exactly Δ long whatever the rows' ms rounding.
    i_b, i_s, i_t = (seconds_to_samples(x) for x in (ev.prompt_start_s, ev.event_start_s, ev.event_end_s))
    i_w = i_s + seconds_to_samples(ev.window_end_s - ev.event_start_s)
    user = _channel(audio, USER_CHANNEL, i_w)
    keep = user[i_s:max(i_s, i_t)].copy()
    user[i_s:] = 0.0
    user[i_s:i_s + len(keep)] = keep
    if cond == "none":
        user[:i_b] = 0.0
    # At the agent's rate: one resampling of the whole channel, region edges mapped onto it.
    a_b, a_s = (int(round(i * sr / SESSION_SR)) for i in (i_b, i_s))
    a_w = a_s + seconds_to_samples(ev.window_end_s - ev.event_start_s, sr)
    user_a = _fit(resample(user, SESSION_SR, sr), a_w)
    system_a = _fit(resample(_channel(audio, SYSTEM_CHANNEL, i_w), SESSION_SR, sr), a_w)
    lead = seconds_to_samples(protocol.lead_silence_s, sr) if protocol.greets_first and cond != "full" else 0
    first = a_b if cond == "none" else 0  # the first clip sample the stream plays: None starts at b
    pad = (-(lead + a_s - first)) % frame if frame > 0 else 0
    offset = lead + pad - first  # the stream sample of clip time 0 (negative under None: C is never played)

    steps: list[Step] = [Silence(lead + pad)]
    if cond != "none":
        steps.append(Play("context", CLIPS["context"], user_a[:a_b]))
    steps += [Play("prompt", CLIPS["prompt"], user_a[a_b:a_s]), Play("window", CLIPS["window"], user_a[a_s:a_w])]
    steps = [st for st in steps if not (isinstance(st, Play) and len(st.audio) == 0)]

    forced = np.concatenate([np.zeros(pad, np.float32), system_a[:a_s]]) if cond == "full" else None
    bound = M3Bound(case=case, system=system_a, sample_rate=sr, clip_start=offset, event_start=offset + a_s,
                    window_end=offset + a_w)
    return EpisodePlan(steps=steps, vad=vad_params(protocol), vad_preset=VAD_PRESET, protocol=protocol.to_dict(),
                       condition=cond, group_id=ev.event_id, gold=gold(case, offset / sr, lead / sr,
                                                                       (offset + a_s) / sr, (offset + a_w) / sr),
                       forced=forced, requires=needs(case),
                       bound_case=bound, system_prompt=NO_INSTRUCTIONS)


def gold(case: M3Case, offset_s: float, lead_s: float, s_stream: float, w_stream: float) -> dict[str, Any]:
    """rec.json's gold (DESIGN.md): the regions on the stream clock, the event and its reference content."""
    ev = case.event

    def at(t: float) -> float:
        return round_ms(offset_s + t)

    return {
        "event_id": ev.event_id, "dialogue_id": ev.dialogue_id, "event_type": ev.event_type,
        "language": ev.language, "domain": ev.domain, "condition": case.condition,
        "context_start_s": round_ms(offset_s), "prompt_start_s": at(ev.prompt_start_s),
        "event_start_s": round_ms(s_stream), "event_end_s": at(ev.event_end_s), "window_end_s": round_ms(w_stream),
        "forced_end_s": round_ms(s_stream) if case.condition == "full" else 0.0, "lead_silence_s": round_ms(lead_s),
        "question": ev.question, "reply": ev.reply, "gold_answer": ev.gold_answer,
        "gold_aliases": list(ev.gold_aliases), "context_dependent": ev.context_dependent,
        "transcribed": ev.transcribed,
        "context": [[u.speaker, u.text, at(u.start_s), at(u.end_s)] for u in ev.utterances
                    if u.start_s < ev.event_start_s],
    }
