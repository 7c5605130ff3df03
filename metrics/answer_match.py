"""The heuristic judge's answer rule: does a transcribed response state the gold answer, and no other answer?

Finding the gold or an alias somewhere in a response is not enough: "three thirty" contains "three", "300
seconds" contains 300, "12 dollars? no, each of you owes 9" contains 12. So the rule first reads what *kind* of
answer the gold is, from the gold itself with the aliases and the question as hints (`read_gold`):

- clock: a time in the gold ("5:15", "4:40 PM");
- weekday: a weekday name;
- label: letters and a number ("B12");
- digits: a digit string that is an identifier, not an amount (a code or room number: an alias reads it digit
  by digit or names it, "room 340", or the question asks for a code or a number);
- number: one number, with the unit it is in (from the gold, an alias such as "300 minutes", or the question);
- text: anything else, matched as a phrase, as before (but "not Paris" is not "Paris").

Then it lists the answers of that kind the response states, and sets aside what is not an answer: numbers the
question already gives ("48 dollars split 4 ways" -> 48 and 4), counts of people ("there are four of you"),
durations and counts next to a clock time, negated values ("not Tuesday", "more than 12"), and whatever a
correction takes back when another answer follows ("12? no, 9"). The response is correct when at least one
stated answer is the gold and none is anything else. A number must also be in the gold's unit when it names
one: "300 seconds" is not 300 minutes. For structured kinds the aliases never widen what counts as the gold,
so a weak alias in an old release ("three" for 3:00) cannot make "three thirty" pass.

Whisper writes some spoken numbers as digit groups: "one hundred eighty-nine" as "100 89" or "10089", "one
thousand five hundred twenty-nine" as "1500 29" or "150029" (benchmarks/bench_asr.py). For a number or a digit
gold (a whole number, no leading zero), a run of numbers that writes the gold's own spoken terms in blocks
(`digit_groups`: 1529 is said 1000 + 500 + 29, so "1000 529", "1500 29", "1000 500 29", optionally "and" between
the groups) reads as the gold, and so does such a run joined into one number when every group after the first has
two digits or more ("10089", "150029", not "1005", which is how whisper writes "one thousand five", a slip a
model can make). Only the gold's groups are read this way: "100" alone, "100 88" or "10088" are still wrong for
189, and a run whose groups are all numbers the question gives ("100 and 89 make ...") is not composed. A quantity
read digit by digit ("4 2" for 42) is two numbers, since a speaker says an amount as a number; a code or room
number read digit by digit is its digits, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dataset_builder.rules.answer_units import LABEL_NOUNS, WEEKDAYS, unit_dimension, unit_key
from dataset_builder.rules.spoken_digits import DIGIT_VALUES
from metrics.textnorm import normalize, words_to_numbers

# --- reading a transcript into tokens --------------------------------------------------------------------------


@dataclass(frozen=True)
class Tok:
    kind: str  # "time" (h:mm), "num", "word" or "punct"
    text: str


_TOKEN = re.compile(r"(\d{1,2}:\d{2})|((?:(?<![\w.])-)?\d+(?:\.\d+)?)|([a-z]+(?:'[a-z]+)*)|([,;?!]|\.(?!\d))")
_KINDS = ("time", "num", "word", "punct")
# "one" that is a pronoun, not a number ("each one pays 12"), and "one second" that is a pause, not a duration.
_PRONOUN_ONE = re.compile(r"\b(each|every|no|any|some|which|that|this|the|another|other|same|right|wrong)\s+one\b"
                          r"(?!\s*(?:-|hundred|thousand|million|point|dollars?|and a half))")
_ONE_MOMENT = re.compile(r"\b(just|wait|hold on)\s+(?:a|one)\s+(?:sec|second|moment|minute)\b")


def tokens(text: str) -> list[Tok]:
    """Numbers as digits, units and am/pm kept as words ("$12" -> 12 dollars, "four forty p.m." -> 4:40 pm)."""
    text = _ONE_MOMENT.sub(r"\1", _PRONOUN_ONE.sub(r"\1", text.lower()))
    return [Tok(_KINDS[(m.lastindex or 1) - 1], m.group()) for m in _TOKEN.finditer(words_to_numbers(text, True))]


def _word(toks: list[Tok], i: int) -> str | None:
    return toks[i].text if 0 <= i < len(toks) and toks[i].kind == "word" else None


def _int(toks: list[Tok], i: int) -> int | None:
    t = toks[i] if 0 <= i < len(toks) else None
    return int(t.text) if t is not None and t.kind == "num" and t.text.isdigit() else None


# A number followed by one of these counts people or shares ("4 of you", "6 ways"), not the answer.
_PEOPLE = frozenset({"people", "person", "persons", "guests", "friends", "ways", "of"})
# Words ending in "s" that are not plural nouns, so a number before them can still be a clock time ("at 5 plus").
_NOT_PLURAL = frozenset({"this", "thus", "plus", "less", "unless", "always", "perhaps", "across", "towards",
                         "besides", "does", "goes", "says", "was", "is", "its", "yes"})
_SKIP_BEFORE_UNIT = frozenset({"more", "extra", "whole", "full", "total"})


def _unit_after(toks: list[Tok], i: int) -> str | None:
    """The word a number at toks[i] counts, if one follows it ("300 minutes", "12 more dollars")."""
    j = i + 1
    while _word(toks, j) in _SKIP_BEFORE_UNIT:
        j += 1
    return _word(toks, j)


def _counts_things(word: str | None) -> bool:
    """Whether a number before `word` counts or measures something ("3 hours", "2 stops", "the 4 of us")."""
    if word is None:
        return False
    if unit_dimension(word) is not None or word in _PEOPLE or word in ("children", "men", "women"):
        return True
    return len(word) > 3 and word.endswith("s") and word not in _NOT_PLURAL


# --- what a response states, per kind of answer ------------------------------------------------------------------


@dataclass(frozen=True)
class Mention:
    value: Any  # float (number); (hour, minute, "am"/"pm"/None) (clock); str (weekday, digits, label)
    start: int  # index of its first token
    end: int  # one past its last token
    unit: str | None = None  # number: the word after it


def _numbers(toks: list[Tok]) -> list[Mention]:
    return [Mention(float(t.text), i, i + 1, _unit_after(toks, i)) for i, t in enumerate(toks) if t.kind == "num"]


_PAST = frozenset({"past", "after"})
_TO = frozenset({"to", "till", "til", "before", "of"})
_MINUTE_WORDS = frozenset({"minutes", "minute", "min", "mins"})
_NAMED_TIMES = {"noon": (12, 0, "pm"), "midday": (12, 0, "pm"), "midnight": (12, 0, "am")}


def _hour(toks: list[Tok], i: int) -> int | None:
    """An hour 1..12 at toks[i]: "5", or "5:00" (how "5 pm" and "5 o'clock" come out of the normaliser)."""
    t = toks[i] if 0 <= i < len(toks) else None
    if t is not None and t.kind == "time" and t.text.endswith(":00"):
        h = int(t.text[:-3])
        return h if 1 <= h <= 12 else None
    h = _int(toks, i)
    return h if h is not None and 1 <= h <= 12 else None


def _clock_at(toks: list[Tok], i: int) -> tuple[int, int, int] | None:
    """(hour, minute, end) of a clock reading starting at toks[i], or None."""
    t = toks[i]
    if t.kind == "time":
        h, m = map(int, t.text.split(":"))
        return (h, m, i + 1) if h < 24 and m < 60 else None
    if t.text in ("quarter", "half") and _word(toks, i + 1) in _PAST | _TO:
        h = _hour(toks, i + 2)
        if h is None:
            return None
        if toks[i + 1].text in _PAST:
            return h, 15 if t.text == "quarter" else 30, i + 3
        return ((h - 2) % 12 + 1, 45, i + 3) if t.text == "quarter" else None
    if re.fullmatch(r"\d{1,2}\.\d\d", t.text):  # "5.15", as a transcript may write a time
        h, m = map(int, t.text.split("."))
        return (h, m, i + 1) if 1 <= h <= 12 and m < 60 else None
    n = _int(toks, i)
    if n is None:
        return None
    j = i + 2 if _word(toks, i + 1) in _MINUTE_WORDS else i + 1
    h = _hour(toks, j + 1)
    if 0 < n < 60 and _word(toks, j) in _PAST | _TO and h is not None \
            and not _counts_things(_word(toks, j + 2)):  # "20 past 5", "10 minutes to 6"; not "5 to 10 minutes"
        return (h, n, j + 2) if toks[j].text in _PAST else ((h - 2) % 12 + 1, 60 - n, j + 2)
    if 1 <= n <= 12 and len(t.text) <= 2:
        m = _int(toks, i + 2)
        if _word(toks, i + 1) == "oh" and m is not None and m < 10:  # "10 oh 5"
            return n, m, i + 3
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if nxt is not None and nxt.kind == "num":  # "5 15" (five fifteen), never "5 5"
            ok = nxt.text.isdigit() and len(nxt.text) == 2 and int(nxt.text) < 60
            return (n, int(nxt.text), i + 2) if ok and not _counts_things(_word(toks, i + 2)) else None
        return None if _counts_things(_word(toks, i + 1)) else (n, 0, i + 1)  # a bare hour: "at 3"
    if len(t.text) in (3, 4) and not _counts_things(_word(toks, i + 1)):  # "515": "five fifteen" run together
        h, m = divmod(n, 100)
        return (h, m, i + 1) if 1 <= h <= 23 and m < 60 else None
    return None


def _clocks(toks: list[Tok]) -> list[Mention]:
    out, i = [], 0
    while i < len(toks):
        named = _NAMED_TIMES.get(toks[i].text)
        reading = _clock_at(toks, i)
        if named:
            out.append(Mention(named, i, i + 1))
        elif reading:
            h, m, end = reading
            meridiem = _word(toks, end) if _word(toks, end) in ("am", "pm") else None
            out.append(Mention((h, m, meridiem), i, end + (meridiem is not None)))
            i = out[-1].end
            continue
        i += 1
    return out


_DAYS = frozenset(d.lower() for d in WEEKDAYS)


def _weekdays(toks: list[Tok]) -> list[Mention]:
    out = []
    for i, t in enumerate(toks):
        w = t.text.removesuffix("'s")
        w = w[:-1] if w[:-1] in _DAYS else w  # "mondays"
        if w in _DAYS:
            out.append(Mention(w, i, i + 1))
    return out


def _digit_run(toks: list[Tok], i: int) -> tuple[str, int] | None:
    """Adjacent whole numbers from toks[i] joined as one digit string ("4 5 6 7", "45 67", "3 40", "34 oh"), with
    single digits also joined across commas ("4, 5, 6, 7"), and its end; None if none starts there."""
    if _int(toks, i) is None:
        return None
    parts, j = [toks[i].text], i + 1
    while True:
        if _int(toks, j) is not None:
            parts.append(toks[j].text)
            j += 1
        elif _word(toks, j) == "oh":  # "three four oh": the normaliser reads "oh" as 0 only between digits
            parts.append("0")
            j += 1
        elif toks[j - 1].text.isdigit() and len(toks[j - 1].text) == 1 and j + 1 < len(toks) \
                and toks[j].text == "," and _int(toks, j + 1) is not None and len(toks[j + 1].text) == 1:
            parts.append(toks[j + 1].text)
            j += 2
        else:
            return "".join(parts), j


# A code read out digit by digit that an ASR writes as a decimal ("four seven three five" -> "4.735"): no point was
# said, so for a code or room number the digits are what was heard.
_DOTTED_DIGITS = re.compile(r"\d\.\d{2,}")


def _digit_strings(toks: list[Tok]) -> list[Mention]:
    out, i = [], 0
    while i < len(toks):
        if _DOTTED_DIGITS.fullmatch(toks[i].text) and not _counts_things(_word(toks, i + 1)):
            out.append(Mention(toks[i].text.replace(".", ""), i, i + 1))
            i += 1
            continue
        run = _digit_run(toks, i)
        if run is None:
            i += 1
            continue
        digits, end = run
        after = _word(toks, end)  # "4 5 6 7" is a code; "2 doors" and "the 3rd floor" are not
        if not _counts_things(after) and after not in LABEL_NOUNS:
            out.append(Mention(digits, i, end))
        i = end
    return out


# Letter names as a transcript may spell them ("gate bee twelve"); only ones that are not common words.
_LETTER_NAMES = {"bee": "b", "cee": "c", "dee": "d", "eff": "f", "gee": "g", "aitch": "h", "jay": "j", "kay": "k",
                 "pee": "p", "tee": "t", "vee": "v", "zed": "z", "zee": "z"}


def _labels(toks: list[Tok], gold_letters: str) -> list[Mention]:
    """Letters then a number ("b 12", "b12", "bee twelve"). "a" and "i" count as letters only when they are the
    gold's letters or follow a label noun ("gate a 12"): otherwise they are words ("it's a 12 minute walk")."""
    out = []
    for i in range(len(toks)):
        w = _word(toks, i)
        letter = _LETTER_NAMES.get(w, w) if w else None
        if letter is None or not (letter == gold_letters or len(letter) == 1):
            continue
        if letter in ("a", "i") and letter != gold_letters and _word(toks, i - 1) not in LABEL_NOUNS:
            continue
        run = _digit_run(toks, i + 1)
        if run is not None:
            out.append(Mention(letter + run[0], i, run[1]))
    return out


# --- numbers whisper writes as digit groups ---------------------------------------------------------------------


def spoken_terms(n: int) -> list[int]:
    """The terms a speaker says for a whole number n >= 0, in order: 1529 -> [1000, 500, 29] ("one thousand five
    hundred twenty-nine"); 189 -> [100, 89]; 2009 -> [2000, 9]."""
    thousands, rest = divmod(n, 1000)
    hundreds, units = divmod(rest, 100)
    return [t for t in (thousands * 1000, hundreds * 100, units) if t]


def digit_groups(n: int) -> list[tuple[int, ...]]:
    """How whisper may write n said aloud other than as n: its spoken terms cut into two or more contiguous blocks,
    each block written as its sum. 189 -> [(100, 89)]; 1529 -> [(1000, 529), (1500, 29), (1000, 500, 29)]."""
    terms = spoken_terms(n)
    out = []
    for cuts in range(1, 2 ** max(len(terms) - 1, 0)):  # bit i set: a block ends after term i
        blocks, acc = [], 0
        for i, t in enumerate(terms):
            acc += t
            if i == len(terms) - 1 or cuts >> i & 1:
                blocks.append(acc)
                acc = 0
        out.append(tuple(blocks))
    return out


def _groups_end(toks: list[Tok], i: int, groups: tuple[int, ...]) -> int | None:
    """The end of `groups` written as numbers from toks[i] ("100 89", "1500 and 29"), or None."""
    j = i
    for k, g in enumerate(groups):
        if k and _word(toks, j) == "and":
            j += 1
        if _int(toks, j) != g or toks[j].text != str(g):  # "100 089" is not a spoken group
            return None
        j += 1
    return j


def compose_groups(toks: list[Tok], gold: int, given: set[int]) -> tuple[list[Tok], list[str]]:
    """`toks` with every writing of `gold` as digit groups (module docstring) replaced by one number token, and
    what each of them was heard as."""
    forms = [g for g in digit_groups(gold) if not all(x in given for x in g)]
    joined = {"".join(map(str, g)) for g in forms if all(len(str(x)) > 1 for x in g[1:])}
    out: list[Tok] = []
    heard: list[str] = []
    i = 0
    while i < len(toks):
        end = i + 1 if toks[i].kind == "num" and toks[i].text in joined else \
            next((e for g in forms if (e := _groups_end(toks, i, g)) is not None), None)
        if end is None:
            out.append(toks[i])
            i += 1
            continue
        heard.append(" ".join(t.text for t in toks[i:end]))
        out.append(Tok("num", str(gold)))
        i = end
    return out, heard


# --- the gold ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gold:
    kind: str  # "clock", "weekday", "label", "digits", "number" or "text"
    values: tuple[Any, ...]  # what counts as the gold, as the kind's reader gives it
    units: frozenset[str] = frozenset()  # number: unit keys the answer is in (empty: not known)
    other_nouns: frozenset[str] = frozenset()  # number: what the question's own numbers count ("adults")
    measure: bool = False  # number: the unit is a measure (a count of people is then never the answer)

    def same(self, a: Any, b: Any) -> bool:
        if self.kind == "number":
            return bool(abs(a - b) <= 1e-6)
        if self.kind == "clock":
            return _clock_same(a, b)
        return bool(a == b)


def _clock_key(v: tuple[int, int, str | None]) -> tuple[int, int, str | None]:
    h, m, meridiem = v
    if h == 0:
        return 12, m, "am"
    if h > 12:
        return h - 12, m, "pm"
    return h, m, meridiem


def _clock_same(a: tuple[int, int, str | None], b: tuple[int, int, str | None]) -> bool:
    (ha, ma, ra), (hb, mb, rb) = _clock_key(a), _clock_key(b)
    return ha == hb and ma == mb and (ra is None or rb is None or ra == rb)


_LABEL_GOLD = re.compile(r"([A-Za-z]{1,2})[\s-]?(\d+)")
_ASKS_FOR_ID = re.compile(r"\b(?:code|pin|number)\b(?!\s+of\b)")
_QUESTION_UNIT = re.compile(r"\b(?:into|in|how many)\s+([a-z]+)")


def _is_identifier(gold: str, aliases: list[str], question: str) -> bool:
    """A digit gold is a code or room number, not an amount, when an alias reads it digit by digit ("4 5 6 7",
    "three four zero") or names it ("room 340"), or the question asks for a code or a number."""
    for alias in aliases:
        words = alias.lower().replace("-", " ").split()
        if all(w in DIGIT_VALUES or (w.isdigit() and len(w) == 1) for w in words) and len(words) > 1 \
                and "".join(str(DIGIT_VALUES.get(w, w)) for w in words) == gold:
            return True
        toks = tokens(alias)
        if len(toks) == 2 and toks[0].text in LABEL_NOUNS and toks[1].text == gold:
            return True
    return bool(_ASKS_FOR_ID.search(question.lower())) and "how many" not in question.lower()


def _number_gold(question: str, gold: str, aliases: list[str]) -> Gold | None:
    toks = [t for t in tokens(gold) if t.kind != "punct"]
    if not toks or toks[0].kind != "num" or any(t.kind != "word" for t in toks[1:]):
        return None
    value = float(toks[0].text)
    # The unit is the last word: the head of "11 score sheets", "150 minutes".
    units = {unit_key(toks[-1].text)} if len(toks) > 1 else set()
    for alias in aliases:
        a = [t for t in tokens(alias) if t.kind != "punct"]
        if len(a) > 1 and a[0].kind == "num" and abs(float(a[0].text) - value) <= 1e-6 \
                and all(t.kind == "word" for t in a[1:]):
            units.add(unit_key(a[-1].text))
    q = tokens(question)
    if not units:  # "into minutes", "in dollars", "how many minutes"
        units = {unit_key(w) for w in _QUESTION_UNIT.findall(question.lower()) if unit_dimension(w) is not None}
    other = {unit_key(w) for i in range(len(q)) if q[i].kind == "num" and (w := _unit_after(q, i))} - units
    measure = any(unit_dimension(u) not in (None, "count") for u in units)
    return Gold("number", (value,), frozenset(units), frozenset(other), measure)


def read_gold(question: str, gold: str, aliases: list[str]) -> Gold:
    """The kind of answer `gold` is and the values that count as it (see the module docstring)."""
    toks = [t for t in tokens(gold) if t.kind != "punct"]
    if any(t.kind == "time" for t in toks):
        return Gold("clock", tuple(m.value for m in _clocks(toks)))
    days = _weekdays(toks)
    if days and len(toks) <= 2:
        return Gold("weekday", (days[0].value,))
    stripped = gold.strip()
    label = _LABEL_GOLD.fullmatch(stripped)
    if label:
        return Gold("label", (label.group(1).lower() + label.group(2),))
    if stripped.isdigit() and _is_identifier(stripped, aliases, question):
        return Gold("digits", (stripped,))
    return _number_gold(question, gold, aliases) or Gold("text", ())


# --- the decision -------------------------------------------------------------------------------------------------

_NEGATORS = frozenset({"not", "isn't", "isnt", "wasn't", "aren't", "never", "nor", "than"})
_SKIP_BEFORE = frozenset({"a", "an", "the", "at", "on", "by", "in", "to", "exactly", "quite", "just", "until",
                          "till", "really", "even", "about", "around", *LABEL_NOUNS})
_CORRECTIONS = frozenset({"no", "nope", "sorry", "actually", "wait", "oops", "correction", "rather", "scratch"})


def _negated(toks: list[Tok], start: int) -> bool:
    """"not Tuesday", "isn't at 5:15", "more than 12", "instead of 9": the value is not what is stated."""
    j = start - 1
    while j >= start - 3 and _word(toks, j) in _SKIP_BEFORE:
        j -= 1
    w = _word(toks, j)
    return w in _NEGATORS or (w == "of" and _word(toks, j - 1) == "instead")


def _corrections(toks: list[Tok]) -> list[int]:
    return [i for i, t in enumerate(toks) if t.text in _CORRECTIONS or (t.text == "mean" and _word(toks, i - 1) == "i")]


def _mentions(gold: Gold, toks: list[Tok]) -> list[Mention]:
    readers: dict[str, Callable[[list[Tok]], list[Mention]]] = {
        "clock": _clocks, "weekday": _weekdays, "digits": _digit_strings, "number": _numbers,
        "label": lambda t: _labels(t, re.sub(r"\d", "", gold.values[0])),
    }
    return readers[gold.kind](toks)


def _unit_fits(gold: Gold, unit: str | None) -> bool:
    """A number's unit fits the gold's: none named, the same one, or a word that is neither a unit of measure nor
    something else the question counts ("12 each" fits dollars; "12 cents", "12 adults" do not)."""
    if unit is None or not gold.units:
        return True
    key = unit_key(unit)
    return key in gold.units or (unit_dimension(unit) is None and key not in gold.other_nouns)


def _classify(gold: Gold, m: Mention, given: list[Any]) -> str:
    """"gold", "wrong", or "aside" (not an answer: a number the question gives, a count of people)."""
    is_gold = any(gold.same(m.value, v) for v in gold.values)
    if gold.kind == "number":
        if m.unit in _PEOPLE:
            return "gold" if is_gold and not gold.measure else "aside"
        is_gold = is_gold and _unit_fits(gold, m.unit)
    if is_gold:
        return "gold"
    return "aside" if any(gold.same(m.value, v) for v in given) else "wrong"


def _whole(gold: Gold) -> int | None:
    """A number or digit gold as the whole number a speaker says: none with a fraction, a leading zero ("0409" is
    said "oh four oh nine") or a million or more (written 1e+06 here, and said in millions)."""
    if gold.kind == "digits":
        text = gold.values[0]
    elif gold.kind == "number":
        text = f"{gold.values[0]:g}"
    else:
        return None  # a clock, weekday or label is read by its own kind's rules
    return int(text) if text.isdigit() and not text.startswith("0") else None


def _said(toks: list[Tok], m: Mention) -> str:
    return " ".join(t.text for t in toks[m.start : m.end]) + (f" {m.unit}" if m.unit else "")


def match(question: str, gold_answer: str, aliases: list[str], response: str) -> tuple[bool, str]:
    """(correct, reason): whether `response` states `gold_answer` and no other answer (module docstring)."""
    gold = read_gold(question, gold_answer, aliases)
    if gold.kind == "text":
        return _match_text(gold_answer, aliases, response)
    toks = tokens(response)
    qtoks = tokens(question)
    given = [m.value for m in _mentions(gold, qtoks)]
    heard: list[str] = []
    whole = _whole(gold)
    if whole is not None:  # "100 89" for 189 (module docstring)
        toks, heard = compose_groups(toks, whole, {n for i in range(len(qtoks)) if (n := _int(qtoks, i))})
    live = [(m, c) for m in _mentions(gold, toks) if not _negated(toks, m.start)
            for c in [_classify(gold, m, given)] if c != "aside"]
    for p in reversed(_corrections(toks)):  # "12? no, 9": what follows a correction replaces what came before
        if any(m.start < p for m, _ in live) and any(m.start > p for m, _ in live):
            live = [(m, c) for m, c in live if m.start > p]
            break
    stated = [_said(toks, m) for m, c in live if c == "gold"]
    wrong = [_said(toks, m) for m, c in live if c == "wrong"]
    note = f" (heard as {', '.join(repr(h) for h in heard)})" if heard else ""
    if stated and not wrong:
        return True, f"{gold.kind}: states {', '.join(stated)}{note}"
    if wrong:
        return False, f"{gold.kind}: states {', '.join(stated + wrong)}, not only {gold_answer!r}{note}"
    return False, f"{gold.kind}: no answer of this kind stated"


# --- free-text golds -----------------------------------------------------------------------------------------------

_ARTICLES = frozenset({"a", "an", "the"})


def content_tokens(text: str) -> list[str]:
    """Normalised tokens without articles, numbers as digits: how a text gold and a response are compared."""
    return [t for t in normalize(words_to_numbers(text)) if t not in _ARTICLES]


def _text_negated(hay: list[str], i: int) -> bool:
    prev = hay[i - 1] if i > 0 else ""
    return prev in ("not", "never", "than") or (prev == "t" and i >= 2 and hay[i - 2] in ("isn", "wasn", "aren"))


def _match_text(gold: str, aliases: list[str], response: str) -> tuple[bool, str]:
    hay = content_tokens(response)
    for cand in [gold, *aliases]:
        needle = content_tokens(cand)
        n = len(needle)
        for i in range(len(hay) - n + 1 if n else 0):
            if hay[i : i + n] == needle and not _text_negated(hay, i):
                return True, f"phrase {cand!r} found"
    return False, "no gold/alias phrase in response"
