"""dataset_builder/mpe/answers.py: canonical golds, and aliases that no plausible wrong answer contains.

The wrong answers here are written in this file, independently of the module's own near-miss lists, and checked
two ways: with the module's `unsafe_aliases`, and with `naive_inside` below (a phrase search on the lowercased
words plus the reading of a bare written number), so a checker that waves everything through fails here too.
Then the heuristic judge closes the loop: it accepts the gold and every alias, said alone or in a sentence, reads
each kind the way the generator means it, and rejects every wrong answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

import pytest

from dataset_builder.mpe import answers
from dataset_builder.mpe.answers import clock, code, contains, count, label, money, quantity, unsafe_aliases, weekday
from dataset_builder.mpe.numbers import clock_words, digit_words, named_clock, number_words
from metrics.answer_match import read_gold
from metrics.judges import HeuristicJudge

JUDGE = HeuristicJudge()


# --- known answers ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, args, expected", [
    (money, (12,), ("12", ["$12", "12 dollars", "twelve dollars"])),
    (money, (1,), ("1", ["$1", "1 dollar", "one dollar"])),
    (money, (20,), ("20", ["$20", "20 dollars", "twenty dollars"])),
    (count, (11, "chairs"), ("11", ["11 chairs", "eleven chairs"])),
    (count, (1, "life jackets"), ("1", ["1 life jacket", "one life jacket"])),
    (count, (1, "batteries"), ("1", ["1 battery", "one battery"])),
    (count, (1, "boxes"), ("1", ["1 box", "one box"])),
    (count, (2, "people"), ("2", ["2 people", "two people"])),
    (quantity, (300, "minutes"), ("300", ["300 minutes", "three hundred minutes"])),
    (quantity, (4000, "metres"), ("4000", ["4000 metres", "four thousand metres", "4000 meters",
                                           "four thousand meters"])),
    (quantity, (1, "litres"), ("1", ["1 litre", "one litre", "1 liter", "one liter"])),
    (quantity, (24, "cupcakes"), ("24", ["24 cupcakes", "twenty-four cupcakes"])),
    (clock, (5, 15), ("5:15", ["5 15", "5.15", "five fifteen", "quarter past five"])),
    (clock, (3, 0), ("3:00", ["3 o'clock", "three o'clock"])),  # never "three" or "3.00"
    (clock, (10, 5), ("10:05", ["10 05", "10.05", "ten oh five"])),
    (clock, (11, 45), ("11:45", ["11 45", "11.45", "eleven forty-five", "quarter to twelve"])),
    (clock, (12, 45), ("12:45", ["12 45", "12.45", "twelve forty-five", "quarter to one"])),
    (clock, (5, 30), ("5:30", ["5 30", "5.30", "half past five"])),  # not "five thirty": "five thirty-five"
    (clock, (7, 50), ("7:50", ["7 50", "7.50"])),
    (weekday, ("wednesday",), ("Wednesday", ["on Wednesday"])),
    (weekday, (" SUNDAY ",), ("Sunday", ["on Sunday"])),
    (code, ("4567",), ("4567", ["4 5 6 7", "four five six seven"])),
    (code, ("4057",), ("4057", ["4 0 5 7", "four zero five seven", "four oh five seven"])),
    (code, ("4050",), ("4050", ["4 0 5 0", "four zero five zero"])),  # a trailing "oh" reads as 405
    (label, ("B12", "gate"), ("B12", ["B 12", "B twelve", "gate B12", "gate B 12"])),
    (label, ("c 4", "taxi bay"), ("C4", ["C 4", "C four", "taxi bay C4", "taxi bay C 4"])),
    (label, ("340", "room"), ("340", ["room 340", "three four zero"])),  # "three forty": "three forty-one"
    (label, ("57", "locker"), ("57", ["locker 57", "locker fifty-seven", "five seven", "fifty-seven"])),
    (label, ("50", "locker"), ("50", ["locker 50", "five zero"])),  # "fifty": "fifty-one"
    (label, ("345",), ("345", ["three four five", "three hundred forty-five", "three forty-five"])),
])  # fmt: skip
def test_known_answers(kind: Callable[..., answers.Answer], args: tuple, expected: answers.Answer) -> None:
    assert kind(*args) == expected


def test_spoken_forms() -> None:
    assert (digit_words("4057"), digit_words("4057", "oh")) == ("four zero five seven", "four oh five seven")
    assert [clock_words(3, 0), clock_words(10, 5), clock_words(5, 15)] == ["three o'clock", "ten oh five",
                                                                            "five fifteen"]
    assert [named_clock(5, 15), named_clock(5, 30), named_clock(12, 45), named_clock(5, 20)] == [
        "quarter past five", "half past five", "quarter to one", None]
    with pytest.raises(ValueError, match="digits"):
        digit_words("4a")


def test_each_call_gets_its_own_aliases() -> None:
    first = money(7)
    first[1].clear()
    assert money(7)[1] == ["$7", "7 dollars", "seven dollars"]


@pytest.mark.parametrize("call", [
    lambda: money(-1), lambda: money(1_000_000), lambda: money(2.5), lambda: money(True),
    lambda: count(3, "chairs!"), lambda: count(3, ""), lambda: quantity(-5, "minutes"),
    lambda: clock(0, 5), lambda: clock(13, 0), lambda: clock(5, 60), lambda: clock(5, -1), lambda: clock(True, 5),
    lambda: weekday("Funday"), lambda: weekday("wed"),
    lambda: code("12a"), lambda: code("1"), lambda: code(""), lambda: code(4567),
    lambda: label("B-12x"), lambda: label("ABC12"), lambda: label("12", "room 5"), lambda: label(""),
])  # fmt: skip
def test_bad_input_is_refused(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


# --- the checker --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, form, inside", [
    ("three thirty", "three", True),                       # the issue: a whole hour's "three"
    ("3 30", "3.00", True),                                # ... and its "3.00", which is the number 3
    ("It's 3:30.", "3.00", False),                         # a clock time is not the number 3
    ("twenty-one cents", "twenty-one", True),
    ("21 cents", "$21", False),                            # a number with its unit is found only in that unit
    ("21 cents", "21 dollars", False),
    ("21 dollars", "$21", True),
    ("$21 each", "21 dollars", True),
    ("300 mins", "300 minutes", True),                     # the same unit, spelled another way
    ("300 seconds", "300 minutes", False),
    ("121 dollars", "21 dollars", False),                  # whole tokens, not characters
    ("one hundred twenty-one dollars", "twenty-one dollars", True),  # words in a row (why +100 is no near miss)
    ("three forty-one", "three forty", True),
    ("Room 341.", "room 34", False),
    ("Three O'Clock", "three o'clock", True),
    ("gate b 12", "B 12", True),
    ("four five six seven eight", "four five six seven", True),  # a code with a digit added (no near miss)
    ("", "three", False),
    ("three", "", False),
    ("?", "!", False),
])  # fmt: skip
def test_contains(text: str, form: str, inside: bool) -> None:
    assert contains(text, form) is inside


def test_unsafe_aliases_names_each_pair() -> None:
    legacy_three = ["3 00", "3.00", "3 o'clock", "three o'clock", "three"]  # what tasks.py wrote for 3:00
    assert unsafe_aliases(legacy_three, ["three thirty", "3 30", "half past three"]) == [
        ("3.00", "3 30"), ("three", "three thirty"), ("three", "half past three")]
    assert unsafe_aliases(clock(3, 0)[1], ["three thirty", "3 30", "half past three"]) == []


# --- the rule, against wrong answers written here -----------------------------------------------------------------

_WORDS = re.compile(r"\$?\d+(?:[.:]\d+)?|[a-z]+(?:'[a-z]+)?")
SAME_UNIT = {"mins": "minutes", "meters": "metres", "liter": "litre", "bucks": "dollars"}


def naive_inside(wrong: str, alias: str) -> bool:
    """The alias's words in a row in the wrong answer, or a bare written number ("3.00", "$21", "21 dollars")
    whose value the wrong answer has, in the same unit when the alias names one."""
    w, a = (_WORDS.findall(s.lower().replace("-", " ")) for s in (wrong, alias))
    if " ".join(a) and f" {' '.join(a)} " in f" {' '.join(w)} ":
        return True
    bare = re.fullmatch(r"(\$?)(\d+(?:\.\d+)?)(?: ([a-z]+))?", " ".join(a))
    if not bare:
        return False
    unit = "dollars" if bare.group(1) else bare.group(3)
    for i, tok in enumerate(w):
        if re.fullmatch(r"\$?\d+(?:\.\d+)?", tok) and float(tok.lstrip("$")) == float(bare.group(2)):
            here = "dollars" if tok.startswith("$") else (w[i + 1] if i + 1 < len(w) else None)
            if unit is None or (here and SAME_UNIT.get(here, here).rstrip("s") == unit.rstrip("s")):
                return True
    return False


def said(n: int | float, unit: str | None = None) -> list[str]:
    n = int(n) if float(n).is_integer() else n
    forms = [str(n)] + ([number_words(n)] if isinstance(n, int) and 0 <= n < 1_000_000 else [])
    return [f"{f} {unit}" for f in forms] if unit else forms


UNITS = ["dollars", "cents", "euros", "seconds", "minutes", "hours", "days", "weeks", "metres", "kilometres",
         "grams", "kilograms", "millilitres", "litres", "dozen"]


def number_misses(n: int, unit: str) -> list[str]:
    """Gold +- 1, 2, 10, times ten, a tenth, digits reversed, with the unit and bare; the same number in another
    unit."""
    others = {n - 10, n - 2, n - 1, n + 1, n + 2, n + 10, n * 10, n / 10, int(str(n)[::-1])} - {n}
    wrong = [f for o in others if o >= 0 for f in said(o, unit) + said(o)]
    return wrong + [f for u in UNITS if u.rstrip("s") != unit.rstrip("s") for f in said(n, u)] + [f"${n + 1}"]


def clock_forms(h: int, m: int) -> list[str]:
    hw = number_words(h)
    forms = [f"{h}:{m:02d}", f"{h} {m:02d}", f"{h}.{m:02d}", f"it's {h}:{m:02d}"]
    if m == 0:
        forms += [str(h), hw, f"{hw} o'clock", f"at {hw}", f"{hw} hours"]
    else:
        forms.append(f"{hw} {'oh ' if m < 10 else ''}{number_words(m)}")
    forms += {15: [f"quarter past {hw}"], 30: [f"half past {hw}"], 45: [f"quarter to {number_words(h % 12 + 1)}"]
              }.get(m, [])
    return forms


def clock_misses(h: int, m: int) -> list[str]:
    """Every other hour at these minutes, every other minute in this hour, and 5 to 30 minutes either side."""
    at = h * 60 + m
    times = {(x, m) for x in range(1, 13)} | {(h, x) for x in range(60)}
    times |= {(((at + d) // 60 - 1) % 12 + 1, (at + d) % 60) for d in (-30, -15, -10, -5, 5, 10, 15, 30)}
    return [f for t in sorted(times - {(h, m)}) for f in clock_forms(*t)]


def digit_misses(digits: str) -> list[str]:
    """One digit one up or down, two neighbours swapped, one digit dropped: written, spaced, and in words."""
    out = set()
    for i in range(len(digits)):
        for d in (1, 9):
            out.add(digits[:i] + str((int(digits[i]) + d) % 10) + digits[i + 1 :])
        out.add(digits[:i] + digits[i + 1 :])
        if i + 1 < len(digits):
            out.add(digits[:i] + digits[i + 1] + digits[i] + digits[i + 2 :])
    out -= {digits, ""}
    zero = {"0": "zero"}
    return [f for s in sorted(out) for f in (s, " ".join(s), " ".join(zero.get(c) or number_words(int(c)) for c in s),
                                             number_words(int(s)))]


def test_the_naive_check_sees_what_the_legacy_aliases_let_through() -> None:
    assert naive_inside("three thirty", "three") and naive_inside("3 30", "3.00")
    assert naive_inside("twenty-one cents", "twenty-one") and naive_inside("three hundred seconds", "three hundred")
    assert naive_inside("300 mins", "300 minutes") and naive_inside("$21", "21 dollars")
    assert not naive_inside("21 cents", "$21") and not naive_inside("three o'clock", "three thirty")


def assert_rule(aliases: list[str], wrong: list[str]) -> None:
    assert unsafe_aliases(aliases, wrong) == []
    assert [(a, w) for a in aliases for w in wrong if naive_inside(w, a)] == []


MONEY = [*range(0, 121), 199, 200, 300, 999, 1000, 4500, 99_999]


@pytest.mark.parametrize("n", MONEY)
def test_money_aliases_are_in_no_wrong_amount(n: int) -> None:
    assert_rule(money(n)[1], number_misses(n, "dollars"))


@pytest.mark.parametrize("n, unit", [(n, u) for n in (2, 11, 12, 20, 60, 100, 120, 300, 420, 3000, 4000, 9000)
                                     for u in ("minutes", "seconds", "metres", "grams", "cupcakes", "chairs")])
def test_quantity_and_count_aliases_are_in_no_wrong_amount(n: int, unit: str) -> None:
    assert_rule(quantity(n, unit)[1], number_misses(n, unit))
    assert_rule(count(n, unit)[1], number_misses(n, unit))


TIMES = [(h, m) for h in range(1, 13) for m in (*range(0, 60, 5), 1, 9, 59)]


@pytest.mark.parametrize("h", range(1, 13))
def test_clock_aliases_are_in_no_other_time(h: int) -> None:
    for hh, m in TIMES:
        if hh == h:
            assert_rule(clock(h, m)[1], clock_misses(h, m))


def test_weekday_aliases_are_in_no_other_day() -> None:
    for day in answers.WEEKDAYS:
        wrong = [f for other in answers.WEEKDAYS if other != day for f in (other, f"on {other}", f"it's {other}")]
        assert_rule(weekday(day)[1], wrong)


CODES = ["4567", "1111", "9090", "4050", "0425", "12", "123456"]


@pytest.mark.parametrize("digits", CODES)
def test_code_aliases_are_in_no_code_one_slip_away(digits: str) -> None:
    assert_rule(code(digits)[1], digit_misses(digits))


@pytest.mark.parametrize("value, noun", [
    ("340", "room"), ("101", "room"), ("489", "flat"), ("57", "locker"), ("50", "locker"), ("10", "table"),
    ("305", "page"), ("99", ""),
])  # fmt: skip
def test_number_label_aliases_are_in_no_label_one_slip_away(value: str, noun: str) -> None:
    wrong = digit_misses(value)
    assert_rule(label(value, noun)[1], wrong + [f"{noun} {w}" for w in wrong])


@pytest.mark.parametrize("letters, n", [("B", 12), ("A", 2), ("F", 30), ("C", 14)])
def test_letter_label_aliases_are_in_no_other_label(letters: str, n: int) -> None:
    other_letters = [chr(c) for c in range(ord("A"), ord("G")) if chr(c) != letters]
    wrong_labels = [(x, n) for x in other_letters] + [(letters, n - 1), (letters, n + 1), (letters, n * 10), ("", n)]
    wrong = [f for x, k in wrong_labels for f in (f"{x}{k}", f"{x} {k}", f"{x} {number_words(k)}", f"gate {x}{k}")]
    assert_rule(label(f"{letters}{n}", "gate")[1], [w.strip() for w in wrong])


# --- the judge reads these answers as meant ------------------------------------------------------------------------

SAMPLES = [
    ("A bill of 48 dollars split 4 ways: how much each?", partial(money, 12), "number", number_misses(12, "dollars")),
    ("How many chairs are needed?", partial(count, 11, "chairs"), "number", number_misses(11, "chairs")),
    ("5 hours: how many minutes is that?", partial(quantity, 300, "minutes"), "number", number_misses(300, "minutes")),
    ("2 minutes: how many seconds?", partial(quantity, 120, "seconds"), "number", number_misses(120, "seconds")),
    ("At what time does it arrive?", partial(clock, 5, 15), "clock", clock_misses(5, 15)),
    ("At what time does it arrive?", partial(clock, 3, 0), "clock", clock_misses(3, 0)),
    ("At what time does it arrive?", partial(clock, 10, 5), "clock", clock_misses(10, 5)),
    ("At what time does it arrive?", partial(clock, 12, 45), "clock", clock_misses(12, 45)),
    ("Which weekday is it now?", partial(weekday, "Wednesday"), "weekday", ["tuesday", "on thursday", "it's monday"]),
    ("What was the door code?", partial(code, "4057"), "digits", digit_misses("4057")),
    ("What was the gate?", partial(label, "B12", "gate"), "label", ["C12", "gate b 13", "a 12", "b 21", "gate d12"]),
    ("What was the room?", partial(label, "340", "room"), "digits", digit_misses("340")),
    ("What was the locker?", partial(label, "57", "locker"), "digits", digit_misses("57")),
]


@pytest.mark.parametrize("question, made, kind, wrong", SAMPLES, ids=[s[1].func.__name__ for s in SAMPLES])
def test_the_judge_accepts_every_alias_and_no_near_miss(question: str, made: partial[answers.Answer], kind: str,
                                                        wrong: list[str]) -> None:
    gold, aliases = made()
    assert read_gold(question, gold, aliases).kind == kind
    for form in [gold, *aliases]:
        for response in (form, f"the answer is {form}.", f"I think it's {form}"):
            assert JUDGE.judge_answer(question, gold, aliases, response).label == "correct", response
    accepted = [w for w in wrong if JUDGE.judge_answer(question, gold, aliases, w).label == "correct"]
    assert accepted == []


def test_the_judge_reads_the_unit_from_the_aliases() -> None:
    assert read_gold("How much?", *money(12)).units == {"dollars"}
    assert read_gold("How many?", *quantity(4000, "metres")).units == {"metres"}
    assert read_gold("How many?", *count(11, "life jackets")).units == {"jacket"}  # the head noun, any number
