"""Timbre changes that keep the pitch: move the spectral envelope (formants) and tilt it, frame by frame.

Resampling moves pitch and formants together; people differ in both, but not by the same factor (a typical
female voice is ~1.7x a male voice's pitch with formants only ~1.15x higher). After a resample by the pitch
factor, each STFT frame's cepstrally smoothed log envelope is warped along frequency to where the formant factor
puts it, and the frame is multiplied by the ratio (new envelope / old envelope). The harmonics, hence the pitch,
stay where the resample put them. Pure numpy/scipy, no randomness: the same input gives the same bytes.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import istft, stft

NFFT = 1024
HOP = 256
LIFTER_S = 0.0025  # cepstral cut-off: 2.5 ms keeps the envelope below the harmonics of pitches up to ~400 Hz


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
