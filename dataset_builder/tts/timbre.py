"""Voice changes: pitch and formants moved apart, and a spectral tilt. No randomness: the same input gives the
same bytes.

Resampling moves pitch and formants together; people differ in both, but not by the same factor (a typical
female voice is ~1.7x a male voice's pitch with formants only ~1.15x higher). Two ways are kept:

- `shift_pitch_and_formants` (the voice bank's): Praat's "Change gender" through `parselmouth`. The sound is
  resampled by the formant factor, then PSOLA moves each pitch period to the new pitch and restores the duration.
  Under whisper tiny.en its five bank voices had 7.4-8.6 % WER on `benchmarks/bench_speech.py`'s 200 sentences
  (ratio 1.17), the unshifted voice 8.5 %.
- `reshape_timbre` (the first human bank's, kept so older scripts render the same): after a resample by the pitch
  factor, each STFT frame's cepstrally smoothed log envelope is warped along frequency to where the formant factor
  puts it, and the frame is multiplied by the ratio (new envelope / old envelope). The fixed cepstral cut smooths
  the envelope poorly under sparse harmonics; its five voices had 7.8-10.3 % WER on the same sample (ratio 1.31).
  It also gives the tilt, which moves no harmonic.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.signal import istft, stft

NFFT = 1024
HOP = 256
LIFTER_S = 0.0025  # cepstral cut-off: 2.5 ms keeps the envelope below the harmonics of pitches up to ~400 Hz


# Praat's pitch analysis range for the source voice (piper's joe: median ~99 Hz).
PITCH_FLOOR_HZ = 60.0
PITCH_CEILING_HZ = 400.0
# Praat needs a few periods of the pitch floor to analyse a sound; shorter clips are padded with silence.
MIN_ANALYSIS_S = 0.1
PSOLA_SEED = 20_261_130


def shift_pitch_and_formants(audio: np.ndarray, sr: int, pitch_ratio: float, formant_ratio: float) -> np.ndarray:
    """Median pitch x `pitch_ratio` and formants x `formant_ratio` (>1 higher), same duration and length (Praat's
    Change gender: resample by the formant ratio, then PSOLA to the new pitch and the old duration). A clip with
    no voiced frame keeps its pitch; identity settings return the input untouched."""
    import parselmouth
    from parselmouth.praat import call, run

    audio = np.asarray(audio, dtype=np.float32)
    if pitch_ratio <= 0 or formant_ratio <= 0:
        raise ValueError(f"pitch and formant ratios must be > 0, got {pitch_ratio}, {formant_ratio}")
    if (pitch_ratio == 1.0 and formant_ratio == 1.0) or audio.size == 0:
        return audio.copy()
    padded = np.zeros(max(audio.size, int(np.ceil(MIN_ANALYSIS_S * sr))), np.float64)
    padded[: audio.size] = audio
    sound = parselmouth.Sound(padded, sampling_frequency=sr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no voiced segments": the median is NaN and the pitch is kept
        median = call(call(sound, "To Pitch", 0.0, PITCH_FLOOR_HZ, PITCH_CEILING_HZ), "Get quantile", 0, 0, 0.5,
                      "Hertz")
        new_median = 0.0 if np.isnan(median) else median * pitch_ratio  # Praat reads 0 as "keep the pitch"
        # PSOLA draws random numbers (Praat's global generator): seeded per call, the same input gives the same bytes.
        run(f"random_initializeWithSeedUnsafelyButPredictably ({PSOLA_SEED})")
        out = call(sound, "Change gender", PITCH_FLOOR_HZ, PITCH_CEILING_HZ, formant_ratio, new_median, 1.0, 1.0)
    values = np.asarray(out.values[0], dtype=np.float32)
    result = np.zeros(audio.size, np.float32)
    n = min(audio.size, values.size)
    result[:n] = values[:n]
    return result


def _smooth_log_envelope(log_mag: np.ndarray, n_lifter: int) -> np.ndarray:
    cep = np.fft.irfft(log_mag, axis=0)
    cep[n_lifter:-n_lifter] = 0.0
    return np.fft.rfft(cep, axis=0).real[: log_mag.shape[0]]


def reshape_timbre(audio: np.ndarray, sr: int, formant_ratio: float = 1.0, tilt_db_per_octave: float = 0.0
                   ) -> np.ndarray:
    """Formants moved by `formant_ratio` (>1 higher) and the spectrum tilted by `tilt_db_per_octave` around
    1 kHz (>0 brighter); pitch and duration unchanged. Identity settings return the input untouched."""
    audio = np.asarray(audio, dtype=np.float32)
    if formant_ratio <= 0:
        raise ValueError(f"formant_ratio must be > 0, got {formant_ratio}")
    if (formant_ratio == 1.0 and tilt_db_per_octave == 0.0) or audio.size < NFFT:
        return audio.copy()
    freqs, _, spec = stft(audio.astype(np.float64), sr, window="hann", nperseg=NFFT, noverlap=NFFT - HOP,
                          boundary="even", padded=True)
    log_env = _smooth_log_envelope(np.log(np.abs(spec) + 1e-9), int(LIFTER_S * sr))
    gain = np.empty_like(log_env)
    source = freqs / formant_ratio  # the new envelope at f is the old one at f / ratio
    for i in range(log_env.shape[1]):
        gain[:, i] = np.interp(source, freqs, log_env[:, i], right=log_env[-1, i]) - log_env[:, i]
    if tilt_db_per_octave:
        octaves = np.log2(np.maximum(freqs, 100.0) / 1000.0)
        gain += (tilt_db_per_octave * np.log(10) / 20) * octaves[:, None]
    _, out = istft(spec * np.exp(gain), sr, window="hann", nperseg=NFFT, noverlap=NFFT - HOP, boundary=True)
    return out[: audio.size].astype(np.float32)
