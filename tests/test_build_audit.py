"""Auditing a build (docs/benchmarks/mpe.md): `--scripts-only` writes the text in seconds without TTS, `--diagnostics`
measures it.

Text diagnostics and word error rates are checked on hand-made inputs with exact answers; the ASR part runs
on the real mini set, bounded by a small `limit`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR
from dataset_builder.build import SCRIPTS_FILE, BuildOptions, read_scripts
from dataset_builder.diagnostics import (
    TextTargets,
    attribute_check,
    distinct_n,
    jsd_bits,
    split_sentences,
    text_diagnostics,
    words,
)
from dataset_builder.mpe.build import build as build_mpe
from dataset_builder.schema import SchemaError, Script, Speaker, Turn
from dataset_builder.tts.piper_backend import PiperTTS
from eval.cli import main
from metrics.build_audit import DIAGNOSTICS_FILE
from metrics.intelligibility import (
    TurnResult,
    WordErrors,
    align_words,
    audio_diagnostics,
    first_distinct_texts,
    format_audio_diagnostics,
    heard_aria,
    same_text_turns,
    says_aria,
    speaking_backend,
    summarise,
    wer_tokens,
    word_errors,
)

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "tts"
ATTRS = ("setting", "activity", "relationship", "device_context", "register")


# ------------------------------------------------------------------------------------------------- scripts-only

def test_scripts_only_writes_validated_scripts_byte_identical(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    info = build_mpe(a, BuildOptions(n=6, scripts_only=True))
    build_mpe(b, BuildOptions(n=6, scripts_only=True))
    lines = (a / SCRIPTS_FILE).read_text().splitlines()
    assert len(lines) == 12 == info["n_scripts"]
    assert (a / SCRIPTS_FILE).read_bytes() == (b / SCRIPTS_FILE).read_bytes()
    scripts = read_scripts(a / SCRIPTS_FILE)
    assert [s.script_id for s in scripts[:2]] == ["mpe-00000-explicit", "mpe-00000-implicit"]
    assert [json.loads(line) for line in lines] == [s.to_dict() for s in scripts]
    assert sorted(p.name for p in a.iterdir()) == [SCRIPTS_FILE]  # no data/, no card, no audio


def test_scripts_only_never_synthesises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataset_builder.tts import piper_backend

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("scripts-only touched the TTS")

    monkeypatch.setattr(piper_backend.PiperTTS, "synthesize", boom)
    monkeypatch.setattr(piper_backend, "_load_voice", boom)
    info = build_mpe(tmp_path, BuildOptions(n=3, scripts_only=True))
    assert info["n_scripts"] == 6 and info["tts_backend"].startswith("piper:")


def test_scripts_only_full_preset_in_seconds_without_loading_piper(tmp_path: Path) -> None:
    code = (
        "import json, sys, time\n"
        "from eval.cli import main\n"
        "t0 = time.perf_counter()\n"
        "rc = main(['build', 'mpe', '--preset', 'full', '--scripts-only', '--no-progress',\n"
        f"           '--out', {str(tmp_path)!r}])\n"
        "heavy = sorted(m for m in ('piper', 'onnxruntime', 'faster_whisper', 'torch') if m in sys.modules)\n"
        "print(json.dumps({'rc': rc, 'heavy': heavy, 's': time.perf_counter() - t0}), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["rc"] == 0 and report["heavy"] == []
    assert report["s"] < 60  # ~2 s here; the bound only catches a build that synthesises
    assert sum(1 for _ in (tmp_path / SCRIPTS_FILE).open()) == 4000


def test_scripts_only_matches_what_a_full_build_speaks(mini_dataset: Path, tmp_path: Path) -> None:
    from dataset_builder.hf_dataset import list_cases

    build_mpe(tmp_path, BuildOptions(preset="mini", scripts_only=True))
    assert [s.to_dict() for s in read_scripts(tmp_path / SCRIPTS_FILE)] == \
        [c.script.to_dict() for c in list_cases(mini_dataset)]


def test_read_scripts_names_file_and_line(tmp_path: Path) -> None:
    build_mpe(tmp_path, BuildOptions(n=1, scripts_only=True))
    path = tmp_path / SCRIPTS_FILE
    first, second = path.read_text().splitlines()
    broken = json.loads(second)
    broken["turns"][0]["label"] = "N9"
    path.write_text(first + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(SchemaError, match=r"scripts.jsonl, row 2, field 'turns\[t00\].label'"):
        read_scripts(path)
    path.write_text(first + "\n{oops\n")
    with pytest.raises(SchemaError, match="row 2.*not JSON"):
        read_scripts(path)


# ------------------------------------------------------------------------------------------ text diagnostics

def script(pair: int, condition: str, texts: list[tuple[str, str]], **attrs: str) -> Script:
    attributes = {a: attrs.get(a, "same") for a in ATTRS}
    names = ["Ann", "Ben", "Cal"]
    turns = [Turn(f"t{i:02d}", names[i % 3], text, label) for i, (label, text) in enumerate(texts)]
    s = Script(script_id=f"p{pair}-{condition}", pair_id=f"p{pair}", condition=condition, seed=pair,
               attributes=attributes, speakers=[Speaker(n, f"v{i}") for i, n in enumerate(names)], turns=turns,
               question="What time is it?", gold_answer="noon", t_position="middle")
    s.validate()
    return s


def two_pairs() -> list[Script]:
    out = []
    for pair, (first, last) in enumerate([("Hello there. How are you?", "Fine thanks."),
                                          ("Hello there. Nice day.", "Good night.")]):
        for condition, t in (("explicit", "Aria, what time is it?"), ("implicit", "What time is it?")):
            out.append(script(pair, condition, [("N2", first), ("T", t), ("N3", last)]))
    return out


def test_sentences_and_words() -> None:
    assert split_sentences("Oh wait, it's Santiago.  Never mind, Aria!") == ["Oh wait, it's Santiago.",
                                                                             "Never mind, Aria!"]
    assert split_sentences("3.5 litres? Yes.") == ["3.5 litres?", "Yes."]
    assert words("Don't LOOK at me, Mei\u2019s 8 cards.") == ["don't", "look", "at", "me", "mei's", "8", "cards"]
    assert distinct_n([["a", "b", "a", "b"]], 2) == pytest.approx(2 / 3)
    assert distinct_n([["a"]], 2) is None


def test_text_diagnostics_known_numbers() -> None:
    d = text_diagnostics(two_pairs())
    assert (d["conversations"], d["pairs"]) == (4, 2)
    # All: 12 turns, 6 distinct texts; one script per pair (explicit): 6 turns, 5 distinct (T repeats).
    assert d["distinct_turns"]["all"] == {"turns": 12, "distinct": 6, "ratio": 0.5}
    assert d["distinct_turns"]["one_per_pair"] == {"turns": 6, "distinct": 5, "ratio": round(5 / 6, 4)}
    assert d["by_label"]["T"]["all"] == {"turns": 4, "distinct": 2, "ratio": 0.5}
    assert d["by_label"]["T"]["one_per_pair"] == {"turns": 2, "distinct": 1, "ratio": 0.5}
    assert list(d["by_label"]) == ["T", "N2", "N3"]
    top = d["sentences"]["top"]
    assert top[0] == {"sentence": "Hello there.", "conversations": 4, "share": 1.0}
    assert {t["sentence"]: t["conversations"] for t in top}["What time is it?"] == 2
    # Explicit turns: 5+5+2+4+5+2 = 23 words (16 types), 17 bigrams (12 distinct), 11 trigrams (8 distinct).
    assert d["distinct_n"] == {"1": round(16 / 23, 4), "2": round(12 / 17, 4), "3": round(8 / 11, 4)}
    assert d["word_types"] == 16
    checks = {c["name"]: c["ok"] for c in d["checks"]}
    assert checks["distinct turn texts (one script per pair)"] is True  # 0.83 >= 0.70
    assert checks["most repeated sentence, share of conversations"] is False  # 1.0 > 0.01
    assert checks["distinct T turn texts (one script per pair)"] is True  # 0.5 >= 0.3
    assert checks["setting changes the words"] is False  # one value only: untestable, not a pass
    assert d["attributes"]["setting"]["changes_words"] is None
    assert d["ok"] is False


def test_jsd_known_values() -> None:
    assert jsd_bits(np.array([[1, 0], [0, 1]])) == pytest.approx(1.0)  # no shared word: log2(2 values)
    assert jsd_bits(np.array([[3, 0, 0], [0, 3, 0], [0, 0, 3]])) == pytest.approx(math.log2(3))
    assert jsd_bits(np.array([[2, 1], [4, 2]])) == pytest.approx(0.0)  # same proportions
    assert jsd_bits(np.array([[1, 1, 0], [0, 1, 1]])) == pytest.approx(0.5)  # H(1/4,1/2,1/4) - 1
    assert jsd_bits(np.zeros((2, 3))) == 0.0


def test_attribute_check_sees_words_that_change_and_words_that_do_not() -> None:
    units = []
    for i in range(32):  # 16 per value: a shuffle separates them perfectly with chance 2 / C(32, 16) ~ 3e-9
        mood = "cheerful" if i < 16 else "grumpy"
        word = "Yay" if mood == "cheerful" else "Ugh"
        units.append(script(i, "explicit", [("N2", f"{word}, pass the salt."), ("T", "Aria, what time is it?"),
                                            ("N3", "Nearly done.")],
                            register=mood, setting="kitchen" if i % 2 else "garden"))
    targets = TextTargets()
    reg = attribute_check(units, "register", targets)
    assert reg["values"] == {"cheerful": {"conversations": 16, "words": 176},
                             "grumpy": {"conversations": 16, "words": 176}}
    # Each value: 11 types, 16 times each; pooled: 10 shared types at 1/11 and yay, ugh at 1/22.
    # I = H(pooled) - H(value) = (log2 11 + 1/11) - log2 11 = 1/11 bit.
    assert reg["jsd_bits"] == pytest.approx(1 / 11, abs=1e-6)
    assert reg["p_value"] == pytest.approx(1 / (1 + targets.permutations))
    assert reg["changes_words"] is True and reg["chance_bits"] < reg["jsd_bits"]
    assert reg["exclusive"] == {"cheerful": ["yay"], "grumpy": ["ugh"]}
    # Each setting holds 8 cheerful and 8 grumpy scenes: identical word distributions, nothing to find.
    setting = attribute_check(units, "setting", targets)
    assert setting["jsd_bits"] == 0.0 and setting["p_value"] == 1.0 and setting["changes_words"] is False
    assert setting["exclusive"] == {"garden": [], "kitchen": []}
    d = text_diagnostics(units)
    checks = {c["name"]: c["ok"] for c in d["checks"]}
    assert checks["register changes the words"] and not checks["setting changes the words"]


def test_attribute_check_is_deterministic() -> None:
    units = [script(i, "explicit", [("N2", f"Word{i % 3} here."), ("T", "Aria, go."), ("N3", "Done.")],
                    activity=f"a{i % 4}") for i in range(12)]
    assert attribute_check(units, "activity") == attribute_check(units, "activity")


# ---------------------------------------------------------------------------------------------- word errors

@pytest.mark.parametrize(("ref", "hyp", "expected"), [
    ("the cat sat", "the cat sat", WordErrors(3, 0, 0, 0)),
    ("the cat sat", "the bat sat", WordErrors(3, 1, 0, 0)),
    ("the cat", "the black cat", WordErrors(2, 0, 0, 1)),
    ("the black cat", "the cat", WordErrors(3, 0, 1, 0)),
    ("a b c d", "a x c d e", WordErrors(4, 1, 0, 1)),
    ("a b c", "", WordErrors(3, 0, 3, 0)),
    ("", "x y", WordErrors(0, 0, 0, 2)),
    ("", "", WordErrors(0, 0, 0, 0)),
])
def test_align_words_known_answers(ref: str, hyp: str, expected: WordErrors) -> None:
    assert align_words(ref.split(), hyp.split()) == expected


def test_word_error_rates() -> None:
    assert word_errors("the cat sat", "the bat sat").rate == pytest.approx(1 / 3)
    assert word_errors("the cat", "the black cat").rate == 0.5
    assert word_errors("a b c", "").rate == 1.0
    assert word_errors("", "").rate == 0.0
    assert word_errors("", "hello").rate == math.inf
    # Both sides normalised: spelled numbers, currency, case and punctuation do not count as errors.
    assert word_errors("I count 8 pizzas needed.", "i count eight pizzas needed").errors == 0
    assert word_errors("Hugo, the tickets are 23 dollars each.", "Hugo the tickets are $23 each").errors == 0
    # A code read digit by digit may be written as one number: every digit was heard. A wrong digit still counts.
    assert word_errors("Yuki, the wifi code is 4 7 3 5.", "Yuki, the wifi code is 4735.").errors == 0
    assert word_errors("The code is four seven three five.", "the code is 4 7 3 5").errors == 0
    assert word_errors("Yuki, the wifi code is 4 7 3 5.", "Yuki, the wifi code is 4736.").errors == 1
    assert word_errors("Yuki, the wifi code is 4 7 3 5.", "Yuki, the wifi code is 47 35.").errors == 2
    assert WordErrors(3, 1, 0, 0) + WordErrors(2, 0, 1, 1) == WordErrors(5, 1, 1, 1)


def test_aria_spotting() -> None:
    assert says_aria("What's the total, Aria?") and not says_aria("Maria, pass the salt.")
    assert heard_aria("what's the total arya") and heard_aria("Aria's list")
    assert not heard_aria("what's the total area") and not heard_aria("Maria")


def turn(voice: str, text: str, transcript: str, label: str = "N2") -> TurnResult:
    return TurnResult("c", "t00", label, voice, text, transcript, word_errors(text, transcript))


def test_summarise_known_answers() -> None:
    turns = [
        turn("v1", "red green blue pink", "red green blue pink"),  # v1: 1 error in 8 words
        turn("v1", "Aria, red green blue", "aria red green glue", "T"),
        turn("v2", "Hey Aria, a b", "hey area a b", "N4Q"),  # v2: 1 error in 8 words
        turn("v2", "c d e f", "c d e f"),
        turn("v3", "g h i j", "g h x y"),  # v3: 2 errors in 4 words
    ]
    d = summarise(turns, asr_name="fake", n_cases=1)
    assert d["per_voice"]["v1"] == {"turns": 2, "ref_words": 8, "substitutions": 1, "deletions": 0,
                                    "insertions": 0, "wer": 0.125}
    assert {v: b["wer"] for v, b in d["per_voice"].items()} == {"v1": 0.125, "v2": 0.125, "v3": 0.5}
    assert d["wer"]["wer"] == round(4 / 20, 4)
    assert (d["best_voice"], d["worst_voice"], d["wer_ratio"]) == ("v1", "v3", 4.0)
    assert {k: d["aria"][k] for k in ("turns", "heard", "rate")} == {"turns": 2, "heard": 1, "rate": 0.5}
    assert d["aria"]["by_label"] == {"N4Q": {"turns": 1, "heard": 0, "rate": 0.0},
                                     "T": {"turns": 1, "heard": 1, "rate": 1.0}}
    assert [m["transcript"] for m in d["aria"]["misses"]] == ["hey area a b"]
    assert [c["ok"] for c in d["checks"]] == [False, False]
    perfect = summarise([turn("v1", "Aria go", "aria go"), turn("v2", "Aria stop", "aria stop")],
                        asr_name="fake", n_cases=1)
    assert perfect["wer_ratio"] == 1.0 and perfect["ok"] is True
    # The best voice made no error and another did: an unbounded ratio fails the check.
    unbounded = summarise([turn("v1", "a b", "a b"), turn("v2", "a b", "a c")], asr_name="fake", n_cases=1)
    assert unbounded["wer_ratio"] is None and unbounded["checks"][1]["ok"] is False


# ----------------------------------------------------------------------------------------- audio, for real

def test_audio_diagnostics_on_the_mini_set(mini_dataset: Path) -> None:
    from dataset_builder.hf_dataset import list_cases

    cases = list_cases(mini_dataset)[:2]
    d = audio_diagnostics(mini_dataset, limit=2, same_texts=3)
    assert d["asr"] == "whisper-tiny-en" and d["cases"] == 2
    assert d["turns"] == sum(len(c.script.turns) for c in cases)
    voices = {s.voice for c in cases for s in c.script.speakers}
    assert set(d["per_voice"]) <= voices and d["per_voice"]
    assert sum(b["turns"] for b in d["per_voice"].values()) == d["turns"]
    assert all(0 <= b["wer"] < 1.5 for b in d["per_voice"].values())
    assert d["aria"]["turns"] == sum(says_aria(t.text) for c in cases for t in c.script.turns) > 0
    assert 0.0 <= d["aria"]["rate"] <= 1.0
    assert [c["target"] for c in d["checks"]] == [">= 0.9", "<= 1.25"]
    # The voices are judged on the same texts: the set's first 3 distinct turn texts, each read by every voice.
    st = d["same_text"]
    first_texts = list(dict.fromkeys(t.text for c in cases for t in c.script.turns))[:3]
    piper_voices = PiperTTS().voices()
    assert st["texts"] == 3 and st["turns"] == 3 * len(piper_voices) and list(st["per_voice"]) == sorted(piper_voices)
    words = sum(len(wer_tokens(t)) for t in first_texts)
    assert all(b["ref_words"] == words and b["turns"] == 3 for b in st["per_voice"].values())
    assert d["checks"][1]["name"].startswith("same texts: ") and d["checks"][1]["value"] == st["wer_ratio"]
    assert d["own_text_ratio"]["value"] == d["wer_ratio"] and d["ok"] == all(c["ok"] for c in d["checks"])
    text = format_audio_diagnostics(d)
    assert "voices on the same texts: the first 3 distinct turn texts" in text and "own audio" in text


class MuffledVoice:
    """The real piper bank with one voice heard through a 300 Hz low-pass: a voice nobody can understand."""

    def __init__(self, muffled: str) -> None:
        self.inner, self.muffled = PiperTTS(), muffled

    def voices(self) -> list[str]:
        return self.inner.voices()

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        from scipy.signal import butter, sosfiltfilt

        audio = self.inner.synthesize(text, voice)
        if voice != self.muffled:
            return audio
        return sosfiltfilt(butter(8, 300, fs=SESSION_SR, output="sos"), audio).astype(np.float32)


def test_same_text_comparison_fails_the_voice_nobody_understands(mini_dataset: Path) -> None:
    from dataset_builder.hf_dataset import list_cases
    from metrics.asr import DEFAULT_ASR, get_asr

    muffled = PiperTTS().voices()[2]
    asr = get_asr(DEFAULT_ASR)
    turns = list(same_text_turns(first_distinct_texts(list_cases(mini_dataset)[:1], 4), MuffledVoice(muffled), asr))
    d = summarise(turns, asr_name=asr.name, n_cases=4)
    assert d["worst_voice"] == muffled and d["per_voice"][muffled]["wer"] > 0.5
    assert d["wer_ratio"] is None or d["wer_ratio"] > 2
    assert not d["checks"][1]["ok"]


def test_same_text_comparison_is_skipped_for_a_backend_this_code_names_otherwise(mini_dataset: Path) -> None:
    from dataset_builder.hf_dataset import list_cases

    cases = [dataclasses.replace(c, tts_backend=c.tts_backend + "+old") for c in list_cases(mini_dataset)[:1]]
    tts, why = speaking_backend(cases)
    assert tts is None and "this code's backend is" in str(why)
    tts, why = speaking_backend(list_cases(mini_dataset)[:1])
    assert why is None and tts.voices() == PiperTTS().voices()


# -------------------------------------------------------------------------------------------------------- CLI

def test_cli_scripts_only_diagnostics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "mpe", "--n", "20", "--scripts-only", "--diagnostics", "--no-progress",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "distinct turn texts" in out and "most repeated sentences" in out and "FAIL" in out
    assert "audio:" not in out
    saved = json.loads((tmp_path / DIAGNOSTICS_FILE).read_text())
    block = saved["configs"]["mpe"]
    assert block["source"] == SCRIPTS_FILE and block["audio"] is None
    assert block["text"]["conversations"] == 40 and block["text"]["pairs"] == 20
    # No paths and no timings: two audits of the same scripts write the same file.
    first = (tmp_path / DIAGNOSTICS_FILE).read_bytes()
    assert main(["build", "mpe", "--diagnostics-only", "--scripts-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / DIAGNOSTICS_FILE).read_bytes() == first


def test_cli_diagnostics_only_audits_an_existing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    build_mpe(tmp_path, BuildOptions(n=1, cache_dir=CACHE))
    shards = {p: p.stat().st_mtime_ns for p in (tmp_path / "data" / "mpe").glob("*.parquet")}
    assert main(["build", "mpe", "--diagnostics-only", "--diagnostics-limit", "1", "--diagnostics-texts", "2",
                 "--no-progress", "--out", str(tmp_path)]) == 0
    assert {p: p.stat().st_mtime_ns for p in shards} == shards  # audited, not rebuilt
    out = capsys.readouterr().out
    assert "per label" in out and "heard in" in out and "piper-joe-" in out
    block = json.loads((tmp_path / DIAGNOSTICS_FILE).read_text())["configs"]["mpe"]
    assert block["source"] == "data/mpe" and block["text"]["conversations"] == 2
    assert block["audio"]["cases"] == 1 and block["audio"]["aria"]["turns"] > 0


def test_cli_diagnostics_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "mpe", "--diagnostics-only", "--out", str(tmp_path / "nothing")]) == 2
    assert "neither data/mpe/*.parquet nor scripts.jsonl" in capsys.readouterr().err
    assert main(["build", "mpe", "--diagnostics", "--diagnostics-limit", "0", "--out", str(tmp_path)]) == 2
    assert "--diagnostics-limit must be >= 1" in capsys.readouterr().err
    # A scripts-only folder audited without --scripts-only: the text, and a note that there is no audio.
    build_mpe(tmp_path, BuildOptions(n=2, scripts_only=True))
    assert main(["build", "mpe", "--diagnostics-only", "--out", str(tmp_path)]) == 0
    block = json.loads((tmp_path / DIAGNOSTICS_FILE).read_text())["configs"]["mpe"]
    assert block["audio"] is None and "ASR diagnostics skipped" in block["audio_note"]
