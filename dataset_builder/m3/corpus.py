"""The authored M3 chat corpus (`texts/{lang}/chat/corpus/NNN-NNN.txt`, format in `texts/README.md` "Chat corpus"):
read into `Dialogue` records and checked.

Every conversation was written whole, with its events marked where they happen by meaning: `{pause}` (the user
stops and goes on: a PAUSE), `{bc: word}` (the other speaker's backchannel right after those words), `{cut}` and a
following `U> {why: reason} ...` line (the user barging in on the system). The reader turns each line into the
utterances the timeline places (`Dialogue`, `DialogueUtterance`): a `{pause}` splits a user line into two TURNs
(relation `pause`), a `{bc:}` becomes a `bc` utterance of the listener with the mark's place in its host
(`bc_at_chars`), `{cut}` the system turn's `cut_after_chars`, the `why` of a barge-in kept in the record (not
spoken). The timings themselves still come from the statistics (`timeline.py`).

`read_corpus(language)` returns the conversations and every problem found (`file:line: rule: text`);
`corpus_dialogues` raises `CorpusError` naming the first error, so a build never runs on a broken corpus. The
checks (`conversation_problems`): the header, speakers alternating, sizes, PAUSE only where the speaker is
unfinished (`speech_forms.unfinished`), backchannels never in or right after a question and fitting what they
answer (`bc_functions.py`), barge-ins after enough of the system's turn and with a reason, Japanese register per
conversation and per speaker (`speech_forms.dialogue_problems`), no storyline twice.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataset_builder.diagnostics import words
from dataset_builder.m3.bankio import TEXTS_DIR, Problem, Problems, rel
from dataset_builder.m3.bc_functions import fit_problem
from dataset_builder.m3.dialogues import Dialogue, DialogueUtterance, dialogue_id, dialogue_seed
from dataset_builder.m3.language import LANGUAGES, Language, syllables
from dataset_builder.m3.speech_forms import bc_register, dialogue_problems, question_at, turn_register, unfinished

CORPUS_DIR = "chat/corpus"
MINI_FILE = "chat/mini.txt"  # one short conversation per language, for the mini preset
HEADERS = ("situation", "user", "system", "storyline")
REGISTERS = ("casual", "polite")
LINES = (14, 22)  # lines per conversation (U and S)
MINI_LINES = (6, 22)
PAUSES = (2, 4)  # per conversation, in different user lines
USER_BCS = (3, 6)  # {bc:} marks in system lines
SYSTEM_BCS = (0, 2)  # {bc:} marks in user lines
BARGE_INS = (1, 2)
FIRST_BARGE_LINE = 3  # never in the first 3 lines
# Sizes in Language.size units (English words, Japanese morae; the format says characters, a mora is close).
CUT_MIN = {"en": 8, "ja": 15}  # of the system line before {cut}
AFTER_BC_MIN = {"en": 4, "ja": 8}  # of the line after a {bc:}
PAUSE_SIDE_MIN = {"en": 3, "ja": 6}  # each side of a {pause} (Language.half_min)
LINE_MAX = {"en": 60, "ja": 120}
# The shortest line: a TURN must last over 0.8 s (the build speaks a short one slower, up to twice as slow: build.py
# SLOWER), so English three words or four syllables ("What happened?"), Japanese six morae.
LINE_MIN = {"en": 3, "ja": 6}
EN_MIN_SYLLABLES = 4

_ID = re.compile(r"^##\s+((en|ja)-chat-(\d{3}))\s*$")
_LINE = re.compile(r"^(U>|U:|S:|U：|S：)\s*(.*)$")
_MARK = re.compile(r"\{\s*(pause|cut|bc|why)\s*(?::\s*([^{}]*?))?\s*\}")
_RANGE = re.compile(r"^(\d{3})-(\d{3})\.txt$")


class CorpusError(ValueError):
    pass


@dataclass(frozen=True)
class CorpusLine:
    """One line as written: the spoken text (marks taken out) and where each mark was in it."""

    speaker: str  # "user" | "system"
    text: str
    pauses: tuple[int, ...]  # character positions in `text`
    bcs: tuple[tuple[int, str], ...]  # (character position, word)
    cut: int  # character position of {cut}, or -1
    barge_in: bool  # written `U>`
    why: str  # the barge-in's reason
    where: str  # "file:line"


@dataclass(frozen=True)
class Conversation:
    conv_id: str  # "en-chat-001"
    number: int
    language: str
    headers: dict[str, str]
    lines: tuple[CorpusLine, ...]
    where: str
    mini: bool = False

    @property
    def register(self) -> str:
        return self.headers.get("register", "")

    @property
    def storyline(self) -> str:
        return self.headers.get("storyline", "")

    def topics(self) -> tuple[str, ...]:
        """The storyline's topics, in order."""
        return tuple(t.strip() for t in re.split(r"\s*(?:->|→)\s*", self.storyline) if t.strip())


# --- reading -----------------------------------------------------------------------------------------------------

def _clean(raw: str, lang: str, where: str, problems: Problems) -> tuple[str, list[tuple[str, str, int]]]:
    """The spoken text of a line and its marks as (kind, value, character position in that text)."""
    out, marks, at = "", [], 0
    for m in _MARK.finditer(raw):
        out += raw[at:m.start()]
        at = m.end()
        kind, value = m.group(1), (m.group(2) or "").strip()
        if kind == "bc" and not value:
            problems.fail(where, "{bc:} needs a word", raw)
        if kind in ("pause", "cut") and m.group(2) is not None:
            problems.fail(where, f"{{{kind}}} takes no value", raw)
        out = out.rstrip() if lang == "ja" else out
        marks.append((kind, value, len(out.rstrip()) if lang == "ja" else len(out)))
        if lang == "ja":
            rest = raw[at:]
            at += len(rest) - len(rest.lstrip())
    out += raw[at:]
    if re.search(r"[{}]", out):
        problems.fail(where, "unknown or broken mark (known: {pause}, {bc: word}, {cut}, {why: reason})", raw)
    if lang == "ja":
        return out.strip(), marks
    # English: one space where a mark sat between words; positions follow the collapsed text.
    text, pos_map, prev_space = "", [], False
    for ch in out:
        pos_map.append(len(text))
        if ch.isspace():
            if not prev_space and text:
                text += " "
            prev_space = True
        else:
            text += ch
            prev_space = False
    pos_map.append(len(text))
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    # A mark sits right after the words before it: "the winter of {cut} two" cuts after "of", not after its space.
    return text, [(k, v, len(text[:min(max(pos_map[p] - lead, 0), len(text))].rstrip())) for k, v, p in marks]


def parse_line(raw: str, lang: str, where: str, problems: Problems) -> CorpusLine | None:
    """One written line (`U: ...`, `S: ...`, `U> {why: ...} ...`) with its marks, or None (the problem recorded)."""
    m = _LINE.match(raw)
    if not m:
        problems.fail(where, "a line is 'U: text', 'S: text' or 'U> {why: reason} text'", raw)
        return None
    code, body = m.group(1)[:2].rstrip(":："), m.group(2)
    text, marks = _clean(body, lang, where, problems)
    speaker = "system" if code == "S" else "user"
    why = [v for k, v, _ in marks if k == "why"]
    pauses = tuple(p for k, _, p in marks if k == "pause")
    bcs = tuple((p, v) for k, v, p in marks if k == "bc")
    cuts = [p for k, _, p in marks if k == "cut"]
    if code == "U>" and not (why and why[0]):
        problems.fail(where, "a barge-in line 'U>' starts with {why: reason}", raw)
    if why and code != "U>":
        problems.fail(where, "{why:} belongs to a barge-in line 'U>'", raw)
    if len(cuts) > 1:
        problems.fail(where, "one {cut} per line", raw)
    return CorpusLine(speaker, text, pauses, bcs, cuts[0] if cuts else -1, code == "U>", why[0] if why else "",
                      where)


def parse_file(path: Path, lang: str, problems: Problems, *, mini: bool = False) -> list[Conversation]:
    """The conversations of one corpus file (errors recorded in `problems`)."""
    try:
        raw_lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        problems.fail(rel(path), "cannot read the file", str(err))
        return []
    out: list[Conversation] = []
    cur: dict | None = None

    def close() -> None:
        if cur is not None:
            out.append(Conversation(cur["id"], cur["number"], lang, cur["headers"], tuple(cur["lines"]),
                                    cur["where"], mini))

    for n, raw in enumerate(raw_lines, 1):
        where = f"{rel(path)}:{n}"
        line = raw.strip()
        if not line or (line.startswith("#") and not line.startswith("##")):
            continue
        if line.startswith("##"):
            close()
            m = _ID.match(line)
            if not m or m.group(2) != lang:
                problems.fail(where, f"a conversation starts '## {lang}-chat-NNN'", line)
                cur = None
                continue
            cur = {"id": m.group(1), "number": int(m.group(3)), "headers": {}, "lines": [], "where": where}
            continue
        if cur is None:
            problems.fail(where, "text before the first '## <id>'", line)
            continue
        head = re.match(r"^(situation|user|system|storyline|register)\s*:\s*(.*)$", line)
        if head and not cur["lines"]:
            cur["headers"][head.group(1)] = head.group(2).strip()
            continue
        parsed = parse_line(line, lang, where, problems)
        if parsed is not None:
            cur["lines"].append(parsed)
    close()
    return out


def corpus_files(lang: str, root: Path = TEXTS_DIR) -> list[Path]:
    return sorted((root / lang / CORPUS_DIR).glob("*.txt"))


def read_corpus(lang: str, root: Path = TEXTS_DIR) -> tuple[list[Conversation], Conversation | None, Problems]:
    """(the corpus's conversations in id order, the mini conversation, every problem)."""
    problems = Problems()
    convs: list[Conversation] = []
    for path in corpus_files(lang, root):
        got = parse_file(path, lang, problems)
        span = _RANGE.match(path.name)
        if not span:
            problems.fail(rel(path), "a corpus file is named NNN-NNN.txt")
        for c in got:
            if span and not int(span.group(1)) <= c.number <= int(span.group(2)):
                problems.fail(c.where, f"{c.conv_id} is outside the file's range {path.stem}")
        convs += got
    mini_path = root / lang / MINI_FILE
    minis = parse_file(mini_path, lang, problems, mini=True) if mini_path.is_file() else []
    seen: dict[str, str] = {}
    stories: dict[str, str] = {}
    for c in convs:
        if c.conv_id in seen:
            problems.fail(c.where, f"{c.conv_id} is written twice (first at {seen[c.conv_id]})")
        seen.setdefault(c.conv_id, c.where)
        key = " ".join(c.storyline.lower().split())
        if key and key in stories:
            problems.fail(c.where, f"storyline also told in {stories[key]}", c.storyline)
        stories.setdefault(key, c.conv_id)
    for c in [*convs, *minis]:
        for p in conversation_problems(c):
            problems.items.append(p)
    if len(minis) > 1:
        problems.fail(rel(mini_path), "the mini file holds one conversation")
    convs.sort(key=lambda c: c.number)
    return convs, (minis[0] if minis else None), problems


# --- checks ------------------------------------------------------------------------------------------------------

def _too_short(text: str, lang: Language) -> bool:
    if lang.code == "ja":
        return lang.size(text) < LINE_MIN["ja"]
    found = words(text)
    return len(found) < LINE_MIN["en"] and sum(syllables(w) for w in found) < EN_MIN_SYLLABLES


def _before(text: str, pos: int) -> str:
    """The words a mark follows, as an error message shows them: "...said yes^"."""
    return f"...{text[max(0, pos - 30):pos]}^"


def _conv_shape(c: Conversation, lang: Language, problems: Problems) -> None:
    lo, hi = MINI_LINES if c.mini else LINES
    if not lo <= len(c.lines) <= hi:
        problems.fail(c.where, f"{c.conv_id}: {len(c.lines)} lines; a conversation has {lo} to {hi}")
    for h in HEADERS + (("register",) if lang.code == "ja" else ()):
        if not c.headers.get(h):
            problems.fail(c.where, f"{c.conv_id}: header '{h}:' missing")
    if lang.code == "ja" and c.register and c.register not in REGISTERS:
        problems.fail(c.where, f"{c.conv_id}: register is one of {REGISTERS}", c.register)
    for a, b in zip(c.lines, c.lines[1:], strict=False):
        if a.speaker == b.speaker:
            problems.fail(b.where, "speakers alternate: a pause inside one turn is {pause}, not a new line", b.text)
    if c.lines and c.lines[-1].text.rstrip().endswith(("?", "？")):
        problems.fail(c.lines[-1].where, "the last line is not a question", c.lines[-1].text)


def _line_checks(c: Conversation, i: int, ln: CorpusLine, lang: Language, problems: Problems) -> None:
    code = lang.code
    size = lang.size(ln.text)
    if _too_short(ln.text, lang) or size > LINE_MAX[code]:
        problems.fail(ln.where, f"a line lasts over 0.8 s: at least {LINE_MIN[code]} and at most {LINE_MAX[code]} "
                      f"{lang.unit} ({size})", ln.text)
    if ln.pauses and ln.speaker != "user":
        problems.fail(ln.where, "{pause} only in user lines", ln.text)
    if len(ln.pauses) > 1:
        problems.fail(ln.where, "one {pause} per line (different user lines)", ln.text)
    for p in ln.pauses:
        first, rest = ln.text[:p], ln.text[p:]
        if min(lang.size(first), lang.size(rest)) < PAUSE_SIDE_MIN[code]:
            problems.fail(ln.where, f"both sides of a {{pause}} at least {PAUSE_SIDE_MIN[code]} {lang.unit}", ln.text)
        if not unfinished(first, code):
            problems.fail(ln.where, "PAUSE after a complete sentence or clause: the listener could take the turn "
                          f"there ({_before(ln.text, p)})", ln.text)
    last_bc = -1
    for p, word in ln.bcs:
        if problem := lang.bc_problem(word):
            problems.fail(ln.where, f"{{bc: {word}}}: {problem}", ln.text)
        if lang.size(ln.text[:p]) == 0:
            problems.fail(ln.where, "a backchannel never at the very start of a line", ln.text)
        if lang.size(ln.text[p:]) < AFTER_BC_MIN[code]:
            problems.fail(ln.where, f"the line goes on at least {AFTER_BC_MIN[code]} {lang.unit} after a {{bc:}}",
                          ln.text)
        if last_bc >= 0 and lang.size(ln.text[last_bc:p]) < 2:
            problems.fail(ln.where, "two backchannels in a row", ln.text)
        last_bc = p
        if question_at(ln.text, p, code):
            problems.fail(ln.where, f"{{bc: {word}}} in or right after a question, which is answered "
                          f"({_before(ln.text, p)})", ln.text)
        if ln.cut >= 0 and p > ln.cut:
            problems.fail(ln.where, "a {bc:} after the {cut} is never heard", ln.text)
        if why := fit_problem(word, ln.text[:p], code):
            problems.fail(ln.where, f"{why} ({_before(ln.text, p)})", ln.text)
        if code == "ja" and c.register and (reg := bc_register(word)) and reg != c.register:
            problems.fail(ln.where, f"{{bc: {word}}} is {reg} in a {c.register} conversation", ln.text)
    if ln.cut >= 0:
        if ln.speaker != "system":
            problems.fail(ln.where, "{cut} only in system lines", ln.text)
        if lang.size(ln.text[:ln.cut]) < CUT_MIN[code]:
            problems.fail(ln.where, f"{{cut}} after at least {CUT_MIN[code]} {lang.unit} of the line", ln.text)
        if lang.size(ln.text[ln.cut:]) < 2:
            problems.fail(ln.where, "the line goes on after {cut} (what the system would have said)", ln.text)
        nxt = c.lines[i + 1] if i + 1 < len(c.lines) else None
        if nxt is None or not nxt.barge_in:
            problems.fail(ln.where, "the line after a {cut} is the user's barge-in 'U> {why: ...}'", ln.text)
        if i < FIRST_BARGE_LINE:
            problems.fail(ln.where, f"no barge-in in the first {FIRST_BARGE_LINE} lines", ln.text)
    if ln.barge_in and (i == 0 or c.lines[i - 1].cut < 0):
        problems.fail(ln.where, "a barge-in line 'U>' follows a system line with {cut}", ln.text)


def _counts(c: Conversation, problems: Problems) -> None:
    def between(n: int, lo_hi: tuple[int, int], what: str) -> None:
        if not lo_hi[0] <= n <= lo_hi[1]:
            problems.fail(c.where, f"{c.conv_id}: {n} {what}; a conversation has {lo_hi[0]} to {lo_hi[1]}")

    between(sum(len(ln.pauses) for ln in c.lines), (1, PAUSES[1]) if c.mini else PAUSES, "{pause} marks")
    between(sum(len(ln.bcs) for ln in c.lines if ln.speaker == "system"), (1, USER_BCS[1]) if c.mini else USER_BCS,
            "{bc:} marks in S lines")
    between(sum(len(ln.bcs) for ln in c.lines if ln.speaker == "user"), SYSTEM_BCS, "{bc:} marks in U lines")
    between(sum(ln.barge_in for ln in c.lines), BARGE_INS, "barge-ins")


def conversation_problems(c: Conversation) -> list[Problem]:
    """Every rule `c` breaks (bankio.Problem items, `file:line: rule: text`)."""
    lang = LANGUAGES[c.language]
    problems = Problems()
    _conv_shape(c, lang, problems)
    for i, ln in enumerate(c.lines):
        _line_checks(c, i, ln, lang, problems)
    _counts(c, problems)
    if c.language == "ja" and not problems.errors:
        d = to_dialogue(c)
        where = {u.utt_id: ln for u, ln in _utt_lines(c, d)}
        for p in dialogue_problems(d.dialogue_id, "ja", d.utterances):
            if p.rule.startswith("doubled word"):
                continue  # a slot-fill rule: authored speech doubles on purpose ("平気平気", "give her a")
            ln = where[p.utt_id]
            problems.fail(ln.where, p.rule, p.text)
        for u in d.utterances:
            reg = bc_register(u.text) if u.kind == "bc" else turn_register(u.text)
            if reg in REGISTERS and c.register in REGISTERS and reg != c.register:
                problems.fail(where[u.utt_id].where, f"{reg} in a {c.register} conversation", u.text)
    return problems.items


# --- to dialogues ------------------------------------------------------------------------------------------------

def _utt_lines(c: Conversation, d: Dialogue) -> list[tuple[DialogueUtterance, CorpusLine]]:
    """Each utterance of `to_dialogue(c)` with the corpus line it came from."""
    out = []
    k = 0
    for ln in c.lines:
        n = 1 + len(ln.pauses) + len(ln.bcs)
        for u in d.utterances[k:k + n]:
            out.append((u, ln))
        k += n
    return out


def to_dialogue(c: Conversation, seed: int = 0) -> Dialogue:
    """The conversation as a `Dialogue`: one TURN per line (two around a `{pause}`), a `bc` utterance per
    `{bc:}` right after the TURN it falls in (`bc_at_chars`: where in that TURN), `{cut}` as `cut_after_chars`."""
    did = dialogue_id(c.language, "chat", c.number)
    utts: list[DialogueUtterance] = []
    topic = c.conv_id

    def add(**kw: Any) -> None:
        utts.append(DialogueUtterance(utt_id=f"{did}-u{len(utts):02d}", topic=topic, **kw))

    for i, ln in enumerate(c.lines):
        other = "system" if ln.speaker == "user" else "user"
        cuts = [0, *ln.pauses, len(ln.text)]
        for j in range(len(cuts) - 1):
            a, b = cuts[j], cuts[j + 1]
            raw = ln.text[a:b]
            lead = len(raw) - len(raw.lstrip())
            piece = raw.strip()
            if j > 0:
                rel_ = "pause"
            elif i == 0:
                rel_ = "first"
            else:
                rel_ = "barge_in" if ln.barge_in else "shift"
            cut = ln.cut - a - lead if ln.cut >= 0 and a <= ln.cut <= b else 0
            add(speaker=ln.speaker, kind="turn", text=piece, relation=rel_, cut_after_chars=max(cut, 0),
                why=ln.why if j == 0 else "")
            for p, word in ln.bcs:
                if a <= p < b or (p == b and j == len(cuts) - 2):
                    add(speaker=other, kind="bc", text=word, relation="bc",
                        bc_at_chars=max(1, min(p - a - lead, len(piece) - 1)))
    d = Dialogue(did, c.language, "chat", c.number, dialogue_seed(seed, c.language, "chat", c.number),
                 c.topics(), tuple(utts))
    d.validate()
    return d


@functools.cache
def _read(lang: str) -> tuple[tuple[Conversation, ...], Conversation | None, tuple[Problem, ...]]:
    convs, mini, problems = read_corpus(lang)
    return tuple(convs), mini, tuple(problems.errors)


def _raise(errors: Sequence[Problem], lang: str) -> None:
    if errors:
        more = f" (and {len(errors) - 1} more; `python -m dataset_builder.m3.texts check --lang {lang}`)" \
            if len(errors) > 1 else ""
        raise CorpusError(f"{errors[0]}{more}")


def corpus_dialogues(lang: str, n: int | None = None, seed: int = 0) -> list[Dialogue]:
    """The first `n` (all: None) conversations of the corpus as `Dialogue`s; raises CorpusError when the corpus
    breaks a rule anywhere (the mini file aside) or holds fewer than `n`."""
    convs, _, errors = _read(lang)
    _raise([p for p in errors if not p.where.startswith(f"{lang}/{MINI_FILE}")], lang)
    if n is not None and n > len(convs):
        raise CorpusError(f"texts/{lang}/{CORPUS_DIR} holds {len(convs)} conversations; {n} asked for")
    return [to_dialogue(c, seed) for c in convs[:n]]


def mini_dialogue(lang: str, seed: int = 0) -> Dialogue:
    """The mini preset's conversation (`texts/{lang}/chat/mini.txt`), checked; raises CorpusError."""
    _, mini, errors = _read(lang)
    _raise([p for p in errors if p.where.startswith(f"{lang}/{MINI_FILE}")], lang)
    if mini is None:
        raise CorpusError(f"texts/{lang}/{MINI_FILE} is missing")
    return to_dialogue(mini, seed)


# --- back to the written form ------------------------------------------------------------------------------------

TASK_WHY = {"en": "the answer has been said; the next question cannot wait",
            "ja": "答えはもう聞けたので、次の質問をすぐにしたい"}


def _bc_place(host: DialogueUtterance, bc: DialogueUtterance) -> int:
    """Where a backchannel's mark goes in its host's text: where it was written (`bc_at_chars`), else before the
    question it must not fall in (`bc_before_chars`), else after the host's first sentence or clause (a composed
    backchannel is placed by the statistics; the mark only says which turn it falls in)."""
    text = host.text
    if bc.bc_at_chars:
        return bc.bc_at_chars
    if bc.bc_before_chars:
        return len(text[:bc.bc_before_chars].rstrip())
    for pattern in (r"[.!?。！？](?=\s|$)", r"[,、]"):
        m = re.search(pattern, text)
        if m and m.end() < len(text) - 1:
            return m.end()
    return len(text)


def render(d: Dialogue) -> list[str]:
    """The dialogue in the corpus's written form (`U: ...`, `S: ...`, `U> {why: ...} ...`, with `{pause}`,
    `{bc: word}` and `{cut}` where they fall): what `to_dialogue` reads back into the same utterances."""
    lines: list[tuple[str, list[list]]] = []  # (head, pieces: [text, [(pos, mark)]])
    for u in d.utterances:
        if u.kind == "bc":
            host_piece = lines[-1][1][-1]
            host = next(x for x in reversed(d.utterances[:d.utterances.index(u)]) if x.kind == "turn")
            host_piece[1].append((_bc_place(host, u), f"{{bc: {u.text}}}"))
            continue
        spaced = d.language == "en" and u.text[u.cut_after_chars:u.cut_after_chars + 1] == " "
        marks: list[tuple[int, str]] = [(u.cut_after_chars, " {cut}" if spaced else "{cut}")] \
            if u.cut_after_chars else []
        if u.relation == "pause" and lines:
            lines[-1][1].append([u.text, marks])
            continue
        if u.relation == "barge_in":
            head = f"U> {{why: {u.why or TASK_WHY[d.language]}}}"
        else:
            head = "U:" if u.speaker == "user" else "S:"
        lines.append((head, [[u.text, marks]]))
    out = []
    for head, pieces in lines:
        said = []
        for text, marks in pieces:
            for pos, mark in sorted(marks, reverse=True):
                text = text[:pos] + mark + text[pos:]
            said.append(text)
        joiner = " {pause} " if d.language == "en" else "{pause}"
        out.append(f"{head} {joiner.join(said)}")
    return out
