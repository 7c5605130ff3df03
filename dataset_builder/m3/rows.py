"""M3Event <-> dataset row: the typed columns of the four `m3_*` configs, and readers of a released folder that
need no `datasets` (`list_items`, `iter_items`).

A row is one event; its cases are the event under each condition it is run in (`schema.EVENT_CONDITIONS`), so
the readers hand out cases, each with the row's 2-channel audio (ch0 user, ch1 system, float32, 24 kHz).
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import soundfile as sf

from dataset_builder.audio import SESSION_SR
from dataset_builder.hf_dataset import config_shards, has_config, rows_with_audio, rows_without_audio
from dataset_builder.m3.schema import BENCHMARK, M3Case, M3Event, cases_of
from dataset_builder.schema import SchemaError, reading_row

if TYPE_CHECKING:
    import numpy as np
    from datasets import Features

UTTERANCE_FIELDS = ("utt_id", "speaker", "kind", "text", "start_s", "end_s", "cut")
EVENT_FIELDS = ("event_id", "dialogue_id", "language", "domain", "event_type", "prompt_start_s", "event_start_s",
                "event_end_s", "window_end_s", "dialogue_offset_s", "question", "reply", "gold_answer",
                "gold_aliases", "context_dependent", "user_voice", "system_voice", "tts_backend", "seed", "transcribed")


def m3_features() -> Features:
    from datasets import Audio, Features, List, Value

    s, f64, i64, b = Value("string"), Value("float64"), Value("int64"), Value("bool")
    utterance = {"utt_id": s, "speaker": s, "kind": s, "text": s, "start_s": f64, "end_s": f64, "cut": b}
    return Features({
        "event_id": s, "dialogue_id": s, "benchmark": s, "config": s, "language": s, "domain": s,
        "event_type": s, "conditions": List(s),
        "audio": Audio(sampling_rate=SESSION_SR),
        "prompt_start_s": f64, "event_start_s": f64, "event_end_s": f64, "window_end_s": f64,
        "dialogue_offset_s": f64,
        "question": s, "reply": s, "gold_answer": s, "gold_aliases": List(s), "context_dependent": b,
        "utterances": List(utterance),
        "user_voice": s, "system_voice": s, "tts_backend": s, "seed": i64, "transcribed": b,
    })


def event_to_row(event: M3Event, audio_bytes: bytes) -> dict[str, Any]:
    row: dict[str, Any] = {k: getattr(event, k) for k in EVENT_FIELDS}
    row["gold_aliases"] = list(event.gold_aliases)
    row["utterances"] = [{k: getattr(u, k) for k in UTTERANCE_FIELDS} for u in event.utterances]
    row.update(benchmark=BENCHMARK, config=event.config, conditions=list(event.conditions),
               audio={"bytes": audio_bytes, "path": f"{event.event_id}.wav"})
    return row


def row_to_event(row: dict[str, Any], *, source: str | None = None, index: int | None = None) -> M3Event:
    """Rebuild and validate an M3Event from a row (the audio column is read separately)."""
    where = row.get("event_id", index)
    with reading_row(source, where, own=f"event {where}"):
        data = {k: row[k] for k in EVENT_FIELDS if k != "transcribed"}
        data["transcribed"] = bool(row.get("transcribed", True))  # shards written before the column: built rows
        data["utterances"] = [{k: u[k] for k in UTTERANCE_FIELDS} for u in row["utterances"]]
        data["gold_aliases"] = list(row["gold_aliases"] or [])
        event = M3Event.from_dict(data)
        if list(row["conditions"]) != list(event.conditions):
            raise SchemaError(f"conditions {row['conditions']} differ from those of a {event.event_type} "
                              f"{list(event.conditions)}", field="conditions")
        return event


def list_events(folder: Path | str, config: str) -> list[M3Event]:
    """Every validated event (row) of a config, without audio."""
    out: list[M3Event] = []
    for shard in config_shards(folder, config):
        for row in rows_without_audio(shard):
            out.append(row_to_event(row, source=str(shard), index=len(out)))
    return out


def event_type_counts(folder: Path | str, config: str) -> Counter[str]:
    """Rows (events) per event type of a built config; none where it has no rows."""
    counts: Counter[str] = Counter()
    if has_config(folder, config):
        for shard in config_shards(folder, config):
            counts.update(row["event_type"] for row in rows_without_audio(shard, ["event_type"]))
    return counts


def list_items(folder: Path | str, config: str) -> list[M3Case]:
    """Every case of a config (each event under each of its conditions), without audio."""
    return [case for event in list_events(folder, config) for case in cases_of(event)]


def iter_items(folder: Path | str, config: str, wanted: set[str] | None = None
               ) -> Iterator[tuple[M3Case, np.ndarray]]:
    """Cases with their row's float32 2-channel 24 kHz audio (ch0 user, ch1 system), one row group at a time."""
    for shard in config_shards(folder, config):
        for _, row in rows_with_audio(shard):
            event = row_to_event(row, source=str(shard))
            cases = [c for c in cases_of(event) if wanted is None or c.case_id in wanted]
            if not cases:
                continue
            audio, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32", always_2d=True)
            if sr != SESSION_SR or audio.shape[1] != 2:
                raise SchemaError(f"audio is {sr} Hz with shape {audio.shape}, expected 2-channel {SESSION_SR}",
                                  source=str(shard), row=event.event_id, field="audio")
            for case in cases:
                yield case, audio
