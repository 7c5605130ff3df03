"""Run health (docs/scoring.md): sound that is not speech, clipping, DC offset, constant output, muted
output and wordless speech are flagged, printed by `score` before any table and shown in the report.

The recordings are hand-built: a real 440 Hz tone or real piper speech in the model channel, scored by the real
Silero VAD. No health check changes a score; the flags say when a score cannot be trusted.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from metrics.health import (
    CONSTANT_RUN_S,
    SOUND_WITHOUT_SPEECH_S,
    TEXT_ASR_WER,
    SoundProfile,
    episode_stats,
    run_health,
    text_from,
    window_sound,
)
from metrics.mpe.score import score_run
from metrics.spans import Span
from tests.handmade import DeafASR, NoASR, kn, place, silence, tone, write_episode

SR = 24_000
ANSWER = "The answer is twenty one."
HOLDING = ("Sure, let me look into that for you, I am checking what I know about it right now, "
           "and I will be back with an answer very soon.")


@pytest.fixture(scope="module")
def tone_run(tmp_path_factory) -> Path:
    """8 s of tone inside the N1 window [12, 24) of one episode; a silent episode beside it."""
    run = tmp_path_factory.mktemp("tone")
    write_episode(run, "tone", "p0", "explicit", model=place(silence(), tone(8.0), 13.0))
    write_episode(run, "quiet", "p0", "implicit")
    return run


def test_eight_seconds_of_tone_is_flagged_not_silent(tone_run: Path) -> None:
    """Old behaviour: the tone scored as perfect silence and nothing said otherwise."""
    res = score_run(tone_run, asr=NoASR())
    # The VAD hears no speech, so the window passes silence preservation: the score alone cannot tell.
    assert kn(res["scores"]["silence_preservation"]) == (6, 6)
    rows = [json.loads(x) for x in (tone_run / "measurements.jsonl").read_text().splitlines()]
    n1 = next(r for r in rows if r["case_id"] == "tone" and r["label"] == "N1")
    assert n1["speech_s"] == 0 and n1["sound"]["window"] == [12.0, 24.0]
    assert n1["sound"]["sound_s"] == pytest.approx(8.0, abs=0.03) and n1["sound"]["speech_s"] == 0
    assert n1["sound"]["energy_dbfs"] == pytest.approx(10 * np.log10(0.045 * 8 / 12), abs=0.2)
    other = [r for r in rows if r is not n1]
    assert all(r["sound"]["sound_s"] == 0 for r in other)
    flags = res["health"]["flags"]
    assert ("sound but no detected speech in 1 scored windows of 1 episodes (tone; e.g. tone N1 window 12.0-24.0 s: "
            "8.0 s of sound at -15 dBFS): tones, noise or a wrong sample rate score as silence") in flags
    assert "sound outside any detected speech in 1/2 episodes (tone; 8.0 s in tone)" in flags
    assert res["health"]["sound_without_speech_windows"] == 1
    # The stats behind it are kept per episode.
    stats = json.loads((tone_run / "health.json").read_text())["episodes"]
    assert stats["tone"]["sound_s"] == pytest.approx(8.0, abs=0.03) and stats["tone"]["speech_s"] == 0
    assert stats["quiet"]["sound_s"] == 0


def test_score_prints_health_before_any_table_and_report_shows_it(tone_run: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from eval.cli import main
    from eval.report import write_report

    score_run(tone_run, asr=NoASR())
    assert main(["score", str(tone_run), "--reuse"]) == 0
    out = capsys.readouterr().out
    health = out.index("HEALTH sound but no detected speech")
    assert health < out.index("-- overall") and health < out.index("fresh_onset_rate")
    page = write_report([tone_run], tmp_path / "report", max_plots=0).read_text()
    assert "<b>Run health</b>" in page and "sound but no detected speech in 1 scored windows" in page


def test_reuse_keeps_the_health_flags(tone_run: Path) -> None:
    first = score_run(tone_run, asr=NoASR())
    again = score_run(tone_run, overrides={"t_onset_window_s": 2}, reuse_measurements=True)
    assert again["health"] == first["health"]


def test_a_silent_run_is_told_it_never_spoke(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for cid in ("A", "B", "C"):
        write_episode(run, cid)
    res = score_run(run, asr=NoASR())
    assert res["health"]["flags"] == [
        "no model speech in 3/3 episodes (muted output, the wrong output channel, or a model that never speaks?)"]
    assert res["health"]["no_speech_episodes"] == 3


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory, speak) -> Path:
    """Real speech answering T in every episode, each with one planted output fault."""
    run = tmp_path_factory.mktemp("faulty")
    answer = speak(ANSWER)

    def speaking() -> np.ndarray:
        return place(silence(), answer, 9.5)

    clean = speaking()
    clipped = np.clip(speaking() * 8.0, -1.0, 1.0)
    biased = speaking() + 0.05
    held = speaking()
    held[int(30 * SR):int(30.5 * SR)] = 0.25  # one value held for 0.5 s
    for cid, model in (("clean", clean), ("clipped", clipped), ("biased", biased), ("held", held)):
        write_episode(run, cid, model=model)
    return run


class _WordsASR:
    name = "words"

    def transcribe(self, audio, sr: int) -> str:
        return "the answer is twenty one"


def test_clipping_dc_offset_and_constant_output_are_flagged(faulty_run: Path) -> None:
    res = score_run(faulty_run, asr=_WordsASR())
    h = res["health"]
    assert h["clipping_episodes"] == ["clipped"]
    assert h["dc_offset_episodes"] == ["biased"]
    assert "held" in h["constant_output_episodes"] and "clean" not in h["constant_output_episodes"]
    flags = "\n".join(h["flags"])
    assert "clipping in 1/4 episodes (clipped; worst clipped:" in flags and "output gain too high?" in flags
    assert "DC offset in 1/4 episodes (biased; mean +0.050 in biased, limit +/-0.01)" in flags
    assert "constant output in" in flags and "a stuck or padded output buffer?" in flags
    assert "clean" not in flags  # real speech, said cleanly, raises nothing
    assert h["asr_no_words"] == 0 and "no model speech" not in flags
    # The scores themselves are untouched by health: every episode answered.
    assert kn(res["scores"]["response_presence"]) == (4, 4)


def test_long_speech_without_words_is_flagged(tmp_path: Path, speak) -> None:
    run = tmp_path / "run"
    holding = speak(HOLDING)
    assert len(holding) / SR > 2.5
    write_episode(run, "A", model=place(silence(), holding, 9.5))  # from the T window into the N1 window
    res = score_run(run, asr=DeafASR())
    flags = res["health"]["flags"]
    assert res["health"]["asr_no_words"] == 2
    assert any(f.startswith("ASR found no words in 2 scored windows holding >= 2 s of model speech (e.g. A ")
               for f in flags)
    assert score_run(run, asr=_WordsASR())["health"]["asr_no_words"] == 0


def test_episode_stats_by_hand() -> None:
    x = np.zeros(SR * 4, np.float32)
    x[SR:2 * SR] = tone(1.0, amp=0.5)
    x[3 * SR:3 * SR + SR // 10] = 0.2  # 100 ms held
    st = episode_stats(x, SR, [Span(1.0, 2.0)])
    assert st["peak"] == pytest.approx(0.5, abs=1e-3) and st["clipped_share"] == 0.0
    assert st["sound_s"] == pytest.approx(1.1, abs=0.03) and st["speech_s"] == 1.0
    assert st["sound_outside_speech_s"] == pytest.approx(0.1, abs=0.03)
    assert st["constant_run_s"] == pytest.approx(0.1, abs=1e-3) and st["constant_run_s"] >= CONSTANT_RUN_S
    assert st["rms_dbfs"] == pytest.approx(10 * np.log10((0.125 + 0.004) / 4), abs=0.2)
    profile = SoundProfile(x, SR)
    w = window_sound(profile, [Span(1.0, 2.0)], 0.5, 2.5)
    assert w == {"window": [0.5, 2.5], "sound_s": pytest.approx(1.0, abs=0.03), "speech_s": 1.0,
                 "energy_dbfs": pytest.approx(10 * np.log10(0.125 / 2), abs=0.2)}
    assert SOUND_WITHOUT_SPEECH_S <= 1.0  # the 8 s tone is far above the flagging threshold


def test_run_health_thresholds_are_the_named_constants() -> None:
    ok = {"speech_s": 3.0, "clipped_share": 0.0, "dc_offset": 0.0, "constant_run_s": 0.001, "flat_offset_s": 0.0,
          "sound_outside_speech_s": 0.1}
    assert run_health({"a": ok, "b": ok}, [])["flags"] == []
    assert run_health({"a": ok | {"speech_s": 0}, "b": ok}, [])["flags"][0].startswith("no model speech in 1/2")
    assert run_health({"a": ok | {"speech_s": 0}, "b": ok, "c": ok}, [])["flags"] == []  # a third is no alarm
    assert run_health({"a": ok | {"flat_offset_s": 0.2}}, [])["constant_output_episodes"] == ["a"]
    quiet = {"case_id": "a", "label": "N2", "kind": "silence",
             "sound": {"window": [0.0, 5.0], "sound_s": 0.9, "speech_s": 0.0, "energy_dbfs": -40.0}}
    assert run_health({"a": ok}, [quiet])["sound_without_speech_windows"] == 0
    loud = quiet | {"sound": quiet["sound"] | {"sound_s": 1.0}}
    assert run_health({"a": ok}, [loud])["sound_without_speech_windows"] == 1
    failed = {"case_id": "a", "label": "T", "kind": "T", "failed": True}
    assert run_health({"a": ok}, [failed])["flags"] == []


def test_asr_heard_otherwise_than_the_models_text_by_hand() -> None:
    """The flag's rule: a different answer verdict, or a word error rate >= TEXT_ASR_WER, between the model's own
    text and the transcript of the same window; windows without text, or failed, are not compared."""
    ok = {"speech_s": 3.0, "clipped_share": 0.0, "dc_offset": 0.0, "constant_run_s": 0.001, "flat_offset_s": 0.0,
          "sound_outside_speech_s": 0.1}
    t = {"case_id": "a", "label": "T", "kind": "T", "transcript": "The answer is for 30.", "transcribed_s": 1.5,
         "answer_verdict": "incorrect"}
    same = t | {"transcript": "The answer is 4:30.", "answer_verdict": "correct"}
    flipped = t | {"model_text": "The answer is 4:30.", "text_verdict": "correct"}
    assert run_health({"a": ok}, [t])["asr_text_disagreements"] == 0  # no text stream: nothing to compare
    assert run_health({"a": ok}, [same | {"model_text": "The answer is 4:30.", "text_verdict": "correct"}]
                      )["flags"] == []
    got = run_health({"a": ok}, [flipped])
    assert got["asr_text_disagreements"] == 1
    assert got["flags"] == ["the ASR disagrees with the model's own text in 1 transcribed windows (e.g. a T: text "
                            "'The answer is 4:30.', ASR 'The answer is for 30.', 20% word errors, answer correct by "
                            "its text but incorrect as heard): scores read the ASR, so these windows may be misjudged"]
    # 1 of 5 words wrong is no alarm without a verdict flip; 3 of 5 (60% >= TEXT_ASR_WER) is.
    silence_window = {"case_id": "a", "label": "N1", "kind": "silence", "transcribed_s": 1.0}
    assert TEXT_ASR_WER == 0.5
    assert run_health({"a": ok}, [silence_window | {"model_text": "the red fox ran home",
                                                    "transcript": "the red fox ran away"}])["flags"] == []
    assert run_health({"a": ok}, [silence_window | {"model_text": "the red fox ran home",
                                                    "transcript": "the bed box can home"}]
                      )["asr_text_disagreements"] == 1
    assert run_health({"a": ok}, [flipped | {"failed": True}])["asr_text_disagreements"] == 0


def test_the_text_of_heard_speech_starts_where_the_models_silence_before_it_starts() -> None:
    """Text stamped in the silence before the speech the ASR heard is that speech's (a frame's stamp comes before
    its audio and the VAD's onset); the model's earlier speech and the window's start bound it, and speech already
    running where the ASR starts listening leaves no earlier text to it."""
    spans = [Span(1.0, 2.0), Span(4.51, 6.0)]
    assert text_from(spans, 4.51, floor_s=4.16) == 4.16  # silence since the window's start
    assert text_from(spans, 4.51, floor_s=0.0) == 2.0  # silence since the earlier speech
    assert text_from(spans, 5.0, floor_s=4.16) == 5.0  # heard from mid-speech
    assert text_from([], 4.51, floor_s=4.16) == 4.16


def test_a_text_stream_that_says_another_answer_than_the_audio_is_flagged(tmp_path: Path, speak) -> None:
    """Real piper and whisper: the model says "It is 21." (the gold) while its text stream says "It is 12.": the
    answer scores correct as heard, the health line says its own text disagrees. The same words in both: no line."""
    run = tmp_path / "run"
    for case, text in (("A", "It is 12."), ("B", "It is 21.")):
        ep = write_episode(run, case, pair=f"p{case}", model=place(silence(), speak("It is 21."), 9.5))
        ep.model_text = [[9.5, text]]
        ep.save(run / f"{case}.rec.json")
    res = score_run(run)
    t = {m["case_id"]: m for m in (json.loads(x) for x in (run / "measurements.jsonl").read_text().splitlines())
         if m.get("kind") == "T"}
    assert t["A"]["answer_verdict"] == "correct" and t["A"]["text_verdict"] == "incorrect"
    assert t["B"]["answer_verdict"] == t["B"]["text_verdict"] == "correct"
    assert res["health"]["asr_text_disagreements"] == 1
    assert any(f.startswith("the ASR disagrees with the model's own text in 1 transcribed windows (e.g. A T: text "
                            "'It is 12.'") for f in res["health"]["flags"])
