"""`duplex-eval import m3` (dataset_builder/importers/m3_authors.py): the M3-DuplexBench authors' released layout
becomes rows of our `m3_*` configs, checked on a hand-made folder in their format.

The folder `data/en/chat/handmade_toy/` holds two dialogues of piper speech placed at known times (whole 10 ms, their
annotation's resolution) on two channels, the authors' labels for them written here from the placement, and word
times for the first:

- d1 (16 kHz, with txt_align): user question -> system answer (SHIFT, gap 0.3 s) with a user BC inside it; the
  system yields to the user (a system SHIFT, not a row); the user pauses 1.2 s (PAUSE, SHORTPAUSE label inside the
  second half, ignored); the system answers overlapping by 0.2 s (SHIFT, t < s); the system holds (system PAUSE);
  the user barges in 1.5 s into a long system turn, which stops 1.0 s later (BARGE_IN); the system answers (SHIFT).
- d2 (24 kHz, no txt_align, 140 s): a SHIFT near the start, and one at 130 s whose context starts at 10 s: τ(L)
  is the start of the earliest utterance overlapping [b - 120 s, b], not the dialogue's start.

Expected rows are computed here from the placement and the paper's region rules, not through the importer's code.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.m3.rows import list_events, list_items
from dataset_builder.m3.schema import M3Event
from dataset_builder.schema import SchemaError
from dataset_builder.tts.voices import trim_silence
from eval.cli import main

SR = SESSION_SR
TEN_MS = SR // 100
CONFIG = "m3_chat_en"
LINES = {
    "q1": "Could you tell me when the museum opens tomorrow?",
    "a1": "It opens at nine in the morning and closes at five.",
    "bc": "Yeah.",
    "f1": "Which museum do you mean exactly?",
    "f2": "I want to see the old paintings there.",
    "a2": "The art museum is on Main Street.",
    "a3": "The reading room on the second floor is very quiet, and there is a small cafe next to the entrance.",
    "f3": "Sorry, how much is a ticket?",
    "a4": "A ticket costs ten dollars.",
}
USER = {"q1", "bc", "f1", "f2", "f3"}


@dataclass
class Toy:
    folder: Path
    d1: dict[str, tuple[int, int]]  # utterance -> (start, end) ms on the dialogue clock (end: where its audio stops)
    d2: dict[str, tuple[int, int]]
    audio1: np.ndarray  # (n, 2) 24 kHz as placed (the WAV is this at 16 kHz)
    audio2: np.ndarray  # (n, 2) 24 kHz as written
    words1: dict[str, str]  # utterance -> the words txt_align gives it


def _label(event: str, a: int, b: int) -> dict[str, Any]:
    return {"event": event, "time": [a / 1000, b / 1000]}


def _place(spec: list[tuple[str, str, int, int | None]], clips: dict[str, np.ndarray], length_ms: int
           ) -> tuple[np.ndarray, dict[str, tuple[int, int]]]:
    """(name, clip, start ms, cut ms or None) -> the 2-channel audio and each utterance's span."""
    audio = np.zeros((length_ms * SR // 1000, 2), np.float32)
    spans = {}
    for name, clip, start, cut_ms in spec:
        x = clips[clip]
        end = start + x.size * 1000 // SR if cut_ms is None else cut_ms
        x = x[: (end - start) * SR // 1000]
        ch = 0 if clip in USER else 1
        audio[start * SR // 1000: start * SR // 1000 + x.size, ch] += x
        spans[name] = (start, end)
    return audio, spans


def _words(spans: dict[str, tuple[int, int]], clip_of: dict[str, str], clip_ms: dict[str, int]
           ) -> tuple[list[str], dict[str, str]]:
    """txt_align lines: each line's words spread evenly over its whole clip (10 ms times); a cut utterance keeps the
    words whose midpoint falls before the cut."""
    lines, kept = [], {}
    for name, (start, end) in spans.items():
        words = LINES[clip_of[name]].split()
        step = clip_ms[clip_of[name]] / len(words)
        said = []
        for i, w in enumerate(words):
            a, b = round((start + i * step) / 10) * 10, round((start + (i + 1) * step) / 10) * 10
            if (a + b) / 2 <= end:
                lines.append(f"{0 if clip_of[name] in USER else 1}\t{a / 1000:.2f}\t{min(b, end) / 1000:.2f}\t{w}")
                said.append(w)
        kept[name] = " ".join(said)
    return lines, kept


@pytest.fixture(scope="module")
def toy(piper, tmp_path_factory) -> Toy:
    user, system = piper.voices()[1], piper.assistant_voice
    clips = {}
    for name, text in LINES.items():
        x = trim_silence(piper.synthesize(text, user if name in USER else system), SR, keep_s=0.0)
        clips[name] = x[: x.size // TEN_MS * TEN_MS]  # whole 10 ms, so label times are the speech edges
    ms = {k: x.size * 1000 // SR for k, x in clips.items()}
    assert ms["bc"] <= 700 and min(ms[k] for k in LINES if k != "bc") > 1000, ms

    # d1: times in ms, each placed after the previous as the module doc says
    q1 = (500, 500 + ms["q1"])
    a1 = (q1[1] + 300, q1[1] + 300 + ms["a1"])
    bc = (a1[0] + 1000, a1[0] + 1000 + ms["bc"])
    f1 = (a1[1] + 800, a1[1] + 800 + ms["f1"])
    f2 = (f1[1] + 1200, f1[1] + 1200 + ms["f2"])
    a2 = (f2[1] - 200, f2[1] - 200 + ms["a2"])
    a3_start = a2[1] + 900
    f3 = (a3_start + 1500, a3_start + 1500 + ms["f3"])
    a3 = (a3_start, f3[0] + 1000)
    a4 = (f3[1] + 600, f3[1] + 600 + ms["a4"])
    audio1, d1 = _place([(n, n, s, None) for n, (s, _) in
                         [("q1", q1), ("a1", a1), ("bc", bc), ("f1", f1), ("f2", f2), ("a2", a2), ("a4", a4),
                          ("f3", f3)]] + [("a3", "a3", a3[0], a3[1])], clips, a4[1] + 500)
    assert d1["a3"] == a3 and f3[1] > a3[1] and a4[0] - a3[1] > 500  # the user outlasts the cut turn; a4 starts
    # more than 0.5 s after it (one IPU each)
    sp = (f2[0] + 300, f2[0] + 400)
    events1 = {
        "0": [_label("TURN", *q1), _label("BC", *bc), _label("TURN_SHIFT", a1[1], f1[0]), _label("TURN", *f1),
              _label("TURN_HOLD", f1[1], f2[0]), _label("TURN", *f2), _label("SHORTPAUSE", *sp),
              _label("TURN", *f3), _label("BARGE_IN", f3[0], a3[1])],
        "1": [_label("TURN_SHIFT", q1[1], a1[0]), _label("TURN", *a1), _label("TURN_SHIFT", f2[1], a2[0]),
              _label("TURN", *a2), _label("TURN_HOLD", a2[1], a3[0]), _label("TURN", *a3),
              _label("TURN_SHIFT", f3[1], a4[0]), _label("TURN", *a4)],
    }
    # d2: 140 s; the second SHIFT's context starts at the system turn at 10 s
    g1 = (1000, 1000 + ms["q1"])
    b1 = (g1[1] + 400, g1[1] + 400 + ms["a1"])
    b2 = (10_000, 10_000 + ms["a2"])
    g2 = (130_000, 130_000 + ms["f1"])
    b3 = (g2[1] + 500, g2[1] + 500 + ms["a4"])
    audio2, d2 = _place([("g1", "q1", g1[0], None), ("b1", "a1", b1[0], None), ("b2", "a2", b2[0], None),
                         ("g2", "f1", g2[0], None), ("b3", "a4", b3[0], None)], clips, 140_000)
    events2 = {
        "0": [_label("TURN", *g1), _label("TURN_SHIFT", b2[1], g2[0]), _label("TURN", *g2)],
        "1": [_label("TURN_SHIFT", g1[1], b1[0]), _label("TURN", *b1), _label("TURN_HOLD", b1[1], b2[0]),
              _label("TURN", *b2), _label("TURN_SHIFT", g2[1], b3[0]), _label("TURN", *b3)],
    }

    folder = tmp_path_factory.mktemp("m3-authors") / "data" / "en" / "chat" / "handmade_toy"
    (folder / "audio").mkdir(parents=True)
    (folder / "txt_align").mkdir()
    sf.write(folder / "audio" / "d1.wav", resample(audio1, SR, 16_000), 16_000, subtype="PCM_16")
    sf.write(folder / "audio" / "d2.wav", audio2, SR, subtype="PCM_16")
    audio2 = sf.read(folder / "audio" / "d2.wav", dtype="float32")[0]  # as its PCM16 file holds it
    lines, words1 = _words(d1, {k: k for k in d1}, ms)
    (folder / "txt_align" / "d1.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "test.jsonl").write_text("".join(json.dumps({"id": i, "events": e}) + "\n"
                                               for i, e in [("d1", events1), ("d2", events2)]), encoding="utf-8")
    return Toy(folder, d1, d2, audio1, audio2, words1)


@pytest.fixture(scope="module")
def imported(toy: Toy, tmp_path_factory) -> tuple[Path, str]:
    """The toy imported through the CLI (user on channel 0): the dataset folder and what the command printed."""
    out = tmp_path_factory.mktemp("m3-imported")
    buf = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(buf):
        assert main(["import", "m3", str(toy.folder), "--out", str(out)]) == 0
    return out, buf.getvalue()


def _decode(row_audio: bytes) -> np.ndarray:
    audio, sr = sf.read(io.BytesIO(row_audio), dtype="float32", always_2d=True)
    assert sr == SR and audio.shape[1] == 2
    return audio


def _same_pcm(a: np.ndarray, b: np.ndarray) -> bool:
    """The same 16-bit samples: a PCM16 file read as float and written again moves by at most one step."""
    return a.shape == b.shape and float(np.max(np.abs(a - b), initial=0.0)) <= 1.5 / 32768


def _rows(out: Path, config: str = CONFIG) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return [r for p in sorted((out / "data" / config).glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


# ------------------------------------------------------------------------------------------------ rows


def test_events_regions_and_texts(toy: Toy, imported: tuple[Path, str]) -> None:
    out, _ = imported
    events = {e.event_id: e for e in list_events(out, CONFIG)}
    p = toy.d1
    tau = p["q1"][0]  # everything lies within 120 s: the context starts at the first utterance

    def s(ms: int) -> float:
        return (ms - tau) / 1000

    # (type, b, s, t) per row on the clip clock, in order of s
    want = [
        ("SHIFT", p["q1"][0], p["q1"][1], p["a1"][0]),
        ("BC", p["bc"][0], p["bc"][0], p["bc"][1]),
        ("PAUSE", p["f1"][0], p["f1"][1], p["f2"][0]),  # b: the start of the user's turn holding the pause
        ("SHIFT", p["f2"][0], p["f2"][1], p["a2"][0]),  # overlapping: t = s - 0.2 s
        ("BARGE_IN", p["f3"][0], p["f3"][0], p["f3"][1]),  # t: the end of the user's TURN
        ("SHIFT", p["f3"][0], p["f3"][1], p["a4"][0]),
    ]
    d1 = [events[f"d1-e{k:02d}"] for k in range(len(want))]
    assert f"d1-e{len(want):02d}" not in events
    got = [(e.event_type, e.prompt_start_s, e.event_start_s, e.event_end_s) for e in d1]
    assert got == [(ty, s(b), s(st), s(t)) for ty, b, st, t in want]
    assert d1[3].event_end_s == pytest.approx(d1[3].event_start_s - 0.2)
    for e in d1:
        assert e.dialogue_id == "d1" and (e.language, e.domain) == ("en", "chat") and e.dialogue_offset_s == 0.5
        assert e.window_end_s == pytest.approx(e.event_start_s + 10.0) and e.transcribed
        assert (e.gold_answer, e.user_voice, e.tts_backend) == ("", "", "")
        # utterances: every IPU overlapping [τ, s + 10 s), with the words txt_align gives it
        inside = {n: v for n, v in p.items() if v[1] > tau and v[0] < round(e.window_end_s * 1000) + tau}
        assert sorted((u.start_s, u.end_s, u.speaker, u.kind, u.text) for u in e.utterances) == sorted(
            (s(a), s(b), "user" if n in USER else "system", "bc" if n == "bc" else "turn", toy.words1[n])
            for n, (a, b) in inside.items())
    w = toy.words1
    assert (d1[0].question, d1[0].reply) == (w["q1"], w["a1"])
    assert (d1[3].question, d1[3].reply) == (w["f1"] + " " + w["f2"], w["a2"])  # the whole turn, across the pause
    assert (d1[5].question, d1[5].reply) == (w["f3"], w["a4"])
    assert w["a3"] and w["a3"] != LINES["a3"]  # the cut turn has only the words said before the cut
    assert all(not e.question and not e.reply for e in d1 if e.event_type != "SHIFT")


def test_context_starts_at_the_earliest_utterance_within_l(toy: Toy, imported: tuple[Path, str]) -> None:
    out, _ = imported
    d2 = sorted((e for e in list_events(out, CONFIG) if e.dialogue_id == "d2"), key=lambda e: e.event_id)
    p = toy.d2
    assert [e.event_type for e in d2] == ["SHIFT", "SHIFT"]
    first, late = d2
    assert first.dialogue_offset_s == 1.0 and first.event_start_s == (p["g1"][1] - 1000) / 1000
    # b = 130 s, b - L = 10 s: the system turn starting at 10 s overlaps [b - L, b], the one ending ~5 s does not
    assert late.dialogue_offset_s == 10.0
    assert late.prompt_start_s == 120.0 and late.event_start_s == (p["g2"][1] - 10_000) / 1000
    assert [u.utt_id[0] for u in late.utterances] == ["s", "u", "s"]
    # no txt_align: imported untranscribed, texts empty
    assert not first.transcribed and not late.transcribed
    assert all(u.text == "" for u in late.utterances) and late.question == late.reply == ""


def test_row_audio_is_the_dialogue_cut_resampled_and_padded(toy: Toy, imported: tuple[Path, str]) -> None:
    out, _ = imported
    rows = {r["event_id"]: r for r in _rows(out)}
    # d2 is a 24 kHz PCM16 file: its row is exactly its samples over [10 s, s + 10 s), zero past the end (140 s)
    late = rows["d2-e01"]
    audio = _decode(late["audio"]["bytes"])
    n = round((late["window_end_s"]) * SR)
    assert audio.shape == (n, 2)
    src = toy.audio2[10 * SR:]
    assert _same_pcm(audio[: len(src)], src) and not np.any(audio[len(src):])
    # d1 was written at 16 kHz: its row, back at 24 kHz, lines up with the placed speech sample for sample
    first = rows["d1-e00"]
    audio = _decode(first["audio"]["bytes"])
    assert audio.shape == (round(first["window_end_s"] * SR), 2)
    tau = toy.d1["q1"][0] * SR // 1000
    pad = 48  # 2 ms of lags either way
    padded = np.pad(audio, ((pad, pad), (0, 0)))
    for ch, name in [(0, "q1"), (1, "a1"), (0, "bc")]:
        a, b = (x * SR // 1000 - tau for x in toy.d1[name])
        ref = toy.audio1[a + tau:b + tau, ch]
        lags = list(range(-pad, pad + 1))
        corr = [float(np.dot(padded[pad + a + k:pad + b + k, ch], ref)) for k in lags]
        best = lags[int(np.argmax(corr))]
        r = max(corr) / float(np.linalg.norm(padded[pad + a + best:pad + b + best, ch]) * np.linalg.norm(ref))
        assert best == 0 and r > 0.95, (name, best, r)
    # the user's channel is silent where only the system speaks, and the other way round
    a, b = (x * SR // 1000 - tau for x in toy.d1["a1"])
    bc_a, bc_b = (x * SR // 1000 - tau for x in toy.d1["bc"])
    assert np.max(np.abs(audio[a:bc_a - 480, 0])) < 1e-3 and np.max(np.abs(audio[bc_b + 480:b, 0])) < 1e-3


def test_user_on_channel_one_swaps_the_channels(toy: Toy, tmp_path: Path) -> None:
    from dataset_builder.importers.m3_authors import import_m3

    s = import_m3(toy.folder, tmp_path, user_channel=1)
    assert s["events"] == {"SHIFT": 2, "PAUSE": 2, "BC": 0, "BARGE_IN": 0} and s["user_channel"] == 1
    events = sorted(list_events(tmp_path, CONFIG), key=lambda e: e.event_id)
    p1, p2 = toy.d1, toy.d2
    got = [(e.event_id, e.event_type, e.prompt_start_s + e.dialogue_offset_s, e.event_start_s + e.dialogue_offset_s,
            e.event_end_s + e.dialogue_offset_s) for e in events]
    want = [("d1-e00", "SHIFT", p1["a1"][0], p1["a1"][1], p1["f1"][0]),
            ("d1-e01", "PAUSE", p1["a2"][0], p1["a2"][1], p1["a3"][0]),
            ("d2-e00", "PAUSE", p2["b1"][0], p2["b1"][1], p2["b2"][0]),
            ("d2-e01", "SHIFT", p2["b2"][0], p2["b2"][1], p2["g2"][0])]
    assert [(i, ty, round(b, 3), round(st, 3), round(t, 3)) for i, ty, b, st, t in got] == [
        (i, ty, b / 1000, st / 1000, t / 1000) for i, ty, b, st, t in want]
    shift = events[0]
    assert all((u.speaker == "user") == (u.utt_id[0] == "u") for u in shift.utterances)
    assert {u.text for u in shift.utterances if u.speaker == "user"} >= {toy.words1["a1"]}  # the system's words
    rows = {r["event_id"]: r for r in _rows(tmp_path)}
    late = _decode(rows["d2-e01"]["audio"]["bytes"])
    src = toy.audio2[round(events[3].dialogue_offset_s * SR):][: len(late)]
    assert len(src) == len(late) and _same_pcm(late, src[:, ::-1])


def test_summary_card_and_loading(toy: Toy, imported: tuple[Path, str], tmp_path: Path) -> None:
    out, printed = imported
    assert "imported 8 event(s) (5 SHIFT, 1 PAUSE, 1 BC, 1 BARGE_IN) from 2 dialogue(s)" in printed
    assert "ignored: SHORTPAUSE: 1" in printed and "rows without a full transcript (no txt_align words): 2" in printed
    assert f"--dataset {out} --config {CONFIG}" in printed
    s = json.loads((out / "import" / f"{CONFIG}.json").read_text())
    assert s["source"] == str(toy.folder.resolve()) and s["with_txt_align"] == 1 and s["sample_rates"] == [16_000,
                                                                                                            24_000]
    assert s["ignored"] == {"SHORTPAUSE": 1, "system PAUSE (the model plays the system)": 2,
                            "system SHIFT (the model plays the system)": 2}
    assert s["skipped"] == {} and s["extractor_check"] == {"same": 2}
    assert s["cases"] == {"SHIFT": 15, "PAUSE": 3, "BC": 2, "BARGE_IN": 2} and s["rows"] == 8
    assert s["untranscribed_events"] == {"SHIFT": 2, "PAUSE": 0, "BC": 0, "BARGE_IN": 0}
    assert [c.case_id for c in list_items(out, CONFIG)][:3] == ["d1-e00-none", "d1-e00-user", "d1-e00-full"]
    card = (out / "README.md").read_text()
    assert str(toy.folder.resolve()) in card and "license: other" in card and "$" not in card
    assert f"| `{CONFIG}` | SHIFT | 5 | 15 | 2 |" in card and f"| `{CONFIG}` | ignored: SHORTPAUSE | 1 |" in card
    from datasets import load_dataset

    ds = load_dataset(str(out), CONFIG, split="test", cache_dir=str(tmp_path / "hf"))
    assert len(ds) == 8 and sorted(ds["event_id"])[0] == "d1-e00"


# ------------------------------------------------------------------------------------------------ the runner


@pytest.fixture
def m3_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """M3 as the runner finds it: the registered entry once the integrator adds it, else a stand-in for this test
    with the runtime pieces (rows, protocol, plan), as in test_m3_runtime.py."""
    from dataset_builder import benchmarks

    try:
        benchmarks.benchmark_for_config(CONFIG)
        return
    except benchmarks.UsageError:
        pass
    monkeypatch.setitem(benchmarks._BENCHMARKS, "m3", benchmarks.Benchmark(
        name="m3", title="M3-DuplexBench", configs=(CONFIG,), presets=("mini",),
        protocol="dataset_builder.benchmark_params:M3Protocol", build="-:-", plan="eval.plans.m3:plan", score="-:-",
        tables="-:-", windows="-:-", cases="dataset_builder.m3.rows:list_items",
        case_audio="dataset_builder.m3.rows:iter_items"))


def _speech(x: np.ndarray, a_s: float, b_s: float) -> float:
    return float(np.max(np.abs(x[round(a_s * SR):round(b_s * SR)]), initial=0.0))


@pytest.mark.parametrize("adapter", ["silent", "oracle"])
def test_adapters_run_on_the_imported_folder(adapter: str, imported: tuple[Path, str], m3_registered: None,
                                             tmp_path: Path) -> None:
    from eval.run import RunConfig, run
    from metrics.episodes import load_run_folder, read_recording

    out, _ = imported
    counts = run(RunConfig(dataset=str(out), adapter=adapter, out=str(tmp_path), config=CONFIG))
    n_full = 8  # one Full case per event; silent cannot teacher-force them
    forcing = adapter == "oracle"
    assert counts["failed"] == 0 and counts["cases"] == 22, counts
    assert counts["ok"] == 22 - (0 if forcing else n_full) and counts.get("skipped", 0) == (
        0 if forcing else n_full), counts
    folder = load_run_folder(tmp_path, "m3")
    events: dict[str, M3Event] = {e.event_id: e for e in list_events(out, CONFIG)}
    seen = set()
    for ep in folder.ok:
        g = ep.gold
        ev = events[g["event_id"]]
        assert g["event_type"] == ev.event_type and g["event_end_s"] - g["event_start_s"] == pytest.approx(
            ev.event_end_s - ev.event_start_s, abs=2e-3)
        model = read_recording(tmp_path, ep)[:, 1]
        s, w = g["event_start_s"], g["window_end_s"]
        if adapter == "silent":
            assert not np.any(model)
        elif ev.event_type == "SHIFT":  # the oracle takes the turn soon after s ...
            assert _speech(model, s + 0.05, s + 1.0) > 0.05, ep.case_id
        elif ev.event_type == "PAUSE":  # ... never in a pause ...
            assert _speech(model, s, w) == 0.0, ep.case_id
        else:  # ... and is speaking at a BC or BARGE_IN
            assert _speech(model, s - 0.2, s) > 0.05, ep.case_id
        seen.add((ev.event_type, g["condition"]))
    assert len(seen) == (10 if forcing else 6)
    # and it scores like a built folder: the paper's timing rules on the imported events
    from metrics.m3.score import score_run

    scores = score_run(tmp_path)["scores"]
    for cond in ("none", "user", "full") if forcing else ("none", "user"):
        got = scores[f"en_chat_{cond}"]
        assert got["shift_tor"]["n"] == 5 and got["pause_tor"]["n"] == 1, got
        assert (got["shift_tor"]["value"], got["pause_tor"]["value"]) == ((1.0, 0.0) if forcing else (0.0, 0.0))


# ------------------------------------------------------------------------------------------------ bad input


def _folder(root: Path, lines: list[Any], wavs: dict[str, tuple[int, int, float]],
            align: dict[str, str] | None = None, name: str = "bad") -> Path:
    """A folder in their layout: jsonl lines (dicts are dumped, strings written as they are), WAVs of low noise
    (id -> (sample rate, channels, seconds)), txt_align files."""
    folder = root / "data" / "en" / "chat" / name
    (folder / "audio").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i, (sr, ch, sec) in wavs.items():
        sf.write(folder / "audio" / f"{i}.wav", (rng.standard_normal((int(sr * sec), ch)) * 0.01).astype(np.float32),
                 sr, subtype="PCM_16")
    for i, text in (align or {}).items():
        (folder / "txt_align").mkdir(exist_ok=True)
        (folder / "txt_align" / f"{i}.txt").write_text(text, encoding="utf-8")
    (folder / "test.jsonl").write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
                                       encoding="utf-8")
    return folder


GOOD = {"id": "d1", "events": {"0": [_label("TURN", 1000, 3000)],
                               "1": [_label("TURN_SHIFT", 3000, 3300), _label("TURN", 3300, 6000)]}}


def _with(event: dict[str, Any], channel: str = "0") -> dict[str, Any]:
    line = json.loads(json.dumps(GOOD))
    line["events"][channel].append(event)
    return line


BAD = {
    "bad JSON": ([GOOD, '{"id": "d2", "events": {'], {}, None, ["test.jsonl:2", "not JSON"]),
    "unknown label": ([_with({"event": "TURN_YIELD", "time": [1, 2]})], {}, None,
                      ["test.jsonl:1", "field 'events.0[1].event'", "unknown event 'TURN_YIELD'"]),
    "time past the audio": ([_with(_label("BC", 9000, 12_500), "1")], {}, None,
                            ["test.jsonl:1", "field 'events.1[2].time'", "outside the audio (0 to 10 s)"]),
    "negative time": ([_with(_label("TURN", -500, 800))], {}, None, ["field 'events.0[1].time'", "outside"]),
    "reversed TURN": ([_with(_label("TURN", 5000, 4000))], {}, None,
                      ["field 'events.0[1].time'", "TURN [5, 4] s ends before it starts"]),
    "time not a pair": ([_with({"event": "BC", "time": [1.0]})], {}, None,
                        ["field 'events.0[1].time'", "expected [start, end]"]),
    "bad channel key": ([{"id": "d1", "events": {"2": []}}], {}, None, ["field 'events.2'", "channel keys"]),
    "bad id": ([{"id": "../d1", "events": {}}], {}, None, ["test.jsonl:1", "field 'id'"]),
    "duplicate id": ([GOOD, GOOD], {}, None, ["test.jsonl:2", "field 'id'", "test.jsonl:1"]),
    "missing wav": ([{**GOOD, "id": "d9"}], {}, None, ["test.jsonl:1", "field 'id'", "audio/d9.wav"]),
    "mono wav": ([GOOD], {"d1": (16_000, 1, 10.0)}, None, ["audio/d1.wav", "1 channel(s)"]),
    "bad words line": ([GOOD], {}, {"d1": "0\t1.00\t1.50\tHello\n0\t1.50\tthere\n"},
                       ["txt_align/d1.txt:2", "3 tab-separated fields"]),
    "words past the audio": ([GOOD], {}, {"d1": "0\t1.00\t1.50\tHello\n1\t10.20\t10.60\tlate\n"},
                             ["txt_align/d1.txt", "'late' ends at 10.6 s"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_naming_file_line_and_field(case: str, tmp_path: Path, capsys) -> None:
    from dataset_builder.importers.m3_authors import import_m3

    lines, wavs, align, expected = BAD[case]
    folder = _folder(tmp_path, lines, {"d1": (16_000, 2, 10.0), **wavs}, align)
    out = tmp_path / "out"
    with pytest.raises((SchemaError, ValueError)) as err:
        import_m3(folder, out)
    message = str(err.value)
    assert "\n" not in message and all(x in message for x in expected), message
    assert not out.exists()  # found before anything was written
    assert main(["import", "m3", str(folder), "--out", str(out)]) == 2
    stderr = capsys.readouterr().err.strip().splitlines()
    assert len(stderr) == 1 and stderr[0].startswith("error: ") and expected[-1] in stderr[0]


def test_labels_that_cannot_be_evaluated_are_skipped_and_counted(tmp_path: Path) -> None:
    from dataset_builder.importers.m3_authors import BC_OUTSIDE, NO_BARGE_TURN, NO_HOST, NO_TURNS, OVERLAP, import_m3

    line = {"id": "d1", "events": {
        "0": [_label("TURN", 1000, 3000), _label("SHORTPAUSE", 1500, 1700), _label("TURN", 5500, 8000),
              _label("TURN_SHIFT", 6000, 5500),  # the user takes over 0.5 s before the system ends: > 0.4 s
              _label("BARGE_IN", 12_000, 12_500),  # no TURN of the user starts at 12 s
              _label("TURN", 14_000, 16_000), _label("BARGE_IN", 14_000, 14_600),  # the system is not speaking
              _label("BC", 17_000, 17_500)],  # in silence: not inside a system TURN
        "1": [_label("TURN_SHIFT", 3000, 3300), _label("TURN", 3300, 6000),
              _label("TURN_HOLD", 10_000, 11_000)]}}  # no system TURNs there
    folder = _folder(tmp_path, [line], {"d1": (16_000, 2, 20.0)}, name="odd")
    s = import_m3(folder, tmp_path / "out", language="en", domain="task")
    assert s["config"] == "m3_task_en" and s["rows"] == 1 and s["events"]["SHIFT"] == 1
    assert s["skipped"] == {NO_TURNS: 1, OVERLAP: 1, NO_BARGE_TURN: 1, NO_HOST: 1, BC_OUTSIDE: 1}
    assert s["ignored"] == {"SHORTPAUSE": 1}
    [event] = list_events(tmp_path / "out", "m3_task_en")
    assert (event.prompt_start_s, event.event_start_s, event.event_end_s, event.dialogue_offset_s) == (
        0.0, 2.0, 2.3, 1.0)


def test_language_and_domain_from_the_path_or_the_options(tmp_path: Path) -> None:
    from dataset_builder.errors import UsageError
    from dataset_builder.importers.m3_authors import infer_language_domain

    assert infer_language_domain(tmp_path / "m3" / "data" / "ja" / "task" / "topiocqa_ja_toy", None, None) == (
        "ja", "task")
    assert infer_language_domain(tmp_path / "data" / "ja" / "chat" / "x", "en", None) == ("en", "chat")
    with pytest.raises(UsageError, match="--language"):
        infer_language_domain(tmp_path / "corpus", None, "chat")
    assert infer_language_domain(tmp_path / "corpus", "ja", "chat") == ("ja", "chat")


def test_a_failed_import_leaves_the_folder_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataset_builder.errors import UsageError
    from dataset_builder.importers import m3_authors as authors

    two = [GOOD, {**GOOD, "id": "d2"}]
    folder = _folder(tmp_path, two, {"d1": (16_000, 2, 10.0), "d2": (16_000, 2, 10.0)})
    out = tmp_path / "out"
    authors.import_m3(folder, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    real = authors.dialogue_audio

    def fail_on_d2(d: authors.Dialogue, user_channel: int) -> np.ndarray:
        if d.dialogue_id == "d2":
            raise SchemaError("not a readable audio file (truncated)", source=str(d.wav))
        return real(d, user_channel)

    monkeypatch.setattr(authors, "dialogue_audio", fail_on_d2)
    with pytest.raises(SchemaError, match="truncated"):
        authors.import_m3(folder, out, user_channel=0)
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # the old shards, summary and card, and no temporary folder left behind
    # a built (not imported) dataset folder is refused
    built = tmp_path / "built"
    built.mkdir()
    (built / "README.md").write_text("---\n---\n")
    with pytest.raises(UsageError, match="not imported"):
        authors.import_m3(folder, built)
