"""IFEvalItem <-> dataset row: the typed columns of the `ifeval` and `ifeval_matched` configs, and readers of a
released folder that need no `datasets` (`list_items`, `iter_items`).

Rows are flat and typed (no JSON blobs); the conversion back rebuilds and validates every record and checks that
the stored trigger window is the one `schema.window_rel` computes from the stored segment timings.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import soundfile as sf

from dataset_builder.audio import SESSION_SR
from dataset_builder.hf_dataset import config_shards, rows_with_audio, rows_without_audio
from dataset_builder.ifeval.schema import (
    BENCHMARK,
    PROBE_TITLES,
    ROLES,
    Conversation,
    IFEvalCase,
    IFEvalItem,
    SegmentTiming,
    TimedConversation,
)
from dataset_builder.schema import SchemaError

if TYPE_CHECKING:
    import numpy as np
    from datasets import Features

SEGMENT_FIELDS = ("kind", "mark", "text", "duration_s", "start_s", "end_s")
TURN_FIELDS = ("turn_id", "mode", "markup", "text", "start_s", "end_s", "segments")


def ifeval_features() -> Features:
    from datasets import Audio, Features, List, Value

    s, f64, i64, b = Value("string"), Value("float64"), Value("int64"), Value("bool")
    segment = {"kind": s, "mark": s, "text": s, "duration_s": f64, "start_s": f64, "end_s": f64}
    turn = {"turn_id": s, "mode": s, "markup": s, "text": s, "start_s": f64, "end_s": f64,
            "segments": List(segment)}
    return Features({
        "case_id": s, "conversation_id": s, "benchmark": s,
        "role": s, "role_name": s, "probe": s, "probe_title": s, "instance": i64, "level": s,
        "audio": Audio(sampling_rate=SESSION_SR),
        "system_prompt": s, "persona": s, "directive": s, "contradiction": s, "contradiction_variant": i64,
        "expected_action": s, "base_action": s, "event": s, "base_event": s, "resolution_target": s,
        "verifier": List({"name": s, "value": f64}),
        "window_start_s": f64, "window_end_s": f64,  # relative to the realised start of turn 2; end null = end
        "turn2_mode": s, "barge_in_after_s": f64,
        "readback_target": s, "readback_kind": s,
        "matched_audio": b, "matched_group": s,
        "label_rule": s, "rationale": s, "audio_variant": s, "safety_relevant_audio": b,
        "turns": List(turn),
        "voice": s, "seed": i64, "tts_backend": s,
    })


def item_to_row(item: IFEvalItem, audio_bytes: bytes, directive: str) -> dict[str, Any]:
    case, conv = item.case, item.timed.conversation
    w0, w1 = item.timed.window(case)
    turns = []
    for turn in conv.turns:
        start, end = item.clips[turn.turn_id]
        turns.append({
            "turn_id": turn.turn_id, "mode": turn.mode, "markup": turn.markup,
            "text": " ".join(seg.text for seg in turn.segments if seg.kind == "speech"),
            "start_s": start, "end_s": end,
            "segments": [{"kind": seg.kind, "mark": seg.mark, "text": seg.text, "duration_s": seg.duration_s,
                          "start_s": t.start_s, "end_s": t.end_s}
                         for seg, t in zip(turn.segments, item.timed.timings[turn.turn_id], strict=True)],
        })
    return {
        "case_id": case.case_id, "conversation_id": case.conversation_id, "benchmark": BENCHMARK,
        "role": case.role, "role_name": ROLES[case.role], "probe": case.probe,
        "probe_title": PROBE_TITLES[case.probe], "instance": case.instance, "level": case.level,
        "audio": {"bytes": audio_bytes, "path": f"{case.stream_id}.wav"},
        "system_prompt": case.system_prompt, "persona": item.persona, "directive": directive,
        "contradiction": case.contradiction, "contradiction_variant": case.contradiction_variant,
        "expected_action": case.expected_action, "base_action": case.base_action, "event": case.event,
        "base_event": conv.base_event, "resolution_target": case.resolution_target,
        "verifier": [{"name": k, "value": v} for k, v in case.verifier.items()],
        "window_start_s": w0, "window_end_s": w1,
        "turn2_mode": conv.turn2.mode, "barge_in_after_s": conv.barge_in_after_s,
        "readback_target": conv.readback_target, "readback_kind": conv.readback_kind,
        "matched_audio": case.matched_audio, "matched_group": case.matched_group,
        "label_rule": case.label_rule, "rationale": case.rationale, "audio_variant": case.audio_variant,
        "safety_relevant_audio": case.safety_relevant_audio,
        "turns": turns, "voice": conv.voice, "seed": conv.seed, "tts_backend": item.tts_backend,
    }


def row_to_item(row: dict[str, Any], *, source: str | None = None, index: int | None = None) -> IFEvalItem:
    """Rebuild and validate an IFEvalItem from a row (the audio column is read separately)."""
    where = row.get("case_id", index)
    try:
        case = IFEvalCase.from_dict({
            "case_id": row["case_id"], "conversation_id": row["conversation_id"], "role": row["role"],
            "probe": row["probe"], "instance": int(row["instance"]), "level": row["level"],
            "system_prompt": row["system_prompt"], "expected_action": row["expected_action"],
            "base_action": row["base_action"], "event": row["event"],
            "resolution_target": row["resolution_target"], "contradiction": row["contradiction"],
            "contradiction_variant": int(row["contradiction_variant"]),
            "verifier": {v["name"]: float(v["value"]) for v in row["verifier"]},
            "matched_audio": bool(row["matched_audio"]), "matched_group": row["matched_group"],
            "label_rule": row["label_rule"], "rationale": row["rationale"], "audio_variant": row["audio_variant"],
            "safety_relevant_audio": bool(row["safety_relevant_audio"]),
        })
        conv = Conversation.from_dict({
            "conversation_id": row["conversation_id"], "role": row["role"], "probe": row["probe"],
            "instance": int(row["instance"]), "seed": int(row["seed"]), "voice": row["voice"],
            "turns": [{"turn_id": t["turn_id"], "markup": t["markup"], "mode": t["mode"],
                       "segments": [{"kind": g["kind"], "text": g["text"], "duration_s": float(g["duration_s"]),
                                     "mark": g["mark"]} for g in t["segments"]]}
                      for t in row["turns"]],
            "base_action": row["base_action"], "base_event": row["base_event"],
            "barge_in_after_s": row["barge_in_after_s"], "readback_target": row["readback_target"],
            "readback_kind": row["readback_kind"], "matched_group": row["matched_group"],
            "safety_relevant": bool(row["safety_relevant_audio"]), "variant": row["audio_variant"],
        })
        timings = {t["turn_id"]: [SegmentTiming(g["kind"], g["mark"], float(g["start_s"]), float(g["end_s"]))
                                  for g in t["segments"]] for t in row["turns"]}
        timed = TimedConversation(conv, timings)
        item = IFEvalItem(case=case, timed=timed,
                          clips={t["turn_id"]: (float(t["start_s"]), float(t["end_s"])) for t in row["turns"]},
                          persona=row["persona"], tts_backend=row["tts_backend"])
        w0, w1 = timed.window(case)
        if (w0, w1) != (row["window_start_s"], row["window_end_s"]):
            raise SchemaError(f"stored window {(row['window_start_s'], row['window_end_s'])} differs from the one "
                              f"the segment timings give {(w0, w1)}", field="window_start_s")
        return item
    except KeyError as err:
        raise SchemaError("missing column", source=source, row=where, field=str(err.args[0])) from None
    except SchemaError as err:
        if err.source is not None:
            raise
        raise SchemaError(str(err).split(": ", 1)[-1], source=source, row=where, field=err.field) from None


def list_items(folder: Path | str, config: str = "ifeval") -> list[IFEvalItem]:
    """Every validated item of a config, without audio."""
    out: list[IFEvalItem] = []
    for shard in config_shards(folder, config):
        for row in rows_without_audio(shard):
            out.append(row_to_item(row, source=str(shard), index=len(out)))
    return out


def iter_items(folder: Path | str, config: str = "ifeval", wanted: set[str] | None = None
               ) -> Iterator[tuple[IFEvalItem, np.ndarray]]:
    """Items with their nominal float32 mono 24 kHz audio, one row group at a time (a group holding none of
    `wanted` is not read)."""
    for shard in config_shards(folder, config):
        for _, row in rows_with_audio(shard, wanted):
            if wanted is not None and row["case_id"] not in wanted:
                continue
            item = row_to_item(row, source=str(shard))
            audio, sr = sf.read(io.BytesIO(row["audio"]["bytes"]), dtype="float32", always_2d=False)
            if sr != SESSION_SR or audio.ndim != 1:
                raise SchemaError(f"audio is {sr} Hz with shape {audio.shape}, expected mono {SESSION_SR}",
                                  source=str(shard), row=item.case_id, field="audio")
            yield item, audio
