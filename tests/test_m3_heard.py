"""M3's heard gate: a backchannel clip the events VAD would mishear at some placement is re-spoken at another tempo
(dataset_builder/m3/build.py `speak_clip`), and the Silero gate's count of misheard placements is what the VAD
makes of the clip placed in a dialogue channel (metrics/m3/heard.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR
from dataset_builder.build import BuildOptions
from dataset_builder.m3 import build as m3_build
from dataset_builder.m3.timeline import BC_HEARD, BC_MAX_MS, BC_MIN_MS, TURN_MIN_MS, trim_clip
from dataset_builder.speech_gate import EdgeTolerance, HeardGate
from dataset_builder.tts.cache import CachedTTS
from dataset_builder.tts.kokoro_backend import KokoroTTS
from metrics.m3.extract import EVENTS_VAD
from metrics.m3.heard import CHUNK_MS, SileroHeardGate
from metrics.vad import SileroVAD

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "tts"
MS = SESSION_SR // 1000


@dataclass(frozen=True)
class Bursts:
    """A TTS double: every text is one noise burst of `ms` milliseconds at tempo 1, `ms * factor` when slowed."""

    factor: float = 1.0
    ms: int = 400

    @property
    def name(self) -> str:
        return f"bursts@{self.factor:g}"

    def voices(self) -> list[str]:
        return ["a", "b"]

    def slowed(self, factor: float) -> Bursts:
        return Bursts(round(self.factor * factor, 6), self.ms)

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        n = round(self.ms * self.factor) * MS
        return np.random.default_rng(0).uniform(-0.5, 0.5, n).astype(np.float32)


@dataclass
class LengthGate:
    """A gate double that hears a clip at every placement only when it is at most `heard_ms` long, and otherwise
    mishears it at one placement per 10 ms of length; it records the lengths it was asked about."""

    heard_ms: int
    name: str = "length"

    def __post_init__(self) -> None:
        self.asked: list[int] = []

    def misheard(self, audio: np.ndarray, sr: int, tolerance: EdgeTolerance) -> int:
        ms = audio.size * 1000 // sr
        self.asked.append(ms)
        return 0 if ms <= self.heard_ms else ms // 10


def speak(clip: m3_build.Clip, gate: HeardGate | None) -> tuple[int, float]:
    m3_build.start_speaking(BuildOptions(tts=f"{__name__}:Bursts", heard_gate=gate))
    try:
        trimmed, factor = m3_build.speak_clip(clip)
    finally:
        m3_build._SPEAKER = None
    return trimmed.ms, factor


def bc(ms_limit: int = BC_MAX_MS) -> m3_build.Clip:
    return ("en", "yeah", "a", BC_MIN_MS, ms_limit)


def test_a_bc_heard_as_spoken_is_kept_as_spoken() -> None:
    gate = LengthGate(heard_ms=500)
    assert speak(bc(), gate) == (400, 1.0) and gate.asked == [400]


def test_a_misheard_bc_is_respoken_faster_until_heard() -> None:
    gate = LengthGate(heard_ms=300)  # 400 ms, then x0.87 = 348 and x0.76 = 304 misheard; x0.66 = 264 heard
    assert speak(bc(), gate) == (264, 0.66)
    assert gate.asked == [400, 348, 304, 264]


def test_then_slower_and_the_least_misheard_when_none_is_heard(caplog: pytest.LogCaptureFixture) -> None:
    # Under 250 ms nothing fits; 264 (x0.66) is the shortest that does, so the least misheard of them, and said.
    with caplog.at_level("WARNING", logger="duplex_eval.build"):
        assert speak(bc(), LengthGate(heard_ms=100)) == (264, 0.66)
    assert "'yeah' (a) is misheard by length" in caplog.text and "kept x0.66, misheard at 26" in caplog.text
    # A slower tempo is tried once the faster ones are spent: x1.15 = 460 ms is the first at most 470 ms long.
    gate = LengthGate(heard_ms=470)
    assert speak(("en", "yeah", "a", 420, BC_MAX_MS), gate) == (460, 1.15)
    assert gate.asked == [460]  # 400, 348, 304 and 264 are under the clip's least length: never asked


def test_turns_and_ungated_builds_are_not_asked() -> None:
    gate = LengthGate(heard_ms=0)
    assert speak(("en", "well", "a", TURN_MIN_MS, 0), gate)[1] > 1.0  # too short for a TURN: spoken slower
    assert gate.asked == []
    assert speak(bc(), None) == (400, 1.0)


def test_silence_and_a_steady_tone_are_misheard_everywhere_speech_nowhere(piper) -> None:
    gate = SileroHeardGate()
    t = np.arange(SESSION_SR // 2) / SESSION_SR
    assert gate.misheard(np.zeros(SESSION_SR // 2, np.float32), SESSION_SR, BC_HEARD) == CHUNK_MS
    assert gate.misheard((0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), SESSION_SR, BC_HEARD) == CHUNK_MS
    speech = trim_clip(piper.synthesize("I see.", piper.voices()[0])).audio
    assert gate.misheard(speech, SESSION_SR, BC_HEARD) == 0
    with pytest.raises(ValueError, match="22050 Hz has no whole samples per ms"):
        gate.misheard(speech, 22050, BC_HEARD)


@pytest.mark.parametrize("text,voice", [("うんうん", "kokoro-jf-nezumi"), ("へえ", "kokoro-jf-gongitsune")])
def test_the_gate_counts_what_the_vad_hears_of_the_clip_in_a_channel(text: str, voice: str) -> None:
    """The clip placed at each whole ms of a chunk, in a channel where the same party spoke a second earlier (its
    state forgotten over the silence between): the placements the VAD mishears there are the gate's count."""
    clip = trim_clip(np.asarray(CachedTTS(KokoroTTS(), CACHE).synthesize(text, voice), np.float32))
    before = trim_clip(np.asarray(CachedTTS(KokoroTTS(), CACHE).synthesize("そうなんだ", voice), np.float32)).audio
    vad, tol, misses = SileroVAD(EVENTS_VAD), BC_HEARD, 0
    for lead in range(CHUNK_MS):
        at = (len(before) // MS + 1000 + lead) * MS
        channel = np.zeros(at + clip.audio.size + SESSION_SR, np.float32)
        channel[:before.size] = before
        channel[at:at + clip.audio.size] = clip.audio
        spans = [s for s in vad.spans(channel, SESSION_SR) if s.end_s > at / SESSION_SR - 0.5]
        a = at / SESSION_SR
        misses += not (len(spans) == 1 and -tol.onset_early_s <= spans[0].start_s - a <= tol.onset_late_s
                       and -tol.end_early_s <= spans[0].end_s - a - clip.ms / 1000 <= tol.end_late_s)
    assert SileroHeardGate().misheard(clip.audio, SESSION_SR, tol) == misses
