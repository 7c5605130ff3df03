"""The shared vocabulary (docs/conventions.md) as small validated records.

A Script is the text side of one conversation; a Case is one dataset row (one script under one condition,
with its audio placed on a nominal timeline). Every record round-trips through plain dicts, and loading one
validates it with an error that names the source file, the row and the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

MPE_LABELS = ("T", "N1", "N2", "N3", "N4Q", "N4R")
SILENT_LABELS = ("N1", "N2", "N3")
MPE_CONDITIONS = ("explicit", "implicit")
ASSISTANT_NAME = "Aria"
SCENE_ATTRIBUTES = ("setting", "activity", "relationship", "device_context", "register")
POSITION_BUCKETS = ("early", "middle", "late")
# How the implicit T shows it is meant for the assistant without naming it (docs/benchmarks/mpe.md): its role or place
# ("you on the counter"), continuing an earlier exchange with it, after the people say none of them can answer,
# or an unnamed "you" after the setup turn pointed at the device. Both scripts of a pair store their pair's kind.
CUE_KINDS = ("role", "earlier", "nobody", "second_person")


class SchemaError(ValueError):
    """A record failed validation; the message names where (file, row) and what (field)."""

    def __init__(self, message: str, *, source: str | None = None, row: int | str | None = None,
                 field: str | None = None) -> None:
        where = ", ".join(
            part for part in (
                f"file {source}" if source is not None else "",
                f"row {row}" if row is not None else "",
                f"field '{field}'" if field is not None else "",
            ) if part
        )
        super().__init__(f"{where}: {message}" if where else message)
        self.source, self.row, self.field = source, row, field


@contextmanager
def reading_row(source: str | None, where: int | str | None, own: str | None = None) -> Iterator[None]:
    """While a dataset row is turned back into a record: a missing column, a malformed value, or a SchemaError that
    names no file (or only the record itself, `own`) becomes a SchemaError naming the file, the row and the field."""
    try:
        yield
    except KeyError as err:
        raise SchemaError("missing column", source=source, row=where, field=str(err.args[0])) from None
    except TypeError as err:
        raise SchemaError(f"malformed row ({err})", source=source, row=where) from None
    except SchemaError as err:
        if err.source is not None and err.source != own:
            raise
        raise SchemaError(str(err).split(": ", 1)[-1], source=source, row=where, field=err.field) from None


def _require(cond: bool, message: str, fld: str) -> None:
    if not cond:
        raise SchemaError(message, field=fld)


def _from_dict(cls: type, data: Any, where: str) -> Any:
    """Build a dataclass from a dict, rejecting unknown and missing keys by name."""
    if not isinstance(data, dict):
        raise SchemaError(f"expected an object, got {type(data).__name__}", field=where)
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise SchemaError(f"unknown key(s) {unknown}", field=where)
    missing = sorted(n for n in names if n not in data and _is_required(cls, n))
    if missing:
        raise SchemaError(f"missing key(s) {missing}", field=where)
    return cls(**data)


def _is_required(cls: type, name: str) -> bool:
    f = next(f for f in fields(cls) if f.name == name)
    return f.default is MISSING and f.default_factory is MISSING


@dataclass(frozen=True)
class Speaker:
    name: str
    voice: str  # a voice id in the TTS voice bank; the speaker->voice map is deterministic

    def validate(self) -> None:
        _require(bool(self.name.strip()), "speaker name is empty", "speakers.name")
        _require(bool(self.voice.strip()), f"speaker {self.name!r} has no voice", "speakers.voice")


SEGMENT_KINDS = ("speech", "silence")


@dataclass(frozen=True)
class Segment:
    """A piece of a turn: speech (text for the TTS) or an exact pause (zero samples, never TTS prosody)."""

    kind: str
    text: str = ""
    duration_s: float = 0.0

    def validate(self, where: str) -> None:
        _require(self.kind in SEGMENT_KINDS, f"segment kind {self.kind!r} not in {SEGMENT_KINDS}", where)
        if self.kind == "speech":
            _require(bool(self.text.strip()), "speech segment has no text", where + ".text")
            _require(self.duration_s == 0.0, "speech duration comes from the TTS", where + ".duration_s")
        else:
            _require(not self.text, "silence segment has text", where + ".text")
            _require(self.duration_s > 0, "silence needs a positive duration", where + ".duration_s")


@dataclass(frozen=True)
class Turn:
    turn_id: str
    speaker: str
    text: str
    label: str
    addressee: str | None = None  # who the turn is for (a speaker, "Aria", a device) or None (nobody)
    segments: list[Segment] = field(default_factory=list)  # empty: the whole text is one speech segment

    def validate(self, speakers: set[str]) -> None:
        f = f"turns[{self.turn_id}]"
        _require(self.label in MPE_LABELS, f"label {self.label!r} is not one of {MPE_LABELS}", f + ".label")
        _require(self.speaker in speakers, f"speaker {self.speaker!r} is not in the scene", f + ".speaker")
        _require(bool(self.text.strip()), "text is empty", f + ".text")
        for i, seg in enumerate(self.segments):
            seg.validate(f"{f}.segments[{i}]")
        spoken = " ".join(seg.text for seg in self.segments if seg.kind == "speech")
        _require(not self.segments or spoken.split() == self.text.split(),
                 "speech segments must spell out the turn's text", f + ".segments")

    def speech_segments(self) -> list[Segment]:
        return self.segments or [Segment("speech", self.text)]


@dataclass
class Script:
    script_id: str
    pair_id: str
    condition: str
    seed: int
    attributes: dict[str, str]
    speakers: list[Speaker]
    turns: list[Turn]
    question: str  # the request T makes, stated neutrally (what the judge compares against)
    gold_answer: str
    gold_aliases: list[str] = field(default_factory=list)
    task_type: str = ""
    t_position: str = ""
    cue: str = ""  # one of CUE_KINDS; "" in scripts from before cue kinds existed

    @property
    def t_index(self) -> int:
        return next(i for i, t in enumerate(self.turns) if t.label == "T")

    def validate(self) -> None:
        """The Duplex-MPE script invariants (docs/benchmarks/mpe.md); raises SchemaError naming the field."""
        _require(isinstance(self.seed, int) and 0 <= self.seed < 2**63, "seed must fit in int64", "seed")
        _require(self.condition in MPE_CONDITIONS, f"condition {self.condition!r} unknown", "condition")
        _require(tuple(self.attributes) == SCENE_ATTRIBUTES,
                 f"attributes must be exactly {SCENE_ATTRIBUTES}", "attributes")
        _require(3 <= len(self.speakers) <= 4, "a scene has 3 or 4 human speakers", "speakers")
        names = {s.name for s in self.speakers}
        _require(len(names) == len(self.speakers), "speaker names repeat", "speakers")
        _require(ASSISTANT_NAME not in names, "Aria is not a human speaker", "speakers")
        for s in self.speakers:
            s.validate()
        for t in self.turns:
            t.validate(names)
        labels = [t.label for t in self.turns]
        _require(labels.count("T") == 1, f"exactly one T per scene, found {labels.count('T')}", "turns")
        ti = self.t_index
        _require(ti > 0, "T is never the first turn", "turns")
        _require(ti < len(labels) - 1, "T is always followed by more talk", "turns")
        for i, lab in enumerate(labels):
            if lab == "N4Q":
                _require(i + 1 < len(labels) and labels[i + 1] == "N4R",
                         f"N4Q at {i} must be followed directly by N4R", "turns")
            if lab == "N4R":
                _require(i > 0 and labels[i - 1] == "N4Q", f"N4R at {i} must follow an N4Q", "turns")
        t_text = self.turns[ti].text
        names_aria = ASSISTANT_NAME.lower() in t_text.lower()
        if self.condition == "explicit":
            _require(names_aria, "explicit T must name Aria", "turns.T.text")
        else:
            _require(not names_aria, "implicit T must not name Aria", "turns.T.text")
        _require(bool(self.gold_answer.strip()), "gold answer is empty", "gold_answer")
        _require(self.t_position in POSITION_BUCKETS, f"t_position {self.t_position!r} unknown", "t_position")
        _require(self.cue in ("", *CUE_KINDS), f"cue {self.cue!r} not in {CUE_KINDS}", "cue")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str | None = None, row: int | str | None = None
                  ) -> Script:
        try:
            d = dict(data)
            d["speakers"] = [_from_dict(Speaker, s, "speakers") for s in d.get("speakers", [])]
            d["turns"] = [_from_dict(Turn, {**t, "segments": [_from_dict(Segment, g, "turns.segments")
                                                                  for g in t.get("segments", [])]}, "turns")
                          for t in d.get("turns", [])]
            script = _from_dict(cls, d, "script")
            script.validate()
            return script
        except SchemaError as err:
            raise SchemaError(str(err).split(": ", 1)[-1] if err.field else str(err),
                              source=source, row=row, field=err.field) from None


def validate_pair(explicit: Script, implicit: Script) -> None:
    """A pair keeps turn count, label sequence and gold answer (docs/benchmarks/mpe.md)."""
    where = explicit.pair_id
    if explicit.pair_id != implicit.pair_id:
        raise SchemaError("pair ids differ", row=where, field="pair_id")
    if (explicit.condition, implicit.condition) != MPE_CONDITIONS:
        raise SchemaError("a pair is one explicit and one implicit script", row=where, field="condition")
    if len(explicit.turns) != len(implicit.turns):
        raise SchemaError("paired scripts differ in turn count", row=where, field="turns")
    if [t.label for t in explicit.turns] != [t.label for t in implicit.turns]:
        raise SchemaError("paired scripts differ in label sequence", row=where, field="turns.label")
    if explicit.gold_answer != implicit.gold_answer:
        raise SchemaError("paired scripts differ in gold answer", row=where, field="gold_answer")
    if explicit.cue != implicit.cue:
        raise SchemaError("paired scripts differ in cue kind", row=where, field="cue")
    if explicit.t_index != implicit.t_index:
        raise SchemaError("paired scripts place T differently", row=where, field="turns")


@dataclass(frozen=True)
class Clip:
    """Where one turn's audio lies on the case's nominal timeline (seconds at 24 kHz)."""

    turn_id: str
    start_s: float
    end_s: float
    gap_before_s: float  # silence the scheduler plays before this clip in an ordinary advance

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass
class Case:
    """One dataset row: one script under one condition, with the audio of each turn placed on a timeline.

    `audio` is the nominal room recording (preamble, then each turn after its gap). The orchestrator cuts
    each turn's clip out of it by `clips[i]` and re-times the clips by the model's behaviour.
    """

    case_id: str
    benchmark: str
    script: Script
    preamble_text: str
    preamble_end_s: float
    clips: list[Clip]
    tts_backend: str

    def validate(self) -> None:
        _require(len(self.clips) == len(self.script.turns), "one clip per turn", "clips")
        prev = self.preamble_end_s
        for clip, turn in zip(self.clips, self.script.turns, strict=True):
            f = f"clips[{clip.turn_id}]"
            _require(clip.turn_id == turn.turn_id, "clip order differs from turn order", f + ".turn_id")
            _require(clip.gap_before_s >= 0, "negative gap", f + ".gap_before_s")
            _require(clip.end_s > clip.start_s, "empty clip", f + ".end_s")
            _require(clip.start_s >= prev - 1e-6, "clips overlap or go backwards", f + ".start_s")
            prev = clip.end_s
