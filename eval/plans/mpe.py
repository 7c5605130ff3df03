"""The Duplex-MPE user-stream plan (docs/benchmarks/mpe.md): preamble, turns with gaps, waits after T, N4 windows."""

from __future__ import annotations

import numpy as np

from dataset_builder.audio import SESSION_SR, resample, seconds_to_samples
from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.schema import Case
from eval.schedule import EpisodePlan, Play, Silence, Step, TakeTurn
from metrics.vad import vad_of

PREAMBLE_ID = "preamble"


def cut_clips(case: Case, audio: np.ndarray, sr: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The preamble and each turn's clip, cut from the nominal 24 kHz audio and resampled to `sr`."""

    def cut(a: float, b: float) -> np.ndarray:
        return resample(audio[seconds_to_samples(a):seconds_to_samples(b)], SESSION_SR, sr)

    return cut(0.0, case.preamble_end_s), {c.turn_id: cut(c.start_s, c.end_s) for c in case.clips}


def strata(case: Case) -> tuple[tuple[str], str]:
    """`run --sample`: whole scenario pairs (explicit and implicit together: the paired test needs both), spread over
    the cue kinds (both cases of a pair share theirs)."""
    return (f"cue {case.script.cue or 'unknown'}",), case.script.pair_id


def plan(case: Case, audio: np.ndarray, protocol: MPEProtocol, sr: int) -> EpisodePlan:
    """The whole episode: no system prompt (the duty preamble is spoken), steps, the MPE VAD, the gold."""
    s = case.script
    vad = vad_of(protocol)
    gold = {"question": s.question, "gold_answer": s.gold_answer, "gold_aliases": list(s.gold_aliases),
            "task_type": s.task_type, "t_position": s.t_position, "labels": {t.turn_id: t.label for t in s.turns}}
    return EpisodePlan(steps=user_steps(case, audio, protocol, sr), vad=vad, vad_preset="mpe",
                       protocol=protocol.to_dict(), condition=s.condition, group_id=s.pair_id, gold=gold)


def user_steps(case: Case, audio: np.ndarray, protocol: MPEProtocol, sr: int) -> list[Step]:
    preamble, clips = cut_clips(case, audio, sr)
    confirm_s = protocol.vad_min_speech_ms / 1000
    steps: list[Step] = [Play(PREAMBLE_ID, "PRE", preamble, text=case.preamble_text),
                         Silence(seconds_to_samples(protocol.post_preamble_s, sr))]
    for turn, clip in zip(case.script.turns, case.clips, strict=True):
        # N4R plays after a fixed answering window whether or not the model is speaking.
        gap = protocol.n4_answer_window_s if turn.label == "N4R" else clip.gap_before_s
        steps.append(Silence(seconds_to_samples(gap, sr)))
        steps.append(Play(turn.turn_id, turn.label, clips[turn.turn_id], text=turn.text))
        if turn.label == "T":
            # No onset within the window (plus the VAD's confirmation delay): move on; else wait for its end.
            steps.append(TakeTurn(protocol.endpoint_s, protocol.t_onset_window_s + confirm_s,
                                  protocol.response_cap_s))
    steps.append(Silence(seconds_to_samples(protocol.tail_s, sr)))
    # Never cut the model off mid-utterance at the end: wait for its silence (capped).
    steps.append(TakeTurn(protocol.endpoint_s, 0.0, protocol.response_cap_s))
    return steps
