"""DSB-IFEval build with real speech (piper through the shared clip cache): the mini set's audio, matched-audio
bytes, exact zero-sample pauses, the two configs, offline `load_dataset`, the card and the CLI."""

from __future__ import annotations

import io
import socket
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml

from dataset_builder.audio import SESSION_SR
from dataset_builder.ifeval.grid import MINI_CELLS
from dataset_builder.ifeval.schema import ACTIONS, ROLES, SAFETY_ACTIONS, SAFETY_CELLS, SHARED_PROBES

CACHE = Path(__file__).resolve().parent.parent / ".cache" / "tts"
GOLD_KEYS = {"conversation_id", "role", "probe", "instance", "level", "expected_action", "base_action", "event",
             "resolution_target", "verifier", "window_anchor", "window_rel_s", "turn2_mode", "barge_in_after_s",
             "turn2_segments", "readback_target", "matched_audio", "matched_group", "persona", "contradiction",
             "label_rule", "rationale", "safety_relevant_audio", "user_text"}


@pytest.fixture(scope="module")
def mini(mini_sets) -> tuple[Path, dict]:
    """The session's IFEval mini set and what its build returned."""
    return mini_sets["ifeval"], mini_sets.info("ifeval")


def _rows(folder: Path, config: str) -> list[dict]:
    return [r for s in sorted((folder / "data" / config).glob("*.parquet")) for r in pq.read_table(s).to_pylist()]


def _decode(row: dict) -> np.ndarray:
    audio, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="int16", always_2d=False)
    assert sr == SESSION_SR and audio.ndim == 1
    return audio


def test_mini_counts(mini) -> None:
    folder, info = mini
    # 16 cells at instance 1: 14 distinct recordings (R1-R3 hear one C1), plus the benign twins of 3 safety cells
    assert info["n_conversations"] == 16 and info["n_cases"] == 83 and info["n_audio_streams"] == 17
    assert info["configs"] == ["ifeval", "ifeval_matched"]
    rows = _rows(folder, "ifeval")
    assert len(rows) == 83 and len({r["case_id"] for r in rows}) == 83
    # What the mini set promises: every role, every shared probe, every action, one own probe per role.
    assert {(r["role"], r["probe"]) for r in rows} == set(MINI_CELLS)
    assert {r["role"] for r in rows} == set(ROLES) and {r["expected_action"] for r in rows} == set(ACTIONS)
    assert set(SHARED_PROBES) <= {r["probe"] for r in rows}
    assert all(sum(r["probe"] not in SHARED_PROBES for r in rows if r["role"] == role and r["level"] == "L1") == 1
               for role in ROLES)
    assert len(_rows(folder, "ifeval_matched")) == 15  # R1-R3 x C1 x instance 1 x L0-L4a


def test_matched_audio_is_byte_identical_across_roles(mini) -> None:
    folder, _ = mini
    by_group: dict[str, dict[str, bytes]] = defaultdict(dict)
    for row in _rows(folder, "ifeval"):
        if row["matched_group"]:
            by_group[row["matched_group"]][row["case_id"]] = row["audio"]["bytes"]
    assert set(by_group) == {"M-C1-i1"}  # the mini set's one matched trio
    for group, audio in by_group.items():
        roles = {cid.split("-")[0] for cid in audio}
        assert roles == {"R1", "R2", "R3"}, group
        assert len(set(audio.values())) == 1, f"{group}: user audio differs across roles"
    matched = {r["case_id"]: r["audio"]["bytes"] for r in _rows(folder, "ifeval_matched")}
    assert all(matched[cid] == b for g in by_group.values() for cid, b in g.items())


def test_one_voice_and_one_audio_per_conversation_across_levels(mini) -> None:
    """One voice per conversation; one audio per script (a safety cell's benign twin is its second script)."""
    folder, _ = mini
    seen: dict[tuple[str, str], bytes] = {}
    voices: dict[str, str] = {}
    for row in _rows(folder, "ifeval"):
        audio = row["audio"]["bytes"]
        assert seen.setdefault((row["conversation_id"], row["audio_variant"]), audio) == audio, row["case_id"]
        assert voices.setdefault(row["conversation_id"], row["voice"]) == row["voice"], row["case_id"]
        safety = (row["role"], row["probe"]) in SAFETY_CELLS and row["audio_variant"] == ""
        assert row["safety_relevant_audio"] == safety, row["case_id"]
        assert not safety or (row["level"] != "L4a" and row["expected_action"] in SAFETY_ACTIONS), row["case_id"]
    assert len(seen) == 19 and sum(v == "benign" for _, v in seen) == 3
    assert len(set(voices.values())) > 1


def test_pauses_are_exact_zero_samples_and_speech_is_not(mini) -> None:
    folder, _ = mini
    checked = set()
    for row in _rows(folder, "ifeval"):
        if (row["conversation_id"], row["audio_variant"]) in checked:
            continue
        checked.add((row["conversation_id"], row["audio_variant"]))
        audio = _decode(row)
        for turn in row["turns"]:
            for seg in turn["segments"]:
                a = round((turn["start_s"] + seg["start_s"]) * SESSION_SR)
                b = round((turn["start_s"] + seg["end_s"]) * SESSION_SR)
                inner = audio[a + 24:b - 24]  # segment times are rounded to ms: 1 ms margins
                if seg["kind"] == "silence":
                    assert abs((b - a) / SESSION_SR - seg["duration_s"]) <= 0.002, (row["conversation_id"], seg)
                    assert not inner.any(), f"{row['conversation_id']}: a {seg['mark']} is not digital silence"
                else:
                    assert np.abs(inner).max() > 1000, f"{row['conversation_id']}: a speech segment is silent"
        # the nominal timeline: turn 1, 3.0 s, turn 2, 5.0 s
        t1, t2 = row["turns"]
        assert t1["start_s"] == 0.0 and t2["start_s"] == pytest.approx(t1["end_s"] + 3.0, abs=0.002)
        assert len(audio) / SESSION_SR == pytest.approx(t2["end_s"] + 5.0, abs=0.002)
    assert len(checked) == 19


def test_items_round_trip_with_windows_and_gold(mini) -> None:
    from dataset_builder.ifeval.rows import iter_items, list_items

    folder, _ = mini
    items = list_items(folder, "ifeval")
    assert len(items) == 83
    for item in items:
        w0, w1 = item.timed.window(item.case)
        gold = item.gold()
        assert set(gold) == GOLD_KEYS and gold["window_rel_s"] == [w0, w1]
        assert 0 <= w0 < item.timed.turn_duration_s("t2") + 0.001
        if item.case.expected_action in ("LISTEN", "TAKE_TURN") and item.case.event in ("pause", "gaps"):
            # the sweep's 2.5 s wait is measurable; window ends are whole milliseconds, so compare in them
            assert w1 is not None and round((w1 - w0) * 1000) >= 3000, item.case_id
    item, audio = next(iter_items(folder, "ifeval", wanted={"R6-C2-i1-L1"}))
    assert item.case.expected_action == "READBACK" and item.timed.conversation.readback_target
    assert audio.dtype == np.float32 and len(audio) > SESSION_SR


def test_load_dataset_decodes_offline(mini, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datasets import load_dataset

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    folder, _ = mini
    for config, n in (("ifeval", 83), ("ifeval_matched", 15)):
        ds = load_dataset(str(folder), config, split="test", cache_dir=str(tmp_path / config))
        assert len(ds) == n
        samples = ds[0]["audio"].get_all_samples()
        assert samples.sample_rate == SESSION_SR
        assert samples.data.shape[1] == len(_decode(_rows(folder, config)[0]))


def test_card_lists_configs_and_counts(mini) -> None:
    folder, _ = mini
    text = (folder / "README.md").read_text()
    front = yaml.safe_load(text.split("---", 2)[1])
    assert [c["config_name"] for c in front["configs"]] == ["ifeval", "ifeval_matched"]
    for needle in ("R8 improv scene partner", "| READBACK |", "ACCEPT_OVERLAP", "Jaccard", "max_wait_s=2",
                   "R3: max_wait_s=1.5", "stay silent", "| total | 16 | 16 | 16 | 16 | 16 | 3 | 83 | 83 |"):
        assert needle in text, needle
    assert "$" not in text.split("---", 2)[2].replace("$$", "")


def test_cli_build_scripts_only_with_diagnostics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eval.cli import main

    assert main(["build", "ifeval", "--scripts-only", "--out", str(tmp_path), "--diagnostics"]) == 0
    out = capsys.readouterr().out
    assert "persona leakage" in out and "R8" in out and "min / mean / max Jaccard" in out
    assert "| total" not in out and "total              16" in out
    assert "targets:" in out and "FAIL" not in out and "PASS  cases without a one-line rationale: 0" in out
    assert (tmp_path / "scripts.jsonl").is_file() and (tmp_path / "manifest.jsonl").is_file()
    assert (tmp_path / "diagnostics.json").is_file()
