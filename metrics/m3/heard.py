"""The M3 build's heard gate: would the events VAD hear a short clip where it lies, wherever it is placed?

Silero scores fixed 32 ms chunks, so what it hears of a brief, soft sound depends on where the sound starts within
a chunk. Measured on Kokoro's "うんうん" (0.63 s, one voice): heard whole when it starts on a chunk edge, half of it
2 ms later, not at all 8 ms later. Clips are placed on whole milliseconds, and on a silent channel the VAD forgets
its state after ten silent chunks (metrics/vad.py), so a clip's 32 placements, each alone between silences, are
every way the extract-back VAD can meet it: the builder keeps a BC clip only if all of them are heard
(dataset_builder/m3/build.py `speak_clip`).
"""

from __future__ import annotations

import numpy as np

from dataset_builder.speech_gate import EdgeTolerance
from metrics.m3.extract import EVENTS_VAD
from metrics.vad import CHUNK_S, SileroVAD, VADParams

CHUNK_MS = round(CHUNK_S * 1000)
# Silence after the clip: long enough for any span to close, and for the clip's end to be heard as an end.
TAIL_S = 0.5


class SileroHeardGate:
    """`HeardGate` (dataset_builder.speech_gate) through Silero under the events VAD settings (`EVENTS_VAD`)."""

    def __init__(self, params: VADParams = EVENTS_VAD) -> None:
        self.params = params
        self.name = f"silero-vad (threshold {params.threshold}, leave < {params.neg_threshold})"

    def misheard(self, audio: np.ndarray, sr: int, tolerance: EdgeTolerance) -> int:
        clip = np.asarray(audio, dtype=np.float32).ravel()
        if sr % 1000:
            raise ValueError(f"clips are placed on whole milliseconds; {sr} Hz has no whole samples per ms")
        vad, per_ms, length_s = SileroVAD(self.params), sr // 1000, clip.size / sr
        tail = np.zeros(round(TAIL_S * sr), np.float32)
        misses = 0
        for lead_ms in range(CHUNK_MS):
            signal = np.concatenate([np.zeros(lead_ms * per_ms, np.float32), clip, tail])
            spans = vad.spans(signal, sr)
            at = lead_ms / 1000
            heard = len(spans) == 1 and (
                -tolerance.onset_early_s <= spans[0].start_s - at <= tolerance.onset_late_s
                and -tolerance.end_early_s <= spans[0].end_s - at - length_s <= tolerance.end_late_s)
            misses += not heard
        return misses
