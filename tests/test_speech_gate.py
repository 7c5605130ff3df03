"""The build-time speech gate: which items a turn must let the ASR recover, the slower re-speaking of a turn
that misses one, the report, and the real-ASR gate (cache, pickling)."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR
from dataset_builder.schema import Turn
from dataset_builder.speech_gate import (
    CALL_SLOWDOWNS,
    SLOWDOWNS,
    GateReport,
    SpeechCheck,
    SpeechGate,
    TurnCheck,
    garbled,
    gate_record,
    render_turn_checked,
)
from dataset_builder.tts.cache import CachedTTS
from dataset_builder.tts.http_backend import HttpTTS
from dataset_builder.tts.piper_backend import PiperTTS
from metrics.intelligibility import AsrSpeechGate, expected_items, missing_items

NAMES = ["Tom", "Priya", "Diego", "Nikhil", "Mei"]


@pytest.mark.parametrize(("text", "items"), [
    ("Tom, can you ask Aria what time the shop shuts?", {"Tom": 1, "Aria": 1}),
    ("Eleven, Diego, everyone knows that. Skip it, Aria.", {"11": 1, "Diego": 1, "Aria": 1}),
    ("It is Canberra, Nikhil.", {"Nikhil": 1}),
    ("Hey Priya what is twelve times 3?", {"Priya": 1, "12": 1, "3": 1}),
    # A name said about someone, not to them, is not an addressed name; "Aria" always counts.
    ("Diego said Aria's timer went off at 9:05.", {"Aria": 1, "905": 1}),  # said "nine oh five"
    ("Thanks Tom. Thanks, Tom!", {"Tom": 2}),
    ("Nothing to check here.", {}),
])
def test_expected_items(text: str, items: dict[str, int]) -> None:
    assert dict(expected_items(text, NAMES)) == items


def test_missing_items() -> None:
    text = "Eleven, Diego, everyone knows that. Skip it, Aria."
    assert missing_items(text, "11, Diego, everyone knows that. Skip it, area.", NAMES) == ("Aria",)
    assert missing_items(text, "Eleven Diego everyone knows that skip it Arya", NAMES) == ()
    assert missing_items(text, "7, Diego. Skip it, Aria.", NAMES) == ("11",)
    assert missing_items("Thanks Tom. Thanks, Tom!", "Thanks Tom. Thanks.", NAMES) == ("Tom",)
    # A code read digit by digit is one item, heard whether written "4735" or "4 7 3 5", missed with a digit wrong.
    code = "Tom, the wifi code is 4 7 3 5."
    assert missing_items(code, "Tom, the Wi-Fi code is 4735.", NAMES) == ()
    assert missing_items(code, "Tom, the Wi-Fi code is 4, 7, 3, 5.", NAMES) == ()
    assert missing_items(code, "Tom, the Wi-Fi code is 4 7 3.", NAMES) == ("4735",)


class _DurationGate:
    """Passes a clip only when it is at least `min_s` long: slower speech is what gets through."""

    name = "duration"

    def __init__(self, min_s: float) -> None:
        self.min_s = min_s
        self.seen: list[float] = []

    def check(self, text: str, audio: np.ndarray, sr: int, names: Sequence[str] = ()) -> SpeechCheck:
        self.seen.append(audio.size / sr)
        missing = ("Aria",) if audio.size / sr < self.min_s else ()
        return SpeechCheck(missing, 5, len(missing), "heard")


TURN = Turn(turn_id="t0", speaker="A", label="T", text="Aria, set a timer for twelve minutes.")


@pytest.fixture(scope="module")
def piper() -> PiperTTS:
    return PiperTTS()


def test_gate_protocol() -> None:
    assert isinstance(_DurationGate(0), SpeechGate) and isinstance(AsrSpeechGate(), SpeechGate)


def test_a_turn_that_fails_is_re_spoken_slower_until_it_passes(piper: PiperTTS, tmp_path: Path) -> None:
    voice = piper.voices()[0]
    first = piper.synthesize(TURN.text, voice)
    gate = _DurationGate(min_s=1.1 * first.size / SESSION_SR)  # the first attempt fails, a slower one passes
    audio, check = render_turn_checked(TURN, CachedTTS(piper, tmp_path), voice, gate, where="case-1 t0")
    assert check.ok and check.attempts == 2 and check.where == "case-1 t0"
    assert audio.tobytes() == piper.slowed(SLOWDOWNS[0]).synthesize(TURN.text, voice).tobytes()
    assert gate.seen[1] > gate.seen[0]
    # Deterministic: the same decision and bytes again (now from the cache).
    again, _ = render_turn_checked(TURN, CachedTTS(piper, tmp_path), voice, _DurationGate(gate.min_s))
    assert again.tobytes() == audio.tobytes()


def test_a_turn_that_never_passes_is_reported_with_its_first_audio(piper: PiperTTS) -> None:
    voice = piper.voices()[1]
    audio, check = render_turn_checked(TURN, piper, voice, _DurationGate(min_s=60), where="c t0")
    assert not check.ok and check.attempts == 1 + len(SLOWDOWNS) + len(CALL_SLOWDOWNS)
    assert audio.tobytes() == piper.synthesize(TURN.text, voice).tobytes()  # fewest missing: the earliest kept
    report = GateReport("duration")
    report.add([check])
    assert report.to_dict()["failed"] == 1 and report.retried == 1 and report.fixed == 0
    assert report.lines()[0].endswith("1 still missing an item (most often Aria 1)")
    assert report.to_dict()["failures"][0]["turn"] == "c t0"  # each failing turn is in the build info


def test_report_summarises_failures_in_one_line() -> None:
    """A name the checker spells otherwise fails every turn that says it: one line counts them, no line per turn."""
    report = GateReport("g")
    report.add([TurnCheck(f"c{i} t0", "v1", "Mateo, Aria?", 5, SpeechCheck(("Mateo",), 2, 1, "Matteo, Aria?"))
                for i in range(30)] + [TurnCheck("c t1", "v1", "Aria, 3.", 5, SpeechCheck(("Aria", "3"), 2, 2, ""))])
    lines = report.lines()
    assert len(lines) == 2 and "31 still missing an item (most often Mateo 30, Aria 1, 3 1)" in lines[0]


class _CountingGate:
    """Answers the k-th clip it hears (1-based) with `verdict(k)`."""

    name = "counting"

    def __init__(self, verdict: Callable[[int], SpeechCheck]) -> None:
        self.verdict = verdict
        self.heard = 0

    def check(self, text: str, audio: np.ndarray, sr: int, names: Sequence[str] = ()) -> SpeechCheck:
        self.heard += 1
        return self.verdict(self.heard)


def _passes_only(attempt: int) -> _CountingGate:
    """Hears "Aria" in the `attempt`-th clip and in no other."""
    return _CountingGate(lambda k: SpeechCheck((), 5, 0, "heard") if k == attempt
                         else SpeechCheck(("Aria",), 5, 1, "heard"))


def _clear_from(attempt: int) -> _CountingGate:
    """Hears every item, but more than a third of the words wrong before the `attempt`-th clip."""
    return _CountingGate(lambda k: SpeechCheck((), 6, 0 if k >= attempt else 3, "heard"))


def test_after_the_slower_attempts_the_name_is_called_out(piper: PiperTTS, tmp_path: Path) -> None:
    voice = piper.voices()[2]
    # Attempts: as written, slowed x1.3, x1.6, called out, called out x1.3.
    for attempt, expected in [(4, piper.called_out()), (5, piper.called_out().slowed(CALL_SLOWDOWNS[1]))]:
        audio, check = render_turn_checked(TURN, CachedTTS(piper, tmp_path), voice, _passes_only(attempt))
        assert check.ok and check.attempts == attempt
        assert audio.tobytes() == expected.synthesize(TURN.text, voice).tobytes()
    called = piper.synthesize("Aria! Set a timer for twelve minutes.", voice)
    assert piper.called_out().synthesize(TURN.text, voice).tobytes() == called.tobytes()
    # A turn whose spoken form calling out would not change (the name mid-sentence) gets only the slower attempts.
    mid = Turn(turn_id="t1", speaker="A", label="N1", text="Every time the kettle boils, Aria lights up.")
    gate = _passes_only(0)
    _, check = render_turn_checked(mid, piper, voice, gate)
    assert check.attempts == gate.heard == 1 + len(SLOWDOWNS)


def test_a_garbled_turn_is_re_spoken_even_with_every_item_heard(piper: PiperTTS) -> None:
    voice = piper.voices()[0]
    audio, check = render_turn_checked(TURN, piper, voice, _clear_from(3))
    assert check.ok and check.attempts == 3 and check.check.word_errors == 0
    assert audio.tobytes() == piper.slowed(SLOWDOWNS[1]).synthesize(TURN.text, voice).tobytes()
    # Never clear: every attempt is heard, the first (earliest among equals) is kept and nothing is reported.
    audio, check = render_turn_checked(TURN, piper, voice, _clear_from(99))
    assert check.ok and check.attempts == 1 + len(SLOWDOWNS) + len(CALL_SLOWDOWNS)
    assert audio.tobytes() == piper.synthesize(TURN.text, voice).tobytes()
    # 2 errors in 6 words is a third, not more: kept at once. Two words of three wrong in a 3-word turn: too short.
    assert not garbled(SpeechCheck((), 6, 2, "")) and garbled(SpeechCheck((), 6, 3, ""))
    assert not garbled(SpeechCheck((), 3, 2, ""))


def test_a_backend_without_a_slower_variant_is_only_checked() -> None:
    class Fixed(HttpTTS):
        def synthesize(self, text: str, voice: str) -> np.ndarray:
            return np.full(SESSION_SR, 0.1, np.float32)

    tts = Fixed("http://127.0.0.1:9")
    _, check = render_turn_checked(TURN, tts, "alloy", _DurationGate(min_s=60))
    assert check.attempts == 1 and not check.ok


def test_report_pools_word_errors_per_voice() -> None:
    report = GateReport("g")
    checks = [SpeechCheck((), 10, 1, ""), SpeechCheck((), 30, 3, ""), SpeechCheck(("Tom",), 10, 5, "")]
    from dataset_builder.speech_gate import TurnCheck

    report.add([TurnCheck("a", "v1", "x", 1, checks[0]), TurnCheck("b", "v1", "x", 2, checks[1]),
                TurnCheck("c", "v2", "x", 3, checks[2])])
    assert report.per_voice_wer() == {"v1": 0.1, "v2": 0.5}
    assert (report.turns, report.retried, report.fixed) == (3, 2, 1)
    assert "v1 10.0 %, v2 50.0 %" in report.lines()[1]


def test_asr_gate_hears_a_real_turn_and_caches_by_audio(piper: PiperTTS, tmp_path: Path) -> None:
    text = "Tom, can you split ninety-six dollars between three people?"
    audio = piper.synthesize(text, piper.voices()[2])
    gate = AsrSpeechGate(cache_dir=tmp_path)
    check = gate.check(text, audio, SESSION_SR, NAMES)
    assert check.missing == () and check.ref_words == 8, check  # "dollars" is dropped, as for "$96"
    assert len(list((tmp_path / "asr").rglob("*.txt"))) == 1
    # Pickled for a worker: the model is dropped, the cache answers without loading it again.
    copy = pickle.loads(pickle.dumps(gate))
    assert copy._asr is None
    assert copy.check(text, audio, SESSION_SR, NAMES) == check and copy._asr is None
    # A clip that does not say the items misses them.
    other = piper.synthesize("Can you split the bill between us?", piper.voices()[2])
    assert set(gate.check(text, other, SESSION_SR, NAMES).missing) == {"Tom", "96", "3"}


class _WordCountGate:
    """Hears every word (no ASR): lets the build's pool path be tested in seconds."""

    name = "word-count"

    def check(self, text: str, audio: np.ndarray, sr: int, names: Sequence[str] = ()) -> SpeechCheck:
        assert audio.size > 0
        return SpeechCheck((), len(text.split()), 0, text)


def test_build_runs_the_gate_in_its_workers_and_reports_per_voice(tmp_path: Path) -> None:
    from dataset_builder.build import BuildOptions
    from dataset_builder.mpe.build import build

    info = build(tmp_path / "out", BuildOptions(n=1, cache_dir=tmp_path / "cache", workers=2,
                                                speech_gate=_WordCountGate()))
    gate = info["speech_gate"]
    n_turns = sum(v for k, v in info["counts"].items() if k.startswith("label:"))
    assert gate["gate"] == "word-count" and gate["turns"] == n_turns and gate["failed"] == 0
    assert gate["per_voice"] and set(gate["per_voice"]) <= set(PiperTTS().voices())
    assert all(b["wer"] == 0.0 and b["ref_words"] > 0 for b in gate["per_voice"].values())


def test_cli_gate_is_on_by_default_and_lazy(tmp_path: Path) -> None:
    from eval.cli import parser, speech_gate

    assert parser().parse_args(["build", "mpe", "--no-speech-gate"]).no_speech_gate
    assert not parser().parse_args(["build", "mpe"]).no_speech_gate
    gate = speech_gate(tmp_path)
    assert isinstance(gate, AsrSpeechGate) and gate._asr is None  # no model until the first turn is checked
    assert gate.cache_dir is not None and gate.cache_dir.is_relative_to(tmp_path)


def test_gate_record_says_whether_the_gate_ran_and_its_rule(tmp_path: Path) -> None:
    """What the card's build parameters carry: off, or the checker and the constants of its rule."""
    assert gate_record(None) == {"ran": False}
    record = gate_record(AsrSpeechGate(cache_dir=tmp_path))
    assert record["ran"] and record["checker"] == "asr:whisper-tiny-en"
    assert all(f"{f:g}" in record["rule"] for f in (*SLOWDOWNS, *CALL_SLOWDOWNS))
