"""M3 events from real audio: piper speech placed at known times on two channels, through Silero VAD and the IPU
rules (metrics/m3/extract.py), and the `duplex-eval events` command on the same WAV.

Every intended gap sits at least 0.1 s from a rule's boundary, so the VAD's edge error (measured here: within
VAD_EDGE_TOLERANCE_S = 0.1 s of the placed clip edges; 32 ms chunks) cannot flip an event.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR, write_wav
from dataset_builder.rules.m3_timing_stats import load_stats
from dataset_builder.tts.voices import trim_silence
from eval.cli import main
from metrics.m3.extract import VAD_EDGE_TOLERANCE_S, DialogueEvents, events_from_audio, events_from_wav

SR = SESSION_SR
TOL = VAD_EDGE_TOLERANCE_S
QUESTION = "Could you tell me when the museum opens tomorrow?"
ANSWER = "It opens at nine in the morning and closes at five."
FOLLOW_UP = "Which museum do you mean exactly?"


@pytest.fixture(scope="module")
def scene(piper) -> tuple[np.ndarray, list[tuple[str, float, float, int]], dict[str, tuple[float, float]]]:
    """A 2-channel dialogue (ch0 user, ch1 system) with every event type, and its intended events and clips."""
    user, system = piper.voices()[1], piper.assistant_voice

    def say(text: str, voice: str) -> np.ndarray:
        return trim_silence(piper.synthesize(text, voice), SR, keep_s=0.0)

    u_q, u_f, u_bc = say(QUESTION, user), say(FOLLOW_UP, user), say("Yeah.", user)
    s_a, s_bc = say(ANSWER, system), say("Mm-hm.", system)
    dur = {k: x.size / SR for k, x in {"u_q": u_q, "u_f": u_f, "u_bc": u_bc, "s_a": s_a, "s_bc": s_bc}.items()}
    assert dur["u_bc"] < 0.6 and dur["s_bc"] < 0.75 and min(dur["u_q"], dur["u_f"], dur["s_a"]) > 1.5

    placed: dict[str, tuple[float, float]] = {}
    tracks = [np.zeros(int(40 * SR), np.float32), np.zeros(int(40 * SR), np.float32)]

    def put(name: str, ch: int, x: np.ndarray, t: float, cut_at: float | None = None) -> float:
        if cut_at is not None:
            x = x[: int(round((cut_at - t) * SR))]
        i = int(round(t * SR))
        tracks[ch][i : i + x.size] += x
        placed[name] = (t, t + x.size / SR)
        return t + x.size / SR

    u1 = put("u1", 0, u_q, 0.5)
    s1 = put("s1", 1, s_a, u1 + 0.3)  # SHIFT user -> system, gap 0.3 s
    put("u_bc", 0, u_bc, placed["s1"][0] + 1.0)  # user BC inside the system TURN
    u2 = put("u2", 0, u_f, s1 - 0.2)  # SHIFT system -> user, 0.2 s overlap (t < s)
    u3 = put("u3", 0, u_q, u2 + 1.2)  # PAUSE 1.2 s
    put("s_bc", 1, s_bc, placed["u3"][0] + 0.6)  # system BC inside the user's TURN
    s2_start = u3 + 0.7  # SHIFT user -> system, gap 0.7 s
    u4_start = s2_start + 1.2
    put("s2", 1, s_a, s2_start, cut_at=u4_start + 1.0)  # system cut 1.0 s after the user barges in
    u4 = put("u4", 0, u_f, u4_start)  # BARGE_IN, 1.0 s overlap
    s3 = put("s3", 1, s_a, u4 + 0.6)  # SHIFT user -> system, gap 0.6 s
    audio = np.stack(tracks, axis=1)[: int((s3 + 1.0) * SR)]
    pl = placed
    intended = [
        ("SHIFT", pl["u1"][1], pl["s1"][0], 0),
        ("BC", *pl["u_bc"], 0),
        ("SHIFT", pl["s1"][1], pl["u2"][0], 1),
        ("PAUSE", pl["u2"][1], pl["u3"][0], 0),
        ("BC", *pl["s_bc"], 1),
        ("SHIFT", pl["u3"][1], pl["s2"][0], 0),
        ("BARGE_IN", *pl["u4"], 0),
        ("SHIFT", pl["u4"][1], pl["s3"][0], 0),
    ]
    return audio, intended, placed


@pytest.fixture(scope="module")
def extracted(scene) -> DialogueEvents:
    audio, _, _ = scene
    return events_from_audio(audio, SR, source="scene")


def test_real_audio_events_match_the_placement(scene, extracted: DialogueEvents) -> None:
    _, intended, _ = scene
    got = [(e.type, e.start_s, e.end_s, e.channel) for e in extracted.events]
    assert [(g[0], g[3]) for g in got] == [(i[0], i[3]) for i in intended]
    for g, i in zip(got, intended, strict=True):
        assert g[1] == pytest.approx(i[1], abs=TOL) and g[2] == pytest.approx(i[2], abs=TOL), (g, i)
    by_type = {e.type: e for e in extracted.events if e.channel == 0}
    assert by_type["BARGE_IN"].overlap_s == pytest.approx(1.0, abs=TOL)
    shift_back = extracted.events[2]
    assert shift_back.overlap_s == pytest.approx(0.2, abs=TOL)  # the follow-up started before the answer ended


def test_real_audio_ipus_and_evaluated_regions(scene, extracted: DialogueEvents) -> None:
    _, _, placed = scene
    assert [i.kind for i in extracted.ipus_ch0] == ["turn", "bc", "turn", "turn", "turn"]
    assert [i.kind for i in extracted.ipus_ch1] == ["turn", "bc", "turn", "turn"]
    regions = extracted.evaluated(0)
    assert [r.event.type for r in regions] == ["SHIFT", "BC", "PAUSE", "SHIFT", "BARGE_IN", "SHIFT"]
    pause, shift_after_pause = regions[2], regions[3]
    # the user's turn with the pause began with the follow-up u2 (after the system's answer s1)
    assert pause.prompt_start_s == pytest.approx(placed["u2"][0], abs=TOL)
    assert shift_after_pause.prompt_start_s == pytest.approx(placed["u3"][0], abs=TOL)
    assert all(r.context_start_s == pytest.approx(placed["u1"][0], abs=TOL) for r in regions)
    # seen with channel 1 as the user: its SHIFT to channel 0 (the overlapping follow-up) and its BC
    assert [r.event.type for r in extracted.evaluated(1)] == ["SHIFT", "BC"]


def test_events_command_prints_the_table_and_writes_stats(scene, tmp_path: Path, capsys) -> None:
    audio, intended, _ = scene
    wav = tmp_path / "dialogue.wav"
    write_wav(wav, audio)
    assert [e.type for e in events_from_wav(wav).events] == [i[0] for i in intended]
    stats_file = tmp_path / "stats.json"
    assert main(["events", str(wav), "--stats-out", str(stats_file)]) == 0
    out = capsys.readouterr().out
    assert "BARGE_IN" in out and "user -> system" in out and "inside system TURN" in out
    assert "evaluated (caused by the user on ch0): 3 SHIFT, 1 PAUSE, 1 BC, 1 BARGE_IN" in out
    assert f"timing stats of 1 dialogue(s) written to {stats_file}" in out
    stats = load_stats(stats_file)
    assert json.loads(stats_file.read_text())["source"] == str(wav)
    assert stats.counts["shift_gap_s"] == 4 and stats.shift_gap_s is None  # too few to measure a distribution
    assert stats.bc_per_min is not None and stats.bc_per_min > 0
    # two copies of the dialogue pool to 8 SHIFT gaps: now a measured distribution
    assert main(["events", str(wav), str(wav), "--stats-out", str(stats_file)]) == 0
    pooled = load_stats(stats_file)
    assert pooled.counts["dialogues"] == 2 and pooled.shift_gap_s is not None
    assert pooled.source == f"2 dialogues: {wav} .. {wav}"
    assert pooled.shift_gap_s.values[0] == pytest.approx(-0.2, abs=TOL)
    capsys.readouterr()
    # the other channel as the user
    assert main(["events", str(wav), "--user-channel", "1"]) == 0
    assert "evaluated (caused by the user on ch1): 1 SHIFT, 0 PAUSE, 1 BC, 0 BARGE_IN" in capsys.readouterr().out


def test_events_command_from_word_timestamps(scene, tmp_path: Path, capsys) -> None:
    audio, _, placed = scene
    wav = tmp_path / "dialogue.wav"
    write_wav(wav, audio)
    words = tmp_path / "dialogue.txt_align"
    # one line per placed clip, a TURN's split into two words 0.3 s apart (a silence inside one IPU)
    lines = []
    for name, (a, b) in placed.items():
        ch, m = (0 if name.startswith("u") else 1), (a + b) / 2
        lines += ([f"{ch}\t{a:.3f}\t{m - 0.15:.3f}\tfirst", f"{ch}\t{m + 0.15:.3f}\t{b:.3f}\tlast"] if b - a > 1.0
                  else [f"{ch}\t{a:.3f}\t{b:.3f}\tyeah"])
    words.write_text("\n".join(lines) + "\n")
    assert main(["events", str(wav), "--words", str(words)]) == 0
    out = capsys.readouterr().out
    assert f"IPUs from words {words}" in out
    assert "evaluated (caused by the user on ch0): 3 SHIFT, 1 PAUSE, 1 BC, 1 BARGE_IN" in out


def test_events_command_errors_are_one_line(tmp_path: Path, capsys) -> None:
    mono = tmp_path / "mono.wav"
    write_wav(mono, np.zeros(SR, np.float32))
    junk = tmp_path / "junk.wav"
    junk.write_text("not audio")
    bad_words = tmp_path / "w.txt"
    bad_words.write_text("0\t0.1\n")
    stereo = tmp_path / "stereo.wav"
    write_wav(stereo, np.zeros((SR, 2), np.float32))
    for argv, message in [
        (["events", str(tmp_path / "none.wav")], "no such audio file"),
        (["events", str(mono)], "1 channel"),
        (["events", str(junk)], "not a readable audio file"),
        (["events", str(stereo), "--words", str(bad_words)], f"{bad_words}:1: 2 tab-separated fields"),
        (["events", str(stereo), "--words", str(tmp_path / "no.txt")], "no such word-timestamp file"),
        (["events", str(stereo), str(stereo), "--words", str(bad_words)], "--words given 1 times for 2 dialogues"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
