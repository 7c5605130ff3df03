"""The release folder of every benchmark (docs/release.md): each built mini card's YAML
is valid Hub metadata that describes exactly the shards beside it, `load_dataset` reads every config offline with
those sizes, and the card body's numbers are the rows' numbers.

Everything here is counted again from the parquet files themselves (pyarrow and soundfile), not through the
builder's own counting code.
"""

from __future__ import annotations

import io
import json
import re
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml

from dataset_builder.benchmarks import benchmark_names, get_benchmark
from dataset_builder.ifeval.schema import LEVELS

DATASETS_RESOURCES = Path(__import__("datasets").__file__).parent / "utils" / "resources"


def card(folder: Path) -> tuple[dict[str, Any], str]:
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    _, front, body = text.split("---", 2)
    return yaml.safe_load(front), body


def shards(folder: Path, config: str) -> list[Path]:
    return sorted((folder / "data" / config).glob("*.parquet"))


def built_configs(folder: Path, name: str) -> list[str]:
    return [c for c in get_benchmark(name).configs if shards(folder, c)]


def rows(folder: Path, config: str, columns: list[str]) -> list[dict[str, Any]]:
    return [r for p in shards(folder, config) for r in pq.read_table(p, columns=columns).to_pylist()]


def table(body: str, header_start: str) -> list[list[str]]:
    """The cells of the markdown table whose header line starts with `header_start` (the header row excluded)."""
    lines = body.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(header_start))
    out = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        out.append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.parametrize("name", benchmark_names())
def test_card_yaml_is_hub_metadata_of_the_shards(name: str, mini_sets: dict[str, Path]) -> None:
    from datasets import Features
    from datasets.utils.metadata import known_task_ids

    folder = mini_sets[name]
    front, _ = card(folder)
    configs = built_configs(folder, name)
    assert configs
    for key in ("license", "language", "task_categories", "size_categories", "pretty_name", "tags",
                "multilinguality", "annotations_creators", "language_creators", "source_datasets"):
        assert front.get(key), key
    assert set(front["task_categories"]) <= set(known_task_ids)
    languages = json.loads((DATASETS_RESOURCES / "languages.json").read_text())
    assert all(code in languages for code in front["language"])
    if name == "m3":
        spoken = {r["language"] for c in configs for r in rows(folder, c, ["language"])}
        assert sorted(spoken) == front["language"] == ["en", "ja"]
    else:
        assert front["language"] == ["en"]
    assert front["multilinguality"] == ["multilingual" if len(front["language"]) > 1 else "monolingual"]
    creators = json.loads((DATASETS_RESOURCES / "creators.json").read_text())
    assert set(front["annotations_creators"]) <= set(creators["annotations"])
    assert set(front["language_creators"]) <= set(creators["language"])
    n_rows = {c: sum(pq.ParquetFile(p).metadata.num_rows for p in shards(folder, c)) for c in configs}
    buckets = json.loads((DATASETS_RESOURCES / "size_categories.json").read_text())
    total = sum(n_rows.values())
    assert total < 1000 and front["size_categories"] == ["n<1K"] and "n<1K" in buckets

    assert [c["config_name"] for c in front["configs"]] == configs
    for c in front["configs"]:
        (files,) = c["data_files"]
        assert files["split"] == "test"
        assert sorted(folder.glob(files["path"])) == shards(folder, c["config_name"])
    infos = {i["config_name"]: i for i in front["dataset_info"]}
    assert list(infos) == configs
    for config in configs:
        info = infos[config]
        stored = Features.from_arrow_schema(pq.read_schema(shards(folder, config)[0]))
        declared = Features._from_yaml_list(info["features"])
        assert declared == stored, config  # every column, its dtype, Audio with its sampling rate
        assert declared["audio"].sampling_rate == 24000
        (split,) = info["splits"]
        assert split["name"] == "test" and split["num_examples"] == n_rows[config]
        assert info["download_size"] == sum(p.stat().st_size for p in shards(folder, config))
        assert info["dataset_size"] == split["num_bytes"] > 0


@pytest.mark.parametrize("name", benchmark_names())
def test_load_dataset_reads_every_config_offline_with_the_card_sizes(name: str, mini_sets: dict[str, Path],
                                                                      tmp_path: Path, no_network: None) -> None:
    from datasets import Features, load_dataset

    folder = mini_sets[name]
    front, _ = card(folder)
    infos = {i["config_name"]: i for i in front["dataset_info"]}
    for config in built_configs(folder, name):
        ds = load_dataset(str(folder), config, split="test", cache_dir=str(tmp_path / config))
        assert len(ds) == infos[config]["splits"][0]["num_examples"]
        # `datasets` verifies the row count itself; the bytes it records must be what the card says too.
        assert ds.info.splits["test"].num_bytes == infos[config]["splits"][0]["num_bytes"]
        assert ds.features == Features._from_yaml_list(infos[config]["features"])


def audio_seconds(folder: Path, config: str) -> list[float]:
    out = []
    for p in shards(folder, config):
        for a in pq.read_table(p, columns=["audio"]).column("audio").to_pylist():
            info = sf.info(io.BytesIO(a["bytes"]))
            out.append(info.frames / info.samplerate)
    return out


@pytest.mark.parametrize("name", benchmark_names())
def test_card_body_numbers_are_the_rows(name: str, mini_sets: dict[str, Path]) -> None:
    folder = mini_sets[name]
    _, body = card(folder)
    assert not re.search(r"\$[a-z_]", body.replace("$$", ""))  # every placeholder filled
    summary = {r[0].strip("`"): r for r in table(body, "| config | split | rows | hours of audio")}
    configs = built_configs(folder, name)
    assert sorted(summary) == sorted(configs)
    for config in configs:
        secs = audio_seconds(folder, config)
        r = summary[config]
        assert int(r[2]) == len(secs) and r[3] == f"{sum(secs) / 3600:.2f}"
        assert r[4] == f"{sum(secs) / len(secs):.1f} ({min(secs):.1f}–{max(secs):.1f})"
        assert r[5] == ("2 ch, 24 kHz" if name == "m3" else "1 ch, 24 kHz")
    defaults = get_benchmark(name).protocol_class()().to_dict()
    assert {r[0].strip("`"): r[1].strip("`") for r in table(body, "| parameter | default |")} == {
        k: str(v) for k, v in defaults.items()}

    if name == "mpe":
        turns = [t for r in rows(folder, "mpe", ["turns"]) for t in r["turns"]]
        labels = Counter(t["label"] for t in turns)
        assert {r[0]: int(r[1]) for r in table(body, "| label | turns |")} == dict(labels)
        voices = {r[0].strip("`"): (int(r[1]), int(r[2])) for r in table(body, "| voice | speakers | turns |")}
        assert voices == {v: (len({t["speaker"] for t in turns if t["voice"] == v}),
                              sum(t["voice"] == v for t in turns)) for v in {t["voice"] for t in turns}}
        conds = Counter(r["condition"] for r in rows(folder, "mpe", ["condition"]))
        assert {r[0]: int(r[1]) for r in table(body, "| condition | cases |")} == dict(conds)
    elif name == "m3":
        counted = {(r[0].strip("`"), r[1]): int(r[2]) for r in table(body, "| config | event | rows |")}
        for config in configs:
            events = Counter(r["event_type"] for r in rows(folder, config, ["event_type"]))
            assert {t: n for (c, t), n in counted.items() if c == config and n} == dict(events)
        voices = table(body, "| config | user voices (dialogues) |")
        for r in voices:
            got = rows(folder, r[0].strip("`"), ["dialogue_id", "user_voice", "tts_backend"])
            users = Counter(v for v, _ in {(x["user_voice"], x["dialogue_id"]) for x in got})
            assert r[1] == ", ".join(f"`{v}` ({n})" for v, n in sorted(users.items()))
            assert r[3] == f"`{got[0]['tts_backend']}`"
    else:
        got = rows(folder, "ifeval", ["level", "expected_action", "voice", "conversation_id"])
        total = table(body, "| action | L0 |")[-1]
        levels = Counter(r["level"] for r in got)
        assert total[0] == "total" and [int(x) for x in total[1:-2]] == [levels[lv] for lv in LEVELS]
        assert int(total[-2]) == len(got)
        voices = {r[0].strip("`"): (int(r[1]), int(r[2])) for r in table(body, "| voice | conversations | cases |")}
        assert voices == {v: (len({r["conversation_id"] for r in got if r["voice"] == v}),
                              sum(r["voice"] == v for r in got)) for v in {r["voice"] for r in got}}


def dry_run(folder: Path, repo_id: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    from eval.cli import main

    assert main(["push", str(folder), "--repo-id", repo_id, "--dry-run"]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("name", benchmark_names())
def test_push_dry_run_lists_every_file_and_every_config(name: str, mini_sets: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str], no_network: None) -> None:
    folder = mini_sets[name]
    out = dry_run(folder, f"my-org/{name}-mini", capsys)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    listed = [line.split() for line in out if "bytes  <- " in line]
    assert [(x[0], int(x[1].replace(",", "")), x[-1]) for x in listed] == [
        (p.relative_to(folder).as_posix(), p.stat().st_size, str(p)) for p in files]
    assert f"would receive {len(files)} file(s), {sum(p.stat().st_size for p in files):,} bytes" in out[0]
    front, _ = card(folder)
    for info in front["dataset_info"]:
        config = info["config_name"]
        n = info["splits"][0]["num_examples"]
        assert f"  {config}: split test, {n:,} rows, {len(shards(folder, config))} file(s) " \
               f"(data/{config}/*.parquet)" in out
    assert f"would see {len(built_configs(folder, name))} config(s):" in " ".join(out)
    assert not any("not in any config" in line for line in out)


def test_push_dry_run_leaves_out_hidden_files_and_names_unread_data(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from dataset_builder.hf_dataset import MPE_FEATURES, mpe_card_context, write_card, write_config
    from tests.test_hf_dataset import make_case, rows_for

    repo = tmp_path / "repo"
    write_config(repo, "mpe", rows_for([make_case(0, "explicit"), make_case(0, "implicit")]), MPE_FEATURES)
    write_card(repo, {"mpe": {"features": MPE_FEATURES}},
               context=mpe_card_context(repo, build_seed=1, build_params={}, generator_version="t"))
    (repo / ".DS_Store").write_bytes(b"x")
    (repo / "data" / ".mpe.new-1").mkdir()
    (repo / "data" / ".mpe.new-1" / "part-00000.parquet").write_bytes(b"half a shard")
    (repo / "data" / "extra").mkdir()
    (repo / "data" / "extra" / "x.parquet").write_bytes(b"not read")
    out = dry_run(repo, "me/tiny", capsys)
    assert [line.split()[0] for line in out if "bytes  <- " in line] == [
        "README.md", "data/extra/x.parquet", "data/mpe/test-00000-of-00001.parquet"]
    assert "  mpe: split test, 2 rows, 1 file(s) (data/mpe/*.parquet)" in out
    assert out[-1] == "  not in any config (load_dataset will not read it): data/extra/x.parquet"


def test_push_needs_a_repo_and_fails_in_one_line_offline(mini_sets: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from eval.cli import main

    folder = str(mini_sets["mpe"])
    with pytest.raises(SystemExit) as exit_:  # argparse's own refusal: --repo-id is required
        main(["push", folder])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--repo-id ORG/NAME" in err and "error: push: the following arguments are required: --repo-id" in err
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert main(["push", folder, "--repo-id", "me/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HF_TOKEN" in err and "--dry-run" in err

    def unreachable(*args: object, **kwargs: object) -> None:
        raise OSError("[Errno 101] Network is unreachable")

    monkeypatch.setattr(socket.socket, "connect", unreachable)
    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token_value")
    assert main(["push", folder, "--repo-id", "me/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: push: could not upload") and "me/x" in err
    assert "hf_secret_token_value" not in err
