"""M3 build with real speech (piper for English, Kokoro for Japanese, through the shared clip cache): scripts-only
determinism, the mini set of all four configs, events extracted back from every assembled dialogue by Silero
VAD, the rows' round trip, offline `load_dataset` of a 2-channel row, and byte-identical output across rebuilds
and worker counts."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from dataset_builder.audio import SESSION_SR
from dataset_builder.build import BuildOptions
from dataset_builder.errors import UsageError
from dataset_builder.m3.build import build, iter_assembled, plan_configs, start_speaking
from dataset_builder.m3.rows import event_to_row, list_events, list_items, row_to_event
from dataset_builder.m3.schema import CONFIGS, EVENT_CONDITIONS, EVENT_TYPES, USER_CHANNEL, WINDOW_S
from dataset_builder.pool import WorkerPool
from metrics.m3.extract import events_from_audio
from tests.conftest import mini_options

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "tts"
# Silero's edges against a placed clip's, measured on the mini set and 12 full-preset English dialogues: onsets
# never early, mostly within 0.07 s, but late by up to 0.33 s on soft Japanese onsets ("あ、", "イギリスか") and
# 0.45 s on a breathy "Huh,"; ends within 0.05 s, a soft final syllable up to 0.16 s early. The event types must
# match exactly; the timeline's margins are sized for the late onsets (dataset_builder/m3/timeline.py).
END_TOL_S, EARLY_TOL_S, LATE_TOL_S = 0.2, 0.1, 0.5


@pytest.fixture(scope="module")
def mini(mini_sets) -> tuple[Path, dict]:
    """The session's M3 mini set and what its build returned."""
    return mini_sets["m3"], mini_sets.info("m3")


def _shard_bytes(folder: Path, config: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((folder / "data" / config).glob("*.parquet"))]


def test_scripts_only_is_deterministic_and_has_every_event(tmp_path: Path) -> None:
    a, b, c = (build(tmp_path / name, BuildOptions(preset="mini", scripts_only=True, seed=seed))
               for name, seed in (("a", 0), ("b", 0), ("c", 1)))
    text = (tmp_path / "a" / "scripts.jsonl").read_bytes()
    assert text == (tmp_path / "b" / "scripts.jsonl").read_bytes()
    assert text != (tmp_path / "c" / "scripts.jsonl").read_bytes()
    assert not (tmp_path / "a" / "data").exists()
    lines = [json.loads(x) for x in text.decode().splitlines()]
    assert [x["config"] for x in lines] == list(CONFIGS)  # mini: one dialogue per config
    for line in lines:
        assert line["user_voice"] != line["system_voice"]
        relations = {u["relation"] for u in line["dialogue"]["utterances"] if u["speaker"] == "user"}
        assert {"pause", "bc", "barge_in"} <= relations, line["config"]
    assert a["configs"]["m3_task_ja"]["dialogues"] == 1 and c["seed"] == 1


def test_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="m3_chat_en"):
        build(tmp_path, BuildOptions(scripts_only=True, configs=("m3_chat_fr",)))
    with pytest.raises(Exception, match="no such file"):
        build(tmp_path, BuildOptions(scripts_only=True, stats=tmp_path / "missing.json"))


def test_stats_file_is_sampled_from_and_filled_from_the_defaults(tmp_path: Path) -> None:
    from dataclasses import replace

    from dataset_builder.m3.build import config_stats
    from dataset_builder.rules.m3_events import EventParams
    from dataset_builder.rules.m3_timing_stats import default_stats, save_stats

    mine = replace(default_stats("en", "chat"), shift_gap_s=None, source="my corpus")
    save_stats(mine, tmp_path / "stats.json")
    got = config_stats("ja", "task", BuildOptions(stats=tmp_path / "stats.json"))
    assert got.source == "my corpus" and got.pause_s == mine.pause_s
    assert got.shift_gap_s == default_stats("ja", "task").shift_gap_s and "not measured" in got.notes["shift_gap_s"]
    other = replace(mine, params=EventParams(ipu_gap_s=0.6), pause_s=None)
    save_stats(other, tmp_path / "other.json")
    with pytest.raises(UsageError, match="--stats"):
        config_stats("en", "chat", BuildOptions(stats=tmp_path / "other.json"))


def test_mini_has_every_event_type_in_every_config(mini) -> None:
    folder, info = mini
    assert sorted(info["configs"]) == sorted(CONFIGS)
    for config, block in info["configs"].items():
        assert block["dialogues"] == 1
        assert all(block["events"][t] >= 1 for t in EVENT_TYPES), (config, block["events"])
        assert block["cases"]["none"] == block["events"]["SHIFT"] + block["events"]["PAUSE"]
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "$" not in card.split("---", 2)[2].replace("$$", "")  # no placeholder left
    for config in CONFIGS:
        assert f"`{config}`" in card


def test_events_extracted_back_by_vad_match_the_intended_ones(mini) -> None:
    """Every assembled mini dialogue, through Silero VAD and the event rules, gives the events it was placed to
    have: the same types by the same party in the same order, at the same times within the VAD's error."""
    folder, _ = mini
    options = mini_options()
    plans = plan_configs(options)
    checked = 0
    with WorkerPool(1, start_speaking, (options,)) as pool:  # every clip is in the cache: nothing is synthesised
        for a in iter_assembled(plans, pool):
            tl = a.timeline
            got = events_from_audio(a.audio, SESSION_SR, source=tl.dialogue.dialogue_id)
            where = tl.dialogue.dialogue_id
            assert [(e.type, e.channel) for e in got.events] == [(e.type, e.channel) for e in tl.events], where
            want_ipus = sorted(tl.ipus, key=lambda i: (i.channel, i.start_s))
            got_ipus = sorted(got.ipus, key=lambda i: (i.channel, i.start_s))
            assert [(i.channel, i.kind) for i in got_ipus] == [(i.channel, i.kind) for i in want_ipus], where
            for w, g in zip(want_ipus, got_ipus, strict=True):
                assert -EARLY_TOL_S <= g.start_s - w.start_s <= LATE_TOL_S, (where, w, g)
                assert abs(g.end_s - w.end_s) <= END_TOL_S, (where, w, g)
            evaluated = [(r.event.type, r.event_start_s) for r in got.evaluated(USER_CHANNEL)]
            assert [t for t, _ in evaluated] == [r.event.type for r in tl.evaluated], where
            # The rows of this dialogue are those events, in order, at the placed times.
            rows = [e for e in list_events(folder, a.plan.config) if e.dialogue_id == tl.dialogue.dialogue_id]
            assert [(e.event_type, round(e.event_start_s + e.dialogue_offset_s, 3)) for e in rows] == \
                [(r.event.type, round(r.event_start_s, 3)) for r in tl.evaluated]
            checked += 1
    assert checked == len(CONFIGS)


def test_rows_round_trip_with_their_audio(mini) -> None:
    folder, _ = mini
    for config in CONFIGS:
        events = list_events(folder, config)
        assert len({e.event_id for e in events}) == len(events)
        assert len(list_items(folder, config)) == sum(len(EVENT_CONDITIONS[e.event_type]) for e in events)
        for shard in sorted((folder / "data" / config).glob("*.parquet")):
            for row in pq.read_table(shard).to_pylist():
                event = row_to_event(row)
                again = event_to_row(event, row["audio"]["bytes"])
                assert again == row, event.event_id
                audio, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32", always_2d=True)
                assert sr == SESSION_SR and audio.shape == (round(event.window_end_s * SESSION_SR), 2)
                s, t = (round(x * SESSION_SR) for x in (event.event_start_s, event.event_end_s))
                w = audio[s:, USER_CHANNEL]
                if event.event_type in ("BC", "BARGE_IN"):  # the user speaks in [s, t]
                    assert np.abs(audio[s:t, USER_CHANNEL]).max() > 0.1, event.event_id
                else:  # SHIFT / PAUSE: the user is silent right after s
                    assert np.abs(w[: round(0.3 * SESSION_SR)]).max() == 0.0, event.event_id
                assert event.window_end_s == pytest.approx(event.event_start_s + WINDOW_S)
                if event.event_type == "SHIFT":
                    assert event.question and event.reply
        assert any(e.gold_answer for e in events) == (CONFIGS[config][1] == "task")


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_load_dataset_decodes_two_channels_offline(mini, tmp_path: Path, no_network) -> None:
    from datasets import load_dataset

    folder, _ = mini
    ds = load_dataset(str(folder), "m3_task_en", split="test", cache_dir=str(tmp_path / "hf"))
    first = pq.read_table(sorted((folder / "data" / "m3_task_en").glob("*.parquet"))[0]).to_pylist()[0]
    assert len(ds) == len(list_events(folder, "m3_task_en")) and ds[0]["event_id"] == first["event_id"]
    samples = ds[0]["audio"].get_all_samples()
    want, _ = sf.read(io.BytesIO(first["audio"]["bytes"]), dtype="float32", always_2d=True)
    assert samples.sample_rate == SESSION_SR and tuple(samples.data.shape) == (2, want.shape[0])
    np.testing.assert_allclose(samples.data.numpy().T, want, atol=1.5 / 32767)


def test_rebuild_is_byte_identical_with_one_or_two_workers(mini, tmp_path: Path) -> None:
    """m3_task_en from an empty clip cache with 1 and with 2 workers, and from the shared cache: same bytes."""
    folder, _ = mini
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        build(out, mini_options(configs=("m3_task_en",), workers=workers, cache_dir=tmp_path / f"cache{workers}"))
        outs.append(out)
    assert _shard_bytes(outs[0], "m3_task_en") == _shard_bytes(outs[1], "m3_task_en") \
        == _shard_bytes(folder, "m3_task_en")
    assert (outs[0] / "README.md").read_bytes() == (outs[1] / "README.md").read_bytes()


def test_cli_build_scripts_only_and_diagnostics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eval.cli import main

    out = tmp_path / "cli"
    assert main(["build", "m3", "--preset", "mini", "--scripts-only", "--diagnostics", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "m3_task_ja" in printed and "most repeated sentences" in printed
    diag = json.loads((out / "diagnostics.json").read_text())
    assert sorted(diag["configs"]) == sorted(CONFIGS)
    assert all(b["audio"]["measured"] is False for b in diag["configs"].values())


def test_diagnostics_measure_every_voice_of_the_mini_set(mini) -> None:
    """With audio, every config's voices are transcribed by their language's offline ASR (English WER, Japanese
    reading CER), and the events per type come from the rows."""
    from metrics.m3.diagnostics import audit

    folder, info = mini
    text = audit(folder)
    diag = json.loads((folder / "diagnostics.json").read_text())
    assert "ASR per voice" in text and diag["ok"]
    for config, block in diag["configs"].items():
        assert block["events"]["per_type"] == info["configs"][config]["events"]
        audio = block["audio"]
        assert audio["measured"] and audio["metric"] == ("WER" if config.endswith("_en") else "CER (reading)")
        assert {v["speaker"] for v in audio["voices"].values()} == {"user", "system"}, config
        assert all(v["turns"] >= 1 and v["rate"] < 0.5 for v in audio["voices"].values()), audio

