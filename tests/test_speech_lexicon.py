"""The pronunciation lexicon: one data file, applied by piper (IPA) and espeak-ng (mnemonics), checked by the
real phonemiser, the real espeak-ng binary and the default ASR."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from dataset_builder.audio import SESSION_SR
from dataset_builder.tts.espeak_backend import EspeakTTS
from dataset_builder.tts.lexicon import LEXICON_PATH, LexiconError, load_lexicon, parse_lexicon
from dataset_builder.tts.piper_backend import PiperTTS, _load_voice
from dataset_builder.tts.spoken import SPOKEN_FORM_VERSION, spoken_form
from metrics.intelligibility import heard_aria

LEX = load_lexicon()


def test_lexicon_file_is_valid_and_says_aria() -> None:
    data = json.loads(LEXICON_PATH.read_text(encoding="utf-8"))
    assert parse_lexicon(data) == LEX
    words = {e.word for e in LEX.entries}
    assert {"Aria", "Aria's"} <= words
    assert len(LEX.digest) == 8


@pytest.mark.parametrize(("text", "ipa", "espeak"), [
    ("Aria, what time is it?", "[[ˈɑːɹiʲə,]] what time is it?", "[['A:ri;@]], what time is it?"),
    ("What time is it, Aria?", "What time is it, [[ˈɑːɹiʲə?]]", "What time is it, [['A:ri;@]]?"),
    ("Hey aria how are you", "Hey [[ˈɑːɹiʲə]] how are you", "Hey [['A:ri;@]] how are you"),
    ("Aria's timer.", "[[ˈɑːɹiʲəz]] timer.", "[['A:ri;@z]] timer."),
    # A full stop right after the name is spoken as its end_mark ("!"); other marks stay as written.
    ("No need, Aria. Thanks.", "No need, [[ˈɑːɹiʲə!]] Thanks.", "No need, [['A:ri;@]]! Thanks."),
    ("Better than Aria's.", "Better than [[ˈɑːɹiʲəz!]]", "Better than [['A:ri;@z]]!"),
    ("Aria... no.", "[[ˈɑːɹiʲə...]] no.", "[['A:ri;@]]... no."),
    # Whole words only: other names and hyphenated words keep the engine's own reading.
    ("Maria, Ariana and aria-like Arias", "Maria, Ariana and aria-like Arias", "Maria, Ariana and aria-like Arias"),
])
def test_apply_puts_punctuation_where_each_engine_keeps_it(text: str, ipa: str, espeak: str) -> None:
    assert LEX.apply(text, "ipa") == ipa
    assert LEX.apply(text, "espeak") == espeak


@pytest.mark.parametrize(("entry", "message"), [
    ({"word": "Aria", "ipa": "ˈɑːɹiːʌ", "espeak": "'A:ri:V", "extra": 1}, "unknown field"),
    ({"word": "two words", "ipa": "x", "espeak": "x"}, "one word"),
    ({"word": "Aria", "ipa": "ˈɑː]]ɹiːə", "espeak": "x"}, "'ipa'"),
    ({"word": "Aria", "ipa": "ˈɑːɹiːʌ", "espeak": "A ri"}, "'espeak'"),
    ({"word": "Aria", "ipa": "ˈɑːɹiːʌ", "espeak": "'A:ri:V", "end_mark": ","}, "'end_mark'"),
])
def test_bad_entries_are_named(entry: dict[str, object], message: str) -> None:
    with pytest.raises(LexiconError, match=message):
        parse_lexicon({"entries": [entry]}, source="t.json")


@pytest.mark.parametrize(("text", "called"), [
    # A vocative opening a sentence is called with "!"; one closing a sentence gets a pause before it.
    ("Aria, random one, what splits a bike chain?", "Aria! Random one, what splits a bike chain?"),
    ("Okay. Aria, what time is it?", "Okay. Aria! What time is it?"),
    ("A chain tool, don't worry about it, Aria.", "A chain tool, don't worry about it... Aria!"),
    ("Thanks, Aria! Bye.", "Thanks... Aria! Bye."),
    # A question, a name mid-sentence or possessive, and names the lexicon does not mark `call` are left alone.
    ("Can you hear me, Aria?", "Can you hear me, Aria?"),
    ("Every time the kettle boils, Aria lights up.", "Every time the kettle boils, Aria lights up."),
    ("Theo, Aria's list is long, Maria.", "Theo, Aria's list is long, Maria."),
    ("Arias, Maria, Ariana.", "Arias, Maria, Ariana."),
])
def test_called_out_sets_the_assistants_name_apart(text: str, called: str) -> None:
    assert LEX.called_out(text) == called
    assert LEX.apply(text, "ipa", call_out=True) == LEX.apply(called, "ipa")
    assert LEX.apply(text, "ipa") == LEX.apply(text, "ipa", call_out=False)


def test_call_is_validated_and_leaves_the_digest() -> None:
    # `call` only matters to a backend speaking with call_out, whose name then says so: the digest stays.
    e = {"word": "Aria", "ipa": "a", "espeak": "a"}
    assert parse_lexicon({"entries": [e]}).digest == parse_lexicon({"entries": [{**e, "call": True}]}).digest
    with pytest.raises(LexiconError, match="'call' must be true or false"):
        parse_lexicon({"entries": [{**e, "call": "yes"}]}, source="t.json")
    assert PiperTTS().called_out().name == PiperTTS().name + "+call"
    assert PiperTTS().called_out().slowed(1.3).name == PiperTTS().slowed(1.3).name + "+call"
    assert EspeakTTS().called_out().name == EspeakTTS().name + "+call"


def test_end_mark_is_part_of_the_digest() -> None:
    # It changes the audio, so it must change the cache key; a plain "." is the default and hashes as before.
    e = {"word": "Aria", "ipa": "a", "espeak": "a"}
    plain, dot, bang = (parse_lexicon({"entries": [x]}) for x in (e, {**e, "end_mark": "."}, {**e, "end_mark": "!"}))
    assert plain.digest == dot.digest != bang.digest


def test_duplicate_word_rejected_case_insensitively() -> None:
    e = {"word": "Aria", "ipa": "a", "espeak": "a"}
    with pytest.raises(LexiconError, match="listed twice"):
        parse_lexicon({"entries": [e, {**e, "word": "ARIA"}]})


def test_piper_speaks_the_override_and_keeps_the_pause() -> None:
    voice = _load_voice()
    (default,) = voice.phonemize("Hey Aria, what time is it?")
    (override,) = voice.phonemize(LEX.apply("Hey Aria, what time is it?", "ipa"))
    assert "".join(default).startswith("hˈeɪ ˈɛɹ")  # espeak-ng's own reading: the vowel of "area"
    assert "".join(override) == "hˈeɪ ˈɑːɹiʲə, wˌʌt tˈaɪm ɪz ɪt?"
    # The IPA is what espeak-ng itself makes of the respelling "Ahria", so piper hears phonemes it was trained on.
    (respelt,) = voice.phonemize("Hey Ahria, what time is it?")
    assert "".join(respelt) == "".join(override)


def test_backend_names_carry_the_lexicon_digest() -> None:
    # The name is the cache key: a changed lexicon or spoken-form rule must not be served clips spoken the old way.
    said = f"+said={SPOKEN_FORM_VERSION}"
    assert PiperTTS().name.endswith(f"+lex={LEX.digest}{said}")
    assert EspeakTTS().name.endswith(f"+lex={LEX.digest}{said}")


def test_clock_times_are_spoken_as_people_say_them() -> None:
    """espeak-ng reads "9:05" as "nine zero five"; the backends say "nine oh five" and "four o'clock"."""
    assert spoken_form("We leave at 9:05 and we're back by 4:00, or 10:45.") == (
        "We leave at nine oh five and we're back by four o'clock, or ten forty-five.")
    assert spoken_form("Room 101, code 4 7 1 9.") == "Room 101, code 4 7 1 9."  # only clock times change
    voice = _load_voice()
    (said,) = voice.phonemize(spoken_form("at 9:05"))
    assert "z" not in "".join(said)  # no "zero"


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng absent: apt-get install espeak-ng")
def test_espeak_reads_the_override() -> None:
    def mnemonics(text: str) -> str:
        run = subprocess.run(["espeak-ng", "-q", "-x", "-v", "en-us", text], capture_output=True, check=True)
        return run.stdout.decode()

    assert "'A:ri;@" not in mnemonics("Hey Aria, what time is it?")
    assert "'A:ri;@" in mnemonics(LEX.apply("Hey Aria, what time is it?", "espeak"))
    tts = EspeakTTS()
    plain = EspeakTTS().synthesize("Hey there, what time is it?", tts.voices()[0])
    assert plain.size > 0 and tts.synthesize("Hey Aria, what time is it?", tts.voices()[0]).size > 0


def test_default_asr_hears_aria_from_piper() -> None:
    from metrics.asr import get_asr

    asr, tts = get_asr(), PiperTTS()
    text = "Hey Aria, what's the weather doing this weekend?"
    heard = [asr.transcribe(tts.synthesize(text, v), SESSION_SR) for v in tts.voices()]
    assert all(heard_aria(h) for h in heard), heard
