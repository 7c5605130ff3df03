"""The released dataset folder: typed parquet shards, the README card, loading back, and the Hub push.

Layout written here (docs/release.md)::

    <repo_dir>/README.md                                   card with YAML `configs:` and `dataset_info`
    <repo_dir>/data/<config>/test-00000-of-00002.parquet   split "test", HF features in the schema metadata

Audio is stored as embedded WAV bytes, so the folder is self-contained and `load_dataset(folder, config)`
works offline and after a push. `datasets` and `huggingface_hub` are imported lazily: importing this module
stays cheap and does no I/O.
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
import shutil
import string
import tempfile
from collections import Counter
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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
# Front matter shared by every card (the Hub's dataset-card keys); per-call `metadata` overrides keys. Task ids are
# the Hub's pipeline tags: a model hears audio and answers in audio, and every row's audio comes with time-aligned
# text of what is said in it. `multilinguality` and `size_categories` are derived, never given.
CARD_METADATA: dict[str, Any] = {
    "license": "cc-by-4.0",
    "language": ["en"],
    "task_categories": ["audio-to-audio", "automatic-speech-recognition"],
    "annotations_creators": ["machine-generated"],
    "language_creators": ["machine-generated"],
    "source_datasets": ["original"],
    "tags": ["full-duplex", "spoken-dialogue", "multi-party", "benchmark"],
    "pretty_name": "Duplex-MPE (duplex-eval reconstruction)",
}
# The Hub's size buckets (datasets/utils/resources/size_categories.json), by row count: n < limit.
SIZE_CATEGORIES = ((10**3, "n<1K"), (10**4, "1K<n<10K"), (10**5, "10K<n<100K"), (10**6, "100K<n<1M"),
                   (10**7, "1M<n<10M"), (10**8, "10M<n<100M"), (10**9, "100M<n<1B"), (10**10, "1B<n<10B"),
                   (10**11, "10B<n<100B"), (10**12, "100B<n<1T"))


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


@contextmanager
def _no_bars() -> Iterator[None]:
    """`datasets` draws a "Creating parquet from Arrow format" bar per shard; the build has its own progress line
    (a library's bars in a build's output read as noise), so its bars are off here and as they were after."""
    from datasets.utils.tqdm import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_off = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was_off:
            enable_progress_bars()


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
            with _no_bars():
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


def size_category(n: int) -> str:
    """The Hub's `size_categories` bucket of `n` rows."""
    return next((name for limit, name in SIZE_CATEGORIES if n < limit), "n>1T")


@dataclass(frozen=True)
class ConfigStats:
    """What a config's written shards hold, counted from them: the card's YAML sizes and its summary table."""

    config: str
    shards: int
    num_examples: int
    num_bytes: int  # Arrow bytes, as `datasets` records a split's num_bytes when it prepares the config
    download_size: int  # parquet bytes on disk
    audio_s: tuple[float, ...]  # each row's audio duration, in row order
    channels: tuple[int, ...]  # distinct channel counts of the audio column
    sample_rates: tuple[int, ...]  # distinct sample rates


_STATS_MEMO: dict[tuple[Any, ...], ConfigStats] = {}


def config_stats(repo_dir: Path, config: str) -> ConfigStats:
    """Counted from the shards of `config` (one pass; memoised on the shards' names, sizes and times, so the
    front matter and a card body count one build once)."""
    shards = _shards(Path(repo_dir), config)
    if not shards:
        raise FileNotFoundError(f"no shards under {Path(repo_dir) / 'data' / config}; write_config first")
    key = (config, *((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in shards))
    if key in _STATS_MEMO:
        return _STATS_MEMO[key]
    n = num_bytes = 0
    durations: list[float] = []
    channels: set[int] = set()
    rates: set[int] = set()
    for shard in shards:
        meta = _open_shard(shard).metadata
        # `datasets` reads a shard in batches of its first row group and adds up each batch's Arrow size; the
        # same batching gives the same byte count (a bit-packed null mask rounds differently per batch).
        size = meta.row_group(0).num_rows if meta.num_row_groups else 1
        for batch in _batches(shard, batch_size=max(size, 1)):
            n += batch.num_rows
            num_bytes += batch.nbytes
            if "audio" not in batch.schema.names:
                continue
            for audio in batch.column("audio").to_pylist():
                info = sf.info(io.BytesIO(audio["bytes"]))
                durations.append(info.frames / info.samplerate)
                channels.add(info.channels)
                rates.add(info.samplerate)
    stats = ConfigStats(config, len(shards), n, num_bytes, sum(p.stat().st_size for p in shards), tuple(durations),
                        tuple(sorted(channels)), tuple(sorted(rates)))
    if len(_STATS_MEMO) >= 32:  # a process writes a handful of configs; never let the memo grow unbounded
        _STATS_MEMO.clear()
    _STATS_MEMO[key] = stats
    return stats


def card_front_matter(repo_dir: Path, configs: Mapping[str, Mapping[str, Any]],
                      metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The YAML header every card has (the one definition): the Hub's card keys, `configs:` (what `load_dataset`
    reads) and per-config `dataset_info` (features, the test split's rows and bytes, download and dataset size).

    `configs` maps a config name to a dict with an optional "features" (`datasets.Features`, the same object
    given to write_config). Every number is counted from the written shards; `multilinguality` follows the
    languages and `size_categories` the total row count.
    """
    repo_dir = Path(repo_dir)
    stats = {name: config_stats(repo_dir, name) for name in configs}
    infos = []
    for name, spec in configs.items():
        info: dict[str, Any] = {"config_name": name}
        if spec.get("features") is not None:
            info["features"] = spec["features"]._to_yaml_list()
        st = stats[name]
        # `load_dataset` checks num_examples against what it reads: a card left stale by a later write_config
        # fails to load, instead of describing other data (load_cases, which validates every row, reads on).
        info["splits"] = [{"name": SPLIT, "num_bytes": st.num_bytes, "num_examples": st.num_examples}]
        # The download size also keys `datasets`' Arrow cache of a local folder (on the card, not the shards),
        # so a rebuilt folder is not served from the old cache.
        info["download_size"] = st.download_size
        info["dataset_size"] = st.num_bytes
        infos.append(info)
    front: dict[str, Any] = {**CARD_METADATA, **(metadata or {})}
    languages = list(front.get("language") or [])
    front["multilinguality"] = ["multilingual" if len(languages) > 1 else "monolingual"]
    front["size_categories"] = [size_category(sum(st.num_examples for st in stats.values()))]
    front["configs"] = [{"config_name": name, "data_files": [{"split": SPLIT, "path": f"data/{name}/*.parquet"}]}
                        for name in configs]
    front["dataset_info"] = infos
    return front


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


def mpe_card_context(repo_dir: Path, config: str = "mpe", *, build_seed: int,
                     build_params: Mapping[str, Any], generator_version: str) -> dict[str, str]:
    """Every placeholder of cards/mpe.md, counted from the written shards of `config`."""
    from dataset_builder.benchmark_params import MPEProtocol
    from dataset_builder.card_tables import count_table, shared_context, voices_table

    files = _shards(repo_dir, config)
    if not files:
        raise FileNotFoundError(f"no shards under {Path(repo_dir) / 'data' / config}; write_config first")
    cond, label, pos, task, nspk, backend, cue = (Counter() for _ in range(7))
    voices: dict[str, Counter[str]] = {}
    pairs: set[str] = set()
    n = 0
    speech_s = 0.0
    cols = ["pair_id", "condition", "turns", "task_type", "t_position", "n_speakers", "tts_backend", "cue"]
    for path in files:
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
                    voices.setdefault(t["voice"], Counter())[t["speaker"]] += 1
    pos_order = [f"{b} ({c})" for b in POSITION_BUCKETS for c in MPE_CONDITIONS]
    return {
        **shared_context(Path(repo_dir), [config], MPEProtocol()),
        "config": config,
        "n_cases": str(n),
        "n_pairs": str(len(pairs)),
        "hours_audio": f"{sum(config_stats(Path(repo_dir), config).audio_s) / 3600:.2f}",
        "hours_speech": f"{speech_s / 3600:.2f}",
        "condition_table": count_table(("condition", "cases"), cond, MPE_CONDITIONS),
        "label_table": count_table(("label", "turns"), label, MPE_LABELS),
        "position_table": count_table(("T position (condition)", "cases"), pos, pos_order),
        "task_table": count_table(("task type", "cases"), task),
        "cue_table": count_table(("implicit cue", "pairs"), cue, CUE_KINDS),
        "speakers_table": count_table(("human speakers", "cases"), nspk),
        "voices_table": voices_table(("voice", "speakers", "turns"), voices),
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
    shards = config_shards(repo_dir, config)
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
                    # Every row is validated below, so the card's split sizes need not be checked: a card not yet
                    # rewritten after write_config must not stop the rows from loading.
                    ds = load_dataset(str(repo_dir), config, split=split, cache_dir=cache,
                                      verification_mode="no_checks")
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


def has_config(repo_dir: Path | str, config: str) -> bool:
    """Whether a folder holds parquet shards of `config` (built with audio, not only its scripts)."""
    return bool(_shards(Path(repo_dir), config))


def config_shards(repo_dir: Path | str, config: str) -> list[Path]:
    """The parquet shards of a config, in order; FileNotFoundError naming the folder or the configs it has."""
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


def rows_without_audio(shard: Path, columns: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
    """A shard's rows in order, every column but the audio (or only `columns`, in that order): cheap even for the
    full set (reads no audio bytes), and a batch at a time, not the whole shard at once."""
    if columns is None:
        columns = [c for c in _open_shard(shard).schema_arrow.names if c != "audio"]
    for batch in _batches(shard, columns=columns, batch_size=256):
        yield from batch.to_pylist()


def rows_with_audio(shard: Path, wanted: set[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row index in the shard, row) with its audio, one parquet row group at a time, so memory stays flat on the
    full set. With `wanted` (case ids), a row group holding none of them is not read; rows of the groups read are
    all yielded (a row may stand for several cases)."""
    pf = _open_shard(shard)
    first = 0  # row index of the group's first row in the shard, for error messages
    for g in range(pf.num_row_groups):
        with _reading(shard):
            if wanted is None:
                table = pf.read_row_group(g)
                n = table.num_rows
            else:
                ids = pf.read_row_group(g, columns=["case_id"]).column("case_id").to_pylist()
                table = pf.read_row_group(g) if wanted.intersection(ids) else None
                n = len(ids)
        for i, row in enumerate(table.to_pylist() if table is not None else []):
            yield first + i, row
        first += n


def list_cases(repo_dir: Path | str, config: str = "mpe") -> list[Case]:
    """Every validated Case of a config, without audio."""
    return [row_to_case(row, source=str(shard), index=i)
            for shard in config_shards(repo_dir, config) for i, row in enumerate(rows_without_audio(shard))]


def iter_cases(repo_dir: Path | str, config: str = "mpe", wanted: set[str] | None = None
               ) -> Iterator[tuple[Case, np.ndarray]]:
    """Cases with their audio, one parquet row group at a time (`rows_with_audio`).

    Reads the same shards `load_dataset` reads; `wanted` limits decoding to those case ids.
    """
    for shard in config_shards(repo_dir, config):
        for i, row in rows_with_audio(shard, wanted):
            if wanted is not None and row["case_id"] not in wanted:
                continue
            case = row_to_case(row, source=str(shard), index=i)
            yield case, _decode_audio(row, case, str(shard))


# -------------------------------------------------------------------------------------------------- push

# Hidden files and folders stay local: the temp folders of an interrupted write_config, editor and OS files.
PUSH_IGNORE = [".*", "**/.*", "**/.*/**"]


@dataclass(frozen=True)
class UploadFile:
    source: Path
    dest: str  # path in the Hub repo
    size: int


@dataclass(frozen=True)
class HubConfig:
    """A config as `load_dataset(repo_id, name)` will see it after the upload."""

    name: str
    patterns: tuple[str, ...]  # its `data_files` paths
    files: tuple[str, ...]  # the uploaded files they match
    num_examples: int | None  # the card's count, which `load_dataset` checks


def _built_folder(repo_dir: Path) -> None:
    if not (repo_dir / "README.md").is_file() or not (repo_dir / "data").is_dir():
        raise FileNotFoundError(f"{repo_dir} is not a built dataset folder (needs README.md and data/)")


def upload_plan(repo_dir: Path | str) -> list[UploadFile]:
    """Every file `push_to_hub` uploads, with its size and its path in the repo, found the way
    `HfApi.upload_folder` finds them (its own filter over the same patterns, its default ignores included)."""
    from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

    repo_dir = Path(repo_dir)
    _built_folder(repo_dir)
    files = {p.relative_to(repo_dir).as_posix(): p for p in sorted(repo_dir.glob("**/*")) if p.is_file()}
    kept = filter_repo_objects(list(files), ignore_patterns=PUSH_IGNORE + list(DEFAULT_IGNORE_PATTERNS))
    return [UploadFile(files[k], k, files[k].stat().st_size) for k in kept]


def _matches(pattern: str, path: str) -> bool:
    """fsspec's glob as `datasets` resolves `data_files`: `*` stays within one folder, `**` spans folders."""
    if "**" in pattern:
        return fnmatch.fnmatchcase(path, pattern)
    parts, names = pattern.split("/"), path.split("/")
    return len(parts) == len(names) and all(fnmatch.fnmatchcase(n, p) for n, p in zip(names, parts, strict=True))


def hub_configs(repo_dir: Path | str, plan: list[UploadFile]) -> list[HubConfig]:
    """The card's `configs:` resolved against the files that will be uploaded."""
    text = (Path(repo_dir) / "README.md").read_text(encoding="utf-8")
    front = (yaml.safe_load(text.split("---", 2)[1]) or {}) if text.startswith("---") else {}
    counts = {i.get("config_name"): sum(s.get("num_examples", 0) for s in i.get("splits") or [])
              for i in front.get("dataset_info") or [] if i.get("splits")}
    out = []
    for c in front.get("configs") or []:
        patterns = tuple(f["path"] for f in c.get("data_files") or [])
        files = tuple(f.dest for f in plan if any(_matches(p, f.dest) for p in patterns))
        out.append(HubConfig(c["config_name"], patterns, files, counts.get(c["config_name"])))
    return out


def describe_upload(repo_dir: Path | str, repo_id: str, private: bool = False) -> str:
    """The dry run of `push`: every file with its size and destination, then the configs `load_dataset` will see
    (and any data file no config reads)."""
    repo_dir = Path(repo_dir)
    plan = upload_plan(repo_dir)
    configs = hub_configs(repo_dir, plan)
    width = max(len(f.dest) for f in plan)
    lines = [f"dataset repo {repo_id} (https://huggingface.co/datasets/{repo_id}, "
             f"{'private' if private else 'public'}) would receive {len(plan)} file(s), "
             f"{sum(f.size for f in plan):,} bytes:"]
    lines += [f"  {f.dest:<{width}}  {f.size:>15,} bytes  <- {f.source}" for f in plan]
    lines.append(f'load_dataset("{repo_id}", CONFIG) would see {len(configs)} config(s):')
    for c in configs:
        n = "?" if c.num_examples is None else f"{c.num_examples:,}"
        state = f"{len(c.files)} file(s)" if c.files else "NO FILES: load_dataset would fail"
        lines.append(f"  {c.name}: split {SPLIT}, {n} rows, {state} ({', '.join(c.patterns)})")
    read = {f for c in configs for f in c.files}
    unread = [f.dest for f in plan if f.dest.startswith("data/") and f.dest not in read]
    lines += [f"  not in any config (load_dataset will not read it): {d}" for d in unread]
    return "\n".join(lines)


def push_to_hub(repo_dir: Path | str, repo_id: str, token_env: str = "HF_TOKEN",
                private: bool = False) -> str:
    """Upload the folder as a Hub dataset repo (the files `upload_plan` lists); returns the commit URL.

    The token is read from `token_env` and passed only to `HfApi`; it is never printed or put in an error. Any Hub
    or network failure is one line naming it.
    """
    repo_dir = Path(repo_dir)
    token = os.environ.get(token_env)
    if not token:
        raise RuntimeError(f"push: no Hugging Face token: set the {token_env} environment variable to a write token "
                           "(or pass --dry-run to see what would be uploaded)")
    _built_folder(repo_dir)
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        info = api.upload_folder(folder_path=str(repo_dir), repo_id=repo_id, repo_type="dataset",
                                 commit_message="Upload dataset built by duplex-eval", ignore_patterns=PUSH_IGNORE)
    except Exception as err:  # one line naming it, the token scrubbed (STYLE: errors a user can act on)
        first = (str(err).strip().splitlines() or [""])[0].replace(token, "***")
        raise RuntimeError(f"push: could not upload {repo_dir} to dataset repo {repo_id}: {type(err).__name__}: "
                           f"{first}") from None
    return str(getattr(info, "commit_url", info))
