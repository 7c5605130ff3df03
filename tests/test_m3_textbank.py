"""The M3 text banks of the task dialogues (dataset_builder/m3/texts/): the shipped files pass every rule, and each
rule catches the entry it is for, naming the file, the line, the entry and the rule. The chat corpus:
tests/test_m3_corpus.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dataset_builder.m3.bankio import TEXTS_DIR
from dataset_builder.m3.textbank import (
    TextBankError,
    bank_languages,
    checked_bank,
    load_bank,
    load_bank_unchecked,
    missing_files,
)
from dataset_builder.m3.texts.__main__ import main as check_main

KNOWLEDGE = """\
entities:
  - id: tower_one
    group: landmark
    name: {en: the Tall Tower, ja: 高い塔}
    noun: {en: [tower], ja: [塔]}
    facts:
      city: {kind: text, value: {en: Springfield, ja: スプリングフィールド}}
      completed: {kind: year, value: 1901}
  - id: tower_two
    group: landmark
    name: {en: the Short Tower, ja: 低い塔}
    noun: {en: [tower], ja: [塔]}
    facts:
      city: {kind: text, value: {en: Shelbyville, ja: シェルビービル}}
      completed: {kind: year, value: 1955}
"""

RELATIONS = """\
openers: ["Hey, quick question,"]
reactions: ["Oh, {value}, okay,"]
city:
  ask_first: ["Which city is {entity} in?"]
  ask_follow: ["And which city is the {noun} in?"]
  answer: ["It's in the city of {value}."]
completed:
  ask_first: ["When was {entity} finished, do you know?"]
  ask_follow: ["And when was it finished?"]
  answer: ["It was finished in {value}."]
"""

FILES = {
    "knowledge.yaml": KNOWLEDGE,
    "en/backchannels.yaml": "user: [yeah, mm-hm]\nsystem: [right, I see]\n",
    "en/barge_in.yaml": "openers: ['Sorry, can I just jump in,']\n",
    "en/transitions.yaml": "task: ['Okay, next question,']\n",
    "en/task/relations.yaml": RELATIONS,
}


def _write(root: Path, overrides: dict[str, str] | None = None) -> Path:
    for name, text in {**FILES, **(overrides or {})}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _problems(tmp_path: Path, overrides: dict[str, str]) -> list[str]:
    _, problems = load_bank_unchecked(["en"], _write(tmp_path, overrides))
    return [str(p) for p in problems.errors]


def test_shipped_banks_are_clean() -> None:
    complete = [code for code in bank_languages() if not missing_files(code)]
    assert "en" in complete
    bank, problems = load_bank_unchecked(complete)
    assert [str(p) for p in problems.errors] == []
    en = bank.language("en")
    assert set(en.relations) == bank.knowledge.relations  # every relation has English questions
    # knowledge.yaml's 120 hand-written entities, the fact tables' 700 rows and the capitals derived from them
    assert len(bank.knowledge.entities) == 1006
    assert load_bank(("en",)) is load_bank(("en",))  # read once per process


def test_the_handmade_bank_is_clean(tmp_path: Path) -> None:
    assert _problems(tmp_path, {}) == []


@pytest.mark.parametrize("name, old, new, where, rule", [
    ("en/backchannels.yaml", "user: [yeah, mm-hm]", "user: [yeah, oh that is really interesting]",
     "backchannels.yaml:1: user", "BC too long in words"),
    ("en/backchannels.yaml", "user: [yeah, mm-hm]", "user: [yeah, no]", "backchannels.yaml", "not text"),
    ("en/task/relations.yaml", '["Which city is {entity} in?"]', '["Which city is that tower in?"]',
     "relations.yaml:4: city.ask_first", "ask_first must name the entity"),
    ("en/task/relations.yaml", '["And which city is the {noun} in?"]', '["And which city is {entity} in?"]',
     "relations.yaml:5: city.ask_follow", "unknown placeholder {entity}"),
    ("en/task/relations.yaml", '["It\'s in the city of {value}."]', '["It\'s in a city, I believe."]',
     "relations.yaml:6: city.answer", "answer must say {value}"),
    ("en/task/relations.yaml", '["And which city is the {noun} in?"]', '["By the way, which city is the {noun} in?"]',
     "relations.yaml:5: city.ask_follow", "a follow-up stays on its entity: no topic-change lead-in"),
    ("en/task/relations.yaml", '["Oh, {value}, okay,"]', '["Oh, {value}? Okay,"]',
     "relations.yaml:2: reactions", "the answer is acknowledged, not asked back"),
    ("knowledge.yaml", "completed: {kind: year, value: 1901}", "completed: {kind: year, value: {en: 1901, ja: x}}",
     "knowledge.yaml:8: entities[0] tower_one facts.completed", "fact kind wrong"),
    ("knowledge.yaml", "completed: {kind: year, value: 1955}", "completed: {kind: text, value: {en: a, ja: b}}",
     "tower_two facts.completed", "fact kind wrong: completed is a year"),
    ("knowledge.yaml", "completed: {kind: year, value: 1901}", "completed: {kind: year, value: 3901}",
     "tower_one facts.completed", "year out of range"),
    ("knowledge.yaml", "completed: {kind: year, value: 1901}", "completed: {kind: number, value: 1901}",
     "tower_one facts.completed", "a number needs a unit"),
    ("knowledge.yaml", "  - id: tower_two", "  - id: tower_one", "knowledge.yaml:9: entities[1] tower_one",
     "duplicate entity id"),
])
def test_each_rule_names_file_line_entry_and_rule(tmp_path: Path, name: str, old: str, new: str, where: str,
                                                  rule: str) -> None:
    text = FILES[name]
    assert old in text, old
    problems = _problems(tmp_path, {name: text.replace(old, new)})
    assert any(where in p and rule in p for p in problems), problems


def test_a_relation_without_questions(tmp_path: Path) -> None:
    relations = RELATIONS[:RELATIONS.index("completed:")]
    problems = _problems(tmp_path, {"en/task/relations.yaml": relations})
    assert any("relations.yaml: completed" in p and "has no questions" in p for p in problems), problems


def test_warnings_do_not_stop_a_build(tmp_path: Path) -> None:
    root = _write(tmp_path, {"en/task/relations.yaml": RELATIONS.replace("city:\n", "city:\n  mood: sunny\n")})
    bank, problems = load_bank_unchecked(["en"], root)
    assert problems.errors == []
    warnings = [str(p) for p in problems.warnings]
    assert any("unknown key 'mood'" in w for w in warnings), warnings
    assert "city" in bank.language("en").relations


def test_a_missing_file_and_the_check_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _write(tmp_path)
    assert check_main(["check", "--root", str(root), "--lang", "en"]) == 0
    (root / "en" / "barge_in.yaml").unlink()
    assert missing_files("en", root) == ["barge_in.yaml"]
    assert check_main(["check", "--root", str(root), "--lang", "en"]) == 1
    out = capsys.readouterr().out
    assert "barge_in.yaml: missing file" in out and "1 error(s)" in out


def test_a_broken_bank_raises_listing_every_error(tmp_path: Path) -> None:
    root = tmp_path / "texts"
    shutil.copytree(TEXTS_DIR, root)
    backchannels = root / "en" / "backchannels.yaml"
    backchannels.write_text(backchannels.read_text(encoding="utf-8").replace("user:", "user:\n  - oh that is "
                                                                             "really very interesting", 1),
                            encoding="utf-8")
    (root / "en" / "transitions.yaml").unlink()
    with pytest.raises(TextBankError) as err:
        checked_bank(["en"], root)
    assert len(err.value.problems) == 2
    assert "BC too long" in str(err.value) and "transitions.yaml: missing file" in str(err.value)
