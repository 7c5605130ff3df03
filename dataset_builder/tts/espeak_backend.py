"""Offline formant TTS with the espeak-ng binary: robotic, but ~1000x real time and many distinct voices.

Words in `lexicon.json` are spoken from their espeak-ng phoneme mnemonics (`[[ ]]` in the input text).
"""

from __future__ import annotations

import io
import shutil
import subprocess

import numpy as np
import soundfile as sf

from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.tts.lexicon import load_lexicon
from dataset_builder.tts.spoken import SPOKEN_FORM_VERSION, spoken_form
from dataset_builder.tts.voices import peak_normalize, trim_silence

# Male and female variants interleaved so that the first few voices of a scene already differ in gender.
HUMAN_VOICES: list[str] = [
    "en-us+m3",
    "en-us+f2",
    "en-us+m1",
    "en-us+f4",
    "en-us+m5",
    "en-us+f1",
    "en-us+m7",
    "en-us+f5",
    "en-us+m2",
    "en-us+f3",
]
ASSISTANT_VOICE = "en-us+m4"  # reserved: never assigned to a human speaker


class EspeakTTS:
    """espeak-ng through its `--stdout` WAV output, resampled to the 24 kHz session clock."""

    def __init__(self, binary: str = "espeak-ng", words_per_minute: int = 165, call_out: bool = False) -> None:
        self.binary = binary
        self.words_per_minute = int(words_per_minute)
        self.call_out = bool(call_out)
        self.lexicon = load_lexicon()
        self.name = (f"espeak-ng:wpm={self.words_per_minute}+lex={self.lexicon.digest}+said={SPOKEN_FORM_VERSION}"
                     + ("+call" if call_out else ""))
        self.assistant_voice = ASSISTANT_VOICE
        self._path: str | None = None

    def voices(self) -> list[str]:
        return list(HUMAN_VOICES)

    def slowed(self, factor: float) -> EspeakTTS:
        """The same voices `factor` times slower (the speech gate's retry)."""
        return EspeakTTS(self.binary, max(80, round(self.words_per_minute / factor)), self.call_out)

    def called_out(self) -> EspeakTTS:
        """The same voices calling out vocative names (`Lexicon.called_out`; the speech gate's last retries)."""
        return EspeakTTS(self.binary, self.words_per_minute, call_out=True)

    def _binary_path(self) -> str:
        if self._path is None:
            path = shutil.which(self.binary)
            if path is None:
                raise RuntimeError(
                    f"espeak-ng binary {self.binary!r} not found on PATH; install it with "
                    "`apt-get install espeak-ng`"
                )
            self._path = path
        return self._path

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        # Text goes through stdin so that text starting with "-" is never read as an option.
        cmd = [self._binary_path(), "--stdout", "-v", voice, "-s", str(self.words_per_minute)]
        spoken = self.lexicon.apply(spoken_form(text), "espeak", call_out=self.call_out)
        proc = subprocess.run(cmd, input=spoken.encode("utf-8"), capture_output=True, check=False)
        if proc.returncode != 0 or not proc.stdout:
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise RuntimeError(f"espeak-ng failed for voice {voice!r} (exit {proc.returncode}): {err}")
        audio, sr = sf.read(io.BytesIO(proc.stdout), dtype="float32", always_2d=True)
        audio = resample(audio.mean(axis=1), int(sr), SESSION_SR)
        return peak_normalize(trim_silence(audio, SESSION_SR))
