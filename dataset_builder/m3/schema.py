"""M3-DuplexBench records (DESIGN.md): the placed utterance, the event row, and the case = event x condition.

Every time in an `M3Event` is on the row's clip clock (0 = the context start τ(L)); the runtime plan moves them to
the stream clock of a recording and writes them into rec.json's gold, so a recording scores on its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from dataset_builder.schema import SchemaError

BENCHMARK = "m3"
LANGUAGES = ("en", "ja")
DOMAINS = ("chat", "task")
CONDITIONS = ("none", "user", "full")
EVENT_TYPES = ("SHIFT", "PAUSE", "BC", "BARGE_IN")
SPEAKERS = ("user", "system")
KINDS = ("turn", "bc")
USER_CHANNEL, SYSTEM_CHANNEL = 0, 1

WINDOW_S = 10.0  # Δ: the evaluation window W = [s, s + Δ)
CONTEXT_S = 120.0  # L: the context length before b

# None has no pre-event turn for BC / BARGE_IN (paper §IV-A), so those events are not cases under it.
EVENT_CONDITIONS: dict[str, tuple[str, ...]] = {
    "SHIFT": CONDITIONS, "PAUSE": CONDITIONS, "BC": ("user", "full"), "BARGE_IN": ("user", "full"),
}
CONFIGS: dict[str, tuple[str, str]] = {f"m3_{d}_{lang}": (lang, d) for lang in LANGUAGES for d in DOMAINS}


def config_name(language: str, domain: str) -> str:
    return f"m3_{domain}_{language}"


def _require(cond: bool, message: str, where: str, fld: str) -> None:
    if not cond:
        raise SchemaError(message, source=where, field=fld)


@dataclass(frozen=True)
class Utterance:
    """One utterance as placed on a timeline (clip clock in rows, dialogue clock while building).

    `end_s` is where its audio stops: for a system utterance cut by a barge-in, the cut point. `text` is what was
    synthesised (the whole sentence even when the audio is cut; `cut` says so).
    """

    utt_id: str
    speaker: str  # "user" | "system"
    kind: str  # "turn" | "bc"
    text: str
    start_s: float
    end_s: float
    cut: bool = False

    def validate(self, where: str, need_text: bool = True) -> None:
        _require(self.speaker in SPEAKERS, f"speaker {self.speaker!r} not in {SPEAKERS}", where, "speaker")
        _require(self.kind in KINDS, f"kind {self.kind!r} not in {KINDS}", where, "kind")
        _require(bool(self.text.strip()) or not need_text, "empty text", where, "text")
        _require(self.end_s > self.start_s, f"end {self.end_s} <= start {self.start_s}", where, "end_s")


@dataclass(frozen=True)
class M3Event:
    """One dataset row: one user-caused event of one dialogue, its regions and the context around it."""

    event_id: str  # "{dialogue_id}-e{NN}"
    dialogue_id: str  # "{lang}-{domain}-d{NNN}"
    language: str
    domain: str
    event_type: str
    prompt_start_s: float  # b (== s for BC / BARGE_IN)
    event_start_s: float  # s
    event_end_s: float  # t (< s for a SHIFT whose reply overlaps the question)
    window_end_s: float  # s + Δ; the row's audio ends here
    dialogue_offset_s: float  # τ(L) on the dialogue clock
    utterances: tuple[Utterance, ...]  # every utterance overlapping [0, window_end_s), clip clock
    question: str = ""  # SHIFT: the user turn before s
    reply: str = ""  # SHIFT: the reference system reply after s
    gold_answer: str = ""  # task SHIFTs that answer a question: the answer, computed from the knowledge base
    gold_aliases: tuple[str, ...] = ()  # forms of the gold a correct answer may say instead
    context_dependent: bool = False  # the question needs the history to be understood ("and when did it open?")
    user_voice: str = ""
    system_voice: str = ""
    tts_backend: str = ""
    seed: int = 0
    # False only for a row imported from a corpus without a transcript for all of it (authors.py): utterance texts,
    # question and reply may then be empty. Built rows are always transcribed.
    transcribed: bool = True

    @property
    def config(self) -> str:
        return config_name(self.language, self.domain)

    @property
    def conditions(self) -> tuple[str, ...]:
        return EVENT_CONDITIONS[self.event_type]

    def validate(self) -> None:
        where = f"event {self.event_id}"
        _require(self.language in LANGUAGES, f"language {self.language!r} not in {LANGUAGES}", where, "language")
        _require(self.domain in DOMAINS, f"domain {self.domain!r} not in {DOMAINS}", where, "domain")
        _require(self.event_type in EVENT_TYPES, f"event_type {self.event_type!r} not in {EVENT_TYPES}",
                 where, "event_type")
        _require(self.event_id.startswith(self.dialogue_id + "-e"), "event_id must extend dialogue_id",
                 where, "event_id")
        _require(0.0 <= self.prompt_start_s <= self.event_start_s, "need 0 <= b <= s", where, "prompt_start_s")
        if self.event_type in ("BC", "BARGE_IN"):
            _require(self.prompt_start_s == self.event_start_s, "BC / BARGE_IN have no P: b must equal s",
                     where, "prompt_start_s")
        _require(abs(self.window_end_s - (self.event_start_s + WINDOW_S)) < 1e-6, "window_end_s must be s + Δ",
                 where, "window_end_s")
        _require(self.event_end_s >= self.event_start_s - 0.4 - 1e-9 if self.event_type == "SHIFT"
                 else self.event_end_s > self.event_start_s, "event end out of range", where, "event_end_s")
        for i, u in enumerate(self.utterances):
            u.validate(f"{where} utterance {i}", need_text=self.transcribed)
        if self.event_type == "SHIFT" and self.transcribed:
            _require(bool(self.question) and bool(self.reply), "a SHIFT needs its question and reply", where,
                     "question")
        if self.gold_answer:
            _require(self.event_type == "SHIFT" and self.domain == "task", "gold answers belong to task SHIFTs",
                     where, "gold_answer")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> M3Event:
        d = dict(data)
        d["utterances"] = tuple(Utterance(**u) for u in d.get("utterances", ()))
        d["gold_aliases"] = tuple(d.get("gold_aliases", ()))
        event = cls(**d)
        event.validate()
        return event


def case_id(event_id: str, condition: str) -> str:
    return f"{event_id}-{condition}"


@dataclass(frozen=True)
class M3Case:
    """One case: an event under a condition. `case_id`, `benchmark` and `tts_backend` are what the runner needs."""

    event: M3Event
    condition: str

    def __post_init__(self) -> None:
        if self.condition not in self.event.conditions:
            raise SchemaError(f"condition {self.condition!r} is not run for a {self.event.event_type}",
                              source=f"event {self.event.event_id}", field="condition")

    @property
    def case_id(self) -> str:
        return case_id(self.event.event_id, self.condition)

    @property
    def benchmark(self) -> str:
        return BENCHMARK

    @property
    def tts_backend(self) -> str:
        return self.event.tts_backend


def cases_of(event: M3Event) -> list[M3Case]:
    return [M3Case(event, c) for c in event.conditions]
