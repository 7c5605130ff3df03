"""Who writes the words of a Duplex-MPE scene: the composer as it is (`template`), or an LLM (`openai`).

The composer (`generator.py`) decides everything about a scene pair: attributes, speakers and voices, each turn's
speaker, label and addressee, the task facts and the gold answer. A writer may change only the turn texts.
`template` keeps the composer's. `openai` asks any OpenAI-compatible chat endpoint to rewrite a pair from the
same attributes, turns and facts, with the composer's text as its draft, and accepts an answer only when the
rewritten pair passes every check a composed pair passes (`Script.validate`, `generator.check_name_mentions`,
`generator.check_gold`, `schema.validate_pair`) plus the writer's own (`check_rewrite`: the phrase bank's rules
for numbers, days, the name and length, applied turn by turn against the draft). A rejected answer is asked for
again with the broken rule named; after the last attempt the build stops with one line naming the pair and the
rule, or, with `on_failure=template`, keeps the composer's text for that pair and counts it in the build info
and the dataset card. Nothing is dropped silently.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dataset_builder.diagnostics import words
from dataset_builder.errors import UsageError
from dataset_builder.llm_writer import ChatWriter, Rejected, default_cache_dir, json_object
from dataset_builder.llm_writer import WriterError as WriterError  # what this writer raises
from dataset_builder.mpe.attributes import HUMAN_NAMES
from dataset_builder.mpe.generator import check_gold, check_name_mentions
from dataset_builder.mpe.phrasebank import CALENDAR_WORDS, NAME_ANYWHERE, NAME_WORD, NUMBER_WORDS
from dataset_builder.mpe.tasks import WEEKDAYS, GoldMismatch
from dataset_builder.progress import Progress
from dataset_builder.registry import LazyRegistry
from dataset_builder.schema import ASSISTANT_NAME, SchemaError, Script, validate_pair

if TYPE_CHECKING:
    from dataset_builder.build import BuildOptions

log = logging.getLogger("duplex_eval.build")

WRITER_PROMPT_VERSION = "mpe-writer-1"  # bump when the prompt or the checks change: cached answers then differ
MAX_WORDS = 40  # a rewritten turn; the bank's lines have at most 30, composed turns add a name or an opener

_DIGITS = re.compile(r"\d+(?:[:.]\d+)*")
_WEEKDAY = re.compile(r"\b(?:" + "|".join(WEEKDAYS) + r")s?\b", re.IGNORECASE)
_ASSISTANT_WORD = re.compile(r"\bassistant", re.IGNORECASE)
_PEOPLE = re.compile(r"\b(?:" + "|".join(HUMAN_NAMES) + r")\b")


@runtime_checkable
class Writer(Protocol):
    name: str  # provenance, recorded in the build info and the dataset card: "template", "openai:MODEL"

    def write_pair(self, explicit: Script, implicit: Script) -> tuple[Script, Script]:
        """The pair with its turn texts written; everything else as composed."""
        ...

    def summary(self) -> dict[str, Any]:
        """What the writer did, for the build info: at least `name`; counts for a writer that can fall back."""
        ...


class TemplateWriter:
    """The composer's text as it is."""

    name = "template"

    def write_pair(self, explicit: Script, implicit: Script) -> tuple[Script, Script]:
        return explicit, implicit

    def summary(self) -> dict[str, Any]:
        return {"name": self.name}


# --- what a rewrite must keep -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Draft:
    """A composed pair and what its rewrite must keep, read from the pair itself."""

    explicit: Script
    implicit: Script
    two_versions: tuple[int, ...]  # turn indices whose text differs between the conditions (T, maybe the setup)
    device: str | None  # the other voice device's name, when a turn addresses one
    cue: str | None  # how the implicit T shows it is for the assistant (schema.CUE_KINDS); None in old scripts

    @classmethod
    def of(cls, explicit: Script, implicit: Script) -> Draft:
        validate_pair(explicit, implicit)
        differ = tuple(i for i, (a, b) in enumerate(zip(explicit.turns, implicit.turns, strict=True))
                       if a.text != b.text)
        people = {s.name for s in explicit.speakers}
        device = next((t.addressee for t in explicit.turns
                       if t.addressee and t.addressee not in people and t.addressee != ASSISTANT_NAME), None)
        return cls(explicit, implicit, differ, device, explicit.cue or None)

    @property
    def pair_id(self) -> str:
        return self.explicit.pair_id


def _counted(pattern: re.Pattern[str], text: str) -> Counter[str]:
    return Counter(m.lower() for m in pattern.findall(text))


def _extra(pattern: re.Pattern[str], new: str, old: str) -> list[str]:
    """What `pattern` finds in `new` beyond what it finds in `old`."""
    return sorted((_counted(pattern, new) - _counted(pattern, old)).elements())


def _same_words_without_name(a: str, b: str) -> bool:
    name = ASSISTANT_NAME.lower()
    return [w for w in words(a) if w != name] == [w for w in words(b) if w != name]


def check_rewrite(draft: Draft, explicit: Script, implicit: Script) -> None:
    """The rewritten pair passes what a composed pair passes, and keeps what the draft fixed; raises Rejected."""
    people = {s.name for s in explicit.speakers}
    for j, (te, ti) in enumerate(zip(explicit.turns, implicit.turns, strict=True)):
        if j not in draft.two_versions and te.text != ti.text:
            raise Rejected("pair", f"turn {te.turn_id} must read the same in both versions (only "
                                   f"{[explicit.turns[k].turn_id for k in draft.two_versions]} differ)")
    for script, old in ((explicit, draft.explicit), (implicit, draft.implicit)):
        for turn, before in zip(script.turns, old.turns, strict=True):
            where, text = f"{script.condition} {turn.turn_id} ({turn.label})", turn.text
            n = len(words(text))
            if not 1 <= n <= max(MAX_WORDS, len(words(before.text))):
                raise Rejected("length", f"{where} has {n} words; at most {MAX_WORDS}")
            if re.match(rf"\s*{re.escape(turn.speaker)}\s*:", text) or any(c in text for c in "{}\n*#"):
                raise Rejected("format", f"{where} is not plain speech: {text!r}")
            if _counted(_DIGITS, text) != _counted(_DIGITS, before.text):
                want = sorted(_DIGITS.findall(before.text)) or "none"
                raise Rejected("numbers", f"{where} says the numbers {sorted(_DIGITS.findall(text))}; "
                                          f"it must say exactly {want}")
            for pattern, what in ((NUMBER_WORDS, "number words"), (_WEEKDAY, "days"), (CALENDAR_WORDS, "dates")):
                if extra := _extra(pattern, text, before.text):
                    raise Rejected("numbers", f"{where} adds {what} {extra}; only the task facts hold numbers")
            if len(NAME_ANYWHERE.findall(text)) > len(NAME_WORD.findall(text)):
                raise Rejected("name", f"{where} hides the letters {ASSISTANT_NAME.lower()!r} in another word")
            if _extra(_ASSISTANT_WORD, text, before.text):
                raise Rejected("name", f"{where} says 'assistant'")
            named = set(_PEOPLE.findall(text))
            if strangers := sorted(named - people):
                raise Rejected("people", f"{where} names {strangers}, who are not in the scene")
            if turn.speaker in named and turn.speaker not in _PEOPLE.findall(before.text):
                raise Rejected("people", f"{where}: {turn.speaker} says their own name")
            if draft.device and turn.addressee == draft.device and draft.device.lower() not in text.lower():
                raise Rejected("device", f"{where} is a command to {draft.device} and must say its name")
    try:
        for script in (explicit, implicit):
            check_name_mentions(script)
    except SchemaError as err:
        raise Rejected("name", str(err)) from None
    try:
        for script in (explicit, implicit):
            script.validate()
    except SchemaError as err:
        raise Rejected("labels", str(err)) from None
    try:
        validate_pair(explicit, implicit)
    except SchemaError as err:
        raise Rejected("pair", str(err)) from None
    try:
        for script in (explicit, implicit):
            check_gold(script)
    except (SchemaError, GoldMismatch) as err:
        raise Rejected("gold", str(err)) from None
    ti = explicit.t_index
    e_t, i_t = explicit.turns[ti].text, implicit.turns[ti].text
    if named := sorted(people & set(_PEOPLE.findall(i_t))):
        raise Rejected("implicit-t", f"the implicit T names {named}: it would read as said to them")
    if _same_words_without_name(e_t, i_t):
        raise Rejected("implicit-t", "the implicit T is the explicit T with the name taken out")


def _text(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise Rejected("json", f"{where} needs a non-empty string {key!r}")
    return " ".join(value.split())


def parse_rewrite(content: str, draft: Draft) -> tuple[Script, Script]:
    """The pair an answer describes (checked by `check_rewrite`, not here); raises Rejected."""
    data = json_object(content)
    items = data.get("turns") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise Rejected("json", 'expected {"turns": [{"id": ..., "label": ..., "text": ...}, ...]}')
    old_e, old_i = draft.explicit.turns, draft.implicit.turns
    got = [(str(x.get("id")), str(x.get("label"))) for x in items]
    want = [(t.turn_id, t.label) for t in old_e]
    if got != want:
        n = min(len(got), len(want))
        k = next((k for k in range(n) if got[k] != want[k]), n)
        first = (f"turn {k} is {got[k]}, expected {want[k]}" if k < n
                 else f"{'missing' if len(got) < len(want) else 'extra'} turn {k}")
        raise Rejected("turns", f"expected {len(want)} turns ({want[0][0]} to {want[-1][0]}, the ids and labels "
                                f"of the draft), got {len(got)}: {first}")
    new_e, new_i = [], []
    for j, (item, te, tm) in enumerate(zip(items, old_e, old_i, strict=True)):
        where = f"turn {te.turn_id}"
        if j in draft.two_versions:
            e, i = _text(item, "explicit", where), _text(item, "implicit", where)
        elif "text" in item:
            e = i = _text(item, "text", where)
        else:
            e, i = _text(item, "explicit", where), _text(item, "implicit", where)
            if e != i:
                raise Rejected("pair", f"{where} must read the same in both versions (only "
                                       f"{[old_e[k].turn_id for k in draft.two_versions]} differ)")
        new_e.append(dataclasses.replace(te, text=e))
        new_i.append(dataclasses.replace(tm, text=i))
    return (dataclasses.replace(draft.explicit, turns=new_e), dataclasses.replace(draft.implicit, turns=new_i))


# --- the request ----------------------------------------------------------------------------------------------

_PROMPT = """\
Rewrite the dialogue of one short scene so that it sounds like real people talking. The scene is read aloud by \
text-to-speech in a benchmark that tests whether a voice assistant called {name}, listening in the room, can tell \
a request meant for it from people talking to each other. A program composed the draft below from phrase lists \
and computed its facts. Your job is the wording; everything else stays as it is.

## The scene
Place: {setting}
What they are doing: {activity}
The people: {people} ({relationship})
Tone: {register}
Other voice devices in the room: {device_context}{device_note}
The request (T) asks: {question}

## The turns
Each turn: id, speaker -> who it is said to, [label], then its draft. Keep every turn in this order, with the same \
speaker, the same listener and the same label.
{turns}

## What the labels mean
N1: someone mentions {name} to the others: talks about it, never to it, never asks it anything.
N2: said to the listener after the arrow{device_label}.
N3: said to nobody in particular: thinking aloud, a remark to the room.
N4Q: a question put to {name} by name; it has nothing to do with the request.
N4R: a person answers that question or waves it off, so {name} need not answer.
T: the request to the assistant. It asks exactly what the draft T asks.

## Two versions
The scene exists twice, "explicit" and "implicit", which differ only in the turns marked with two versions \
({two_versions}). In the explicit T the speaker addresses {name} by name. The implicit T contains neither the \
name {name} nor the name of anyone present, and it is not the explicit T with the name taken out: {cue}

## Rules
1. A turn marked "must say:" says exactly those numbers, as digits, and days, with the words that tell what they \
count ("30 minutes", "4 days earlier", "$12"). No other turn says a number, in digits or in words (two, ten, \
dozen, half past), a day of the week or a month.
2. The letters "{lname}" appear only as the name {name}, and only in N1, N4Q, N4R and the explicit T; every N1 and \
N4Q says "{name}". Avoid words that hide those letters (vegetarian, librarian, variable). Never say "assistant".
3. Name only the people listed; nobody says their own name.
4. At most {max_words} words a turn, at most three sentences: plain spoken English, no stage directions, no \
speaker names in front of lines, no quotation marks, no emoji.
5. The facts are said before T, the turn before T raises the question with the T speaker, and nobody says the \
answer: T's question must follow from what was said.
6. One conversation that fits the place, the activity, the people and the tone; a question to a person gets an \
answer or is put off.

Answer with one JSON object and nothing else, in this shape:
{{"turns": [{{"id": "t00", "label": "N3", "text": "..."}}, {{"id": "{t_id}", "label": "T", "explicit": "...", \
"implicit": "..."}}, ...]}}
A turn with two versions has "explicit" and "implicit"; every other turn has one "text"."""

_RETRY = """

## Your previous answer was rejected
Rule broken: {rule}: {detail}
Write the whole scene again from the draft and keep to every rule (attempt {attempt} of {attempts})."""

_CUES: dict[str | None, str] = {
    "role": "it speaks to the assistant by what it is or where it sits (\"you on the counter\", \"speaker\"), "
            "as the implicit draft does.",
    "earlier": "it follows on from the earlier exchange with the assistant (the N4Q question before T), plainly "
               "said to the same listener.",
    "nobody": "the implicit version of the turn before T says that none of the people can answer, and T then "
              "turns to the assistant with an unnamed \"you\".",
    "second_person": "the implicit version of the turn before T points at the device in the room, and T is then "
                     "an unnamed \"you\" request to it.",
    None: "T makes clear from what was said before it that it is meant for the assistant, as the implicit draft "
          "does.",
}


def _turn_lines(draft: Draft) -> str:
    out = []
    for j, (te, tm) in enumerate(zip(draft.explicit.turns, draft.implicit.turns, strict=True)):
        to = te.addressee or "nobody"
        head = f"{te.turn_id}  {te.speaker} -> {to}  [{te.label}]"
        facts = _DIGITS.findall(te.text) + _WEEKDAY.findall(te.text)
        if facts or j == draft.explicit.t_index:
            head += "  must say: " + (", ".join(facts) if facts else "no number")
        if j in draft.two_versions:
            out += [head + "  (two versions)", f"    explicit draft: {te.text}", f"    implicit draft: {tm.text}"]
        else:
            out += [head, f"    draft: {te.text}"]
    return "\n".join(out)


def prompt(draft: Draft, attempt: int = 1, attempts: int = 1, rejected: Rejected | None = None) -> str:
    """The request for `draft`; from the second attempt on it names the rule the previous answer broke."""
    s = draft.explicit
    a = s.attributes
    device_note = f" (its name is {draft.device})" if draft.device else ""
    text = _PROMPT.format(
        name=ASSISTANT_NAME, lname=ASSISTANT_NAME.lower(), setting=a["setting"], activity=a["activity"],
        people=", ".join(sp.name for sp in s.speakers), relationship=a["relationship"], register=a["register"],
        device_context=a["device_context"], device_note=device_note, question=s.question, turns=_turn_lines(draft),
        device_label=(f"; said to {draft.device}, it is a command to that device and says its name"
                      if draft.device else ""),
        two_versions=", ".join(s.turns[j].turn_id for j in draft.two_versions), cue=_CUES[draft.cue],
        max_words=MAX_WORDS, t_id=s.turns[s.t_index].turn_id)
    if rejected is not None:
        text += _RETRY.format(rule=rejected.rule, detail=rejected.detail, attempt=attempt, attempts=attempts)
    return text


# --- the LLM writer -----------------------------------------------------------------------------------------------

class OpenAIWriter(ChatWriter):
    """Rewrites each pair through an OpenAI-compatible chat endpoint; see the module docstring."""

    unit, kept, prompt_version = "pair", "template", WRITER_PROMPT_VERSION

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 cache_dir: Path | str | None = None, timeout_s: float = 120.0, attempts: int = 3,
                 temperature: float = 0.7, max_tokens: int | None = None, on_failure: str = "fail",
                 concurrency: int = 4, json_mode: bool = False, http_attempts: int = 3) -> None:
        if concurrency < 1:
            raise UsageError(f"--writer-arg concurrency must be >= 1, got {concurrency}")
        super().__init__(base_url, model, api_key_env=api_key_env, cache_dir=cache_dir, timeout_s=timeout_s,
                         attempts=attempts, temperature=temperature, max_tokens=max_tokens, on_failure=on_failure,
                         json_mode=json_mode, http_attempts=http_attempts)
        self.concurrency = concurrency

    def ask(self, draft: Draft, attempt: int, rejected: Rejected | None) -> str:
        return self.complete(prompt(draft, attempt, self.attempts, rejected), draft.explicit.seed + attempt)

    def write_pair(self, explicit: Script, implicit: Script) -> tuple[Script, Script]:
        draft = Draft.of(explicit, implicit)

        def accept(content: str) -> tuple[Script, Script]:
            pair = parse_rewrite(content, draft)
            check_rewrite(draft, *pair)
            return pair

        pair = self.rewrite(draft.pair_id, lambda attempt, rejected: self.ask(draft, attempt, rejected), accept)
        return (explicit, implicit) if pair is None else pair


# --- registry and the build's entry point ----------------------------------------------------------------------

_REGISTRY = LazyRegistry("writer", {
    "template": "dataset_builder.mpe.writer:TemplateWriter",
    "openai": "dataset_builder.mpe.writer:OpenAIWriter",
}, option="--writer", arg_option="--writer-arg")
DEFAULT_WRITER = "template"


def writer_names() -> list[str]:
    return _REGISTRY.names()


def get_writer(name: str = DEFAULT_WRITER, **kwargs: Any) -> Writer:
    return _REGISTRY.load(name, **kwargs)


def write_scenes(writer: Writer, scripts: Sequence[Script], *, progress: bool = False) -> list[Script]:
    """`scripts` (explicit then implicit script of each pair, as `generate_scripts` returns them) with their
    texts written by `writer`, in the same order. A writer with a `concurrency` attribute gets that many pairs
    in flight at once; the first pair that fails stops the rest."""
    pairs = [(scripts[k], scripts[k + 1]) for k in range(0, len(scripts) - 1, 2)]
    if len(scripts) % 2 or any(e.pair_id != i.pair_id for e, i in pairs):
        raise ValueError("write_scenes takes the explicit and implicit script of each pair, in pair order")
    if isinstance(writer, TemplateWriter):
        return list(scripts)
    bar = Progress(f"write scenes ({writer.name})", len(pairs), enabled=progress)
    stop = threading.Event()
    failures: list[tuple[int, Exception]] = []

    def write(k: int) -> tuple[Script, Script] | None:
        if stop.is_set():
            return None  # an earlier pair failed: ask nothing more
        try:
            return writer.write_pair(*pairs[k])
        except Exception as err:
            failures.append((k, err))
            stop.set()
            raise

    out: list[Script] = []
    pool = ThreadPoolExecutor(max_workers=max(1, int(getattr(writer, "concurrency", 1))))
    try:
        for pair in pool.map(write, range(len(pairs))):  # results in pair order
            if pair is None:
                break
            out.extend(pair)
            bar.advance(note=pair[0].pair_id)
    except Exception:
        if not failures:  # not a pair's failure: this loop's own
            raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if failures:
        raise min(failures, key=lambda f: f[0])[1]  # the first pair (in order) of those that failed
    return out


def writer_for_build(options: BuildOptions) -> Writer:
    """The writer `--writer`/`--writer-arg` chose. The openai writer caches its answers next to the TTS clips
    unless told where (`cache_dir`), and not at all with `--no-cache`."""
    args = dict(options.writer_args)
    if options.writer == "openai" and "cache_dir" not in args and options.cache_dir is not None:
        args["cache_dir"] = default_cache_dir()
    return get_writer(options.writer, **args)


def card_record(writer: Writer) -> dict[str, Any]:
    """What the dataset card records of the writer: who wrote the text and how many pairs fell back to the
    template; no request or cache counts, which differ between two builds of the same folder."""
    summary = writer.summary()
    return {k: v for k, v in summary.items() if k not in ("requests", "cache_hits", "rejected_attempts")}


def compose_scripts(n_pairs: int, options: BuildOptions, voices: list[str]) -> tuple[list[Script], Writer]:
    """The build's scripts: composed by the generator, then written by the chosen writer."""
    from dataset_builder.mpe.generator import generate_scripts

    writer = writer_for_build(options)
    scripts = write_scenes(writer, generate_scripts(n_pairs, options.seed, voices), progress=options.progress)
    if writer.name != TemplateWriter.name:
        log.info("writer %s: %s", writer.name, json.dumps(writer.summary(), sort_keys=True))
    return scripts, writer
