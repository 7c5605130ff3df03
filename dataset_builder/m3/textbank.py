"""The M3 text banks (`texts/`, format in `texts/README.md`): loaded, validated, ready for the dialogue generator.

`load_bank()` reads every language that has a folder under `texts/` and the knowledge base, and raises
`TextBankError` listing every error (file, line, entry, rule); `load_bank_unchecked()` returns the bank and the
problems instead. `python -m dataset_builder.m3.texts check` prints them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from dataset_builder.m3.bankio import TEXTS_DIR, Problems, check_keys, read_yaml, rel, stripped, where
from dataset_builder.m3.knowledge import Knowledge, load_knowledge, said
from dataset_builder.m3.language import LANGUAGES, Language

SPEAKER_CODES = {"U": "user", "S": "system"}
PAUSE = "|"
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_LINE = re.compile(r"^\s*([US])\s*[:：]\s*(.*)$", re.DOTALL)
SECTIONS = ("opening", "middle", "closing")
ALTERNATIVES = ("interchangeable", "parallel")
MIN_MIDDLES = 2  # 2-4 middles are drawn without repeats
LANG_FILES = ("backchannels.yaml", "barge_in.yaml", "transitions.yaml", "task/relations.yaml")
RELATION_PARTS = ("ask_first", "ask_follow", "answer")
RELATION_EXTRAS = ("openers", "reactions", "also")
# Optional backchannel lists for one domain (a user acknowledging an answer says "mm-hm", not "no way").
BC_EXTRAS = ("user_task", "system_task", "user_chat", "system_chat")
# Placeholders each kind of text may hold (besides chat slots).
ALLOWED = {"ask_first": {"entity", "noun", "pronoun"}, "ask_follow": {"noun", "pronoun"},
           "answer": {"value", "entity", "noun", "pronoun"},
           "reactions": {"value"}, "openers": set(), "also": set(), "transitions": set(), "barge_in": set()}
FILLER = {"en": "Sam", "ja": "あれ"}  # what a placeholder counts as when a length is checked


@dataclass(frozen=True)
class BankLine:
    """One move of an exchange: a speaker and the alternative phrasings of what they say."""

    speaker: str  # "user" | "system"
    texts: tuple[str, ...]
    key: str  # stable id, for spreading the draws: "en/chat/pets.yaml:middle[3].1"
    where: str


@dataclass(frozen=True)
class Exchange:
    lines: tuple[BankLine, ...]
    key: str
    where: str

    @property
    def first_speaker(self) -> str:
        return self.lines[0].speaker

    @property
    def last_speaker(self) -> str:
        return self.lines[-1].speaker


@dataclass(frozen=True)
class ChatTopic:
    topic: str
    slots: dict[str, tuple[str, ...]]
    opening: tuple[Exchange, ...]
    middle: tuple[Exchange, ...]
    closing: tuple[Exchange, ...]
    where: str
    # "interchangeable" (the default): any phrasing of a line fits any phrasing of the next; "parallel": the i-th
    # phrasings of an exchange's lines belong together (the i-th reply answers the i-th question).
    alternatives: str = "interchangeable"
    # The speech style of the whole topic ("casual", "polite"; "" when a language's banks do not mark one): one
    # dialogue keeps to one register, as two people talking do.
    register: str = ""
    # premise -> section -> exchange indices: the exchanges that only make sense in that story ("back from a
    # trip" vs "planning one"). An opening gives its premise to the topic; then only middles and closings of that
    # premise or of none follow it. Exchanges under no premise fit any.
    premises: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)

    def premise_of(self, opening: int) -> str:
        return next((p for p, secs in self.premises.items() if opening in secs.get("opening", ())), "")

    def fits(self, section: str, index: int, premise: str) -> bool:
        """Whether exchange `index` of `section` may follow an opening of `premise` ("" = none)."""
        tagged = [p for p, secs in self.premises.items() if index in secs.get(section, ())]
        return not tagged or premise in tagged

    @property
    def threaded(self) -> bool:
        """Whether the topic is cut into stories (`premises:`), so that every exchange follows only an opening
        it continues (the loader rejects a threaded topic with an untagged exchange)."""
        return bool(self.premises)


@dataclass(frozen=True)
class RelationTexts:
    relation: str
    ask_first: tuple[str, ...]
    ask_follow: tuple[str, ...]
    answer: tuple[str, ...]


@dataclass(frozen=True)
class LanguageBank:
    language: str
    chat: dict[str, ChatTopic]
    backchannels: dict[str, tuple[str, ...]]  # "user" / "system", optionally "user_task" etc. (BC_EXTRAS)
    barge_in: tuple[str, ...]
    transitions: dict[str, tuple[str, ...]]  # "chat" / "task"
    relations: dict[str, RelationTexts]
    openers: tuple[str, ...]
    reactions: tuple[str, ...] = ()
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class TextBank:
    knowledge: Knowledge
    languages: dict[str, LanguageBank] = field(default_factory=dict)

    def language(self, code: str) -> LanguageBank:
        if code not in self.languages:
            raise TextBankError([f"no text bank for language {code!r} under {TEXTS_DIR}"])
        return self.languages[code]


class TextBankError(ValueError):
    """One or more bank rules broken; the message lists every error as `file:line: entry: rule: text`."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join([f"{len(problems)} problem(s) in the M3 text banks ({TEXTS_DIR}):", *problems]))
        self.problems = problems


# --- text rules ------------------------------------------------------------------------------------------------

class _Texts:
    """The rules every spoken text of one language obeys."""

    def __init__(self, lang: Language, problems: Problems) -> None:
        self.lang, self.problems = lang, problems

    def filled(self, text: str, values: dict[str, str] | None = None) -> str:
        """The text with each placeholder replaced by `values[name]` (the shortest real value), else a filler."""
        return PLACEHOLDER.sub(lambda m: (values or {}).get(m.group(1), FILLER[self.lang.code]), text)

    def placeholders(self, at: str, text: str, allowed: set[str], what: str = "placeholder") -> list[str]:
        names = PLACEHOLDER.findall(text)
        for name in names:
            if name not in allowed:
                self.problems.fail(at, f"unknown {what} {{{name}}}", text)
        if "{" in PLACEHOLDER.sub("", text) or "}" in PLACEHOLDER.sub("", text):
            self.problems.fail(at, "unbalanced brace", text)
        return names

    def turn(self, at: str, text: str, *, pause_ok: bool, values: dict[str, str] | None = None) -> None:
        """A TURN line: long enough to last over 0.8 s, not too long; at most one '|', both halves TURNs. Its
        placeholders count as `values` (the shortest ones it can say), else as one-word fillers."""
        lang = self.lang
        if not text.strip():
            self.problems.fail(at, "empty text", text)
            return
        n_pause = text.count(PAUSE)
        if n_pause and not pause_ok:
            self.problems.fail(at, "'|' only in user lines and questions", text)
        if n_pause > 1:
            self.problems.fail(at, "more than one '|' in a line", text)
        whole = self.filled(text.replace(PAUSE, " "), values)
        size = lang.size(whole)
        if size < lang.turn_min:
            self.problems.fail(at, f"turn too short to be a TURN ({size} < {lang.turn_min} {lang.unit})", text)
        if size > lang.turn_max:
            self.problems.fail(at, f"turn too long ({size} > {lang.turn_max} {lang.unit})", text)
        if n_pause == 1:
            for half in text.split(PAUSE):
                n = lang.size(self.filled(half, values))
                if n < lang.half_min:
                    self.problems.fail(at, f"pause half too short ({n} < {lang.half_min} {lang.unit})", half.strip())

    def lead(self, at: str, text: str, allowed: set[str]) -> None:
        """A lead-in (opener, transition, reaction): said before a line, in the same turn."""
        if not text.strip():
            self.problems.fail(at, "empty text", text)
            return
        self.placeholders(at, text, allowed)
        if PAUSE in text:
            self.problems.fail(at, "'|' only in user lines and questions", text)
        if self.lang.size(self.filled(text)) > self.lang.turn_max // 2:
            self.problems.fail(at, "lead-in too long", text)


def _strings(value: object, at: str, problems: Problems, what: str) -> list[str]:
    if not isinstance(value, list) or not value:
        problems.fail(at, f"{what}: expected a non-empty list of texts", value)
        return []
    out = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            problems.fail(at, f"{what}: empty alternative or not text", item)
            continue
        out.append(stripped(item))
    return out


# --- chat topics -----------------------------------------------------------------------------------------------

def _parse_line(item: object) -> tuple[str, str] | None:
    """("user" | "system", text) from "U: text" or {U: text}; None if neither."""
    if isinstance(item, dict) and len(item) == 1:
        code, text = next(iter(item.items()))
        if code in SPEAKER_CODES and isinstance(text, str):
            return SPEAKER_CODES[code], text.strip()
        return None
    if isinstance(item, str) and (m := _LINE.match(item)):
        return SPEAKER_CODES[m.group(1)], m.group(2).strip()
    return None


def _exchange(node: object, path: Path, entry: str, key: str, slots: dict[str, str], used: set[str],
              texts: _Texts, problems: Problems) -> Exchange | None:
    """One exchange; `slots` maps each slot to its shortest value (what a length check counts it as)."""
    at0 = where(path, _first_str(node), entry)
    if not isinstance(node, list) or not node:
        problems.fail(at0, "an exchange is a non-empty list of lines", node)
        return None
    lines: list[BankLine] = []
    for j, item in enumerate(node):
        alts = item if isinstance(item, list) else [item]
        at = where(path, _first_str(item), f"{entry} line {j + 1}")
        parsed = []
        if not alts:
            problems.fail(at, "empty alternative list", item)
            continue
        for alt in alts:
            p = _parse_line(alt)
            if p is None:
                problems.fail(where(path, _first_str(alt), f"{entry} line {j + 1}"),
                              "expected 'U: text' or 'S: text'", alt)
                continue
            if not p[1]:
                problems.fail(at, "empty alternative", alt)
                continue
            parsed.append(p)
        if not parsed:
            continue
        speakers = {s for s, _ in parsed}
        if len(speakers) > 1:
            problems.fail(at, "alternatives with different speakers", item)
        speaker = parsed[0][0]
        for _, text in parsed:
            used.update(texts.placeholders(at, text, set(slots), "slot"))
            texts.turn(at, text, pause_ok=speaker == "user", values=slots)
        if lines and lines[-1].speaker == speaker:
            problems.fail(at, "speaker alternation broken (same speaker twice in a row)", parsed[0][1])
        lines.append(BankLine(speaker, tuple(t for _, t in parsed), f"{key}.{j}", at))
    if lines and any(t.rstrip().endswith(("?", "？")) for t in lines[-1].texts):
        problems.warn(lines[-1].where, "an exchange ends on a question nobody answers", lines[-1].texts[0])
    return Exchange(tuple(lines), key, at0) if lines else None


def _first_str(node: object) -> object:
    """The first string inside a node: where its line number comes from."""
    while isinstance(node, (list, dict)) and node:
        node = node[0] if isinstance(node, list) else next(iter(node.values()))
    return node


def load_topic(path: Path, lang: Language, problems: Problems) -> ChatTopic | None:
    data = read_yaml(path, problems)
    if data is None:
        return None
    if not isinstance(data, dict):
        problems.fail(rel(path), "expected a mapping at the top", type(data).__name__)
        return None
    check_keys(data, path, "top", {"topic", "slots", *SECTIONS, "register", "notes", "alternatives", "premises"},
               {"topic", "opening", "middle"}, problems)
    alternatives = data.get("alternatives", ALTERNATIVES[0])
    if alternatives not in ALTERNATIVES:
        problems.fail(where(path, alternatives, "alternatives"), f"alternatives is one of {ALTERNATIVES}", alternatives)
        alternatives = ALTERNATIVES[0]
    topic = data.get("topic")
    if topic != path.stem:
        problems.fail(where(path, topic, "topic"), f"topic id differs from the file name {path.stem!r}", topic)
    texts = _Texts(lang, problems)
    slots: dict[str, tuple[str, ...]] = {}
    raw_slots = data.get("slots") or {}
    if not isinstance(raw_slots, dict):
        problems.fail(where(path, None, "slots"), "slots is a mapping name -> list of values", raw_slots)
        raw_slots = {}
    for name, values in raw_slots.items():
        at = where(path, name, f"slots.{name}")
        vals = _strings(values, at, problems, f"slot {name}")
        vals = [str(v) for v in vals]
        if len(set(vals)) < len(vals):
            problems.warn(at, "a slot value listed twice", name)
        if vals:
            slots[str(name)] = tuple(dict.fromkeys(vals))
    used: set[str] = set()
    sections: dict[str, tuple[Exchange, ...]] = {}
    key_base = rel(path)
    for section in SECTIONS:
        nodes = data.get(section) or []
        if not isinstance(nodes, list):
            problems.fail(where(path, None, section), f"{section} is a list of exchanges", nodes)
            nodes = []
        out = []
        for i, node in enumerate(nodes):
            shortest = {name: min(vals, key=lang.size) for name, vals in slots.items()}
            ex = _exchange(node, path, f"{section}[{i}]", f"{key_base}:{section}[{i}]", shortest, used, texts,
                           problems)
            if ex is not None:
                out.append(ex)
        sections[section] = tuple(out)
    if not sections["opening"]:
        problems.fail(where(path, topic, "opening"), "at least one opening exchange")
    if len(sections["middle"]) < MIN_MIDDLES:
        problems.fail(where(path, topic, "middle"), f"fewer than {MIN_MIDDLES} middle exchanges",
                      len(sections["middle"]))
    for name in sorted(set(slots) - used):
        problems.warn(where(path, name, f"slots.{name}"), "slot never used", name)
    _repeats([t for s in sections.values() for ex in s for ln in ex.lines for t in ln.texts], path, problems,
             [ln.where for s in sections.values() for ex in s for ln in ex.lines for _ in ln.texts])
    register = data.get("register", "")
    if not isinstance(register, str):
        problems.fail(where(path, register, "register"), "register is a word (casual, polite)", register)
        register = ""
    if data.get("premises") is None:  # every topic is cut into stories, so no middle follows an unrelated opening
        problems.fail(where(path, topic, "premises"), "no premises: list each story's opening, middles and closings "
                      "(../README.md, premises)")
    premises = _premises(data.get("premises"), path, sections, problems)
    if lang.code == "en":
        _pronouns_agree(sections, slots, path, problems)
    if lang.code == "ja":
        _kin_one_side(sections, slots, path, problems)
    return ChatTopic(str(topic), slots, sections["opening"], sections["middle"], sections["closing"],
                     where(path, topic, "topic"), str(alternatives), register, premises)


# English words that fix a person's gender: a slot value with one ("Aunt Rosa", "the guy next door") is a he or a
# she, and a line about it may not call it "they"; a slot whose values differ may call them nothing. Names count
# by their title only ("Aunt", "Uncle"): a bare first name is left to the writer; "my aunt's farm" is a place.
_SHE = re.compile(r"\b(?:aunt|grandma|grandmother|mom|mother|sister|niece|woman|lady|girl|wife|daughter|"
                  r"goddaughter|actress|queen|gran)\b(?!'s)", re.IGNORECASE)
_HE = re.compile(r"\b(?:uncle|grandpa|grandfather|dad|father|brother|nephew|man|guy|boy|husband|son|godson|"
                 r"actor|king)\b(?!'s)", re.IGNORECASE)
_EN_PRONOUN = {"they": re.compile(r"\b(?:they|them|their|theirs|themselves|they're|they've|they'd|they'll)\b",
                                  re.IGNORECASE),
               "he": re.compile(r"\b(?:he|him|his|himself|he's|he'd|he'll)\b", re.IGNORECASE),
               "she": re.compile(r"\b(?:she|her|hers|herself|she's|she'd|she'll)\b", re.IGNORECASE)}


def _gender(value: str) -> str:
    """'she', 'he' or '' (not fixed by a word of the value, or fixed both ways: "my sister's twins" are 'they')."""
    she, he = bool(_SHE.search(value)), bool(_HE.search(value))
    return "she" if she and not he else "he" if he and not she else ""


def _pronouns_agree(sections: dict[str, tuple[Exchange, ...]], slots: dict[str, tuple[str, ...]], path: Path,
                    problems: Problems) -> None:
    """An exchange naming a person slot whose values have a gender uses only that gender's pronoun: no "they"
    for "Aunt Rosa" ("I met the guy next door, and they brought us cookies"), no "she" where a value is a he."""
    genders = {name: {_gender(v) for v in vals} for name, vals in slots.items()}
    gendered = {name for name, g in genders.items() if g - {""}}
    for section in sections.values():
        for ex in section:
            texts = [t for ln in ex.lines for t in ln.texts]
            named = [n for n in gendered if any("{" + n + "}" in t for t in texts)]
            for n in named:
                fits = genders[n] - {""} if len(genders[n]) == 1 else set()
                for t in texts:
                    said = {p for p, rx in _EN_PRONOUN.items() if rx.search(t)}
                    if said - fits:
                        values = "/".join(sorted(g or "unmarked" for g in genders[n]))
                        problems.fail(ex.where, f"pronoun {'/'.join(sorted(said - fits))} in an exchange about "
                                      f"{{{n}}}, whose values are {values} (../README.md, slots)", t)


# Japanese family words as one says them of one's own family (母, 妹, 両親): the other speaker says お母さん, 妹さん,
# ご両親. A slot with such a value is said by one speaker only (the other, saying it back, would call the
# speaker's mother "母").
_JA_OWN_KIN = re.compile(r"(?<![おご])(?:母|父|姉|兄|妹|弟|息子|娘|夫|妻|主人|両親|祖母|祖父|家族)(?!さん|公)")


def _kin_one_side(sections: dict[str, tuple[Exchange, ...]], slots: dict[str, tuple[str, ...]], path: Path,
                  problems: Problems) -> None:
    for name, vals in slots.items():
        kin = [v for v in vals if _JA_OWN_KIN.search(v)]
        lines = [ln for sec in sections.values() for ex in sec for ln in ex.lines
                 if any("{" + name + "}" in t for t in ln.texts)]
        if kin and len({ln.speaker for ln in lines}) > 1:
            problems.fail(where(path, name, f"slots.{name}"), f"a family word said of one's own family ({kin[0]}) "
                          "in a slot both speakers say: the other would say it back as their own (../README.md, "
                          "slots)", name)


def _premises(raw: object, path: Path, sections: dict[str, tuple[Exchange, ...]],
              problems: Problems) -> dict[str, dict[str, tuple[int, ...]]]:
    """`premises:` checked: known sections, indices in range, and every opening left with two middles to draw."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.fail(where(path, None, "premises"), "premises is a mapping premise -> {section: [indices]}", raw)
        return {}
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for name, secs in raw.items():
        at = where(path, name, f"premises.{name}")
        if not isinstance(secs, dict):
            problems.fail(at, "expected a mapping section -> list of exchange indices", secs)
            continue
        out[str(name)] = {}
        for section, idx in secs.items():
            if section not in SECTIONS:
                problems.fail(at, f"unknown section {section!r} (known: {', '.join(SECTIONS)})", section)
                continue
            n = len(sections[section])
            if not isinstance(idx, list) or not all(isinstance(i, int) and 0 <= i < n for i in idx):
                problems.fail(at, f"{section}: expected a list of indices 0..{n - 1}", idx)
                continue
            out[str(name)][str(section)] = tuple(idx)
    topic = ChatTopic("", {}, sections["opening"], sections["middle"], sections["closing"], "", premises=out)
    # Once a topic is cut into stories, every exchange belongs to one an opening starts: an untagged line would
    # follow any opening (the non-sequitur the premises exist to prevent), a line under a premise no opening has
    # would never be said.
    opened = {p for p, secs in out.items() if secs.get("opening")}
    for section in SECTIONS:
        for i in range(len(sections[section])):
            tagged = [p for p, secs in out.items() if i in secs.get(section, ())]
            if not tagged:
                problems.fail(sections[section][i].where, "under no premise: list it under each story it "
                              f"continues (premises.<story>.{section})", section)
            elif section != "opening" and not opened.intersection(tagged):
                problems.fail(sections[section][i].where, f"no opening starts its premise(s) "
                              f"{', '.join(tagged)}: it is never said", section)
            elif section == "opening" and len(tagged) > 1:
                problems.fail(sections[section][i].where, f"an opening sets one story, not "
                              f"{', '.join(tagged)}", section)
    for i in range(len(sections["opening"])):
        premise = topic.premise_of(i)
        fit = sum(topic.fits("middle", j, premise) for j in range(len(sections["middle"])))
        if fit < MIN_MIDDLES:
            problems.fail(sections["opening"][i].where, f"only {fit} middle(s) fit its premise "
                          f"{premise or '(none)'!r}; at least {MIN_MIDDLES}")
    return out


def _repeats(items: list[str], path: Path, problems: Problems, places: list[str] | None = None) -> None:
    seen: dict[str, str] = {}
    for i, text in enumerate(items):
        at = places[i] if places else rel(path)
        norm = " ".join(text.lower().split())
        if norm in seen:
            problems.warn(at, f"repeats {seen[norm]}", text)
        seen.setdefault(norm, at)


# --- the other files of a language -----------------------------------------------------------------------------

def _mapping(path: Path, problems: Problems) -> dict | None:
    if not path.exists():
        problems.fail(rel(path), "missing file")
        return None
    data = read_yaml(path, problems)
    if data is None:
        return None
    if not isinstance(data, dict):
        problems.fail(rel(path), "expected a mapping at the top", type(data).__name__)
        return None
    return data


def _load_backchannels(path: Path, lang: Language, problems: Problems) -> dict[str, tuple[str, ...]]:
    data = _mapping(path, problems)
    if data is None:
        return {"user": (), "system": ()}
    check_keys(data, path, "top", {"user", "system", *BC_EXTRAS}, {"user", "system"}, problems)
    out = {}
    for side in ("user", "system", *(k for k in BC_EXTRAS if k in data)):
        items = _strings(data.get(side), where(path, side, side), problems, side)
        for text in items:
            at = where(path, text, side)
            if (why := lang.bc_problem(text)) is not None:
                problems.fail(at, why, text)
            if PLACEHOLDER.search(text) or PAUSE in text:
                problems.fail(at, "a backchannel has no placeholder and no '|'", text)
        _repeats(items, path, problems)
        out[side] = tuple(dict.fromkeys(items))
    return out


def _load_barge_in(path: Path, texts: _Texts, problems: Problems) -> tuple[str, ...]:
    if not path.exists():
        problems.fail(rel(path), "missing file")
        return ()
    data = read_yaml(path, problems)
    if isinstance(data, dict):
        check_keys(data, path, "top", {"openers"}, {"openers"}, problems)
        data = data.get("openers")
    items = _strings(data, where(path, None, "openers"), problems, "openers")
    for text in items:
        texts.lead(where(path, text, "openers"), text, ALLOWED["barge_in"])
    _repeats(items, path, problems)
    return tuple(dict.fromkeys(items))


def _load_transitions(path: Path, texts: _Texts, problems: Problems) -> dict[str, tuple[str, ...]]:
    data = _mapping(path, problems)
    if data is None:
        return {"chat": (), "task": ()}
    check_keys(data, path, "top", {"chat", "task"}, {"chat", "task"}, problems)
    out = {}
    for domain in ("chat", "task"):
        items = _strings(data.get(domain), where(path, domain, domain), problems, domain)
        for text in items:
            texts.lead(where(path, text, domain), text, ALLOWED["transitions"])
        _repeats(items, path, problems)
        out[domain] = tuple(dict.fromkeys(items))
    return out


def _load_relations(path: Path, texts: _Texts, knowledge: Knowledge, problems: Problems
                    ) -> tuple[dict[str, RelationTexts], dict[str, tuple[str, ...]]]:
    data = _mapping(path, problems)
    if data is None:
        return {}, {}
    extras: dict[str, tuple[str, ...]] = {}
    for name in RELATION_EXTRAS:
        if name not in data:
            if name == "openers":
                problems.fail(where(path, None, "openers"), "missing key 'openers'")
            continue
        items = _strings(data[name], where(path, name, name), problems, name)
        for text in items:
            texts.lead(where(path, text, name), text, ALLOWED[name])
        _repeats(items, path, problems)
        extras[name] = tuple(dict.fromkeys(items))
    relations: dict[str, RelationTexts] = {}
    known = knowledge.relations
    shortest = _shortest_values(knowledge, texts.lang)
    for relation, body in data.items():
        if relation in RELATION_EXTRAS:
            continue
        at = where(path, relation, str(relation))
        if relation not in known:
            problems.warn(at, "no fact in knowledge.yaml has this relation (ignored)", relation)
            continue
        if not isinstance(body, dict):
            problems.fail(at, "a relation is a mapping with ask_first, ask_follow, answer", body)
            continue
        check_keys(body, path, str(relation), set(RELATION_PARTS), set(RELATION_PARTS), problems)
        parts: dict[str, list[str]] = {}
        for part in RELATION_PARTS:
            items = _strings(body.get(part), at, problems, f"{relation}.{part}")
            for text in items:
                t_at = where(path, text, f"{relation}.{part}")
                names = texts.placeholders(t_at, text, ALLOWED[part])
                texts.turn(t_at, text, pause_ok=part != "answer", values=shortest.get(str(relation)))
                if part == "ask_first" and "entity" not in names:
                    problems.fail(t_at, "ask_first must name the entity ({entity})", text)
                if part == "answer" and "value" not in names:
                    problems.fail(t_at, "answer must say {value}", text)
            _repeats(items, path, problems)
            parts[part] = list(dict.fromkeys(items))
        if all(parts.values()):
            relations[str(relation)] = RelationTexts(str(relation), *(tuple(parts[p]) for p in RELATION_PARTS))
    for relation in sorted(known - set(data)):
        problems.fail(where(path, None, relation), "a relation of knowledge.yaml has no questions", relation)
    return relations, extras


def _shared_sentences(chat: dict[str, ChatTopic], lang: Language, problems: Problems) -> None:
    """A sentence written in two places of a language's chat bank is drawn for both, and adds up against the
    variety rule: warn at its second place (a sentence with a slot is filled differently and is left alone)."""
    first: dict[str, str] = {}
    for topic in chat.values():
        for section in (topic.opening, topic.middle, topic.closing):
            for ex in section:
                for ln in ex.lines:
                    for text in ln.texts:
                        for sentence in lang.sentences(text.replace(PAUSE, " ")):
                            if PLACEHOLDER.search(sentence):
                                continue
                            norm = " ".join(sentence.lower().split())
                            if norm in first and first[norm] != ln.where:
                                problems.warn(ln.where, f"sentence also at {first[norm]}", sentence)
                            first.setdefault(norm, ln.where)


def _shortest_values(knowledge: Knowledge, lang: Language) -> dict[str, dict[str, str]]:
    """Per relation, the shortest entity name, value and noun it can be said with: a question or answer must be a
    TURN even then."""
    code = lang.code
    out: dict[str, dict[str, str]] = {}
    for relation in knowledge.relations:
        ents = [e for e in knowledge.entities if relation in e.facts]
        names = [e.name[code] for e in ents]
        vals = [said(e.facts[relation], code) for e in ents]
        nouns = [n for e in ents for n in e.noun.get(code, ())] or [FILLER[code]]
        out[relation] = {"entity": min(names, key=lang.size), "value": min(vals, key=lang.size),
                         "noun": min(nouns, key=lang.size)}
    return out


def load_language(code: str, knowledge: Knowledge, problems: Problems, root: Path = TEXTS_DIR) -> LanguageBank:
    lang = LANGUAGES[code]
    base = root / code
    texts = _Texts(lang, problems)
    chat: dict[str, ChatTopic] = {}
    chat_files = sorted((base / "chat").glob("*.yaml"))
    if not chat_files:
        problems.fail(rel(base / "chat"), "no chat topics")
    for path in chat_files:
        topic = load_topic(path, lang, problems)
        if topic is not None:
            chat[topic.topic] = topic
    _shared_sentences(chat, lang, problems)
    relations, extras = _load_relations(base / "task" / "relations.yaml", texts, knowledge, problems)
    return LanguageBank(
        language=code,
        chat=chat,
        backchannels=_load_backchannels(base / "backchannels.yaml", lang, problems),
        barge_in=_load_barge_in(base / "barge_in.yaml", texts, problems),
        transitions=_load_transitions(base / "transitions.yaml", texts, problems),
        relations=relations,
        openers=extras.get("openers", ()),
        reactions=extras.get("reactions", ()),
        also=extras.get("also", ()),
    )


def bank_languages(root: Path = TEXTS_DIR) -> list[str]:
    """The languages with a folder under texts/."""
    return [code for code in LANGUAGES if (root / code).is_dir()]


def missing_files(code: str, root: Path = TEXTS_DIR) -> list[str]:
    """The files a language's bank still lacks (a bank being written is incomplete until this is empty)."""
    base = root / code
    missing = [f for f in LANG_FILES if not (base / f).is_file()]
    if not any((base / "chat").glob("*.yaml")):
        missing.insert(0, "chat/*.yaml")
    return missing


def load_bank_unchecked(languages: list[str] | None = None, root: Path = TEXTS_DIR) -> tuple[TextBank, Problems]:
    problems = Problems()
    knowledge = load_knowledge(problems, root / "knowledge.yaml", root / "facts" if (root / "facts").is_dir() else None)
    codes = bank_languages(root) if languages is None else languages
    langs = {code: load_language(code, knowledge, problems, root) for code in codes}
    return TextBank(knowledge, langs), problems


def checked_bank(languages: list[str] | None = None, root: Path = TEXTS_DIR) -> TextBank:
    """The banks under `root`; raises TextBankError listing every error (warnings pass)."""
    bank, problems = load_bank_unchecked(languages, root)
    if problems.errors:
        raise TextBankError([str(p) for p in problems.errors])
    return bank


@functools.cache
def load_bank(languages: tuple[str, ...] | None = None) -> TextBank:
    """The shipped banks (all languages with a folder, or `languages`), read once per process."""
    return checked_bank(list(languages) if languages is not None else None)


def thread_report(bank: LanguageBank) -> dict[str, int]:
    """How the chat topics are cut into stories (`premises:`): topics, stories, exchanges under no story (the
    loader rejects any), and the fewest middles an opening has to draw from."""
    untagged, fewest, stories = 0, -1, 0
    for topic in bank.chat.values():
        stories += len(topic.premises)
        for section, exchanges in (("opening", topic.opening), ("middle", topic.middle), ("closing", topic.closing)):
            untagged += sum(not any(i in secs.get(section, ()) for secs in topic.premises.values())
                            for i in range(len(exchanges)))
        for i in range(len(topic.opening)):
            premise = topic.premise_of(i)
            fit = sum(topic.fits("middle", j, premise) for j in range(len(topic.middle))) if premise else 0
            fewest = fit if fewest < 0 else min(fewest, fit)
    return {"topics": len(bank.chat), "stories": stories, "untagged_exchanges": untagged,
            "fewest_middles": max(fewest, 0)}


def size_report(bank: LanguageBank) -> list[str]:
    """Per chat topic and per file: how much there is to draw from."""
    lines = []
    for t in bank.chat.values():
        alts = sum(len(ln.texts) for s in (t.opening, t.middle, t.closing) for ex in s for ln in ex.lines)
        slot_values = sum(len(v) for v in t.slots.values())
        lines.append(f"  chat/{t.topic}: {len(t.opening)} openings, {len(t.middle)} middles, {len(t.closing)} "
                     f"closings, {alts} phrasings, {len(t.slots)} slots ({slot_values} values)")
    lines.append(f"  backchannels: {len(bank.backchannels.get('user', ()))} user, "
                 f"{len(bank.backchannels.get('system', ()))} system; barge-in openers: {len(bank.barge_in)}; "
                 f"transitions: {len(bank.transitions.get('chat', ()))} chat, {len(bank.transitions.get('task', ()))} "
                 "task")
    n_q = sum(len(r.ask_first) + len(r.ask_follow) for r in bank.relations.values())
    n_a = sum(len(r.answer) for r in bank.relations.values())
    lines.append(f"  task: {len(bank.relations)} relations, {n_q} questions, {n_a} answers, {len(bank.openers)} "
                 f"openers, {len(bank.reactions)} reactions, {len(bank.also)} also-lead-ins")
    return lines
