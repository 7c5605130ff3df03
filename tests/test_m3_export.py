"""`export m3`: a scored run folder in the M3 authors' layout (audio/{sample_id}/{event_id}.wav stereo,
metadata.jsonl with their field names, their ASR JSON), and the timing their evaluation would compute from those
files equals our `rules=authors` scores: per episode to the millisecond, and their summary of each condition folder
equals our scores-rules=authors.json cell for cell, value and n, with the events that rule set drops left out of
the export and listed in export.json.

Their evaluation is our reference of it, tests/m3_authors_reference.py, which reads only the exported files. The
backchannel filter's word counts are one count (metrics/m3/words.py): the transcript scoring stored for a short
PAUSE segment is the one the export writes, and its words are the chunks ("Mm-hm, mm-hm." is four words in both;
a Japanese 「うんうん」 is two, so a 0.45 s Japanese backchannel inside a PAUSE is no takeover in either).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from dataset_builder.audio import SESSION_SR
from dataset_builder.errors import UsageError
from metrics.asr import SCORING_ASR
from metrics.m3.export import export_run
from metrics.m3.rules import RULE_SETS, verdict
from metrics.m3.score import score_run
from metrics.scoring import ASR_PAD_S
from tests import m3_authors_reference as R
from tests import m3_handmade as H

S, D = 4.0, 14.0
SYSTEM = [["system", "a long system turn", 0.5, S + 3.0]]
CASES = [  # (event type, t, model spans, context)
    ("SHIFT", S + 0.3, [(S + 0.4, S + 2.0)], None),
    ("SHIFT", S + 0.3, [(S - 0.3, S + 0.2), (S + 0.8, S + 3.0)], None),
    ("SHIFT", S + 0.3, [], None),
    ("PAUSE", S + 2.0, [(S + 0.5, S + 0.9)], None),  # a backchannel by word count
    ("PAUSE", S + 2.0, [(S + 0.5, S + 0.95), (S + 3.0, S + 4.0)], None),  # then a later onset
    ("PAUSE", S + 2.0, [(S + 1.0, S + 1.6)], None),  # short but many words: a takeover
    ("PAUSE", S + 2.0, [(S - 3.5, S + 0.5)], None),  # carried in from before P
    ("BC", S + 0.5, [(S - 3.0, S + 2.25)], SYSTEM),
    ("BC", S + 0.5, [(S + 0.3, S + 1.0)], SYSTEM),
    ("BARGE_IN", S + 2.0, [(S - 3.0, S + 0.4)], SYSTEM),
]


class EnglishASR:
    """Declares English; a few words for a short clip (under 0.5 s of speech with the scorer's padding on both
    sides), a sentence otherwise."""

    name = "stub-en"
    languages = ("en",)

    def transcribe(self, audio: np.ndarray, sr: int, language: str = "en") -> str:
        assert language == "en" and sr == SESSION_SR
        return "mm hm" if audio.size < (0.5 + 2 * ASR_PAD_S) * sr else "well I do think so"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    run = tmp_path_factory.mktemp("m3-run")
    for n, (kind, t, spans, ctx) in enumerate(CASES, start=1):
        for cond in ("user", "full"):
            g = H.gold(kind, s=S, t=t, event_n=n, condition=cond, context=ctx)
            H.write(run, f"{g['event_id']}-{cond}", g, H.bursts(D, spans), user=H.bursts(D, [(1.0, S)], 0.1))
    score_run(run, asr=EnglishASR(), vad_factory=H.planted)
    out = run.parent / "export"
    return run, out, export_run(run, out, asr=EnglishASR())


def ours(m: dict[str, Any]) -> dict[str, Any]:
    v = verdict(m, RULE_SETS["authors"])
    if m["event_type"] in ("SHIFT", "PAUSE"):
        return {"tor": int(v["takeover"]), "latency": v["latency_s"]}
    return {"stop": v["stop_latency_s"]}


def _theirs(meta: dict[str, Any], transcript: dict[str, Any]) -> dict[str, Any]:
    """Their metrics of one episode, named as `ours` names them."""
    got = {k.split(" ")[0]: v for k, v in R.evaluate(meta, transcript).items()}
    return {"stop": got["stop_latency"]} if "stop_latency" in got else got


def _ms(d: dict[str, Any]) -> dict[str, Any]:
    return {k: None if v is None else (v if k == "tor" else int(round(v * 1000))) for k, v in d.items()}


def test_layout_and_fields(exported: tuple[Path, Path, dict[str, Any]]) -> None:
    run, out, summary = exported
    assert summary["episodes"] == {"user": len(CASES), "full": len(CASES)} and summary["left_out"] == []
    rows = [json.loads(x) for x in (out / "user" / "metadata.jsonl").read_text().splitlines()]
    assert len(rows) == len(CASES)
    for field in ("sample_id", "event_id", "user_channel", "system_channel", "event_type", "task", "event_start",
                  "event_end", "input_start", "input_end", "context_start", "context_end", "output_audio_path",
                  "output_asr_path", "use_context", "context_mode"):
        assert all(field in r for r in rows), field
    shift = rows[0]
    assert (shift["sample_id"], shift["event_id"], shift["event_type"], shift["task"]) == (
        "en-task-d001", "en-task-d001-e01", "TURN_SHIFT", "smooth_turn_taking")
    assert (shift["input_start"], shift["input_end"], shift["user_channel"], shift["system_channel"]) == (
        S - 3.0, D, 0, 1)
    wav = Path(shift["output_audio_path"])
    assert wav == (out / "user" / "audio" / "en-task-d001" / "en-task-d001-e01.wav").resolve()
    audio, sr = sf.read(wav, dtype="float32", always_2d=True)
    rec, _ = sf.read(run / "en-task-d001-e01-user.wav", dtype="float32", always_2d=True)
    a = int(round((S - 3.0) * SESSION_SR))
    assert sr == SESSION_SR and audio.shape == (int(round((D - S + 3.0) * SESSION_SR)), 2)
    assert np.array_equal(audio, rec[a:])  # ch0 user, ch1 model, untouched
    bc = next(r for r in rows if r["event_type"] == "BC")
    assert (bc["input_start"], bc["task"], bc["context_mode"]) == (S, "backchanneling", "user_audio")
    full = json.loads((out / "full" / "metadata.jsonl").read_text().splitlines()[0])
    assert full["context_mode"] == "teacher_forcing" and full["case_id"].endswith("-full")
    asr = json.loads(Path(shift["output_asr_path"]).read_text())
    model = [s for s in asr["segments"] if s["channel"] == 1]
    assert [(s["text"], s["timestamp"]) for s in model] == [("well I do think so", [3.4, 5.0])]
    assert len(model[0]["chunks"]) == 5 and model[0]["chunks"][0]["timestamp"] == [3.4, 3.72]
    assert [s["text"] for s in asr["segments"] if s["channel"] == 0] == ["Tell me about the old bridge."]


def test_their_timing_on_our_export_equals_rules_authors(exported: tuple[Path, Path, dict[str, Any]]) -> None:
    run, out, _ = exported
    measured = {m["case_id"]: m for m in map(json.loads, (run / "measurements.jsonl").read_text().splitlines())}
    compared = 0
    for cond in ("user", "full"):
        for row in map(json.loads, (out / cond / "metadata.jsonl").read_text().splitlines()):
            theirs = _theirs(row, json.loads(Path(row["output_asr_path"]).read_text()))
            assert _ms(theirs) == _ms(ours(measured[row["case_id"]])), row["case_id"]
            compared += 1
    assert compared == 2 * len(CASES)
    # and the cases do exercise the rules: a backchannel ignored, a later onset, a carried-in turn
    lat = [_ms(ours(measured[f"en-task-d001-e{n:02d}-user"])) for n in (4, 5, 6, 7)]
    assert lat == [{"tor": 0, "latency": 10000}, {"tor": 0, "latency": 3000}, {"tor": 1, "latency": 1000},
                   {"tor": 1, "latency": -3000}]


def test_export_needs_fresh_scores(tmp_path: Path) -> None:
    g = H.gold("SHIFT", s=S, t=S + 0.3)
    H.write(tmp_path / "run", "en-task-d001-e01-user", g, H.bursts(D, [(S + 0.4, S + 2.0)]))
    with pytest.raises(UsageError, match="score"):
        export_run(tmp_path / "run", tmp_path / "out", asr=EnglishASR())


def test_cli_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`duplex-eval export m3 RUN_DIR --out DIR --param rules=authors`, with the default (real) ASR."""
    from eval.cli import main

    g = H.gold("SHIFT", s=S, t=S + 0.3)
    H.write(tmp_path / "run", "en-task-d001-e01-user", g, H.bursts(D, [(S + 0.4, S + 2.0)]))
    score_run(tmp_path / "run", asr=EnglishASR(), vad_factory=H.planted)
    assert main(["export", "m3", str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--param",
                 "rules=authors"]) == 0
    printed = capsys.readouterr().out
    assert "exported {'user': 1}" in printed and "rules=authors" in printed
    assert "is scores-rules=authors.json's, cell for cell" in printed
    row = json.loads((tmp_path / "out" / "user" / "metadata.jsonl").read_text())
    assert Path(row["output_audio_path"]).is_file() and Path(row["output_asr_path"]).is_file()
    assert json.loads((tmp_path / "out" / "export.json").read_text())["asr"] == SCORING_ASR


# --- their summary on our export equals our rules=authors scores, cell for cell ------------------------------------

# Events the authors' code does not score (the reference system's state at s does not fit them), and one PAUSE whose
# short segment says "Mm-hm, mm-hm.": four words, so no backchannel, for both.
DROPPED = [
    ("SHIFT", S - 0.3, [(S - 0.2, S + 2.0)], None),  # overlapping SHIFT: t < s
    ("SHIFT", S, [(S + 0.1, S + 1.0)], None),  # t == s
    ("PAUSE", S + 2.0, [(S + 0.3, S + 1.0)], SYSTEM),  # the reference system holds a turn across s
    ("BC", S + 0.5, [(S - 3.0, S + 2.25)], None),  # no system turn for the user to backchannel to
]
MM_HM = ("PAUSE", S + 2.0, [(S + 0.6, S + 1.3)], None)
CONDITIONS = ("none", "user", "full")


class ScriptedASR:
    """Says a set text for a clip whose sound lasts a set length (ms; from its first to its last non-zero sample,
    so the scorer's padding into the silence around a segment does not change it), else `default`: each planted
    segment says what the case needs. Declares the one language it is given."""

    def __init__(self, name: str, language: str, by_ms: dict[int, str], default: str) -> None:
        self.name, self.languages, self.by_ms, self.default = name, (language,), by_ms, default

    def transcribe(self, audio: np.ndarray, sr: int, language: str = "en") -> str:
        assert language == self.languages[0] and sr == SESSION_SR
        sounding = np.flatnonzero(audio)
        n = int(sounding[-1] - sounding[0] + 1) if sounding.size else 0
        return self.by_ms.get(int(round(n * 1000 / sr)), self.default)


SCORING_EN = ScriptedASR("scripted-en", "en", {400: "mm hm", 450: "mm hm", 700: "Mm-hm, mm-hm."},
                         "well I do think so")
EXPORT_EN = ScriptedASR("export-en", "en", {}, "uh")  # the export's own ASR: scoring's transcripts must win


def _plant(run: Path, cases: list[tuple[str, float, list[tuple[float, float]], Any]], conditions: tuple[str, ...],
           lang: str = "en", domain: str = "task") -> dict[str, tuple[int, str]]:
    """One episode per case and condition (BC / BARGE_IN not under none, as the runtime plan has it); in Full the
    model's spans come 0.1 s later, so the conditions' cells differ. Returns case id -> (case number, condition)."""
    ids = {}
    for n, (kind, t, spans, ctx) in enumerate(cases, start=1):
        for cond in conditions:
            if cond == "none" and kind in ("BC", "BARGE_IN"):
                continue
            shift = 0.1 if cond == "full" else 0.0
            g = H.gold(kind, s=S, t=t, event_n=n, condition=cond, context=ctx, lang=lang, domain=domain)
            cid = f"{g['event_id']}-{cond}"
            H.write(run, cid, g, H.bursts(D, [(a + shift, b + shift) for a, b in spans]),
                    user=H.bursts(D, [(1.0, S)], 0.1))
            ids[cid] = (n, cond)
    return ids


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = tmp_path_factory.mktemp("m3-planted")
    cases = [*CASES, *DROPPED, MM_HM]
    ids = _plant(run, cases, CONDITIONS)
    score_run(run, asr=SCORING_EN, vad_factory=H.planted)
    authors = score_run(run, overrides={"rules": "authors"}, reuse_measurements=True)
    out = run.parent / "export-authors"
    summary = export_run(run, out, asr=EXPORT_EN, overrides={"rules": "authors"})
    paper_out = run.parent / "export-paper"
    paper_summary = export_run(run, paper_out, asr=EXPORT_EN)
    return {"run": run, "ids": ids, "cases": cases, "authors": authors, "out": out, "summary": summary,
            "paper_out": paper_out, "paper_summary": paper_summary}


def _differing_cells(theirs: dict[str, tuple[float | None, int]], ours: dict[str, Any]) -> list[str]:
    """The cells that differ, in value (to the 4 decimals scores.json keeps) or n."""
    bad = []
    for key, (value, n) in theirs.items():
        mine = ours[key]
        same_value = (value is None and mine["value"] is None) or (
            value is not None and mine["value"] is not None and abs(value - mine["value"]) <= 5e-5 + 1e-12)
        if n != mine["n"] or not same_value:
            bad.append(f"{key}: theirs {value} (n {n}), ours {mine['value']} (n {mine['n']})")
    return bad


def test_their_summary_equals_our_authors_scores_in_every_cell(planted: dict[str, Any]) -> None:
    out, scores = planted["out"], planted["authors"]["scores"]
    assert planted["summary"]["rules"] == "authors"
    assert planted["summary"]["compare_with"] == "scores-rules=authors.json"
    compared = 0
    for cond in CONDITIONS:
        theirs = R.cells(out / cond / "metadata.jsonl")
        differ = _differing_cells(theirs, scores[f"en_task_{cond}"])
        assert not differ, (cond, differ)
        compared += sum(1 for _, n in theirs.values() if n)
    assert compared == 6 + 6 + 4  # none has no BC / BARGE_IN; every other cell holds values
    user = scores["en_task_user"]
    # known answers of the user condition: 3 of 4 SHIFTs scored (none dropped there but the two overlapping ones),
    # the Mm-hm PAUSE taken over 0.6 s in
    assert (user["shift_tor"]["k"], user["shift_tor"]["n"], user["shift_tor"]["n_dropped"]) == (2, 3, 2)
    assert (user["pause_tor"]["k"], user["pause_tor"]["n"], user["pause_tor"]["n_dropped"]) == (3, 5, 1)
    assert user["bc_stop_latency"]["n_dropped"] == 1


def test_export_leaves_out_what_the_rules_drop_and_says_why(planted: dict[str, Any]) -> None:
    summary, ids = planted["summary"], planted["ids"]
    first_dropped = len(CASES) + 1
    dropped = {cid for cid, (n, _) in ids.items() if first_dropped <= n < first_dropped + len(DROPPED)}
    assert {f["case_id"] for f in summary["left_out"]} == dropped and len(dropped) == 3 + 3 + 3 + 2
    assert summary["left_out_by_status"] == {"dropped": len(dropped)}
    why = {f["case_id"]: f["reason"] for f in summary["left_out"]}
    assert "overlapping SHIFT: the reply starts 0.3 s before the user's turn ends" in why["en-task-d001-e11-user"]
    assert "overlapping SHIFT: the reply starts 0 s before" in why["en-task-d001-e12-none"]
    assert "in a turn at s, where a PAUSE needs it silent" in why["en-task-d001-e13-full"]
    assert "not in a turn at s, where a BC needs it speaking" in why["en-task-d001-e14-user"]
    rows = [json.loads(x) for x in (planted["out"] / "user" / "metadata.jsonl").read_text().splitlines()]
    assert len(rows) == len(planted["cases"]) - 4 and not {r["case_id"] for r in rows} & dropped
    # Under the paper's rules every episode is scored, so every one is exported: their summary then counts the
    # overlapping SHIFTs our authors-rules scores drop (what the rule-set choice changes).
    assert planted["paper_summary"]["left_out"] == [] and planted["paper_summary"]["rules"] == "paper"
    assert planted["paper_summary"]["compare_with"] is None
    theirs = R.cells(planted["paper_out"] / "user" / "metadata.jsonl")
    assert theirs["shift_tor"][1] == 5 != planted["authors"]["scores"]["en_task_user"]["shift_tor"]["n"]


def test_mm_hm_is_four_words_in_scoring_and_export(planted: dict[str, Any]) -> None:
    from metrics.m3.words import words

    assert words("Mm-hm, mm-hm.", "en") == ["Mm", "hm", "mm", "hm"]
    run, out = planted["run"], planted["out"]
    n = len(planted["cases"])  # MM_HM is the last case
    m = next(json.loads(x) for x in (run / "measurements.jsonl").read_text().splitlines()
             if json.loads(x)["case_id"] == f"en-task-d001-e{n:02d}-user")
    key = "ge:4600-5300"
    assert m["words_text"][key] == "Mm-hm, mm-hm." and m["words"][key] == 4
    v = verdict(m, RULE_SETS["authors"])
    assert v["takeover"] and v["latency_s"] == pytest.approx(0.6) and v["bc_filter"] == "applied"
    row = next(json.loads(x) for x in (out / "user" / "metadata.jsonl").read_text().splitlines()
               if json.loads(x)["event_id"] == f"en-task-d001-e{n:02d}")
    transcript = json.loads(Path(row["output_asr_path"]).read_text())
    seg = next(s for s in transcript["segments"] if s["channel"] == 1)
    # the transcript scoring stored, not the export ASR's "uh"; its four words are the chunks
    assert seg["text"] == "Mm-hm, mm-hm." and [c["text"] for c in seg["chunks"]] == ["Mm", "hm", "mm", "hm"]
    assert R.evaluate(row, transcript) == {"tor ↓": 1, "latency ↑": pytest.approx(0.6)}


# --- Japanese: the backchannel filter applies, with words from the morphological analyser ---------------------------

JA_CASES = [
    ("PAUSE", S + 2.0, [(S + 0.5, S + 0.95)], None),  # 0.45 s 「うんうん」: a backchannel
    ("PAUSE", S + 2.0, [(S + 0.5, S + 1.3)], None),  # 0.8 s 「そうですね、分かりました」: six words, a takeover
    ("PAUSE", S + 2.0, [(S + 0.5, S + 0.95), (S + 3.0, S + 4.0)], None),  # a backchannel, then the next onset
]
SCORING_JA = ScriptedASR("scripted-ja", "ja", {450: "うんうん", 800: "そうですね、分かりました"}, "はい")


def test_japanese_backchannel_inside_a_pause_is_no_takeover_in_both(tmp_path: Path) -> None:
    from metrics.m3.words import words

    assert words("うんうん", "ja") == ["うん", "うん"]
    assert words("そうですね、分かりました", "ja") == ["そう", "です", "ね", "分かり", "まし", "た"]
    run = tmp_path / "run"
    _plant(run, JA_CASES, ("user",), lang="ja", domain="chat")
    paper = score_run(run, asr=SCORING_JA, vad_factory=H.planted)
    authors = score_run(run, overrides={"rules": "authors"}, reuse_measurements=True)
    measured = [json.loads(x) for x in (run / "measurements.jsonl").read_text().splitlines()]
    assert [sorted(m["words"].values()) for m in measured] == [[2, 2], [6, 6], [2, 2]]  # paper's and authors' keys
    got = [verdict(m, RULE_SETS["authors"]) for m in measured]
    assert [(v["takeover"], round(v["latency_s"] * 1000), v["bc_filter"]) for v in got] == [
        (False, 10000, "applied"), (True, 500, "applied"), (False, 3000, "applied")]
    assert paper["scores"]["ja_chat_user"]["pause_tor"]["k"] == 3  # the paper's rule has no backchannel filter
    a = authors["scores"]["ja_chat_user"]
    assert (a["pause_tor"]["k"], a["pause_tor"]["n"], a["pause_latency"]["n_bc_filter_not_applied"]) == (1, 3, 0)
    summary = export_run(run, tmp_path / "out", asr=EXPORT_EN, overrides={"rules": "authors"})
    assert summary["left_out"] == [] and "ja" in summary["untranscribed"]  # the export's ASR hears English only
    rows = [json.loads(x) for x in (tmp_path / "out" / "user" / "metadata.jsonl").read_text().splitlines()]
    transcripts = [json.loads(Path(r["output_asr_path"]).read_text()) for r in rows]
    assert [c["text"] for c in transcripts[0]["segments"][-1]["chunks"]] == ["うん", "うん"]
    assert [R.evaluate(r, tr) for r, tr in zip(rows, transcripts, strict=True)] == [
        {"tor ↓": 0, "latency ↑": pytest.approx(10.0)}, {"tor ↓": 1, "latency ↑": pytest.approx(0.5)},
        {"tor ↓": 0, "latency ↑": pytest.approx(3.0)}]
    assert not _differing_cells(R.cells(tmp_path / "out" / "user" / "metadata.jsonl"), a)


def test_export_without_word_counts_leaves_the_pause_out(tmp_path: Path) -> None:
    """Scored with an ASR that does not transcribe Japanese, the filter is not applied to a PAUSE with a short
    segment (ours counts it a takeover); their filter would read its empty chunks as a backchannel, so the export
    leaves it out and says why."""
    run = tmp_path / "run"
    _plant(run, JA_CASES[:1], ("user",), lang="ja", domain="chat")
    score_run(run, asr=SCORING_EN, vad_factory=H.planted)
    summary = export_run(run, tmp_path / "out", asr=EXPORT_EN, overrides={"rules": "authors"})
    assert [f["status"] for f in summary["left_out"]] == ["no word counts"]
    assert "transcribes en only" in summary["left_out"][0]["reason"] and summary["episodes"] == {}
