"""Render a turn's segments to audio: TTS for speech, exact zero samples for pauses (docs/conventions.md)."""

from __future__ import annotations

import numpy as np

from dataset_builder.audio import silence
from dataset_builder.schema import Turn
from dataset_builder.tts import TTSBackend


def render_turn(turn: Turn, tts: TTSBackend, voice: str) -> np.ndarray:
    """The turn's audio at 24 kHz; a turn without segments is its text spoken in one piece."""
    parts = [tts.synthesize(seg.text, voice) if seg.kind == "speech" else silence(seg.duration_s)
             for seg in turn.speech_segments()]
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)
