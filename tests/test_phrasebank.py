"""The phrase banks (dataset_builder/mpe/phrases/): the shipped files pass every rule, and each rule catches the
line it is for, naming the file, the line number and the rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataset_builder.mpe.phrasebank import (
    MIN_SIZE,
    PHRASES_DIR,
    _Checker,
    load_bank,
    load_bank_unchecked,
    load_exchanges,
    size_report,
    slug,
)


def test_shipped_banks_are_clean_and_big_enough() -> None:
    bank, problems = load_bank_unchecked()
    assert problems == []
    assert all(n >= least for _, n, least in size_report(bank))
    assert load_bank() is load_bank()  # read once per process
    assert sum(len(b) for b in bank.activities.values()) >= 8 * MIN_SIZE["activities"]


def test_slugs_name_the_files() -> None:
    assert slug("a living room on a Sunday afternoon") == "a_living_room_on_a_sunday_afternoon"
    assert slug("tired and low-key") == "tired_and_low_key"
    assert (PHRASES_DIR / "activities" / f"{slug('fixing a bike')}.txt").exists()


def _problems(tmp_path: Path, text: str, *, mentions: bool = False) -> list[str]:
    path = tmp_path / "bank.txt"
    path.write_text(text, encoding="utf-8")
    check = _Checker()
    load_exchanges(path, check, mentions=mentions)
    return check.problems


GOOD = "== casual\n\nA>B: Did you bring the spare tube with you?\nB>A: It's in my rucksack, the front pocket.\n"


@pytest.mark.parametrize("text, rule", [
    ("A>B: We need 3 more chairs in here.", "digits"),
    ("A>B: We need three more chairs in here.", "number word 'three'"),
    ("A>B: Let's sort the chairs out on Friday.", "day or month 'Friday'"),
    ("A>B: The vegetarian option looks good to me.", "letters 'aria' inside another word"),
    ("A>B: The assistant can sort that out later.", "the word 'assistant'"),
    ("A>B: Aria played the wrong song again.", "Aria outside mentions.txt"),
    ("A>B: Did you bring the spare tube with you?", "question to a person with no answer"),
    ("A>B: Did you bring the spare tube?\nA>B: It must be in the car then.", "same speaker twice in a row"),
    ("A>B: Okay. Let's get the chairs out now.", "sentence 'Okay.' shorter than 3 words"),
    ("A>B: Get the chairs.", "fewer than 4 words"),
    ("A>A: I should really tidy this up.", "a line addressed to its own speaker"),
    ("B>C: Could you hold the ladder for a moment?\nC>B: Of course, tell me when you're ready.",
     "a block uses role A"),
    ("A>B: Ask {D} whether the van is booked.", "unknown placeholder {D}"),
    ("A-B: Did you bring the spare tube?", "expected 'SPEAKER>ADDRESSEE: text'"),
])  # fmt: skip
def test_each_rule_names_file_line_and_rule(tmp_path: Path, text: str, rule: str) -> None:
    problems = _problems(tmp_path, text + "\n")
    assert any(rule in p and "bank.txt:" in p for p in problems), problems


def test_a_good_block_passes_and_repeats_are_caught(tmp_path: Path) -> None:
    assert _problems(tmp_path, GOOD) == []
    repeated = GOOD + "\nA>-: It's in my rucksack, the front pocket.\n"
    assert any("repeats" in p for p in _problems(tmp_path, repeated))


@pytest.mark.parametrize("line, ok", [
    ("A>B: Aria played the wrong song at my party.", True),
    ("A>B: Did Aria set the oven timer earlier?\nB>A: It did, it went off a while ago.", True),
    ("A>B: Aria, play something cheerful for us.", False),
    ("A>B: We could just ask Aria about the trains.", False),
    ("A>B: That's the funniest thing I've heard, Aria.", False),
    ("A>B: The tea's gone cold again, hasn't it.", False),  # a mention block names Aria first
])  # fmt: skip
def test_mentions_talk_about_aria_never_to_it(tmp_path: Path, line: str, ok: bool) -> None:
    assert (_problems(tmp_path, line + "\n", mentions=True) == []) is ok


def test_parts_lines_are_read_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "bank.txt"
    path.write_text("@ A=parent B=child\nA>B: Have you done your homework yet, love?\n"
                    "B>A: Nearly, just the last page now.\n\n@ A=Parent\nA>B: Bedtime in a minute, no arguments.\n")
    check = _Checker()
    blocks = load_exchanges(path, check)
    assert blocks[0].parts == (("A", "parent"), ("B", "child"))
    assert any("@ ROLE=part" in p and "bank.txt:5" in p for p in check.problems)
