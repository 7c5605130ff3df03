"""The Duplex-MPE phrase banks (`phrases/`, format in `phrases/README.md`): loaded, validated, ready to compose.

Loading collects every rule broken in every file before failing, so an author fixes a file in one pass:
`python -m dataset_builder.mpe.phrasebank check` prints them, one `file:line: rule: text` per problem, with the
block counts per file against the sizes the README asks for.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dataset_builder.diagnostics import split_sentences, words
from dataset_builder.mpe.attributes import ACTIVITIES, DEVICE_COMMAND_KINDS, REGISTERS, RELATIONSHIPS, SETTINGS
from dataset_builder.schema import ASSISTANT_NAME

PHRASES_DIR = Path(__file__).with_name("phrases")
STYLES = ("casual", "formal", "any")
ROLES = ("A", "B", "C")

# Smallest bank the README asks for, per kind of file (blocks; lines for dismiss; entries for openers/devices).
MIN_SIZE = {"activities": 80, "settings": 30, "relationships": 30, "registers": 40, "mentions": 250, "n4": 35,
            "dismiss": 40, "openers": 20, "devices": 18}
MAX_WORDS, MIN_LINE_WORDS, MIN_SENTENCE_WORDS, MAX_SENTENCES = 30, 4, 3, 2

_LINE = re.compile(r"^([A-Z])>([A-Z]|-):\s*(.+)$")
_SECTION = re.compile(r"^==\s*(\w+)\s*$")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
NUMBER_WORDS = re.compile(
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen"
    r"|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundreds?|thousands?|millions?"
    r"|dozens?|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|twelfth|o'clock|half past|quarter past"
    r"|quarter to)\b", re.IGNORECASE)
# Case-sensitive: "May I" and "march" are ordinary words.
CALENDAR_WORDS = re.compile(r"\b(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|January|February|March"
                       r"|April|June|July|August|September|October|November|December)\b")
NAME_WORD = re.compile(rf"\b{ASSISTANT_NAME}(?:'s)?\b")
NAME_ANYWHERE = re.compile(ASSISTANT_NAME, re.IGNORECASE)
# Addressing or asking Aria inside a mention: "Aria, ...", "Hey Aria ...", "..., Aria?" and "ask Aria".
_ADDRESSED = re.compile(rf"(?:^|[.!?]\s+)(?:hey\s+|ok\s+|okay\s+)?{ASSISTANT_NAME}\s*[,!?]"
                        rf"|,\s*{ASSISTANT_NAME}\s*[.!?]*$|\bask\s+{ASSISTANT_NAME}\b", re.IGNORECASE)


def slug(value: str) -> str:
    """The file name of an attribute value: lowercase, each run of non-letters one underscore."""
    return re.sub(r"[^a-z]+", "_", value.lower()).strip("_")


@dataclass(frozen=True)
class Line:
    speaker: str  # a role: "A", "B" or "C"
    addressee: str | None  # a role, or None for nobody
    text: str  # may hold {A}/{B}/{C}: other people's names
    where: str  # "file:line", for error messages and audits

    @property
    def mentions_name(self) -> bool:
        return bool(NAME_WORD.search(self.text))

    @property
    def asks_person(self) -> bool:
        return self.addressee is not None and "?" in self.text


@dataclass(frozen=True)
class Block:
    style: str  # "casual", "formal" or "any"
    lines: tuple[Line, ...]
    # (role, part) pairs from an "@ A=parent B=child" line: a person keeps one part through a scene.
    parts: tuple[tuple[str, str], ...] = ()

    @property
    def roles(self) -> list[str]:
        used = {ln.speaker for ln in self.lines} | {ln.addressee for ln in self.lines if ln.addressee}
        used |= {r for ln in self.lines for r in _PLACEHOLDER.findall(ln.text)}
        return sorted(used)

    def fits(self, style: str) -> bool:
        return self.style in ("any", style)

    def prefix_ok(self, n: int) -> bool:
        """Whether the first `n` lines stand on their own: every question to a person in them is answered in
        them (a reply may be cut, a question left hanging may not)."""
        kept = self.lines[:n]
        return all(not ln.asks_person or any(later.speaker == ln.addressee and later.addressee == ln.speaker
                                             for later in kept[i + 1:]) for i, ln in enumerate(kept))

    def cut(self, n: int) -> Block:
        return Block(self.style, self.lines[:n], self.parts)


@dataclass(frozen=True)
class N4Item:
    question: str  # lowercase, no "Aria", no question mark: the composer adds both
    other: tuple[str, ...]  # another person answers the asker
    own: tuple[str, ...]  # the asker remembers
    where: str


@dataclass(frozen=True)
class StyledLine:
    style: str
    text: str
    where: str


@dataclass
class PhraseBank:
    activities: dict[str, list[Block]] = field(default_factory=dict)
    settings: dict[str, list[Block]] = field(default_factory=dict)
    relationships: dict[str, list[Block]] = field(default_factory=dict)
    registers: dict[str, list[Block]] = field(default_factory=dict)
    openers: dict[str, list[str]] = field(default_factory=dict)
    mentions: list[Block] = field(default_factory=list)
    n4: dict[str, list[N4Item]] = field(default_factory=dict)
    dismiss: list[StyledLine] = field(default_factory=list)
    devices: dict[str, list[str]] = field(default_factory=dict)


class PhraseBankError(ValueError):
    """One or more phrase-bank rules broken; the message lists every problem as `file:line: rule: text`."""

    def __init__(self, problems: list[str]) -> None:
        head = f"{len(problems)} problem(s) in the phrase banks ({PHRASES_DIR}):"
        super().__init__("\n".join([head, *problems]))
        self.problems = problems


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, where: str, rule: str, text: str) -> None:
        self.problems.append(f"{where}: {rule}: {text}")

    def text(self, where: str, text: str, *, mentions_allowed: bool, min_words: int = MIN_LINE_WORDS,
             whole: bool = True, may_address: bool = False) -> None:
        """The rules every spoken line obeys (README rules 3-5); `whole=False` for a fragment (an opener, a
        command) that only ever appears inside a longer sentence."""
        if re.search(r"\d", text):
            self.fail(where, "digits", text)
        if m := NUMBER_WORDS.search(text):
            self.fail(where, f"number word {m.group(0)!r}", text)
        if m := CALENDAR_WORDS.search(text):
            self.fail(where, f"day or month {m.group(0)!r}", text)
        if re.search(r"\bassistant", text, re.IGNORECASE):
            self.fail(where, "the word 'assistant'", text)
        hidden = len(NAME_ANYWHERE.findall(text)) - len(NAME_WORD.findall(text))
        if hidden:
            self.fail(where, f"letters '{ASSISTANT_NAME.lower()}' inside another word", text)
        if NAME_WORD.search(text) and not mentions_allowed:
            self.fail(where, f"{ASSISTANT_NAME} outside mentions.txt", text)
        if NAME_WORD.search(text) and _ADDRESSED.search(text) and not may_address:
            self.fail(where, f"addresses or asks {ASSISTANT_NAME} (a mention only talks about it)", text)
        n_words = len(words(_PLACEHOLDER.sub("Sam", text)))
        if n_words < min_words:
            self.fail(where, f"fewer than {min_words} words", text)
        if n_words > MAX_WORDS:
            self.fail(where, f"more than {MAX_WORDS} words", text)
        sentences = split_sentences(text) if whole else []
        if len(sentences) > MAX_SENTENCES:
            self.fail(where, f"more than {MAX_SENTENCES} sentences", text)
        for s in sentences:
            if len(words(s)) < MIN_SENTENCE_WORDS:
                self.fail(where, f"sentence {s!r} shorter than {MIN_SENTENCE_WORDS} words", text)
        for name in _PLACEHOLDER.findall(text):
            if name not in ROLES:
                self.fail(where, f"unknown placeholder {{{name}}}", text)

    def block(self, block: Block, *, mentions: bool) -> None:
        lines = block.lines
        first = lines[0].where
        if len(lines) > 4:
            self.fail(first, "a block has more than 4 lines", lines[0].text)
        for i, ln in enumerate(lines):
            self.text(ln.where, ln.text, mentions_allowed=mentions)
            if ln.speaker not in ROLES or (ln.addressee is not None and ln.addressee not in ROLES):
                self.fail(ln.where, f"roles are {ROLES} (addressee also '-')", ln.text)
            if ln.addressee == ln.speaker:
                self.fail(ln.where, "a line addressed to its own speaker", ln.text)
            if ln.speaker in _PLACEHOLDER.findall(ln.text):
                self.fail(ln.where, "a speaker names themselves", ln.text)
            if i and ln.speaker == lines[i - 1].speaker:
                self.fail(ln.where, "same speaker twice in a row", ln.text)
            if ln.asks_person and not any(
                    later.speaker == ln.addressee and later.addressee == ln.speaker for later in lines[i + 1:]):
                self.fail(ln.where, "question to a person with no answer or deferral from them in the block",
                          ln.text)
        if mentions and not lines[0].mentions_name:
            self.fail(first, f"a mention block's first line names {ASSISTANT_NAME}", lines[0].text)
        if "A" not in block.roles:
            self.fail(first, "a block uses role A", lines[0].text)


def _sections(path: Path, check: _Checker) -> list[tuple[str, list[tuple[int, str]]]]:
    """(style, [(line number, text)]) per blank-line separated block, comments dropped."""
    style, blocks, current = "any", [], []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if line.startswith("#"):
            continue
        if not line:
            if current:
                blocks.append((style, current))
                current = []
            continue
        if m := _SECTION.match(line):
            if current:
                blocks.append((style, current))
                current = []
            style = m.group(1)
            if style not in STYLES:
                check.fail(f"{path.name}:{number}", f"style must be one of {STYLES}", line)
            continue
        current.append((number, line))
    if current:
        blocks.append((style, current))
    return blocks


def _rel(path: Path) -> str:
    return str(path.relative_to(PHRASES_DIR)) if path.is_relative_to(PHRASES_DIR) else str(path)


def load_exchanges(path: Path, check: _Checker, *, mentions: bool = False) -> list[Block]:
    out = []
    seen: dict[str, str] = {}
    for style, rows in _sections(path, check):
        lines: list[Line] = []
        parts: dict[str, str] = {}
        for number, text in rows:
            where = f"{_rel(path)}:{number}"
            if text.startswith("@"):
                for item in text[1:].split():
                    role, _, part = item.partition("=")
                    if role not in ROLES or not re.fullmatch(r"[a-z]+", part):
                        check.fail(where, "expected '@ ROLE=part ...' (a role A/B/C, a lowercase part)", text)
                    parts[role] = part
                continue
            m = _LINE.match(text)
            if not m:
                check.fail(where, "expected 'SPEAKER>ADDRESSEE: text'", text)
                continue
            speaker, to, said = m.groups()
            lines.append(Line(speaker, None if to == "-" else to, said.strip(), where))
            if said.strip() in seen:
                check.fail(where, f"repeats {seen[said.strip()]}", said)
            seen.setdefault(said.strip(), where)
        if lines:
            block = Block(style, tuple(lines), tuple(sorted(parts.items())))
            check.block(block, mentions=mentions)
            out.append(block)
    return out


def load_n4(path: Path, check: _Checker) -> list[N4Item]:
    items: list[N4Item] = []
    for _style, rows in _sections(path, check):
        where = f"{_rel(path)}:{rows[0][0]}"
        question, other, own = "", [], []
        for number, text in rows:
            key, _, value = text.partition(":")
            value, at = value.strip(), f"{_rel(path)}:{number}"
            if key == "Q" and not question:
                question = value
                check.text(at, value, mentions_allowed=False, min_words=MIN_SENTENCE_WORDS)
                if value.endswith("?") or value[:1] != value[:1].lower():
                    check.fail(at, "Q: starts lowercase and has no question mark", value)
            elif key in ("other", "self"):
                check.text(at, value, mentions_allowed=True, may_address=True)
                (other if key == "other" else own).append(value)
            else:
                check.fail(at, "expected 'Q:' once, then 'other:' and 'self:' lines", text)
        if not (question and other and own):
            check.fail(where, "an N4 block has a Q:, an other: and a self: line", rows[0][1])
            continue
        items.append(N4Item(question, tuple(other), tuple(own), where))
    return items


def load_dismiss(path: Path, check: _Checker) -> list[StyledLine]:
    out = []
    for style, rows in _sections(path, check):
        for number, text in rows:
            m = _LINE.match(text)
            said, where = (m.group(3) if m else text).strip(), f"{_rel(path)}:{number}"
            check.text(where, said, mentions_allowed=True, may_address=True)
            if not NAME_WORD.search(said):
                check.fail(where, f"a dismissal names {ASSISTANT_NAME}", said)
            out.append(StyledLine(style, said, where))
    return out


def _yaml(path: Path, check: _Checker) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        check.fail(_rel(path), "not valid YAML", str(err).splitlines()[0])
        return {}
    if not isinstance(data, dict):
        check.fail(_rel(path), "expected a mapping at the top", type(data).__name__)
        return {}
    return data


def _string_list(value: object, where: str, check: _Checker) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        check.fail(where, "expected a list of non-empty strings", repr(value)[:80])
        return []
    return [v.strip() for v in value]


def _per_value(kind: str, values: list[str], check: _Checker, **kwargs: bool) -> dict[str, list[Block]]:
    out = {}
    for value in values:
        path = PHRASES_DIR / kind / f"{slug(value)}.txt"
        if not path.exists():
            check.fail(f"{kind}/{path.name}", "missing file", value)
            continue
        out[value] = load_exchanges(path, check, **kwargs)
    return out


def load_bank_unchecked() -> tuple[PhraseBank, list[str]]:
    """Every file read; the bank and the list of problems (empty when it is valid)."""
    check = _Checker()
    bank = PhraseBank(
        activities=_per_value("activities", list(ACTIVITIES), check),
        settings=_per_value("settings", list(SETTINGS), check),
        relationships=_per_value("relationships", list(RELATIONSHIPS), check),
        registers=_per_value("registers", list(REGISTERS), check),
    )
    mentions = PHRASES_DIR / "mentions.txt"
    if mentions.exists():
        bank.mentions = load_exchanges(mentions, check, mentions=True)
    else:
        check.fail("mentions.txt", "missing file", "")
    for activity in ACTIVITIES:
        path = PHRASES_DIR / "n4" / f"{slug(activity)}.txt"
        if path.exists():
            bank.n4[activity] = load_n4(path, check)
        else:
            check.fail(_rel(path), "missing file", activity)
    dismiss = PHRASES_DIR / "n4" / "dismiss.txt"
    if dismiss.exists():
        bank.dismiss = load_dismiss(dismiss, check)
    else:
        check.fail("n4/dismiss.txt", "missing file", "")
    registers = PHRASES_DIR / "registers.yaml"
    data = _yaml(registers, check) if registers.exists() else {}
    for register in REGISTERS:
        entry = data.get(register)
        where = f"registers.yaml:{register}"
        openers = _string_list(entry.get("openers") if isinstance(entry, dict) else None, where, check)
        for opener in openers:
            if not opener.endswith(","):
                check.fail(where, "an opener ends with a comma", opener)
            check.text(where, opener, mentions_allowed=False, min_words=1, whole=False)
        bank.openers[register] = openers
    # The composer puts openers before lines: a line that already starts with one would get two.
    starts = {o.rstrip(",").lower() for openers in bank.openers.values() for o in openers}
    for blocks in [*bank.activities.values(), *bank.settings.values(), *bank.relationships.values(),
                   *bank.registers.values(), bank.mentions]:
        for ln in (ln for b in blocks for ln in b.lines):
            lead = ln.text.split(",", 1)[0].lower()
            if "," in ln.text and lead in starts:
                check.fail(ln.where, f"starts with the opener {lead!r}, which the composer adds itself", ln.text)
    devices = PHRASES_DIR / "devices.yaml"
    data = _yaml(devices, check) if devices.exists() else {}
    for kind in DEVICE_COMMAND_KINDS:
        where = f"devices.yaml:{kind}"
        commands = _string_list(data.get(kind), where, check)
        for command in commands:
            check.text(where, command, mentions_allowed=False, min_words=2, whole=False)
            if command[:1] != command[:1].lower() or command[-1:] in ".!?,":
                check.fail(where, "a command starts lowercase and has no final punctuation", command)
        bank.devices[kind] = commands
    return bank, check.problems


def size_report(bank: PhraseBank) -> list[tuple[str, int, int]]:
    """(file, size, minimum) for every bank file."""
    rows = []
    for kind in ("activities", "settings", "relationships", "registers"):
        for value, blocks in getattr(bank, kind).items():
            rows.append((f"{kind}/{slug(value)}.txt", len(blocks), MIN_SIZE[kind]))
    rows.append(("mentions.txt", len(bank.mentions), MIN_SIZE["mentions"]))
    rows += [(f"n4/{slug(a)}.txt", len(items), MIN_SIZE["n4"]) for a, items in bank.n4.items()]
    rows.append(("n4/dismiss.txt", len(bank.dismiss), MIN_SIZE["dismiss"]))
    rows += [(f"registers.yaml:{r}", len(o), MIN_SIZE["openers"]) for r, o in bank.openers.items()]
    rows += [(f"devices.yaml:{k}", len(c), MIN_SIZE["devices"]) for k, c in bank.devices.items()]
    return rows


@functools.cache
def load_bank() -> PhraseBank:
    """The validated phrase bank (read once per process); PhraseBankError lists every problem."""
    bank, problems = load_bank_unchecked()
    problems += [f"{name}: size: {n} < {least}" for name, n, least in size_report(bank) if n < least]
    if problems:
        raise PhraseBankError(problems)
    return bank


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["check"]:
        print("usage: python -m dataset_builder.mpe.phrasebank check", file=sys.stderr)
        return 2
    bank, problems = load_bank_unchecked()
    for name, n, least in size_report(bank):
        print(f"{'ok ' if n >= least else 'LOW'} {n:5d} / {least:<4d} {name}")
    for problem in problems:
        print(problem)
    short = sum(n < least for _, n, least in size_report(bank))
    print(f"{len(problems)} problem(s), {short} file(s) below size")
    return 1 if problems or short else 0


if __name__ == "__main__":
    raise SystemExit(main())
