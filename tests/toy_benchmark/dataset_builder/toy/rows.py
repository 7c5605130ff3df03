"""ToyCase <-> dataset row, and the readers the registry names (`list_cases`, `iter_cases`)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.parquet as pq
import soundfile as sf

from dataset_builder.audio import SESSION_SR
from dataset_builder.schema import SchemaError

if TYPE_CHECKING:
    from datasets import Features

BENCHMARK = "toy"


@dataclass(frozen=True)
class ToyCase:
    case_id: str
    question: str
    answer: str  # what a good answer says (the oracle says it)
    voice: str
    tts_backend: str
    benchmark: str = BENCHMARK

    def gold(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer}


def toy_features() -> Features:
    from datasets import Audio, Features, Value

    s = Value("string")
    return Features({"case_id": s, "benchmark": s, "question": s, "answer": s, "voice": s, "tts_backend": s,
                     "audio": Audio(sampling_rate=SESSION_SR)})


def row_to_case(row: dict[str, Any], source: str) -> ToyCase:
    try:
        if row["benchmark"] != BENCHMARK:
            raise SchemaError(f"benchmark {row['benchmark']!r}, expected {BENCHMARK!r}", source=source,
                              row=row["case_id"], field="benchmark")
        return ToyCase(row["case_id"], row["question"], row["answer"], row["voice"], row["tts_backend"])
    except KeyError as err:
        raise SchemaError("missing column", source=source, row=row.get("case_id"), field=str(err.args[0])) from None


def _shards(folder: Path | str, config: str) -> list[Path]:
    shards = sorted((Path(folder) / "data" / config).glob("*.parquet"))
    if not shards:
        raise FileNotFoundError(f"{folder} has no data/{config}/*.parquet (build it with `duplex-eval build toy`)")
    return shards


def list_cases(folder: Path | str, config: str = BENCHMARK) -> list[ToyCase]:
    """Every case of the config, no audio read."""
    out = []
    for shard in _shards(folder, config):
        columns = [c for c in pq.ParquetFile(shard).schema_arrow.names if c != "audio"]
        out += [row_to_case(row, str(shard)) for row in pq.read_table(shard, columns=columns).to_pylist()]
    return out


def iter_cases(folder: Path | str, config: str = BENCHMARK, wanted: set[str] | None = None
               ) -> Iterator[tuple[ToyCase, np.ndarray]]:
    """Cases with their float32 mono 24 kHz question audio; `wanted` limits decoding to those ids."""
    for shard in _shards(folder, config):
        for row in pq.read_table(shard).to_pylist():
            if wanted is not None and row["case_id"] not in wanted:
                continue
            case = row_to_case(row, str(shard))
            audio, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32", always_2d=False)
            if sr != SESSION_SR or audio.ndim != 1:
                raise SchemaError(f"audio is {sr} Hz with shape {audio.shape}, expected mono {SESSION_SR}",
                                  source=str(shard), row=case.case_id, field="audio")
            yield case, audio
