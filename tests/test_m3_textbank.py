"""The M3 text banks (dataset_builder/m3/texts/): the shipped files pass every rule, and each rule catches the entry
it is for, naming the file, the line, the entry and the rule."""

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
    thread_report,
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

TOPIC = """\
topic: NAME
slots:
  place: [the lake, the old market, the park by the river]
opening:
  - - ["U: I went to {place} on Saturday with my brother.", "U: We spent Saturday at {place}, my brother and me."]
    - "S: Oh nice, how was it out there?"
middle:
  - - "U: The weather at {place} was lovely all day long."
    - "S: Lucky you, it rained here the whole afternoon."
  - - "S: Do you go to {place} often these days?"
    - "U: Not often enough, | it takes an hour to get there."
closing:
  - - "S: Anyway, say hello to your brother for me."
    - "U: I will, he always asks about you."
premises:
  out: {opening: [0], middle: [0, 1], closing: [0]}
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
    "en/chat/lake.yaml": TOPIC.replace("NAME", "lake"),
    "en/chat/park.yaml": TOPIC.replace("NAME", "park").replace("Saturday", "Sunday").replace("brother", "sister")
    .replace("lovely all day", "lovely all morning").replace("often these days", "often lately")
    .replace("an hour", "two hours").replace("whole afternoon", "whole morning").replace("Oh nice", "Oh lovely"),
    "en/backchannels.yaml": "user: [yeah, mm-hm]\nsystem: [right, I see]\n",
    "en/barge_in.yaml": "openers: ['Sorry, can I just jump in,']\n",
    "en/transitions.yaml": "chat: ['Anyway,']\ntask: ['Okay, next question,']\n",
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
    assert len(en.chat) >= 12
    assert all(len(t.opening) >= 5 and len(t.middle) >= 12 for t in en.chat.values())
    assert set(en.relations) == bank.knowledge.relations  # every relation has English questions
    # knowledge.yaml's 120 hand-written entities, the fact tables' 700 rows and the capitals derived from them
    assert len(bank.knowledge.entities) == 1006
    assert load_bank(("en",)) is load_bank(("en",))  # read once per process


def test_the_handmade_bank_is_clean(tmp_path: Path) -> None:
    assert _problems(tmp_path, {}) == []


@pytest.mark.parametrize("name, old, new, where, rule", [
    ("en/chat/lake.yaml", "{place} was lovely", "{weather} was lovely", "lake.yaml:8: middle[0] line 1",
     "unknown slot {weather}"),
    ("en/chat/lake.yaml", '"S: Lucky you, it rained here the whole afternoon."',
     '"U: Lucky you, it rained here the whole afternoon."', "lake.yaml:9: middle[0] line 2",
     "speaker alternation broken"),
    ("en/chat/lake.yaml", '"U: We spent Saturday at {place}, my brother and me."', '"U: "',
     "lake.yaml:5: opening[0] line 1", "empty alternative"),
    ("en/chat/lake.yaml", '"U: We spent Saturday at {place}, my brother and me."',
     '"S: We spent Saturday at {place}, my brother and me."', "lake.yaml:5: opening[0] line 1",
     "alternatives with different speakers"),
    ("en/chat/lake.yaml", '"S: Oh nice, how was it out there?"', '"S: Oh nice, | how was it out there?"',
     "lake.yaml:6: opening[0] line 2", "'|' only in user lines"),
    ("en/chat/lake.yaml", "Not often enough, | it takes", "Not often, | it takes", "lake.yaml:11: middle[1] line 2",
     "pause half too short"),
    ("en/chat/lake.yaml", '"S: Oh nice, how was it out there?"', '"S: Oh, how nice?"',
     "lake.yaml:6: opening[0] line 2", "turn too short to be a TURN"),
    ("en/chat/lake.yaml", '"S: Oh nice, how was it out there?"', '"X: Oh nice, how was it out there?"',
     "lake.yaml:6: opening[0] line 2", "expected 'U: text' or 'S: text'"),
    ("en/chat/lake.yaml", "topic: lake", "topic: lakes", "lake.yaml:1: topic", "topic id differs from the file name"),
    ("en/backchannels.yaml", "user: [yeah, mm-hm]", "user: [yeah, oh that is really interesting]",
     "backchannels.yaml:1: user", "BC too long in words"),
    ("en/backchannels.yaml", "user: [yeah, mm-hm]", "user: [yeah, no]", "backchannels.yaml", "not text"),
    ("en/task/relations.yaml", '["Which city is {entity} in?"]', '["Which city is that tower in?"]',
     "relations.yaml:4: city.ask_first", "ask_first must name the entity"),
    ("en/task/relations.yaml", '["And which city is the {noun} in?"]', '["And which city is {entity} in?"]',
     "relations.yaml:5: city.ask_follow", "unknown placeholder {entity}"),
    ("en/task/relations.yaml", '["It\'s in the city of {value}."]', '["It\'s in a city, I believe."]',
     "relations.yaml:6: city.answer", "answer must say {value}"),
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


def test_a_relation_without_questions_and_too_few_middles(tmp_path: Path) -> None:
    relations = RELATIONS[:RELATIONS.index("completed:")]
    topic = FILES["en/chat/lake.yaml"]
    one_middle = topic[:topic.index("  - - \"S: Do you go")] + topic[topic.index("closing:"):]
    problems = _problems(tmp_path, {"en/task/relations.yaml": relations, "en/chat/lake.yaml": one_middle})
    assert any("relations.yaml: completed" in p and "has no questions" in p for p in problems), problems
    assert any("lake.yaml" in p and "fewer than 2 middle exchanges" in p for p in problems), problems


@pytest.mark.parametrize("premises, where, rule", [
    ("", "lake.yaml:1: premises", "no premises"),
    ("premises:\n  out: {opening: [0], middle: [0], closing: [0]}\n", "lake.yaml:10: middle[1]",
     "under no premise"),
    ("premises:\n  out: {opening: [0], middle: [0, 1]}\n  later: {closing: [0]}\n", "lake.yaml:13: closing[0]",
     "no opening starts its premise(s) later"),
    ("premises:\n  out: {opening: [0], middle: [0, 1], closing: [0]}\n  home: {opening: [0], middle: [1]}\n",
     "lake.yaml:5: opening[0]", "an opening sets one story, not out, home"),
    ("premises:\n  out: {opening: [0], middle: [0], closing: [0]}\n  home: {middle: [1]}\n",
     "lake.yaml:5: opening[0]", "only 1 middle(s) fit its premise 'out'"),
    ("premises:\n  out: {opening: [0], middle: [0, 2], closing: [0]}\n", "lake.yaml:16: premises.out",
     "middle: expected a list of indices 0..1"),
])
def test_every_exchange_belongs_to_a_story_an_opening_starts(tmp_path: Path, premises: str, where: str,
                                                             rule: str) -> None:
    """A topic is cut into stories (premises): an exchange under none, or only under stories no opening starts,
    an opening in two stories, or a story that leaves an opening fewer than two middles is a load error."""
    topic = FILES["en/chat/lake.yaml"]
    topic = topic[:topic.index("premises:")] + premises
    problems = _problems(tmp_path, {"en/chat/lake.yaml": topic})
    assert any(where in p and rule in p for p in problems), problems


def test_thread_report_counts_stories_and_untagged_exchanges(tmp_path: Path) -> None:
    bank, _ = load_bank_unchecked(["en"], _write(tmp_path))
    assert thread_report(bank.language("en")) == {"topics": 2, "stories": 2, "untagged_exchanges": 0,
                                                  "fewest_middles": 2}
    topic = FILES["en/chat/lake.yaml"].replace("middle: [0, 1], closing: [0]", "middle: [0]")
    bank, _ = load_bank_unchecked(["en"], _write(tmp_path, {"en/chat/lake.yaml": topic}))
    assert thread_report(bank.language("en")) == {"topics": 2, "stories": 2, "untagged_exchanges": 2,
                                                  "fewest_middles": 2}


def test_warnings_do_not_stop_a_build(tmp_path: Path) -> None:
    topic = FILES["en/chat/lake.yaml"].replace("slots:\n", "slots:\n  unused: [a, b]\n").replace(
        "topic: lake", "topic: lake\nregister: casual\nmood: sunny")
    root = _write(tmp_path, {"en/chat/lake.yaml": topic})
    bank, problems = load_bank_unchecked(["en"], root)
    assert problems.errors == []
    warnings = [str(p) for p in problems.warnings]
    assert any("slot never used" in w and "unused" in w for w in warnings), warnings
    assert any("unknown key 'mood'" in w for w in warnings), warnings
    assert "lake" in bank.language("en").chat


def test_a_sentence_written_twice_in_a_chat_bank_is_a_warning(tmp_path: Path) -> None:
    park = FILES["en/chat/park.yaml"].replace("Oh lovely, how was it out there?", "Oh nice, how was it out there?")
    root = _write(tmp_path, {"en/chat/park.yaml": park})
    _, problems = load_bank_unchecked(["en"], root)
    assert any("sentence also at" in str(p) and "lake.yaml:6" in str(p) for p in problems.warnings)


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
    weekend = root / "en" / "chat" / "weekend.yaml"
    weekend.write_text(weekend.read_text(encoding="utf-8").replace("topic: weekend", "topic: weekends"),
                       encoding="utf-8")
    (root / "en" / "transitions.yaml").unlink()
    with pytest.raises(TextBankError) as err:
        checked_bank(["en"], root)
    assert len(err.value.problems) == 2
    assert "topic id differs" in str(err.value) and "transitions.yaml: missing file" in str(err.value)


THEY = "U: I met {friend} at {place}, and they were lovely all day long."
SHE = "U: I met {friend} at {place}, and she was lovely all day long."


@pytest.mark.parametrize("values, line, rule", [
    # a gendered value is never "they"; values of two genders (or some without one) take no gendered pronoun
    ("[Aunt Rosa, Aunt Meg]", THEY, "pronoun they in an exchange about {friend}, whose values are she"),
    ("[Aunt Rosa, the guy next door]", SHE, "pronoun she in an exchange about {friend}, whose values are he/she"),
    ("[Aunt Rosa, my roommate]", THEY, "pronoun they in an exchange about {friend}, whose values are she/unmarked"),
    ("[Aunt Rosa, Aunt Meg]", SHE, ""),
    ("[my cousin, my roommate]", THEY, ""),  # no value has a gender: "they" is right
    ("[my aunt's farm, the lake]", THEY, ""),  # a place, not a person
])
def test_a_pronoun_agrees_with_its_person_slot(tmp_path: Path, values: str, line: str, rule: str) -> None:
    topic = FILES["en/chat/lake.yaml"].replace("  place: [", f"  friend: {values}\n  place: [").replace(
        "U: The weather at {place} was lovely all day long.", line)
    problems = [p.split("/en/chat/", 1)[-1] for p in _problems(tmp_path, {"en/chat/lake.yaml": topic})]
    assert problems == ([f"lake.yaml:9: middle[0]: {rule} (../README.md, slots): {line[3:]}"] if rule else [])


JA_TOPIC = """\
topic: visit
register: casual
slots:
  who: [WHO]
opening:
  - - "U: この前の日曜に{who}と駅前のカフェに行ってきたんだ。"
    - "S: いいね、{who}と出かけるのって楽しそうだね。"
middle:
  - - "U: お店の中がすごく明るくて、ゆっくりできたんだよね。"
    - "S: 明るいお店って、それだけで気分が上がるよね。"
  - - "U: ケーキがおいしくて、つい二つも食べちゃったんだ。"
    - "S: 二つはすごいね、よっぽどおいしかったんだね。"
premises:
  out: {opening: [0], middle: [0, 1]}
"""


@pytest.mark.parametrize("who, problems", [
    ("妹", ["visit.yaml: slots.who: a family word said of one's own family (妹) in a slot both speakers say: "
           "the other would say it back as their own (../README.md, slots): who"]),
    ("妹さん", []), ("お母さん", []), ("幼なじみ", []), ("主人公", []),
])
def test_a_japanese_family_word_is_said_by_one_speaker(tmp_path: Path, who: str, problems: list[str]) -> None:
    from dataset_builder.m3.bankio import Problems
    from dataset_builder.m3.language import LANGUAGES
    from dataset_builder.m3.textbank import load_topic
    path = tmp_path / "visit.yaml"
    path.write_text(JA_TOPIC.replace("WHO", who), encoding="utf-8")
    found = Problems()
    load_topic(path, LANGUAGES["ja"], found)
    assert [str(p).split("visit.yaml", 1)[-1] for p in found.errors] == [p[len("visit.yaml"):] for p in problems]
