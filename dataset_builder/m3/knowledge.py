"""The task domain's knowledge base (`texts/knowledge.yaml`): real-world entities and facts, and the gold answers
computed from them.

Each fact is a value of one kind: a `year`, a `number` with a unit, an `ordinal` ("the fourth planet") or `text`
written in each language (`{en, ja}`, with optional `aka: {en: [...], ja: [...]}` for other names of the same
thing). A system answer says the value (`said`); its gold is `gold(...)`: the canonical form and aliases, built
like Duplex-MPE's (`dataset_builder/mpe/answers.py`): **no alias is a form that a wrong answer contains**. The
wrong answers are near misses of the value (years and numbers a little off, in digits and in words) and, for
text, every other value of the same relation in the knowledge base ("Emily Brontë" rules out the alias "Brontë"
for Charlotte's book).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from dataset_builder.m3.bankio import TEXTS_DIR, Problems, check_keys, read_yaml, where
from dataset_builder.m3.fact_tables import FACTS_DIR, RELATIONS_FILE, as_fact_data, relation_kinds, table_rows
from dataset_builder.mpe.answers import quantity, unsafe_aliases
from dataset_builder.mpe.numbers import number_words

KNOWLEDGE_FILE = TEXTS_DIR / "knowledge.yaml"
FACT_KINDS = ("year", "number", "ordinal", "count", "text")
LANGS = ("en", "ja")
MIN_FACTS = 2  # knowledge.yaml: one question naming the entity and at least one follow-up
# Gold answers of a config: the most dialogues one gold answer may answer a question in (the full preset's 200),
# so that no single answer ("the United States") stands for a large part of the QA score.
MAX_DIALOGUES_PER_GOLD = 8
YEAR_RANGE = (1000, 2100)

# Units a number fact may carry: English plural (as dataset_builder/rules/answer_units.UNITS names it), singular,
# and the Japanese forms (the first is what an answer says, the rest are aliases).
UNITS: dict[str, tuple[str, tuple[str, ...]]] = {
    "metres": ("metre", ("メートル",)),
    "kilometres": ("kilometre", ("キロメートル", "キロ")),
    "years": ("year", ("年",)),
}

_ORDINALS = ("zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
             "tenth", "eleventh", "twelfth")

Answer = tuple[str, list[str]]


@dataclass(frozen=True)
class Fact:
    relation: str
    kind: str
    value: int | dict[str, str]  # a number, or the text per language
    unit: str = ""
    aka: dict[str, tuple[str, ...]] = field(default_factory=dict)  # text: other names per language

    def text(self, lang: str) -> str:
        assert isinstance(self.value, dict)
        return self.value[lang]


@dataclass(frozen=True)
class Entity:
    id: str
    group: str
    name: dict[str, str]
    noun: dict[str, tuple[str, ...]]  # what a follow-up may call it ("the tower"), per language
    facts: dict[str, Fact]
    where: str = ""
    aka: dict[str, tuple[str, ...]] = field(default_factory=dict)  # other names, per language
    pronoun: str = "it"  # English: how a follow-up about this entity refers to it ("when was she born?")


@dataclass(frozen=True)
class Knowledge:
    entities: tuple[Entity, ...]

    @cached_property
    def _by_id(self) -> dict[str, Entity]:
        return {e.id: e for e in self.entities}

    @cached_property
    def _by_name(self) -> dict[str, Entity]:
        return {_name_key(e.name["en"]): e for e in self.entities}

    def entity(self, entity_id: str) -> Entity:
        return self._by_id[entity_id]

    def link(self, fact: Fact) -> Entity | None:
        """The entity a text fact's value names ("Jane Austen" -> the entity jane_austen), or None: a follow-up
        may then ask about the answer itself."""
        if fact.kind != "text":
            return None
        return self._by_name.get(_name_key(fact.text("en")))

    @cached_property
    def _text_facts(self) -> dict[str, list[Fact]]:
        out: dict[str, list[Fact]] = {}
        for e in self.entities:
            for r, f in e.facts.items():
                if f.kind == "text":
                    out.setdefault(r, []).append(f)
        return out

    @cached_property
    def relations(self) -> set[str]:
        return {r for e in self.entities for r in e.facts}

    def others(self, relation: str, fact: Fact, lang: str) -> list[str]:
        """Every other text value (and its other names) of `relation`: the wrong answers for a text fact."""
        own = {fact.text(lang).lower(), *(a.lower() for a in fact.aka.get(lang, ()))}
        out: list[str] = []
        for f in self._text_facts.get(relation, ()):
            out += [t for t in (f.text(lang), *f.aka.get(lang, ())) if t.lower() not in own]
        return out

    def gold(self, entity: Entity, relation: str, lang: str) -> Answer:
        fact = entity.facts[relation]
        return gold(fact, lang, self.others(relation, fact, lang) if fact.kind == "text" else ())


# --- saying a value --------------------------------------------------------------------------------------------

def said(fact: Fact, lang: str) -> str:
    """The value as an answer says it: "1889", "3776 meters", "fourth", "Paris"; "1889年", "3776メートル"."""
    if fact.kind == "text":
        return fact.text(lang)
    assert isinstance(fact.value, int)
    v = fact.value
    if fact.kind == "year":
        return str(v) if lang == "en" else f"{v}年"
    if fact.kind == "ordinal":
        return _ORDINALS[v] if lang == "en" else f"{v}番目"
    if fact.kind == "count":
        return str(v)
    singular, ja = UNITS[fact.unit]
    if lang == "en":
        unit = (singular if v == 1 else fact.unit).replace("tre", "ter")  # spoken by US voices: "meters"
        return f"{v:,} {unit}" if v >= 10_000 else f"{v} {unit}"
    return f"{v}{ja[0]}"


# --- gold answers ----------------------------------------------------------------------------------------------

def year_words(year: int) -> list[str]:
    """How a year is read aloud: "eighteen eighty-nine", "nineteen oh five", "nineteen hundred", "two thousand
    and nine", "twenty twelve"."""
    hi, lo = divmod(year, 100)
    if 2000 <= year <= 2009:
        return ["two thousand"] if year == 2000 else [f"two thousand {number_words(lo)}",
                                                      f"two thousand and {number_words(lo)}"]
    forms = [f"{number_words(hi)} hundred" if lo == 0 else
             f"{number_words(hi)} oh {number_words(lo)}" if lo < 10 else f"{number_words(hi)} {number_words(lo)}"]
    if year >= 2010:
        forms.append(f"two thousand {number_words(lo)}")
    return forms


def _year_misses(year: int) -> list[str]:
    near = {year + d for d in (-100, -50, -20, -10, -5, -3, -2, -1, 1, 2, 3, 5, 10, 20, 50, 100)}
    s = str(year)
    near.add(int(s[:-2] + s[-1] + s[-2]))
    near.discard(year)
    return [form for y in sorted(near) if y > 0 for form in (str(y), *year_words(y))]


def normalise_ja(text: str) -> str:
    """Japanese text compared as characters: width-folded, lowercase, without spaces and punctuation."""
    t = unicodedata.normalize("NFKC", text).lower()
    return "".join(ch for ch in t if unicodedata.category(ch)[0] not in ("P", "Z", "S"))


def _safe(gold: str, candidates: list[str], wrong: list[str], lang: str) -> list[str]:
    """The candidates that no wrong answer contains, the gold and repeats left out."""
    out = []
    for c in dict.fromkeys(candidates):
        if c.lower() == gold.lower():
            continue
        if lang == "en":
            if unsafe_aliases([c], wrong):
                continue
        elif any(normalise_ja(c) in normalise_ja(w) for w in wrong):
            continue
        out.append(c)
    return out


def gold(fact: Fact, lang: str, other_values: Sequence[str] = ()) -> Answer:
    """(gold, aliases) of a fact in a language. The gold of a number is its digits; of text, its name."""
    if fact.kind == "text":
        g = fact.text(lang)
        cands = list(fact.aka.get(lang, ()))
        if lang == "en" and g.lower().startswith("the "):
            cands.insert(0, g[4:])
        return g, _safe(g, cands, list(other_values), lang)
    assert isinstance(fact.value, int)
    v = fact.value
    if fact.kind == "year":
        wrong = _year_misses(v)
        if lang == "en":
            return str(v), _safe(str(v), year_words(v), wrong, lang)
        return str(v), _safe(str(v), [f"{v}年"], [f"{w}年" for w in wrong if w.isdigit()], lang)
    if fact.kind == "ordinal":
        misses = [n for n in range(1, 13) if n != v]
        if lang == "en":
            wrong = [f for n in misses for f in (_ORDINALS[n], f"{n}th", str(n))]
            return str(v), _safe(str(v), [_ORDINALS[v], f"{v}{_suffix(v)}"], wrong, lang)
        return str(v), _safe(str(v), [f"{v}番目", f"第{v}"], [f for n in misses for f in (f"{n}番目", f"第{n}")], lang)
    if fact.kind == "count":
        if lang == "ja":
            return str(v), []
        misses = sorted({v + d for d in (-10, -2, -1, 1, 2, 10)} | {v * 10} - {v})
        return str(v), _safe(str(v), [number_words(v)], [f for m in misses if m > 0 for f in (str(m), number_words(m))],
                             lang)
    if lang == "en":
        return quantity(v, fact.unit)
    ja_units = UNITS[fact.unit][1]
    misses = sorted({v + d for d in (-10, -2, -1, 1, 2, 10)} | {v * 10})
    return str(v), _safe(str(v), [f"{v}{u}" for u in ja_units], [f"{m}{u}" for m in misses for u in ja_units], lang)


def _name_key(name: str) -> str:
    n = name.lower().strip()
    return n[4:] if n.startswith("the ") else n


def _suffix(n: int) -> str:
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


# --- loading ---------------------------------------------------------------------------------------------------

_ID = re.compile(r"^[a-z][a-z0-9_]*$")


def _lang_map(value: object, path: Path, entry: str, problems: Problems, what: str) -> dict[str, str] | None:
    if not isinstance(value, dict) or not all(isinstance(value.get(lang), str) and value[lang].strip()
                                              for lang in LANGS):
        problems.fail(where(path, value, entry), f"{what} needs non-empty text for {LANGS}", value)
        return None
    return {lang: value[lang].strip() for lang in LANGS}


def _entity_name(value: object, path: Path, entry: str, at: str, ent_id: str,
                 seen_names: dict[tuple[str, str], str], problems: Problems) -> dict[str, str] | None:
    """An entity's {en, ja} name, each unique (case-folded) across knowledge.yaml and the fact tables: a repeat
    fails, naming the entity that has it first (`seen_names` records each name's first entity)."""
    name = _lang_map(value, path, entry, problems, "name")
    if name is None:
        return None
    for lang in LANGS:
        key = (lang, name[lang].lower())
        if key in seen_names:
            problems.fail(at, f"duplicate {lang} name (also {seen_names[key]})", name[lang])
        seen_names.setdefault(key, ent_id)
    return name


def _aka(value: object, path: Path, entry: str, problems: Problems) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict) or any(k not in LANGS for k in value) or not all(
            isinstance(v, list) and all(isinstance(x, str) and x.strip() for x in v) for v in value.values()):
        problems.fail(where(path, value, entry), "aka is {en: [names], ja: [names]}", value)
        return {}
    return {lang: tuple(x.strip() for x in names) for lang, names in value.items()}


def _fact(relation: str, data: object, path: Path, entry: str, problems: Problems) -> Fact | None:
    at = where(path, relation, entry)
    if not isinstance(data, dict):
        problems.fail(at, "a fact is {value, kind, unit?}", data)
        return None
    check_keys(data, path, entry, {"value", "kind", "unit"}, {"value", "kind"}, problems)
    kind, value, unit = data.get("kind"), data.get("value"), data.get("unit", "")
    if kind not in FACT_KINDS:
        problems.fail(at, f"unknown fact kind {kind!r} (one of {FACT_KINDS})", kind)
        return None
    if kind == "text":
        if not isinstance(value, dict):
            problems.fail(at, "fact kind wrong: a text value is {en, ja}", value)
            return None
        text = _lang_map({k: v for k, v in value.items() if k in LANGS}, path, entry, problems, "a text value")
        if text is None:
            return None
        extra = set(value) - {*LANGS, "aka"}
        if extra:
            problems.fail(at, f"unknown key(s) {sorted(extra)} in a text value", value)
        if unit:
            problems.fail(at, "a text value has no unit", unit)
        return Fact(str(relation), kind, text, aka=_aka(value.get("aka"), path, entry, problems))
    if isinstance(value, bool) or not isinstance(value, int):
        problems.fail(at, f"fact kind wrong: a {kind} value is a whole number", value)
        return None
    if kind == "year" and not YEAR_RANGE[0] <= value <= YEAR_RANGE[1]:
        problems.fail(at, f"year out of range {YEAR_RANGE}", value)
    if kind == "ordinal" and not 1 <= value < len(_ORDINALS):
        problems.fail(at, f"ordinal out of range 1..{len(_ORDINALS) - 1}", value)
    if kind == "number":
        if unit not in UNITS:
            problems.fail(at, f"a number needs a unit, one of {sorted(UNITS)}", unit)
            return None
        if not 0 < value < 1_000_000:
            problems.fail(at, "a number is in 1..999999", value)
    elif unit:
        problems.fail(at, f"a {kind} value has no unit", unit)
    return Fact(str(relation), kind, value, unit=str(unit))


def load_knowledge(problems: Problems, path: Path = KNOWLEDGE_FILE, tables: Path | None = FACTS_DIR) -> Knowledge:
    """knowledge.yaml and the fact tables (`fact_tables.py`; `tables=None`: knowledge.yaml alone)."""
    data = read_yaml(path, problems)
    if data is None:
        return Knowledge(())
    if not isinstance(data, dict) or not isinstance(data.get("entities"), list):
        problems.fail(where(path, None, "top"), "expected a mapping with an 'entities:' list")
        return Knowledge(())
    entities: list[Entity] = []
    seen_ids: dict[str, str] = {}
    seen_names: dict[tuple[str, str], str] = {}
    for i, item in enumerate(data["entities"]):
        entry = f"entities[{i}]"
        if not isinstance(item, dict):
            problems.fail(where(path, item, entry), "an entity is a mapping", item)
            continue
        ent_id = item.get("id")
        entry = f"entities[{i}] {ent_id}"
        at = where(path, ent_id, entry)
        check_keys(item, path, entry, {"id", "group", "name", "noun", "facts"}, {"id", "group", "name", "facts"},
                   problems)
        if not isinstance(ent_id, str) or not _ID.match(ent_id):
            problems.fail(at, "id is lowercase letters, digits and '_'", ent_id)
            continue
        if ent_id in seen_ids:
            problems.fail(at, f"duplicate entity id (first at {seen_ids[ent_id]})", ent_id)
        seen_ids.setdefault(ent_id, at)
        name = _entity_name(item.get("name"), path, entry, at, ent_id, seen_names, problems)
        if name is None:
            continue
        noun = _aka(item.get("noun"), path, entry, problems)
        facts_data = item.get("facts")
        if not isinstance(facts_data, dict):
            problems.fail(at, "facts is a mapping relation -> {value, kind, unit?}", facts_data)
            continue
        facts = {}
        for relation, fdata in facts_data.items():
            if not isinstance(relation, str) or not _ID.match(relation):
                problems.fail(at, "a relation id is lowercase letters, digits and '_'", relation)
                continue
            fact = _fact(relation, fdata, path, f"{entry} facts.{relation}", problems)
            if fact is not None:
                facts[relation] = fact
        if len(facts) < MIN_FACTS:
            problems.fail(at, f"an entity needs at least {MIN_FACTS} facts (a question and a follow-up)", ent_id)
        entities.append(Entity(ent_id, str(item.get("group", "")), name, noun, facts, at))
    if tables is not None:
        entities = derive(entities + _load_tables(tables, seen_ids, seen_names, problems))
    kb = Knowledge(tuple(entities))
    _check_kinds_agree(kb, path, problems)
    return kb


def _load_tables(folder: Path, seen_ids: dict[str, str], seen_names: dict[tuple[str, str], str],
                 problems: Problems) -> list[Entity]:
    """The entities of the fact tables (`fact_tables.py`), their "@id" values resolved to the named entity's name
    and other names, checked like knowledge.yaml's (ids and names unique across both)."""
    kinds = relation_kinds(problems, folder)
    rows = table_rows(problems, folder)
    names = {row["id"]: row for _, row in rows}
    out: list[Entity] = []
    for at, row in rows:
        ent_id = row["id"]
        if ent_id in seen_ids:
            problems.fail(at, f"duplicate entity id (first at {seen_ids[ent_id]})", ent_id)
            continue
        seen_ids[ent_id] = at
        name = _entity_name(row["name"], Path(at), ent_id, at, ent_id, seen_names, problems)
        if name is None:
            continue
        facts: dict[str, Fact] = {}
        for relation, value in row["facts"].items():
            if relation not in kinds:
                problems.fail(at, f"relation {relation!r} has no kind in {RELATIONS_FILE}", relation)
                continue
            data = as_fact_data(value, kinds[relation])
            if isinstance(data, str):  # "@id": the named entity's names
                target = names.get(data[1:])
                if target is None:
                    problems.fail(at, f"{relation}: no entity {data[1:]!r} in the fact tables", data)
                    continue
                data = {"kind": "text", "value": {**target["name"], "aka": target.get("aka", {})}}
            if kinds[relation] == "text" and isinstance(data, dict) and not isinstance(data.get("value"), dict):
                problems.fail(at, f"fact kind wrong: {relation} is text ({{en, ja}} or \"@id\")", str(value))
                continue
            fact = _fact(relation, data, Path(at), f"{ent_id} facts.{relation}", problems)
            if fact is not None:
                facts[relation] = fact
        aka = _aka(row.get("aka"), Path(at), ent_id, problems)
        noun = _aka(row.get("noun"), Path(at), ent_id, problems)
        out.append(Entity(ent_id, str(row["group"]), name, noun, facts, at, aka=aka,
                          pronoun=str(row.get("pronoun", "it"))))
    return out


def derive(entities: list[Entity]) -> list[Entity]:
    """The facts computed from others (never written twice): each chemical element's successor
    (`next_element`, by atomic number), and for each capital (of a country, a US state, a Japanese prefecture) a
    city entity (or the existing entity of that name) that knows what it is the capital of (`capital_of`,
    `state_of`, `prefecture_of`) and the country's continent."""
    by_z = {e.facts["atomic_number"].value: e for e in entities if "atomic_number" in e.facts}
    out: list[Entity] = []
    for e in entities:
        nxt = by_z.get(e.facts["atomic_number"].value + 1) if "atomic_number" in e.facts else None  # type: ignore
        if nxt is not None:
            e = replace(e, facts={**e.facts, "next_element": Fact("next_element", "text", dict(nxt.name),
                                                                  aka=dict(nxt.aka))})
        out.append(e)
    by_name = {_name_key(e.name["en"]): i for i, e in enumerate(out)}
    ja_names = {e.name["ja"].lower() for e in out}
    for forward, (reverse, group, nouns) in _CAPITALS.items():
        for place in list(out):
            cap = place.facts.get(forward)
            if cap is None:
                continue
            facts = {reverse: Fact(reverse, "text", dict(place.name), aka=dict(place.aka))}
            if "on_continent" in place.facts:
                facts["on_continent"] = place.facts["on_continent"]
            i = by_name.get(_name_key(cap.text("en")))
            if i is not None:  # a city knowledge.yaml already has (Paris): it learns the capital's facts
                out[i] = replace(out[i], facts={**out[i].facts, **facts})
                continue
            if cap.text("ja").lower() in ja_names:  # another thing of that name in Japanese (Columbia, コロンビア)
                continue
            city_id = "capital_" + re.sub(r"[^a-z0-9]+", "_", _fold(cap.text("en")).lower()).strip("_")
            if any(e.id == city_id for e in out):
                city_id += "_" + group
            out.append(Entity(city_id, group, dict(cap.value), nouns, facts,  # type: ignore[arg-type]
                              f"{place.where} {forward}", aka=dict(cap.aka)))
            by_name[_name_key(cap.text("en"))] = len(out) - 1
            ja_names.add(cap.text("ja").lower())
    return out


# forward relation -> (the reverse relation a capital city gets, its group, its nouns)
_CAPITALS: dict[str, tuple[str, str, dict[str, tuple[str, ...]]]] = {
    "capital": ("capital_of", "capital", {"en": ("city",), "ja": ("都市",)}),
    "state_capital": ("state_of", "state_capital", {"en": ("city",), "ja": ("都市",)}),
    "prefecture_seat": ("prefecture_of", "prefecture_seat", {"en": ("city",), "ja": ("市",)}),
}


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


def _check_kinds_agree(kb: Knowledge, path: Path, problems: Problems) -> None:
    """One relation, one kind (and unit): the questions and answers of a relation are written for one kind."""
    first: dict[str, tuple[str, str, str]] = {}
    for e in kb.entities:
        for r, f in e.facts.items():
            prev = first.setdefault(r, (f.kind, f.unit, e.id))
            if (f.kind, f.unit) != prev[:2]:
                first_kind = f"{prev[0]} {prev[1]}".strip()
                problems.fail(f"{e.where} facts.{r}", f"fact kind wrong: {r} is a {first_kind} at {prev[2]}",
                              f"{f.kind} {f.unit}".strip())
