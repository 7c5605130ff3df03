"""The task domain's fact tables (`texts/facts/*.jsonl`): the bulk of the knowledge the QA dialogues ask about.

`knowledge.yaml` holds hand-written entities with few facts each; the tables hold many entities of a few kinds
(people, works, countries, US states, Japanese prefectures, chemical elements), one JSON object a line:

    {"id": "jane_austen", "group": "person", "name": {"en": "Jane Austen", "ja": "ジェーン・オースティン"},
     "aka": {"en": ["Austen"], "ja": ["オースティン"]}, "noun": {"en": ["writer"], "ja": ["作家"]},
     "pronoun": "she", "facts": {"born": 1775, "died": 1817}}

A fact's value is a whole number (its kind from `relations.jsonl`: year, count, number), a text `{en, ja, aka?}`,
or `"@entity_id"`: the name (and other names) of another entity, which is also how a follow-up can ask about the
answer itself ("Who wrote Emma?" "Jane Austen." "And when was she born?": TopiOCQA's context dependence on the
previous answer). Facts computed from the tables, never written twice (`derive`): the element after each element
(`next_element`, from the atomic numbers), and for every capital city the country it is the capital of
(`capital_of`) and that country's continent.

Only facts we are sure of are written: no disputed capitals (Bolivia, South Africa, ...), no years where sources
disagree (a book serialised over two years, a birth before the Gregorian calendar was adopted), no counts that
change (moons, populations); a living person has no `died`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dataset_builder.m3.bankio import TEXTS_DIR, Problems, rel

FACTS_DIR = TEXTS_DIR / "facts"
RELATIONS_FILE = "relations.jsonl"
PRONOUNS = ("he", "she", "it", "they")
ROW_KEYS = {"id", "group", "name", "aka", "noun", "pronoun", "facts"}
_ID = re.compile(r"^[a-z][a-z0-9_]*$")


def _where(path: Path, line: int, row_id: object = "") -> str:
    return f"{rel(path)}:{line}: {row_id}".rstrip(": ")


def _read_jsonl(path: Path, problems: Problems) -> list[tuple[int, Any]]:
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        problems.fail(rel(path), f"unreadable: {err}")
        return []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as err:
            problems.fail(f"{rel(path)}:{n}", f"not JSON: {err.msg}", line[:60])
    return out


def relation_kinds(problems: Problems, folder: Path = FACTS_DIR) -> dict[str, str]:
    """relation -> kind, from `relations.jsonl`."""
    path = folder / RELATIONS_FILE
    kinds: dict[str, str] = {}
    for n, row in _read_jsonl(path, problems):
        if not isinstance(row, dict) or set(row) != {"relation", "kind"}:
            problems.fail(_where(path, n), "a row is {relation, kind}", str(row))
            continue
        if row["relation"] in kinds:
            problems.fail(_where(path, n), "duplicate relation", row["relation"])
        kinds[row["relation"]] = row["kind"]
    return kinds


def table_rows(problems: Problems, folder: Path = FACTS_DIR) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) of every entity row of every table, in file order; rows that are not a mapping with an id,
    a group, a name and facts are reported and left out. Values are resolved by `knowledge.load_knowledge`."""
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        if path.name == RELATIONS_FILE:
            continue
        for n, row in _read_jsonl(path, problems):
            at = _where(path, n, row.get("id", "") if isinstance(row, dict) else "")
            if not isinstance(row, dict):
                problems.fail(at, "a row is a JSON object", str(row)[:60])
                continue
            unknown = set(row) - ROW_KEYS
            missing = {"id", "group", "name", "facts"} - set(row)
            if unknown or missing:
                problems.fail(at, f"row keys: unknown {sorted(unknown)}, missing {sorted(missing)}", str(row)[:60])
                continue
            if not isinstance(row["id"], str) or not _ID.match(row["id"]):
                problems.fail(at, "id is lowercase letters, digits and '_'", str(row["id"]))
                continue
            if row.get("pronoun", "it") not in PRONOUNS:
                problems.fail(at, f"pronoun is one of {PRONOUNS}", str(row.get("pronoun")))
                continue
            if not isinstance(row["facts"], dict) or not row["facts"]:
                problems.fail(at, "facts is a non-empty mapping relation -> value", str(row["facts"]))
                continue
            out.append((at, row))
    return out


def as_fact_data(value: object, kind: str | None) -> object:
    """A table value as knowledge.yaml writes a fact (`{kind, value}`), for the one fact loader; "@id" stays a
    reference for the caller to resolve."""
    if isinstance(value, str) and value.startswith("@"):
        return value
    return {"kind": kind, "value": value}
