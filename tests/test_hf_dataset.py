"""The released folder round-trips: write_config + write_card -> load_dataset / load_cases, offline."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest
import yaml

from dataset_builder import hf_dataset
from dataset_builder.audio import SESSION_SR, seconds_to_samples, wav_bytes
from dataset_builder.hf_dataset import (
    MPE_FEATURES,
    load_cases,
    mpe_card_context,
    push_to_hub,
    write_card,
    write_config,
)
from dataset_builder.rows import TURN_FIELDS, case_to_row
from dataset_builder.schema import SCENE_ATTRIBUTES, Case, Clip, SchemaError, Script, Speaker, Turn

PREAMBLE_S = 0.5
TURN_S = 0.3
GAP_S = 0.2


def make_case(k: int, condition: str) -> tuple[Case, np.ndarray]:
    """A 5-turn scene (N2, N1, T, N4Q, N4R) with a sine burst per turn on a nominal timeline."""
    t_text = "Aria, what is six times seven?" if condition == "explicit" else "Okay, so six times seven is?"
    lines = [
        ("Ben", "Cara, pass me the notes.", "N2", "Cara"),
        ("Cara", "Aria helped with these yesterday.", "N1", None),
        ("Ben", t_text, "T", "Aria"),
        ("Dev", "Aria, is it raining tomorrow?", "N4Q", "Aria"),
        ("Cara", "It is, I checked.", "N4R", "Dev"),
    ]
    turns = [Turn(f"t{i}", sp, text, lab, addr) for i, (sp, text, lab, addr) in enumerate(lines)]
    case_id = f"mpe-{k:03d}-{condition}"
    script = Script(
        script_id=case_id, pair_id=f"mpe-{k:03d}", condition=condition, seed=100 + k,
        attributes={a: f"{a}-{k}" for a in SCENE_ATTRIBUTES},
        speakers=[Speaker("Ben", "v0"), Speaker("Cara", "v1"), Speaker("Dev", "v2")],
        turns=turns, question="What is six times seven?", gold_answer="42",
        gold_aliases=["forty-two", "forty two"], task_type="arithmetic", t_position="middle",
    )
    script.validate()
    audio = [np.zeros(seconds_to_samples(PREAMBLE_S), np.float32)]
    clips, t = [], PREAMBLE_S
    for i, turn in enumerate(turns):
        start = t + GAP_S
        clips.append(Clip(turn.turn_id, round(start, 3), round(start + TURN_S, 3), GAP_S))
        n = seconds_to_samples(TURN_S)
        tone = 0.3 * np.sin(2 * np.pi * (220 + 40 * i + k) * np.arange(n) / SESSION_SR)
        audio += [np.zeros(seconds_to_samples(GAP_S), np.float32), tone.astype(np.float32)]
        t = start + TURN_S
    case = Case(case_id=case_id, benchmark="mpe", script=script, preamble_text="You are Aria.",
                preamble_end_s=PREAMBLE_S, clips=clips, tts_backend="test:sine")
    case.validate()
    return case, np.concatenate(audio)


def rows_for(cases: list[tuple[Case, np.ndarray]]) -> list[dict]:
    return [case_to_row(c, wav_bytes(a)) for c, a in cases]


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket connection fails the test: loading a local folder must stay offline."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture()
def built(tmp_path: Path) -> tuple[Path, list[tuple[Case, np.ndarray]]]:
    cases = [make_case(0, "explicit"), make_case(0, "implicit"), make_case(1, "explicit")]
    repo = tmp_path / "repo"
    shards = write_config(repo, "mpe", rows_for(cases), MPE_FEATURES, shard_size=2)
    assert [p.name for p in shards] == ["test-00000-of-00002.parquet", "test-00001-of-00002.parquet"]
    ctx = mpe_card_context(repo, "mpe", build_seed=7, build_params={"n_pairs": 2}, generator_version="0.1.0")
    write_card(repo, {"mpe": {"features": MPE_FEATURES}}, context=ctx)
    return repo, cases


def test_features_match_row_layout() -> None:
    case, audio = make_case(0, "explicit")
    row = case_to_row(case, wav_bytes(audio))
    assert list(MPE_FEATURES) == list(row)
    assert list(MPE_FEATURES["turns"].feature) == list(TURN_FIELDS)


def test_load_dataset_decodes_audio(built, tmp_path: Path, no_network) -> None:
    from datasets import load_dataset

    repo, cases = built
    ds = load_dataset(str(repo), "mpe", split="test", cache_dir=str(tmp_path / "cache"))
    assert len(ds) == 3 and ds.features["audio"].sampling_rate == SESSION_SR
    samples = ds[0]["audio"].get_all_samples()  # torchcodec: the path a user takes
    assert samples.sample_rate == SESSION_SR
    data = samples.data.numpy()
    assert data.shape == (1, len(cases[0][1]))
    np.testing.assert_allclose(data[0], cases[0][1], atol=1.5 / 32767)


def test_load_cases_round_trip(built, tmp_path: Path, no_network) -> None:
    repo, cases = built
    loaded = list(load_cases(repo, "mpe", cache_dir=tmp_path / "cache"))
    assert [c for c, _ in loaded] == [c for c, _ in cases]
    for (_, got), (_, want) in zip(loaded, cases, strict=True):
        assert got.dtype == np.float32 and got.ndim == 1 and got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1.5 / 32767)  # PCM16 quantisation


def test_card_front_matter(built) -> None:
    repo, _ = built
    text = (repo / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---", 2)[1])
    assert front["configs"] == [
        {"config_name": "mpe", "data_files": [{"split": "test", "path": "data/mpe/*.parquet"}]}
    ]
    assert front["license"] == "cc-by-4.0" and front["language"] == ["en"]
    assert {"full-duplex", "spoken-dialogue", "multi-party", "benchmark"} <= set(front["tags"])
    assert front["dataset_info"][0]["config_name"] == "mpe" and front["size_categories"] == ["n<1K"]
    body = text.split("---", 2)[2]
    assert "$" not in body.replace("$$", "")  # every placeholder filled
    assert "| explicit | 2 |" in body and "| N4Q | 3 |" in body and "| middle (implicit) | 1 |" in body


def test_card_template_missing_placeholder(built) -> None:
    repo, _ = built
    with pytest.raises(KeyError, match="n_cases"):
        write_card(repo, {"mpe": {"features": MPE_FEATURES}}, context={})


def test_broken_row_names_case_and_field(tmp_path: Path) -> None:
    rows = rows_for([make_case(0, "explicit"), make_case(0, "implicit")])
    rows[1]["turns"][2]["label"] = "N9"
    repo = tmp_path / "repo"
    write_config(repo, "mpe", rows, MPE_FEATURES)
    with pytest.raises(SchemaError) as err:
        list(load_cases(repo, "mpe", cache_dir=tmp_path / "cache"))
    assert err.value.row == "mpe-000-implicit" and err.value.field == "turns[t2].label"
    assert "mpe-000-implicit" in str(err.value) and "N9" in str(err.value)


def test_rewrite_removes_stale_shards(built, tmp_path: Path) -> None:
    repo, cases = built
    write_config(repo, "mpe", rows_for(cases[:2]), MPE_FEATURES, shard_size=10)
    assert sorted(p.name for p in (repo / "data" / "mpe").iterdir()) == ["test-00000-of-00001.parquet"]
    assert [p.name for p in (repo / "data").iterdir()] == ["mpe"]  # no temp folders left behind
    assert [c.case_id for c, _ in load_cases(repo, cache_dir=tmp_path / "cache")] == [
        c.case_id for c, _ in cases[:2]]
    # Same shard name, different rows: the Arrow cache must not serve the earlier build.
    write_config(repo, "mpe", rows_for(cases[2:]), MPE_FEATURES, shard_size=10)
    assert [c.case_id for c, _ in load_cases(repo, cache_dir=tmp_path / "cache")] == [cases[2][0].case_id]


def test_user_cache_follows_rebuild(built, tmp_path: Path) -> None:
    """`load_dataset` with one shared cache sees an in-place rebuild once the card is rewritten too."""
    from datasets import load_dataset

    repo, cases = built
    cache = str(tmp_path / "shared-cache")
    assert len(load_dataset(str(repo), "mpe", split="test", cache_dir=cache)) == 3
    write_config(repo, "mpe", rows_for(cases[2:]), MPE_FEATURES)
    ctx = mpe_card_context(repo, "mpe", build_seed=7, build_params={}, generator_version="0.1.0")
    write_card(repo, {"mpe": {"features": MPE_FEATURES}}, context=ctx)
    assert load_dataset(str(repo), "mpe", split="test", cache_dir=cache)["case_id"] == [cases[2][0].case_id]


def test_failed_write_keeps_previous_build(built) -> None:
    repo, cases = built
    rows = rows_for(cases)
    del rows[2]["gold_answer"]
    before = sorted(p.name for p in (repo / "data" / "mpe").iterdir())
    with pytest.raises(SchemaError, match="gold_answer"):
        write_config(repo, "mpe", rows, MPE_FEATURES, shard_size=1)
    assert sorted(p.name for p in (repo / "data" / "mpe").iterdir()) == before
    assert [p.name for p in (repo / "data").iterdir()] == ["mpe"]


def test_path_only_audio_rejected(tmp_path: Path) -> None:
    row = rows_for([make_case(0, "explicit")])[0]
    row["audio"] = {"bytes": None, "path": "/somewhere/local.wav"}
    with pytest.raises(SchemaError, match="embedded WAV bytes"):
        write_config(tmp_path / "repo", "mpe", [row], MPE_FEATURES)


def test_wrong_sample_rate_names_case(tmp_path: Path) -> None:
    case, audio = make_case(0, "explicit")
    row = case_to_row(case, wav_bytes(audio, sr=16_000))  # bytes claim 16 kHz
    repo = tmp_path / "repo"
    write_config(repo, "mpe", [row], MPE_FEATURES)
    with pytest.raises(SchemaError, match="16000 Hz") as err:
        list(load_cases(repo, cache_dir=tmp_path / "cache"))
    assert err.value.row == case.case_id


def test_missing_folder_or_config(built, tmp_path: Path, no_network) -> None:
    repo, _ = built
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_cases(tmp_path / "owner" / "nothing")
    with pytest.raises(FileNotFoundError, match=r"no config 'm3'.*\['mpe'\]") as err:
        load_cases(repo, "m3")
    assert str(repo) in str(err.value)


def test_offline_switch_is_restored(built, tmp_path: Path) -> None:
    import datasets.config
    import huggingface_hub.constants

    before = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    list(load_cases(built[0], cache_dir=tmp_path / "cache"))
    assert (datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE) == before


def test_push_requires_token(built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(RuntimeError, match="HF_TOKEN"):
        push_to_hub(built[0], "someone/duplex-mpe")


def test_push_uploads_folder_without_leaking_token(built, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    calls: list[tuple[str, dict]] = []

    class FakeApi:
        def __init__(self, token: str) -> None:
            assert token == "secret-token"

        def create_repo(self, repo_id: str, **kw: object) -> None:
            calls.append(("create_repo", {"repo_id": repo_id, **kw}))

        def upload_folder(self, **kw: object) -> str:
            calls.append(("upload_folder", kw))
            return "https://hub.example/commit/1"

    monkeypatch.setenv("HF_TOKEN", "secret-token")
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    assert push_to_hub(built[0], "someone/duplex-mpe") == "https://hub.example/commit/1"
    assert calls[0][1]["repo_type"] == "dataset" and calls[1][1]["repo_type"] == "dataset"
    assert calls[1][1]["folder_path"] == str(built[0])
    assert "secret-token" not in repr(calls)


def test_import_does_not_load_datasets() -> None:
    import subprocess
    import sys

    code = "import sys, dataset_builder.hf_dataset as h; assert 'datasets' not in sys.modules; h.MPE_FEATURES"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(hf_dataset.__file__).parents[1])


def test_write_config_draws_no_library_bars(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """`datasets` draws a "Creating parquet from Arrow format" bar per shard unless told not to: the build's output
    has its own progress line and no library bars; the bars' setting is as it was afterwards."""
    from datasets.utils.tqdm import are_progress_bars_disabled

    before = are_progress_bars_disabled()
    cases = [make_case(0, "explicit"), make_case(0, "implicit"), make_case(1, "explicit")]
    write_config(tmp_path / "repo", "mpe", rows_for(cases), MPE_FEATURES, shard_size=2)
    assert "Creating parquet" not in capfd.readouterr().err
    assert are_progress_bars_disabled() == before
