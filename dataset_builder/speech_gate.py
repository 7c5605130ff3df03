"""The build-time intelligibility gate: speak a turn, let a checker listen, re-speak it slower (and, for the
assistant's name, called out) if it missed an addressed name, "Aria" or a number, and report what still fails.

The checker (an ASR) lives in `metrics`, which dataset_builder must not import: the CLI passes one in through
the `SpeechGate` protocol below (`metrics.intelligibility.AsrSpeechGate`). A gate must be picklable so that
build workers in other processes can each hold one.

Retries are deterministic: attempt k speaks through the backend's `slowed(SLOWDOWNS[k - 1])` variant (a longer
piper length scale, fewer espeak words per minute). Then, where the turn opens or closes a sentence with a name
the lexicon marks `call` (the assistant's), its `called_out()` variant speaks it as a call ("Aria! What...",
"..., thanks... Aria!"), at each of CALL_SLOWDOWNS. A backend without these variants (http) is only checked and
reported. A turn is also re-spoken when the checker misheard more than a third of its words (`garbled`), items or
not. The first attempt that leaves nothing missing and is not garbled is kept; if none does, the attempt missing the
fewest items (then not garbled) is kept, the earliest among equals, and a turn still missing an item is reported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dataset_builder.audio import SESSION_SR
from dataset_builder.schema import Turn
from dataset_builder.segments import render_turn
from dataset_builder.tts.base import TTSBackend
from dataset_builder.tts.lexicon import load_lexicon

# Length-scale factors of the 2nd and 3rd attempt. Piper's durations grow less than the factor (x1.3 made a
# sentence ~1.1x longer, x1.5 ~1.35x), so the steps are wide.
SLOWDOWNS: tuple[float, ...] = (1.3, 1.6)
# A turn the checker mostly misheard is re-spoken too, even with every item heard: above this word error rate...
GARBLED_WER = 0.34
MIN_GARBLED_WORDS = 4  # ... in a turn of at least this many words (one slip in "Thanks, Aria." is not garbling)
# Length-scale factors of the called-out attempts that follow (only for a turn whose spoken form they change).
CALL_SLOWDOWNS: tuple[float, ...] = (1.0, 1.3)


@dataclass(frozen=True)
class SpeechCheck:
    """What a gate heard in one clip: items the text says that the transcript lacks, and word error counts."""

    missing: tuple[str, ...]
    ref_words: int
    word_errors: int
    transcript: str


@runtime_checkable
class SpeechGate(Protocol):
    name: str

    def check(self, text: str, audio: np.ndarray, sr: int, names: Sequence[str] = ()) -> SpeechCheck:
        """Listen to `audio` (mono float32 at `sr` Hz) that should say `text`; `names` are the people who may be
        addressed by name in it (the assistant's name always counts)."""
        ...


@dataclass(frozen=True)
class EdgeTolerance:
    """How far a VAD's span may lie from a clip's own edges (seconds, each >= 0): its onset up to `onset_early_s`
    before the clip starts or `onset_late_s` after, its end up to `end_early_s` before the clip ends or `end_late_s`
    after."""

    onset_early_s: float
    onset_late_s: float
    end_early_s: float
    end_late_s: float


@runtime_checkable
class HeardGate(Protocol):
    """The build-time VAD check of a short clip (M3: every backchannel). A VAD scores fixed chunks, so what it hears
    of a brief sound can depend on where the sound starts within a chunk: a hummed "うんうん" measured heard whole
    at some placements, half at others and not at all at two. The gate counts the placements it would mishear;
    the M3 builder re-speaks a clip at another tempo until none is left (dataset_builder/m3/build.py `speak_clip`).
    The VAD lives in `metrics`, which dataset_builder must not import: the CLI passes one in
    (`metrics.m3.heard.SileroHeardGate`). Must be picklable (build workers)."""

    name: str

    def misheard(self, audio: np.ndarray, sr: int, tolerance: EdgeTolerance) -> int:
        """How many placements of `audio` (mono float32 at `sr` Hz, trimmed to its sound) alone between silences,
        one at each whole millisecond of the VAD's chunk, the VAD does not hear as one stretch of speech whose
        edges are within `tolerance` of the clip's."""
        ...


@runtime_checkable
class Slowable(Protocol):
    def slowed(self, factor: float) -> TTSBackend | None:
        """The same voices spoken `factor` times slower, under a different `name` (cache key); None if none."""
        ...


@runtime_checkable
class CallingOut(Protocol):
    def called_out(self) -> TTSBackend | None:
        """The same voices calling out vocative names (`Lexicon.called_out`), under a different `name`; None if
        none."""
        ...


def gate_record(gate: SpeechGate | None) -> dict[str, Any]:
    """What a dataset card says about the speech gate: whether it ran, with which checker, and its rule (the
    constants above), so two folders built with and without it can be told apart (docs/benchmarks/mpe.md)."""
    if gate is None:
        return {"ran": False}
    return {"ran": True, "checker": gate.name,
            "rule": ("re-speak a turn whose addressed name, 'Aria' or a number the checker does not hear, or with "
                     f"more than {GARBLED_WER:g} of its words misheard ({MIN_GARBLED_WORDS} words or more); "
                     f"attempts at length scale {', '.join(f'{f:g}' for f in SLOWDOWNS)}, then the name called "
                     f"out at {', '.join(f'{f:g}' for f in CALL_SLOWDOWNS)}; the attempt missing the fewest "
                     "items is kept")}


def retry_backends(tts: TTSBackend, text: str) -> list[TTSBackend]:
    """The backends of the attempts after the first, in order (see the module docstring)."""
    backends: list[TTSBackend] = []
    if isinstance(tts, Slowable):
        backends += [b for f in SLOWDOWNS if (b := tts.slowed(f)) is not None]
    if isinstance(tts, CallingOut) and load_lexicon().called_out(text) != text and (call := tts.called_out()):
        for f in CALL_SLOWDOWNS:  # a variant that cannot be slowed is tried once, not once per factor
            variant = call if f == 1.0 else call.slowed(f) if isinstance(call, Slowable) else None
            if variant is not None:
                backends.append(variant)
    return backends


@dataclass(frozen=True)
class TurnCheck:
    """The gate's record of one turn: the voice, how many attempts were spoken, and the kept attempt's check."""

    where: str  # "<case id> <turn id>"
    voice: str
    text: str
    attempts: int
    check: SpeechCheck

    @property
    def ok(self) -> bool:
        return not self.check.missing


def garbled(check: SpeechCheck) -> bool:
    """More than GARBLED_WER of the turn's words misheard (turns of MIN_GARBLED_WORDS words or more)."""
    return check.ref_words >= MIN_GARBLED_WORDS and check.word_errors > GARBLED_WER * check.ref_words


def _shortfall(check: SpeechCheck) -> tuple[int, bool]:
    return len(check.missing), garbled(check)


def render_turn_checked(turn: Turn, tts: TTSBackend, voice: str, gate: SpeechGate, *, names: Sequence[str] = (),
                        where: str = "") -> tuple[np.ndarray, TurnCheck]:
    """The turn's audio, re-spoken while the gate misses something or hears it garbled (see the module
    docstring); `names` are the scene's people, `where` names the turn in the report."""
    backends = [tts, *retry_backends(tts, turn.text)]
    best: tuple[np.ndarray, SpeechCheck] | None = None
    attempts = 0
    for backend in backends:
        audio = render_turn(turn, backend, voice)
        check = gate.check(turn.text, audio, SESSION_SR, names)
        attempts += 1
        shortfall = _shortfall(check)
        if best is None or shortfall < _shortfall(best[1]):
            best = (audio, check)
        if shortfall == (0, False):
            break
    assert best is not None
    return best[0], TurnCheck(where or turn.turn_id, voice, turn.text, attempts, best[1])


@dataclass
class GateReport:
    """Counts over many TurnChecks (mergeable across build workers) and the lines the build log prints."""

    gate: str
    turns: int = 0
    retried: int = 0  # turns that needed more than one attempt
    fixed: int = 0  # ... and then passed
    failures: list[TurnCheck] = field(default_factory=list)
    voice_words: dict[str, list[int]] = field(default_factory=dict)  # voice -> [reference words, errors]

    def add(self, checks: Iterable[TurnCheck]) -> None:
        for c in checks:
            self.turns += 1
            self.retried += c.attempts > 1
            self.fixed += c.attempts > 1 and c.ok
            if not c.ok:
                self.failures.append(c)
            counts = self.voice_words.setdefault(c.voice, [0, 0])
            counts[0] += c.check.ref_words
            counts[1] += c.check.word_errors

    def per_voice_wer(self) -> dict[str, float]:
        return {v: (e / w if w else 0.0) for v, (w, e) in sorted(self.voice_words.items())}

    def to_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "turns": self.turns, "retried": self.retried, "fixed": self.fixed,
                "failed": len(self.failures),
                "per_voice": {v: {"ref_words": w, "errors": e, "wer": round(e / w, 4) if w else 0.0}
                              for v, (w, e) in sorted(self.voice_words.items())},
                "failures": [{"turn": c.where, "voice": c.voice, "text": c.text, "missing": list(c.check.missing),
                              "transcript": c.check.transcript} for c in self.failures]}

    def lines(self, most: int = 5) -> list[str]:
        """Two lines for the build's summary: the counts, with the items turns still miss most often (a name the
        checker spells otherwise, like "Mateo", recurs in every turn that says it), and the per-voice word error
        rate. Each failing turn, with its transcript, is in `to_dict()` (the build's build-info.json)."""
        missed = Counter(item for c in self.failures for item in c.check.missing)
        often = ", ".join(f"{item} {n}" for item, n in missed.most_common(most))
        more = f", {len(missed) - most} other items" if len(missed) > most else ""
        out = [f"speech gate ({self.gate}): {self.turns} turns checked, {self.retried} re-spoken, "
               f"{self.fixed} of them then passed, {len(self.failures)} still missing an item"
               + (f" (most often {often}{more})" if missed else "")]
        out.append("  per-voice word error rate: " + ", ".join(
            f"{v} {100 * r:.1f} %" for v, r in self.per_voice_wer().items()))
        return out
