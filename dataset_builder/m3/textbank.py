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
from dataset_builder.m3.speech_forms import echoes_as_question, topic_change_lead

PAUSE = "|"
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
LANG_FILES = ("backchannels.yaml", "barge_in.yaml", "transitions.yaml", "task/relations.yaml")
RELATION_PARTS = ("ask_first", "ask_follow", "answer")
RELATION_EXTRAS = ("openers", "reactions", "also")
# Optional backchannel lists for one domain (a user acknowledging an answer says "mm-hm", not "no way").
BC_EXTRAS = ("user_task", "system_task")
# Placeholders each kind of text may hold (besides chat slots).
ALLOWED = {"ask_first": {"entity", "noun", "pronoun"}, "ask_follow": {"noun", "pronoun"},
           "answer": {"value", "entity", "noun", "pronoun"},
           "reactions": {"value"}, "openers": set(), "also": set(), "transitions": set(), "barge_in": set()}
FILLER = {"en": "Sam", "ja": "あれ"}  # what a placeholder counts as when a length is checked


@dataclass(frozen=True)
class RelationTexts:
    relation: str
    ask_first: tuple[str, ...]
    ask_follow: tuple[str, ...]
    answer: tuple[str, ...]


@dataclass(frozen=True)
class LanguageBank:
    language: str
    backchannels: dict[str, tuple[str, ...]]  # "user" / "system", optionally "user_task" etc. (BC_EXTRAS)
    barge_in: tuple[str, ...]
    transitions: dict[str, tuple[str, ...]]  # "task": lead-ins of a question about a new entity
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
        return {"task": ()}
    check_keys(data, path, "top", {"task"}, {"task"}, problems)
    out = {}
    for domain in ("task",):
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
            if name == "reactions":  # said right after the answer, before a follow-up on the same entity
                _follow_up_lead(where(path, text, name), text, texts.lang.code, problems)
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
                if part == "ask_follow":
                    _follow_up_lead(t_at, text, texts.lang.code, problems)
            _repeats(items, path, problems)
            parts[part] = list(dict.fromkeys(items))
        if all(parts.values()):
            relations[str(relation)] = RelationTexts(str(relation), *(tuple(parts[p]) for p in RELATION_PARTS))
    for relation in sorted(known - set(data)):
        problems.fail(where(path, None, relation), "a relation of knowledge.yaml has no questions", relation)
    return relations, extras


def _follow_up_lead(at: str, text: str, code: str, problems: Problems) -> None:
    """A follow-up (or the reaction before one) stays on its entity: no lead-in that announces a new topic
    ("By the way,", "ところで、"), and no answer said back as a question ("1889?", "1889年なんですか、")."""
    if topic_change_lead(text, code):
        problems.fail(at, "a follow-up stays on its entity: no topic-change lead-in", text)
    if echoes_as_question(text.replace("{value}", "\x00"), "\x00", code):
        problems.fail(at, "the answer is acknowledged, not asked back", text)


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
    relations, extras = _load_relations(base / "task" / "relations.yaml", texts, knowledge, problems)
    return LanguageBank(
        language=code,
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
    return [f for f in LANG_FILES if not (base / f).is_file()]


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


def size_report(bank: LanguageBank) -> list[str]:
    """Per file: how much there is to draw from."""
    lines = []
    lines.append(f"  backchannels: {len(bank.backchannels.get('user', ()))} user, "
                 f"{len(bank.backchannels.get('system', ()))} system; barge-in openers: {len(bank.barge_in)}; "
                 f"transitions: {len(bank.transitions.get('task', ()))} task")
    n_q = sum(len(r.ask_first) + len(r.ask_follow) for r in bank.relations.values())
    n_a = sum(len(r.answer) for r in bank.relations.values())
    lines.append(f"  task: {len(bank.relations)} relations, {n_q} questions, {n_a} answers, {len(bank.openers)} "
                 f"openers, {len(bank.reactions)} reactions, {len(bank.also)} also-lead-ins")
    return lines
