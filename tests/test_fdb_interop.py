"""Full-Duplex-Bench v1 interop (docs/interop.md): a hand-built FDB-style folder of real piper speech (16 kHz
float input.wav, their annotation files) is imported as M3 cases, run through the real runner (an echo model and
`silent`), and exported back to their per-sample layout; files, lengths and timestamps are checked exactly.

Every placed edge lies on an 80 ms grid (1280 samples at 16 kHz), so the times are whole milliseconds and a stream
aligned to the 80 ms frames of the agents here needs no padding: the exported timestamps are FDB's own times plus
the stream offset of the condition (0 for `user` / `full`, -b for `none`, which starts at b).
"""

from __future__ import annotations

import json
import re
from contextlib import redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError
from dataset_builder.importers.fdb_v1 import import_fdb
from dataset_builder.m3.rows import iter_items
from dataset_builder.rules.fdb_tasks import TASKS
from dataset_builder.schema import SchemaError
from dataset_builder.tts.voices import trim_silence
from eval.cli import main
from eval.run import RunConfig, run
from metrics.m3.fdb_export import export_fdb
from tests import m3_handmade as H

FDB_SR = 16_000
GRID = 1280  # 80 ms at 16 kHz
CONFIG = "m3_chat_en"
ECHO = "tests.fake_agents:MimiStyleAgent"  # output frame k = input frame k - 1 (80 ms), teacher forcing


@dataclass
class Sample:
    folder: str
    input: np.ndarray  # 16 kHz float32, as written
    spans: list[tuple[float, float]]  # the annotation, seconds
    b: float  # the prompt start the import must find
    texts: dict[str, str]


def grid(x: np.ndarray) -> np.ndarray:
    return np.concatenate([x, np.zeros(-len(x) % GRID, np.float32)])


def gap(seconds: float) -> np.ndarray:
    n = int(round(seconds * FDB_SR))
    assert n % GRID == 0
    return np.zeros(n, np.float32)


def at(n_samples: int) -> float:
    return round(n_samples / FDB_SR, 3)


@pytest.fixture(scope="module")
def fdb(piper, tmp_path_factory) -> tuple[Path, dict[str, Sample]]:
    voice = piper.voices()[1]

    def say(text: str) -> np.ndarray:
        x = trim_silence(piper.synthesize(text, voice), SESSION_SR, keep_s=0.0)
        return grid(resample(x, SESSION_SR, FDB_SR))

    root = tmp_path_factory.mktemp("fdb")
    samples: dict[str, Sample] = {}

    def write(folder: str, parts: list[np.ndarray], files: dict[str, Any], spans: list[tuple[float, float]],
              b: float, texts: dict[str, str] | None = None) -> None:
        d = root / folder
        d.mkdir(parents=True)
        x = np.concatenate(parts)
        sf.write(d / "input.wav", x, FDB_SR, subtype="FLOAT")  # their release: pcm_f32le, 16 kHz
        for name, content in files.items():
            if isinstance(content, np.ndarray):
                sf.write(d / name, content, FDB_SR, subtype="FLOAT")
            else:
                (d / name).write_text(json.dumps(content, indent=4))
        samples[folder] = Sample(folder, x, spans, b, texts or {})

    # Pause handling: "I was thinking we could go to the" | 1.2 s | "market on Saturday morning".
    a, m = "I was thinking we could go to the", "market on Saturday morning"
    lead, one, pause, two = gap(0.48), say(a), gap(1.2), say(m)
    s0 = len(lead) + len(one)
    s1 = s0 + len(pause)
    words = [{"speaker": 0, "item": [{"text": a, "timestamp": [at(len(lead)), at(s0)]},
                                     {"text": "[PAUSE]", "timestamp": [at(s0), at(s1)]},
                                     {"text": m, "timestamp": [at(s1), at(s1 + len(two))]}]}]
    write("synthetic_pause_handling/1", [lead, one, pause, two, gap(2.0)],
          {"pause.json": [{"text": "[PAUSE]", "timestamp": [at(s0), at(s1)]}], "transcription.json": words},
          [(at(s0), at(s1))], at(len(lead)))
    # Smooth turn-taking: the user's question, then the other speaker took over 0.24 s later; no transcription.
    lead, q = gap(0.32), say("What time does the last train leave tonight?")
    end = len(lead) + len(q)
    write("candor_turn_taking/7", [lead, q, gap(4.0)],
          {"turn_taking.json": [{"text": "[TURN-TAKING]", "timestamp": [at(end), at(end) + 0.24]}]},
          [(at(end), round(at(end) + 0.24, 3))], 0.0)
    # User interruption: context, 2.4 s (the model's answer), the interruption.
    c, i = "Tell me about the history of Rome.", "Actually, tell me about Paris instead."
    ctx, wait, stop = say(c), gap(2.4), say(i)
    s = len(ctx) + len(wait)
    write("synthetic_user_interruption/3", [ctx, wait, stop, gap(1.2)],
          {"interrupt.json": [{"context": c, "interrupt": i, "timestamp": [at(s), at(s + len(stop))]}],
           "context.wav": ctx},
          [(at(s), at(s + len(stop)))], at(s), {"context": c, "interrupt": i})
    # ICC backchannel: no task file (the model's own backchannels): skipped, counted.
    (root / "icc_backchannel" / "0").mkdir(parents=True)
    sf.write(root / "icc_backchannel" / "0" / "input.wav", say("So I went to the store and then"), FDB_SR)
    return root, samples


@pytest.fixture(scope="module")
def imported(fdb: tuple[Path, dict[str, Sample]], tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("fdb-imported")
    buf = StringIO()
    with redirect_stdout(buf):
        assert main(["import", "fdb", str(fdb[0]), "--out", str(out)]) == 0
    return out, buf.getvalue()


def row_id(folder: str) -> str:
    return folder.replace("/", "-") + "-e00"


EVENT = {"synthetic_pause_handling/1": "PAUSE", "candor_turn_taking/7": "SHIFT",
         "synthetic_user_interruption/3": "BARGE_IN"}


def test_import_makes_one_row_per_annotation_on_the_input_clock(fdb, imported) -> None:
    root, samples = fdb
    out, printed = imported
    assert "imported 3 event(s) (1 SHIFT, 1 PAUSE, 1 BARGE_IN) from 4 Full-Duplex-Bench v1 sample(s)" in printed
    assert "skipped: no annotation file (icc_backchannel" in printed and f"--config {CONFIG}" in printed
    summary = json.loads((out / "import" / f"{CONFIG}.json").read_text())
    assert summary["layout"] == "Full-Duplex-Bench v1" and summary["sample_rates"] == [FDB_SR]
    assert summary["cases"] == {"SHIFT": 3, "PAUSE": 3, "BC": 0, "BARGE_IN": 2}
    items = {c.case_id: (c, a) for c, a in iter_items(out, CONFIG)}
    assert len(items) == 8
    for folder, sample in samples.items():
        case, audio = items[f"{row_id(folder)}-user"]
        ev = case.event
        (s, t), = sample.spans
        assert (ev.event_type, ev.event_start_s, ev.event_end_s, ev.prompt_start_s, ev.dialogue_offset_s) == (
            EVENT[folder], s, t, sample.b, 0.0)
        assert ev.window_end_s == round(s + 10.0, 3) and audio.shape == (round((s + 10.0) * SESSION_SR), 2)
        want = resample(sample.input, FDB_SR, SESSION_SR)[:audio.shape[0]]
        np.testing.assert_allclose(audio[:len(want), 0], want, atol=1.5 / 32767)  # the input, on its own clock
        assert not audio[len(want):, 0].any() and not audio[:, 1].any()  # padded; FDB has no system side
    pause = items[f"{row_id('synthetic_pause_handling/1')}-user"][0].event
    assert [u.text for u in pause.utterances] == ["I was thinking we could go to the", "market on Saturday morning"]
    assert pause.transcribed
    shift = items[f"{row_id('candor_turn_taking/7')}-user"][0].event
    assert not shift.transcribed and shift.utterances == ()  # no words, no reference reply
    barge = items[f"{row_id('synthetic_user_interruption/3')}-user"][0].event
    assert [(u.text, u.start_s) for u in barge.utterances] == [
        ("Tell me about the history of Rome.", 0.0), ("Actually, tell me about Paris instead.", barge.event_start_s)]
    card = (out / "README.md").read_text()
    assert "license: cc-by-nc-4.0" in card and f"| `{CONFIG}` | PAUSE | pause_handling | 1 | 3 |" in card
    assert "$" not in card.split("---", 2)[2]


@pytest.fixture(scope="module")
def runs(imported: tuple[Path, str], tmp_path_factory) -> dict[str, Path]:
    out = {}
    for name, adapter in (("echo", ECHO), ("silent", "silent")):
        out[name] = tmp_path_factory.mktemp(f"fdb-run-{name}")
        counts = run(RunConfig(dataset=str(imported[0]), config=CONFIG, adapter=adapter, out=str(out[name])))
        assert counts["failed"] == 0, counts
    return out


def pcm(path: Path) -> tuple[np.ndarray, int]:
    x, sr = sf.read(str(path), dtype="int16", always_2d=True)
    return x, sr


@pytest.mark.parametrize("agent", ["echo", "silent"])
def test_export_writes_their_layout_from_the_recordings(agent: str, fdb, runs, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    root, samples = fdb
    run_dir, out = runs[agent], tmp_path / "fdb-out"
    assert main(["export", "fdb", str(run_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "export.json").read_text())
    ran = ("none", "user", "full") if agent == "echo" else ("none", "user")  # silent cannot be teacher-forced
    assert summary["samples"] == {c: {t: 1 for t in ("pause_handling", "smooth_turn_taking", "user_interruption")
                                      if c != "none" or t != "user_interruption"} for c in sorted(ran)}
    if agent == "silent":
        assert {f["status"] for f in summary["episodes_left_out"]} == {"skipped"}
        assert "LEFT OUT" in printed and "(skipped)" in printed
    for cond in ran:
        for task_dir in (out / cond).iterdir():
            assert all(p.is_dir() for p in task_dir.iterdir())  # their scripts read every entry as a sample
    for folder, sample in samples.items():
        (s, t), = sample.spans
        task, task_file, text = TASKS[EVENT[folder]]
        for cond in ran:
            if cond == "none" and EVENT[folder] == "BARGE_IN":
                continue
            cid = f"{row_id(folder)}-{cond}"
            d = out / cond / task / cid
            assert sorted(p.name for p in d.iterdir()) == sorted(["input.wav", "output.wav", task_file])
            rec, _ = pcm(run_dir / f"{cid}.wav")
            (inp, sr_in), (outp, sr_out) = pcm(d / "input.wav"), pcm(d / "output.wav")
            assert sr_in == sr_out == SESSION_SR and inp.shape == outp.shape == (rec.shape[0], 1)
            assert np.array_equal(inp[:, 0], rec[:, 0]) and np.array_equal(outp[:, 0], rec[:, 1])
            gold = json.loads((run_dir / f"{cid}.rec.json").read_text())["gold"]
            offset = {"none": -sample.b, "user": 0.0, "full": 0.0}[cond]
            assert gold["context_start_s"] == round(offset, 3)
            want_span = [round(s + offset, 3), round(t + offset, 3)]
            got = json.loads((d / task_file).read_text())
            if EVENT[folder] == "BARGE_IN":
                assert got == [{"context": sample.texts["context"], "interrupt": sample.texts["interrupt"],
                                "timestamp": want_span}]
            else:
                assert got == [{"text": text, "timestamp": want_span}]
            # input.wav is FDB's input on the recording clock up to s: two PCM16 hops (the row, the recording), each
            # writing x * 32767 and reading back / 32768, hence the relative tolerance of 2 / 32768.
            i_s = round((s + offset) * SESSION_SR)
            first = round(-offset * SESSION_SR)
            want = resample(sample.input, FDB_SR, SESSION_SR)
            np.testing.assert_allclose(inp[:i_s, 0] / 32768, want[first:first + i_s], rtol=2 / 32768, atol=2 / 32767)
            if agent == "echo" and cond != "full":
                assert np.array_equal(outp[1920:, 0], inp[:-1920, 0])  # the model channel, one 80 ms frame late
            if agent == "silent":
                assert not outp.any()


def test_export_counts_events_without_an_fdb_task_and_refuses_other_benchmarks(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    for n, kind in enumerate(("BC", "SHIFT", "BC"), start=1):
        g = H.gold(kind, s=2.0, t=2.5, event_n=n, b=0.5 if kind == "SHIFT" else None)
        H.write(run_dir, H.case_id(kind, n), g, H.bursts(12.0, [(2.6, 4.0)]), user=H.bursts(12.0, [(0.5, 2.0)]))
    (run_dir / "run.json").write_text(json.dumps({"benchmark": "m3"}))
    summary = export_fdb(run_dir, tmp_path / "out")
    assert summary["samples"] == {"user": {"smooth_turn_taking": 1}}
    assert summary["events_left_out"]["BC"]["episodes"] == 2 and "own backchannels" in \
        summary["events_left_out"]["BC"]["why"]
    assert json.loads((tmp_path / "out" / "user" / "smooth_turn_taking" / H.case_id("SHIFT", 2) /
                       "turn_taking.json").read_text()) == [{"text": "[TURN-TAKING]", "timestamp": [2.0, 2.5]}]
    (run_dir / "run.json").write_text(json.dumps({"benchmark": "mpe"}))
    with pytest.raises(UsageError, match="mpe run; `export fdb` exports M3 runs"):
        export_fdb(run_dir, tmp_path / "out2")


def test_malformed_samples_are_one_line_errors(fdb, tmp_path: Path) -> None:
    def sample(name: str, content: Any, channels: int = 1) -> Path:
        d = tmp_path / name / "1"
        d.mkdir(parents=True)
        sf.write(d / "input.wav", np.zeros((FDB_SR * 2, channels), np.float32), FDB_SR)
        (d / "pause.json").write_text(content if isinstance(content, str) else json.dumps(content))
        return d

    cases = {"notjson": ("[{", "not readable JSON"),
             "nostamp": ([{"text": "[PAUSE]"}], "expected [start, end]"),
             "outside": ([{"text": "[PAUSE]", "timestamp": [1.0, 3.5]}], "outside input.wav"),
             "stereo": ([{"text": "[PAUSE]", "timestamp": [0.5, 1.0]}], "2 channels")}
    for name, (content, message) in cases.items():
        d = sample(name, content, channels=2 if name == "stereo" else 1)
        with pytest.raises(SchemaError, match=re.escape(message)) as err:
            import_fdb(d.parent, tmp_path / f"{name}-out")
        assert str(d) in str(err.value) and "\n" not in str(err.value)
        assert not (tmp_path / f"{name}-out").exists()  # nothing written
    # Spans our definitions cannot evaluate are skipped and counted, the rest imported.
    d = sample("empty", [{"text": "[PAUSE]", "timestamp": [1.0, 1.0]}])
    with pytest.raises(UsageError, match="no sample with"):
        import_fdb(d.parent, tmp_path / "empty-out")
    (tmp_path / "built").mkdir()
    (tmp_path / "built" / "README.md").write_text("---\n---\n")
    with pytest.raises(UsageError, match="not imported"):
        import_fdb(fdb[0], tmp_path / "built")


def test_their_data_scores_with_our_definitions(runs: dict[str, Path]) -> None:
    from metrics.scoring import score_run_dir

    result = score_run_dir(runs["silent"])
    assert result["benchmark"] == "m3" and result["n_failed"] == 0 and result["n_episodes"] == 8
    user = result["scores"]["en_chat_user"]
    # The silent model takes no turn: SHIFT and PAUSE TOR 0 of 1; stop latency undefined (it is not speaking at s);
    # no content score without a reference text.
    assert (user["shift_tor"]["value"], user["shift_tor"]["n"]) == (0.0, 1)
    assert (user["pause_tor"]["value"], user["pause_tor"]["n"]) == (0.0, 1)
    assert user["barge_in_stop_latency"]["n_undefined"] == 1 and user["relevance"]["computed"] is False
