"""Case <-> dataset row: the typed columns of the released MPE config.

Rows are flat and typed (no JSON blobs) so a dataset viewer and `datasets` filters work on them; the
conversion back validates and names the source, row and field of anything wrong.
"""

from __future__ import annotations

from typing import Any

from dataset_builder.schema import SCENE_ATTRIBUTES, Case, Clip, SchemaError, Script, Speaker, reading_row

TURN_FIELDS = (
    "turn_id", "speaker", "voice", "label", "text", "addressee", "start_s", "end_s", "gap_before_s",
)


def case_to_row(case: Case, audio_bytes: bytes) -> dict[str, Any]:
    s = case.script
    if any(t.segments for t in s.turns):
        raise SchemaError("the mpe config stores whole turns; segmented turns would be lost", row=case.case_id,
                          field="turns.segments")
    voices = {sp.name: sp.voice for sp in s.speakers}
    turns = [
        {
            "turn_id": t.turn_id, "speaker": t.speaker, "voice": voices[t.speaker], "label": t.label,
            "text": t.text, "addressee": t.addressee, "start_s": c.start_s, "end_s": c.end_s,
            "gap_before_s": c.gap_before_s,
        }
        for t, c in zip(s.turns, case.clips, strict=True)
    ]
    return {
        "case_id": case.case_id,
        "pair_id": s.pair_id,
        "benchmark": case.benchmark,
        "condition": s.condition,
        "audio": {"bytes": audio_bytes, "path": f"{case.case_id}.wav"},
        "preamble_text": case.preamble_text,
        "preamble_end_s": case.preamble_end_s,
        "turns": turns,
        "question": s.question,
        "gold_answer": s.gold_answer,
        "gold_aliases": list(s.gold_aliases),
        "task_type": s.task_type,
        "t_position": s.t_position,
        "cue": s.cue,
        **{a: s.attributes[a] for a in SCENE_ATTRIBUTES},
        "speakers": [sp.name for sp in s.speakers],
        "n_speakers": len(s.speakers),
        "seed": s.seed,
        "tts_backend": case.tts_backend,
    }


def row_to_case(row: dict[str, Any], *, source: str | None = None, index: int | None = None) -> Case:
    """Rebuild and validate a Case from a row (audio column ignored: it is read separately)."""
    where = row.get("case_id", index)
    with reading_row(source, where):
        turns_raw = row["turns"]
        voices: dict[str, str] = {}
        for t in turns_raw:
            voices.setdefault(t["speaker"], t["voice"])
        speakers = [Speaker(name=n, voice=voices.get(n, "")) for n in row["speakers"]]
        script = Script.from_dict(
            {
                "script_id": row["case_id"],
                "pair_id": row["pair_id"],
                "condition": row["condition"],
                "seed": int(row["seed"]),
                "attributes": {a: row[a] for a in SCENE_ATTRIBUTES},
                "speakers": [{"name": sp.name, "voice": sp.voice} for sp in speakers],
                "turns": [
                    {"turn_id": t["turn_id"], "speaker": t["speaker"], "text": t["text"], "label": t["label"],
                     "addressee": t.get("addressee")}
                    for t in turns_raw
                ],
                "question": row["question"],
                "gold_answer": row["gold_answer"],
                "gold_aliases": list(row.get("gold_aliases") or []),
                "task_type": row["task_type"],
                "t_position": row["t_position"],
                "cue": row.get("cue") or "",
            },
            source=source, row=where,
        )
        clips = [Clip(t["turn_id"], float(t["start_s"]), float(t["end_s"]), float(t["gap_before_s"]))
                 for t in turns_raw]
        case = Case(case_id=row["case_id"], benchmark=row["benchmark"], script=script,
                    preamble_text=row["preamble_text"], preamble_end_s=float(row["preamble_end_s"]),
                    clips=clips, tts_backend=row["tts_backend"])
        case.validate()
        return case
