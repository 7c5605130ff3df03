"""The released dataset folder: typed parquet shards, the README card, loading back, and the Hub push.

Layout written here (SPEC §9)::

    <repo_dir>/README.md                                   card with YAML `configs:` and `dataset_info`
    <repo_dir>/data/<config>/test-00000-of-00002.parquet   split "test", HF features in the schema metadata

Audio is stored as embedded WAV bytes, so the folder is self-contained and `load_dataset(folder, config)`
works offline and after a push. `datasets` and `huggingface_hub` are imported lazily: importing this module
stays cheap and does no I/O.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import string
import tempfile
from collections import Counter
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import soundfile as sf
import yaml

from dataset_builder.atomic import atomic_write_text, make_temp_dir
from dataset_builder.audio import SESSION_SR
from dataset_builder.rows import TURN_FIELDS, row_to_case
from dataset_builder.schema import CUE_KINDS, MPE_CONDITIONS, MPE_LABELS, POSITION_BUCKETS, Case, SchemaError

if TYPE_CHECKING:
    from datasets import Features

    MPE_FEATURES: Features  # built lazily by the module __getattr__ below

SPLIT = "test"
DEFAULT_TEMPLATE = Path(__file__).resolve().parent.parent / "cards" / "mpe.md"
# Front matter shared by every card; per-call `metadata` overrides keys.
CARD_METADATA: dict[str, Any] = {
    "license": "cc-by-4.0",
    "language": ["en"],
    "task_categories": ["audio-to-audio"],
    "tags": ["full-duplex", "spoken-dialogue", "multi-party", "benchmark"],
    "pretty_name": "Duplex-MPE (duplex-eval reconstruction)",
}


def _mpe_features() -> Features:
    from datasets import Audio, Features, List, Value

    s, f64, i64 = Value("string"), Value("float64"), Value("int64")
    turn = {name: s for name in TURN_FIELDS}  # addressee is a nullable string: None means "nobody"
    turn.update(start_s=f64, end_s=f64, gap_before_s=f64)
    return Features({
        "case_id": s, "pair_id": s, "benchmark": s, "condition": s,
        "audio": Audio(sampling_rate=SESSION_SR),
        "preamble_text": s, "preamble_end_s": f64,
        "turns": List({name: turn[name] for name in TURN_FIELDS}),
        "question": s, "gold_answer": s, "gold_aliases": List(s), "task_type": s, "t_position": s, "cue": s,
        "setting": s, "activity": s, "relationship": s, "device_context": s, "register": s,
        "speakers": List(s), "n_speakers": i64, "seed": i64, "tts_backend": s,
    })


def __getattr__(name: str) -> Any:
    # MPE_FEATURES is built on first use so `import dataset_builder.hf_dataset` does not import `datasets`.
    if name == "MPE_FEATURES":
        value = _mpe_features()
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------------------------- writing

def _shard_name(i: int, n: int) -> str:
    return f"{SPLIT}-{i:05d}-of-{n:05d}.parquet"


def _check_row(row: Mapping[str, Any], features: Features, index: int) -> None:
    """Fail before writing: a missing column would otherwise become a silent null, a path-only audio a
    reference to a file that exists only on the builder's disk."""
    where = row.get("case_id", index)
    missing, unknown = sorted(set(features) - set(row)), sorted(set(row) - set(features))
    if missing or unknown:
        raise SchemaError(f"row columns differ from the features: missing {missing}, unknown {unknown}",
                          row=where, field="columns")
    for name, feat in features.items():
        if type(feat).__name__ == "Audio":
            audio = row[name]
            if not isinstance(audio, Mapping) or not isinstance(audio.get("bytes"), bytes | bytearray) \
                    or not audio["bytes"]:
                raise SchemaError("audio must be embedded WAV bytes ({'bytes': ..., 'path': ...})",
                                  row=where, field=name)


def _chunks(rows: Iterable[dict], size: int) -> Iterator[list[dict]]:
    chunk: list[dict] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def write_config(repo_dir: Path, config: str, rows: Iterable[dict], features: Features,
                 shard_size: int = 500) -> list[Path]:
    """Write `rows` as `data/<config>/test-*.parquet` shards; returns the shard paths in order.

    Shards are written into a hidden sibling folder (ignored by `datasets` globs and by `push_to_hub`) and
    swapped in by rename only when all are complete, so a crash leaves the previous build intact and a reader
    never sees old and new rows mixed. Rows are held one shard at a time.
    """
    from datasets import Dataset

    if shard_size < 1:
        raise ValueError("shard_size must be >= 1")
    data_dir = Path(repo_dir) / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    final = data_dir / config
    tmp = make_temp_dir(data_dir, prefix=f".{config}.new-")  # becomes data/<config>: umask modes
    try:
        parts: list[Path] = []
        seen = 0
        for chunk in _chunks(rows, shard_size):
            for j, row in enumerate(chunk):
                _check_row(row, features, seen + j)
            seen += len(chunk)
            part = tmp / f"part-{len(parts):05d}.parquet"
            Dataset.from_list(chunk, features=features).to_parquet(str(part))
            parts.append(part)
        if not parts:
            raise ValueError(f"no rows to write for config {config!r}")
        # The total shard count is known only now; rename parts to the HF `-of-NNNNN` names.
        for i, part in enumerate(parts):
            os.replace(part, tmp / _shard_name(i, len(parts)))
        old = None
        if final.exists():
            old = make_temp_dir(data_dir, prefix=f".{config}.old-")
            os.replace(final, old / config)
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [final / _shard_name(i, len(parts)) for i in range(len(parts))]


# ------------------------------------------------------------------------------------------------- card

def _shards(repo_dir: Path, config: str) -> list[Path]:
    return sorted((Path(repo_dir) / "data" / config).glob("*.parquet"))


_UNREADABLE = ("not a readable parquet file ({}); it is truncated or damaged: rebuild the dataset "
               "(duplex-eval build) or download it again")


@contextmanager
def _reading(shard: Path) -> Iterator[None]:
    """Turns pyarrow's errors while reading `shard` (which do not name the file) into a SchemaError that does."""
    try:
        yield
    except (pa.ArrowException, OSError) as err:
        if isinstance(err, FileNotFoundError | PermissionError):
            raise SchemaError(f"cannot read the file: {err.strerror or err}", source=str(shard)) from None
        detail = " ".join(str(err).split())  # pyarrow's text spans lines; the CLI prints one
        raise SchemaError(_UNREADABLE.format(f"{type(err).__name__}: {detail}"), source=str(shard)) from None


def _open_shard(shard: Path) -> pq.ParquetFile:
    """A shard's parquet reader; a truncated or garbage file fails here, by name (only the footer is read)."""
    with _reading(shard):
        return pq.ParquetFile(shard)


def _num_rows(repo_dir: Path, config: str) -> int:
    return sum(_open_shard(p).metadata.num_rows for p in _shards(repo_dir, config))


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return name
    return "100K<n<1M"


def card_front_matter(repo_dir: Path, configs: Mapping[str, Mapping[str, Any]],
                      metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The YAML header: `configs:` (what `load_dataset` reads) plus per-config `dataset_info` features.

    `configs` maps a config name to a dict with an optional "features" (`datasets.Features`, the same object
    given to write_config). The size category is counted from the written shards.
    """
    repo_dir = Path(repo_dir)
    counts = {name: _num_rows(repo_dir, name) for name in configs}
    sizes = {name: sum(p.stat().st_size for p in _shards(repo_dir, name)) for name in configs}
    infos = []
    for name, spec in configs.items():
        info: dict[str, Any] = {"config_name": name}
        if spec.get("features") is not None:
            info["features"] = spec["features"]._to_yaml_list()
        # `datasets` keys its Arrow cache of a local folder on the card (and the folder name), not on the
        # shards' contents, so a rebuilt folder could be served from the old cache; the shards' byte size
        # makes the key change with the data. No `splits:` sizes: `load_dataset` verifies those, so a card
        # left stale by a later write_config would break loading. Counts live in the card body instead.
        info["download_size"] = sizes[name]
        infos.append(info)
    return {
        **CARD_METADATA,
        "size_categories": [_size_category(sum(counts.values()))],
        **(metadata or {}),
        "configs": [
            {"config_name": name, "data_files": [{"split": SPLIT, "path": f"data/{name}/*.parquet"}]}
            for name in configs
        ],
        "dataset_info": infos,
    }


def write_card(repo_dir: Path, configs: Mapping[str, Mapping[str, Any]], template: Path | None = None,
               context: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None) -> None:
    """Render `repo_dir/README.md`: YAML front matter, then `template` with its `$name` placeholders filled.

    Rendering is strict: a placeholder without a value in `context` raises, naming it, so a card never ships
    with a literal `$name` in it. Write a literal dollar as `$$` in a template.
    """
    repo_dir = Path(repo_dir)
    template = Path(template) if template is not None else DEFAULT_TEMPLATE
    body_t = string.Template(template.read_text(encoding="utf-8"))
    values = {k: str(v) for k, v in (context or {}).items()}
    wanted = set(body_t.get_identifiers())
    missing = sorted(wanted - set(values))
    if missing:
        raise KeyError(f"card template {template} needs values for {missing}")
    front = yaml.safe_dump(card_front_matter(repo_dir, configs, metadata), sort_keys=False,
                           allow_unicode=True, width=1000)
    atomic_write_text(repo_dir / "README.md", f"---\n{front}---\n\n{body_t.substitute(values).lstrip()}")


def _md_table(header: tuple[str, str], counts: Mapping[str, int], order: Iterable[str] = ()) -> str:
    order = list(order)  # every expected key is listed, with 0 when absent: a missing label is visible
    keys = order + sorted(k for k in counts if k not in set(order))
    lines = [f"| {header[0]} | {header[1]} |", "|---|---:|"]
    lines += [f"| {k or '(none)'} | {counts.get(k, 0)} |" for k in keys]
    return "\n".join(lines)


def mpe_card_context(repo_dir: Path, config: str = "mpe", *, build_seed: int,
                     build_params: Mapping[str, Any], generator_version: str) -> dict[str, str]:
    """Every placeholder of cards/mpe.md, counted from the written shards of `config`."""
    files = _shards(repo_dir, config)
    if not files:
        raise FileNotFoundError(f"no shards under {Path(repo_dir) / 'data' / config}; write_config first")
    cond, label, pos, task, nspk, backend, cue = (Counter() for _ in range(7))
    pairs: set[str] = set()
    n = 0
    audio_s = speech_s = 0.0
    cols = ["pair_id", "condition", "turns", "task_type", "t_position", "n_speakers", "tts_backend", "audio", "cue"]
    for path in files:
        # One row group at a time: the audio column is most of the bytes.
        for batch in _batches(path, columns=cols, batch_size=64):
            for row in batch.to_pylist():
                n += 1
                pairs.add(row["pair_id"])
                cond[row["condition"]] += 1
                pos[f'{row["t_position"]} ({row["condition"]})'] += 1
                task[row["task_type"]] += 1
                cue[row["cue"]] += row["condition"] == "implicit"
                nspk[str(row["n_speakers"])] += 1
                backend[row["tts_backend"]] += 1
                for t in row["turns"]:
                    label[t["label"]] += 1
                    speech_s += t["end_s"] - t["start_s"]
                audio_s += sf.info(io.BytesIO(row["audio"]["bytes"])).duration
    pos_order = [f"{b} ({c})" for b in POSITION_BUCKETS for c in MPE_CONDITIONS]
    return {
        "config": config,
        "n_cases": str(n),
        "n_pairs": str(len(pairs)),
        "hours_audio": f"{audio_s / 3600:.2f}",
        "hours_speech": f"{speech_s / 3600:.2f}",
        "condition_table": _md_table(("condition", "cases"), cond, MPE_CONDITIONS),
        "label_table": _md_table(("label", "turns"), label, MPE_LABELS),
        "position_table": _md_table(("T position (condition)", "cases"), pos, pos_order),
        "task_table": _md_table(("task type", "cases"), task),
        "cue_table": _md_table(("implicit cue", "pairs"), cue, CUE_KINDS),
        "speakers_table": _md_table(("human speakers", "cases"), nspk),
        "tts_backend": ", ".join(f"`{b}`" for b in sorted(backend)),
        "build_seed": str(build_seed),
        "build_params": json.dumps(dict(build_params), indent=2, sort_keys=True, default=str),
        "generator_version": generator_version,
    }


# ------------------------------------------------------------------------------------------------ loading

@contextmanager
def _hub_offline() -> Iterator[None]:
    """Offline mode for the duration of one local load, then the user's setting back.

    `datasets` and `huggingface_hub` read HF_HUB_OFFLINE / HF_DATASETS_OFFLINE once, at import, into module
    constants that are consulted at call time; setting the environment variable here would be too late, and
    setting it for good would silently break the user's own Hub loads. So the constants are flipped and
    restored (not thread-safe; loading is not done concurrently in this project).
    """
    import datasets.config as dconfig
    import huggingface_hub.constants as hconst

    saved = dconfig.HF_HUB_OFFLINE, dconfig.HF_DATASETS_OFFLINE, hconst.HF_HUB_OFFLINE
    dconfig.HF_HUB_OFFLINE = dconfig.HF_DATASETS_OFFLINE = hconst.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        dconfig.HF_HUB_OFFLINE, dconfig.HF_DATASETS_OFFLINE, hconst.HF_HUB_OFFLINE = saved


def _card_configs(repo_dir: Path) -> list[str]:
    readme = repo_dir / "README.md"
    if not readme.is_file():
        return []
    text = readme.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return []
    front = yaml.safe_load(text.split("---", 2)[1]) or {}
    return [c["config_name"] for c in front.get("configs") or []]


def available_configs(repo_dir: Path | str) -> list[str]:
    """Configs of a folder: those in README.md's `configs:` plus any `data/<config>/` with shards."""
    repo_dir = Path(repo_dir)
    names = _card_configs(repo_dir)
    data = repo_dir / "data"
    if data.is_dir():
        names += sorted(p.name for p in data.iterdir()
                        if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.parquet"))
                        and p.name not in names)
    return names


def load_cases(repo_dir: Path | str, config: str = "mpe", split: str = SPLIT,
               cache_dir: Path | str | None = None) -> Generator[tuple[Case, np.ndarray], None, None]:
    """Load a released folder back as validated Cases with their float32 mono 24 kHz audio, one at a time.

    Goes through `datasets.load_dataset` (the user's path, so the card's `configs:` is exercised) in offline
    mode, but reads the audio column undecoded and decodes the WAV bytes with soundfile: exact PCM16 samples,
    no torchcodec needed. A generator, so the full set never sits in memory: `datasets` builds a private
    temporary Arrow cache under `cache_dir` (default: the `datasets` cache folder) on the first `next()`, and
    it is removed when the generator is exhausted or closed (`contextlib.closing(load_cases(...))` closes one
    left early). The folder, the config and every shard's footer are checked on the call itself.
    """
    repo_dir = Path(repo_dir)
    # Checked first: a missing path shaped like "owner/name" would otherwise be looked up on the Hub.
    shards = _checked_shards(repo_dir, config)
    for shard in shards:
        _open_shard(shard)  # a truncated or garbage shard, by name, before `datasets` says "an error occurred"
    if cache_dir is None:
        from datasets import config as hf_config

        cache_dir = hf_config.HF_DATASETS_CACHE
    return _load_cases(repo_dir, config, split, Path(cache_dir), shards)


def _load_cases(repo_dir: Path, config: str, split: str, parent: Path, shards: list[Path]
                ) -> Generator[tuple[Case, np.ndarray], None, None]:
    from datasets import Audio, load_dataset
    from datasets.exceptions import DatasetGenerationError

    source = str(repo_dir / "data" / config)
    parent.mkdir(parents=True, exist_ok=True)
    # A private, throw-away Arrow cache: `datasets` keys a local folder's cache on its card and name rather
    # than on the shards, so a shared cache can serve an earlier build of a folder rebuilt in place. Offline
    # mode is on only while it is built, so the caller's own Hub loads between two rows are untouched.
    with tempfile.TemporaryDirectory(dir=parent, prefix="duplex-eval-load-", ignore_cleanup_errors=True) as cache:
        try:
            with _hub_offline():
                if config in _card_configs(repo_dir):
                    ds = load_dataset(str(repo_dir), config, split=split, cache_dir=cache)
                else:
                    # Shards written but no card yet (write_card not run): point at them directly.
                    ds = load_dataset(str(repo_dir), data_files={split: f"data/{config}/*.parquet"},
                                      split=split, cache_dir=cache)
        except DatasetGenerationError:
            for shard in shards:  # damage past the footer: find the shard, so the error can name it
                for _ in _batches(shard, batch_size=8):
                    pass
            raise
        for i, row in enumerate(ds.cast_column("audio", Audio(decode=False))):
            case = row_to_case(row, source=source, index=i)
            yield case, _decode_audio(row, case, source)


def _decode_audio(row: dict[str, Any], case: Case, source: str) -> np.ndarray:
    audio, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32", always_2d=False)
    if sr != SESSION_SR:
        raise SchemaError(f"audio is {sr} Hz, expected {SESSION_SR}", source=source, row=case.case_id,
                          field="audio")
    if audio.ndim != 1:
        raise SchemaError(f"audio has {audio.shape[1]} channels, expected mono", source=source,
                          row=case.case_id, field="audio")
    return audio


def _checked_shards(repo_dir: Path | str, config: str) -> list[Path]:
    repo_dir = Path(repo_dir)
    if not repo_dir.is_dir():
        raise FileNotFoundError(f"dataset folder {repo_dir} does not exist")
    shards = _shards(repo_dir, config)
    if not shards:
        raise FileNotFoundError(f"dataset folder {repo_dir} has no config {config!r}; it has "
                                f"{available_configs(repo_dir)}")
    return shards


def _batches(shard: Path, **kwargs: Any) -> Iterator[pa.RecordBatch]:
    """`ParquetFile.iter_batches(**kwargs)`, with a damaged shard reported by name."""
    pf = _open_shard(shard)
    with _reading(shard):
        yield from pf.iter_batches(**kwargs)


def list_cases(repo_dir: Path | str, config: str = "mpe") -> list[Case]:
    """Every validated Case of a config, without audio: cheap even for the full set (reads no audio bytes)."""
    out: list[Case] = []
    for shard in _checked_shards(repo_dir, config):
        columns = [c for c in _open_shard(shard).schema_arrow.names if c != "audio"]
        i = 0
        for batch in _batches(shard, columns=columns, batch_size=256):  # not the whole shard at once
            for row in batch.to_pylist():
                out.append(row_to_case(row, source=str(shard), index=i))
                i += 1
    return out


def iter_cases(repo_dir: Path | str, config: str = "mpe", wanted: set[str] | None = None
               ) -> Iterator[tuple[Case, np.ndarray]]:
    """Cases with their audio, one parquet row group at a time, so memory stays flat on the full set.

    Reads the same shards `load_dataset` reads; `wanted` limits decoding to those case ids.
    """
    for shard in _checked_shards(repo_dir, config):
        pf = _open_shard(shard)
        first = 0  # row index of the group's first row in the shard, for error messages
        for g in range(pf.num_row_groups):
            with _reading(shard):
                ids = pf.read_row_group(g, columns=["case_id"]).column("case_id").to_pylist()
                table = pf.read_row_group(g) if wanted is None or wanted.intersection(ids) else None
            for i, row in enumerate(table.to_pylist() if table is not None else []):
                if wanted is not None and row["case_id"] not in wanted:
                    continue
                case = row_to_case(row, source=str(shard), index=first + i)
                yield case, _decode_audio(row, case, str(shard))
            first += len(ids)


# -------------------------------------------------------------------------------------------------- push

def push_to_hub(repo_dir: Path | str, repo_id: str, token_env: str = "HF_TOKEN",
                private: bool = False) -> str:
    """Upload the folder as a Hub dataset repo; returns the commit URL.

    The token is read from `token_env` and passed only to `HfApi`; it is never printed or put in an error.
    """
    repo_dir = Path(repo_dir)
    token = os.environ.get(token_env)
    if not token:
        raise RuntimeError(f"no Hugging Face token: set the {token_env} environment variable "
                           "to a write token")
    if not (repo_dir / "README.md").is_file() or not (repo_dir / "data").is_dir():
        raise FileNotFoundError(f"{repo_dir} is not a built dataset folder (needs README.md and data/)")
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    info = api.upload_folder(
        folder_path=str(repo_dir), repo_id=repo_id, repo_type="dataset",
        commit_message="Upload dataset built by duplex-eval",
        # Leftover temp folders of an interrupted write_config and other hidden files stay local.
        ignore_patterns=[".*", "**/.*", "**/.*/**"],
    )
    return str(getattr(info, "commit_url", info))
