"""Gold answers for Duplex-MPE's task T: one function per kind of answer, each returning `(gold, aliases)`.

The gold is canonical: digits ("12", "300"), a 12-hour clock time without am/pm ("5:15", "3:00"), a weekday
name ("Wednesday"), a digit string ("4567"), a label ("B12", "340"). The aliases are other ways of saying
exactly that answer, for judges that look for them in a transcript. The rule: **no alias is a form that a
plausible wrong answer contains.** So a whole hour has no alias "three" ("three thirty" contains it) and no
"3.00" (it is the number 3, which "3 30" contains); a sum of money has no bare "twenty-one" ("twenty-one
cents"); a conversion has no unit-less number ("300 seconds" for 300 minutes).

Each function builds its candidate aliases and keeps the ones `unsafe_aliases` clears against that answer's
near misses: the gold +- small deltas, times ten, its digits reversed, the same number with every other unit;
every other hour at the same minutes and every other minute in the same hour; the other weekdays; a code or
label with one digit changed, two swapped or one dropped, or another letter. Each near miss is checked in the
ways it is said ("3:30", "3 30", "three thirty", "half past three"). The rule thus holds for every input, and a
candidate that breaks it for some input ("fifty" for locker 50: "fifty-one") is simply not offered. Not counted
as a near miss: a code with a digit added, which contains any digit-by-digit reading ("4 5 6 7" in "4 5 6 7 8"),
and numbers a hundred or more away that end in the gold's words ("one hundred twenty-one" for 21); the judge
reads whole numbers and digit strings, so neither passes it.

A response that states a wrong answer *and* the gold ("12 dollars? no, 9 each") is the judge's problem:
metrics/answer_match.py reads the kind of answer from these golds, aliases and the question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dataset_builder.mpe.numbers import clock_words, digit_words, named_clock, number_words
from dataset_builder.rules.answer_units import UNITS, WEEKDAYS, canonical_unit, singular, unit_key

Answer = tuple[str, list[str]]  # (gold, aliases)

# --- the checker -----------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\$?\d+(?:[.:]\d+)?|[a-z]+(?:'[a-z]+)?|\|")
_NUMBER = re.compile(r"\$?\d+(?:\.\d+)?")


def _tokens(text: str) -> list[str]:
    """Lowercase words and numbers; hyphens split words, as in "twenty-one" = "twenty one". "|" is a token of its
    own, so the checker can keep texts apart."""
    return _TOKEN.findall(text.lower().replace("-", " "))


def _one_number(tokens: list[str]) -> tuple[float, str | None] | None:
    """(value, unit key) when a form is a single written number, with or without its unit ("3.00", "$21",
    "300 minutes"); such a form is in any text that has that number (with that unit, if it names one)."""
    if not 1 <= len(tokens) <= 2 or not _NUMBER.fullmatch(tokens[0]):
        return None
    unit = "dollars" if tokens[0].startswith("$") else None
    if len(tokens) == 2:
        if unit or not tokens[1].isalpha():
            return None
        unit = unit_key(tokens[1])
    return float(tokens[0].lstrip("$")), unit


# A written number as a token, and the word after it (its unit), in a string of tokens joined by spaces.
_WRITTEN = re.compile(r"(?<![^ ])(\$?)(\d+(?:\.\d+)?)(?![^ ])(?: ([a-z]+)(?= ))?")


class _Said:
    """Texts read once for the checker: their words, as one string in which "|" keeps the texts apart, and the
    numbers written in them, each with the unit word after it (and without: "3" is in "3 hours")."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.words = f" | {' '.join(_tokens(' | '.join(texts)))} | "
        self.numbers: set[tuple[float, str | None]] = set()
        for m in _WRITTEN.finditer(self.words):
            value = float(m.group(2))
            unit = "dollars" if m.group(1) else (unit_key(m.group(3)) if m.group(3) else None)
            self.numbers |= {(value, unit), (value, None)}

    def has(self, form: str) -> bool:
        needle = _tokens(form)
        if not needle:
            return False
        return f" {' '.join(needle)} " in self.words or _one_number(needle) in self.numbers


def contains(text: str, form: str) -> bool:
    """Whether `text` contains `form`: its words in a row (case, punctuation and hyphens aside), or, for a form
    that is one written number, that number's value ("3.00" is in "3 30"; "$21" is in "21 dollars", not in
    "21 cents")."""
    return _Said([text]).has(form)


def unsafe_aliases(aliases: Iterable[str], wrong_answers: Iterable[str]) -> list[tuple[str, str]]:
    """Every (alias, wrong answer) pair where the wrong answer contains the alias; empty when the rule holds."""
    wrong = [(w, _Said([w])) for w in wrong_answers]
    return [(a, w) for a in aliases for w, said in wrong if said.has(a)]


def _keep_safe(gold: str, candidates: list[str], wrong_answers: list[str]) -> list[str]:
    """The candidates no wrong answer contains (the test of `unsafe_aliases`, with the wrong answers read once
    for all candidates), the gold itself left out."""
    said = _Said(wrong_answers)
    return [a for a in dict.fromkeys(candidates) if not said.has(a) and a.lower() != gold.lower()]


# --- numbers with a unit ---------------------------------------------------------------------------------------

def _check_count(value: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1_000_000:
        raise ValueError(f"{what} must be a whole number in 0..999999, got {value!r}")


def _noun_for(value: int, noun: str) -> str:
    return singular(noun) if value == 1 else noun


def _said(value: int, noun: str | None) -> list[str]:
    """A number as digits and as words, with its noun if any ("21 dollars", "twenty-one dollars")."""
    forms = [str(value), number_words(value)]
    return [f"{f} {_noun_for(value, noun)}" for f in forms] if noun else forms


def _number_misses(value: int, noun: str) -> list[str]:
    """Near misses of `value` `noun`: other numbers (with the noun and without), the same number in other units."""
    others = {value + d for d in (-10, -2, -1, 1, 2, 10)} | {value * 10, int(str(value)[::-1])}
    if value % 10 == 0:
        others.add(value // 10)
    wrong: list[str] = []
    for other in sorted(o for o in others - {value} if 0 <= o < 1_000_000):
        wrong += _said(other, noun) + _said(other, None)
    for unit in UNITS:
        if unit != unit_key(noun):
            wrong += _said(value, unit)
    return wrong


def _with_noun(value: int, noun: str, extra: list[str]) -> Answer:
    _check_count(value, "the value")
    noun = noun.strip().lower()
    if not re.fullmatch(r"[a-z]+(?: [a-z]+)*", noun):
        raise ValueError(f"the unit or noun must be words, got {noun!r}")
    word = _noun_for(value, noun)
    candidates = [*extra, f"{value} {word}", f"{number_words(value)} {word}"]
    # The other spelling of metric units ("meters" for "metres"), as a transcript may write it.
    us = word.replace("tre", "ter")
    if us != word and canonical_unit(us) == canonical_unit(word):
        candidates += [f"{value} {us}", f"{number_words(value)} {us}"]
    gold = str(value)
    return gold, _keep_safe(gold, candidates, _number_misses(value, noun))


def money(dollars: int) -> Answer:
    """A whole-dollar amount: money(12) -> ("12", ["$12", "12 dollars", "twelve dollars"])."""
    _check_count(dollars, "dollars")
    return _with_noun(dollars, "dollars", [f"${dollars}"])


def count(n: int, noun: str) -> Answer:
    """A number of things, `noun` in the plural: count(11, "chairs") -> ("11", ["11 chairs", "eleven chairs"])."""
    return _with_noun(n, noun, [])


def quantity(value: int, unit: str) -> Answer:
    """An amount in a unit, `unit` in the plural as the question says it ("minutes", "metres", "eggs", "dozen"):
    quantity(4000, "metres") -> ("4000", ["4000 metres", "four thousand metres", "4000 meters", ...])."""
    return _with_noun(value, unit, [])


# --- clock times -----------------------------------------------------------------------------------------------

def _clock_forms(hour: int, minute: int) -> list[str]:
    """The ways hour:minute is said or transcribed: "5:15", "5 15", "5.15", "515", "five fifteen", "quarter
    past five"; a whole hour also as "5 o'clock", "five", "5", and as a duration ("5 hours")."""
    forms = [f"{hour}:{minute:02d}", f"{hour} {minute:02d}", f"{hour}.{minute:02d}", f"{hour}{minute:02d}",
             clock_words(hour, minute)]
    if minute == 0:
        forms += [f"{hour} o'clock", str(hour), number_words(hour), f"{hour} hours", f"{number_words(hour)} hours"]
    named = named_clock(hour, minute)
    return forms + ([named] if named else [])


def _clock_misses(hour: int, minute: int) -> list[str]:
    """Every other hour at the same minutes, every other minute in the same hour, and the times 5, 10, 15, 30,
    60 and 120 minutes either side, each in all the ways it is said."""
    at = hour % 12 * 60 + minute
    times = {(h, minute) for h in range(1, 13)} | {(hour, m) for m in range(60)}
    for d in (5, 10, 15, 30, 60, 120):
        for t in (at - d, at + d):
            h, m = divmod(t % 720, 60)
            times.add((h or 12, m))
    times.discard((hour, minute))
    return [form for h, m in sorted(times) for form in _clock_forms(h, m)]


def clock(hour: int, minute: int) -> Answer:
    """A 12-hour clock time without am/pm, hour 1..12: clock(5, 15) -> ("5:15", ["5 15", "5.15", "five fifteen",
    "quarter past five"]); clock(3, 0) -> ("3:00", ["3 o'clock", "three o'clock"]), never "three" or "3.00"."""
    if not (1 <= hour <= 12 and 0 <= minute <= 59) or isinstance(hour, bool) or isinstance(minute, bool):
        raise ValueError(f"clock needs hour 1..12 and minute 0..59, got {hour}:{minute}")
    gold = f"{hour}:{minute:02d}"
    if minute == 0:
        candidates = [f"{hour} o'clock", clock_words(hour, 0)]
    else:
        candidates = [f"{hour} {minute:02d}", f"{hour}.{minute:02d}", clock_words(hour, minute)]
        named = named_clock(hour, minute)
        candidates += [named] if named else []
    return gold, _keep_safe(gold, candidates, _clock_misses(hour, minute))


# --- weekdays --------------------------------------------------------------------------------------------------

def weekday(name: str) -> Answer:
    """A day of the week, any case: weekday("wednesday") -> ("Wednesday", ["on Wednesday"])."""
    day = name.strip().capitalize()
    if day not in WEEKDAYS:
        raise ValueError(f"not a weekday: {name!r}")
    wrong = [f for other in WEEKDAYS if other != day for f in (other, f"on {other}", f"next {other}")]
    return day, _keep_safe(day, [f"on {day}"], wrong)


# --- codes and labels ------------------------------------------------------------------------------------------

def _number_readings(digits: str) -> list[str]:
    """A digit string read as a number ("four thousand five hundred sixty-seven") and in pairs, the way people
    read codes and room numbers ("forty-five sixty-seven", "three forty")."""
    forms = [number_words(int(digits))] if len(digits) <= 6 else []
    head, tail = digits[:-2], digits[-2:]
    if head and head[0] != "0" and tail[0] != "0":
        forms.append(f"{number_words(int(head))} {number_words(int(tail))}")
    return forms


def _digit_forms(digits: str) -> list[str]:
    """Every way a digit string is said or written: "4567", "4 5 6 7", digit by digit (with zero and with oh),
    as a number and in pairs."""
    return [digits, " ".join(digits), digit_words(digits), digit_words(digits, "oh"), *_number_readings(digits)]


def _digit_misses(digits: str) -> list[str]:
    """Digit strings one slip away: a digit one up or down, two neighbours swapped, a digit dropped."""
    out = set()
    for i, c in enumerate(digits):
        for d in (1, 9):
            out.add(digits[:i] + str((int(c) + d) % 10) + digits[i + 1 :])
        if i + 1 < len(digits):
            out.add(digits[:i] + digits[i + 1] + c + digits[i + 2 :])
        if len(digits) > 1:
            out.add(digits[:i] + digits[i + 1 :])
    out.discard(digits)
    return sorted(out)


def _oh_reading(digits: str) -> list[str]:
    """"four oh five seven" when a zero sits between other digits. A leading or trailing "oh" is left out: it
    reads as an interjection, and a normaliser takes "three four oh" for 34."""
    inner = digits[1:-1]
    return [digit_words(digits, "oh")] if "0" in inner and digits[0] != "0" and digits[-1] != "0" else []


def code(digits: str) -> Answer:
    """A code said digit by digit, as a string of digits: code("4057") -> ("4057", ["4 0 5 7",
    "four zero five seven", "four oh five seven"])."""
    if not (isinstance(digits, str) and digits.isdigit() and len(digits) >= 2):
        raise ValueError(f"a code is a string of two or more digits, got {digits!r}")
    candidates = [" ".join(digits), digit_words(digits), *_oh_reading(digits)]
    wrong = [form for miss in _digit_misses(digits) for form in _digit_forms(miss)]
    return digits, _keep_safe(digits, candidates, wrong)


_LABEL = re.compile(r"([A-Za-z]{0,2})[\s-]?(\d+)")


def label(value: str, noun: str = "") -> Answer:
    """An identifier: optional letters and a number, with the noun it belongs to ("gate", "room", "locker").

    label("B12", "gate") -> ("B12", ["B 12", "B twelve", "gate B12", "gate B 12"]);
    label("340", "room") -> ("340", ["room 340", "three four zero"]) — not "three forty", which room 341
    ("three forty-one") contains.
    """
    m = _LABEL.fullmatch(value.strip())
    noun = noun.strip().lower()
    if not m or (noun and not re.fullmatch(r"[a-z]+(?: [a-z]+)*", noun)):
        raise ValueError(f"a label is up to two letters and a number, with a noun in words; got {value!r}, {noun!r}")
    letters, digits = m.group(1).upper(), m.group(2)
    gold = letters + digits
    prefix = f"{noun} " if noun else ""
    if letters:
        said = [f"{letters} {digits}", f"{letters} {number_words(int(digits))}"]
        candidates = said + ([f"{noun} {gold}", f"{noun} {letters} {digits}"] if noun else [])
        other_letters = {chr(c) for c in range(ord("A"), ord("Z") + 1)} - {letters[-1]}
        wrong_labels = [(letters[:-1] + x, digits) for x in sorted(other_letters)]
        wrong_labels += [(letters, d) for d in _digit_misses(digits)] + [("", digits)]
        wrong = [f"{prefix}{lets} {form}".replace("  ", " ").strip() for lets, d in wrong_labels
                 for form in (d, number_words(int(d)))] + [f"{prefix}{lets}{d}" for lets, d in wrong_labels]
    else:
        candidates = [f"{noun} {digits}", f"{noun} {number_words(int(digits))}"] if noun else []
        candidates += [digit_words(digits), *_oh_reading(digits), *_number_readings(digits)]
        wrong = [f"{p}{form}" for miss in _digit_misses(digits) for form in _digit_forms(miss)
                 for p in ("", prefix)]
    return gold, _keep_safe(gold, candidates, wrong)
