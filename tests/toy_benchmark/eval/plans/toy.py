"""The toy's user stream: lead silence, the question, then the answer window and a tail of silence.

    lead_s | question ("q") | answer_window_s + tail_s

A fixed schedule: every model hears the same stream. The window is anchored on the question's realised end
(rec.json's timeline), which the scorer reads back.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from dataset_builder.toy.protocol import ToyProtocol
from dataset_builder.toy.rows import ToyCase

from dataset_builder.audio import SESSION_SR, resample, seconds_to_samples
from eval.schedule import EpisodePlan, Play, Silence
from metrics.vad import VAD_PRESETS

QUESTION = "q"  # the clip's turn id, the scorer's anchor


def plan(case: ToyCase, audio: np.ndarray, protocol: ToyProtocol, sr: int) -> EpisodePlan:
    vad = replace(VAD_PRESETS["ifeval"], min_speech_ms=protocol.vad_min_speech_ms)
    steps = [Silence(seconds_to_samples(protocol.lead_s, sr)),
             Play(QUESTION, "question", resample(audio, SESSION_SR, sr)),
             Silence(seconds_to_samples(protocol.answer_window_s + protocol.tail_s, sr))]
    return EpisodePlan(steps=steps, vad=vad, vad_preset="ifeval", protocol=protocol.to_dict(), condition="ask",
                       group_id=case.case_id, gold=case.gold())
