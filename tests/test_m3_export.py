"""`export m3`: a scored run folder in the M3 authors' layout (audio/{sample_id}/{event_id}.wav stereo,
metadata.jsonl with their field names, their ASR JSON), and the timing their evaluation would compute from those
files equals our `rules=authors` scores to the millisecond.

The evaluator below reads only the exported files, the way SPEC §6 describes the authors' timing code: times
relative to `input_start`; SHIFT: among model segments with end > s and start >= s − 0.4 the start closest to s;
PAUSE: any model segment overlapping the pause that is not a backchannel (< 1.0 s and < 4 chunks), else the next
onset at or after the pause end, else the window end; stop latency: the earliest segment starting before
s + 0.5 s, its end − s.
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
from metrics.m3.export import export_run
from metrics.m3.rules import RULE_SETS, verdict
from metrics.m3.score import score_run
from metrics.scoring import ASR_PAD_S
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


def authors_timing(meta: dict[str, Any], transcript: dict[str, Any]) -> dict[str, Any]:
    model = sorted((s for s in transcript["segments"] if s["channel"] == 1), key=lambda s: s["timestamp"][0])
    ts = [(float(s["timestamp"][0]), float(s["timestamp"][1]), len(s["chunks"])) for s in model]
    s0 = float(meta["event_start"]) - float(meta["input_start"])
    kind = meta["event_type"]
    if kind == "TURN_SHIFT":
        cands = [a for a, b, _ in ts if b > s0 and a >= s0 - 0.4]
        if not cands:
            return {"tor": 0, "latency": None}
        return {"tor": 1, "latency": min(cands, key=lambda a: abs(a - s0)) - s0}
    if kind == "TURN_HOLD":
        pe = float(meta["event_end"]) - float(meta["input_start"])
        turns = [a for a, b, n in ts if not (b <= s0 or a >= pe) and not (b - a < 1.0 and n < 4)]
        if turns:
            return {"tor": 1, "latency": min(turns) - s0}
        later = [a for a, _, _ in ts if a >= pe]
        return {"tor": 0, "latency": (min(later) - s0) if later else float(meta["input_end"]) - float(
            meta["event_start"])}
    early = [(a, b) for a, b, _ in ts if a < s0 + 0.5]
    return {"stop": (min(early)[1] - s0) if early else None}


def ours(m: dict[str, Any]) -> dict[str, Any]:
    v = verdict(m, RULE_SETS["authors"])
    if m["event_type"] in ("SHIFT", "PAUSE"):
        return {"tor": int(v["takeover"]), "latency": v["latency_s"]}
    return {"stop": v["stop_latency_s"]}


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
            theirs = authors_timing(row, json.loads(Path(row["output_asr_path"]).read_text()))
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
    """`duplex-eval export m3 RUN_DIR --out DIR`, with the default (real) ASR."""
    from eval.cli import main

    g = H.gold("SHIFT", s=S, t=S + 0.3)
    H.write(tmp_path / "run", "en-task-d001-e01-user", g, H.bursts(D, [(S + 0.4, S + 2.0)]))
    score_run(tmp_path / "run", asr=EnglishASR(), vad_factory=H.planted)
    assert main(["export", "m3", str(tmp_path / "run"), "--out", str(tmp_path / "out")]) == 0
    assert "exported {'user': 1}" in capsys.readouterr().out
    row = json.loads((tmp_path / "out" / "user" / "metadata.jsonl").read_text())
    assert Path(row["output_audio_path"]).is_file() and Path(row["output_asr_path"]).is_file()
    assert json.loads((tmp_path / "out" / "export.json").read_text())["asr"] == "whisper-tiny-en"
