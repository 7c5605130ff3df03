"""Text normalisation shared by judges, verifiers and agents: spelled numbers -> digits, times, currency.

Built for what ASR (whisper) writes back — "150 minutes.", "$21.", "It's 4:40 PM.", "twenty one" — and for
gold answers written by hand; both sides go through the same functions, so they meet in one form.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal

from dataset_builder.rules.spoken_digits import DIGIT_VALUES, DIGIT_WORDS

_UNITS = {w: i for i, w in enumerate(DIGIT_WORDS)}
_TEENS = {
    w: 10 + i
    for i, w in enumerate(
        "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
# Word ordinals. "first" and "second" only count after a tens word ("twenty first"): alone they are mostly
# not numbers ("first of all", "one second").
_ORD_UNITS = {"third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9}
_ORD_UNITS_AFTER_TENS = {"first": 1, "second": 2, **_ORD_UNITS}
_ORD_TEENS = {
    "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
    "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
}  # fmt: skip
_ORD_TENS = {w[:-1] + "ieth": v for w, v in _TENS.items()}  # twentieth ... ninetieth
_DIGIT_WORDS = DIGIT_VALUES

_WORD_RE = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_SEP_OK = re.compile(r"[\s-]*")  # only whitespace or hyphens may sit inside one spelled number


def _fmt(d: Decimal) -> str:
    s = format(d, "f")
    return s.rstrip("0").rstrip(".") if "." in s else s


def _is_digit_word(words: list[str], j: int) -> bool:
    """A digit of a spoken digit run ("five five five", "four oh four"); "oh" only between digits."""
    if j >= len(words):
        return False
    if words[j] == "oh":
        return j + 1 < len(words) and words[j + 1] in _UNITS
    return words[j] in _UNITS


def _parse_cardinal(words: list[str], i: int) -> tuple[Decimal, int] | None:
    """Longest spelled cardinal at words[i:], e.g. "one hundred and fifty", "twenty one", "a thousand"."""
    total, current, last, j, n = 0, 0, None, i, len(words)
    if words[i] == "a" and i + 1 < n and (words[i + 1] == "hundred" or words[i + 1] in _SCALES):
        current, last, j = 1, "unit", i + 1
    while j < n:
        w = words[j]
        open_slot = last in (None, "hundred", "scale", "and")
        if w in _UNITS and (open_slot or (last == "tens" and _UNITS[w] > 0)):
            if w == "zero" and last is not None:
                break
            current += _UNITS[w]
            last = "unit"
        elif w in _TEENS and open_slot:
            current += _TEENS[w]
            last = "teen"
        elif w in _TENS and open_slot:
            current += _TENS[w]
            last = "tens"
        elif w == "hundred" and last in ("unit", "teen") and current % 100 == current:
            current *= 100
            last = "hundred"
        elif w in _SCALES and last in ("unit", "teen", "tens", "hundred"):
            total += current * _SCALES[w]
            current, last = 0, "scale"
        elif w == "and" and last in ("hundred", "scale") and j + 1 < n:
            nxt = words[j + 1]
            if not (nxt in _TEENS or nxt in _TENS or (nxt in _UNITS and nxt != "zero")):
                break
            last = "and"
        elif last == "tens" and w in _ORD_UNITS_AFTER_TENS:
            current += _ORD_UNITS_AFTER_TENS[w]
            j += 1
            break
        elif open_slot and (w in _ORD_UNITS or w in _ORD_TEENS or w in _ORD_TENS):
            current += _ORD_UNITS.get(w) or _ORD_TEENS.get(w) or _ORD_TENS[w]
            j += 1
            break
        elif w == "hundredth" and last in ("unit", "teen"):
            current *= 100
            j += 1
            break
        else:
            break
        j += 1
    if last == "and":  # cannot happen (lookahead), but never end a number on "and"
        j -= 1
    if j == i:
        return None
    return Decimal(total + current), j


def _parse_number(words: list[str], i: int) -> tuple[str, int] | None:
    """A number starting at words[i]: digit run, cardinal (+ "point ..." / "and a half"), or "a half"."""
    n = len(words)
    if words[i] == "a" and i + 1 < n and words[i + 1] == "half":
        return "0.5", i + 2
    if words[i] in _UNITS and _is_digit_word(words, i + 1):
        j = i
        digits = []
        while _is_digit_word(words, j):
            digits.append(str(_DIGIT_WORDS[words[j]]))
            j += 1
        return "".join(digits), j
    if re.fullmatch(r"\d+(?:\.\d+)?", words[i]):
        value, j = Decimal(words[i]), i + 1
        if j < n and (words[j] == "hundred" or words[j] in _SCALES):
            value *= 100 if words[j] == "hundred" else _SCALES[words[j]]
            j += 1
    else:
        parsed = _parse_cardinal(words, i)
        if parsed is None:
            return None
        value, j = parsed
    if words[j - 1] in _UNITS or words[j - 1] in _TEENS or words[j - 1] in _TENS or words[j - 1][0].isdigit():
        if j + 1 < n and words[j] == "point" and words[j + 1] in _DIGIT_WORDS:
            k, digits = j + 1, []
            while k < n and words[k] in _DIGIT_WORDS:
                digits.append(str(_DIGIT_WORDS[words[k]]))
                k += 1
            if "." not in str(value):
                return f"{_fmt(value)}.{''.join(digits)}", k
        if words[j : j + 3] == ["and", "a", "half"]:
            return _fmt(value + Decimal("0.5")), j + 3
    if words[i][0].isdigit() and j == i + 1:
        return None  # a written number with nothing spelled around it stays exactly as written ("04:05")
    return _fmt(value), j


_PRE = [
    (re.compile(r"[\u2018\u2019]"), "'"),
    (re.compile(r"(?<=[a-z])-(?=[a-z])"), " "),  # twenty-one -> twenty one
    (re.compile(r"(?<=\d),(?=\d{3}\b)"), ""),  # 1,500 -> 1500
    (re.compile(r"(?<=\d)(?:st|nd|rd|th)\b"), ""),  # 21st -> 21
    (re.compile(r"%"), " percent"),
]
_CURRENCY = re.compile(r"([$€£])\s?(\d+(?:,\d{3})*(?:\.\d+)?)")
_CURRENCY_WORDS = {"$": "dollars", "€": "euros", "£": "pounds"}
_AMPM = r"(?:a\.?\s?m\b\.?|p\.?\s?m\b\.?)"
_DOLLARS = re.compile(r"(?<=\d)\s+(?:dollars?|bucks|usd)\b")  # 21 dollars -> 21
_MINUS = re.compile(r"\b(minus|negative)\s+(?=\d)")
_CLOCK_RULES = [
    re.compile(rf"\b(\d{{1,2}}):(\d{{2}})(?:\s*(?P<m>{_AMPM}))?"),  # 4:40 pm -> 4:40
    re.compile(rf"\b(1[0-2]|0?[1-9])\s+([0-5]\d)\s*(?P<m>{_AMPM})"),  # 4 40 pm -> 4:40
    re.compile(rf"\b(1[0-2]|0?[1-9])()\s*(?:(?P<m>{_AMPM})|o'?\s?clock\b)"),  # 4 pm, 4 o'clock -> 4:00
]


def _clock_sub(keep_meridiem: bool) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        time = f"{m.group(1)}:{m.group(2) or '00'}"
        meridiem = m.group("m")
        return f"{time} {meridiem[0]}m" if keep_meridiem and meridiem else time

    return sub


def words_to_numbers(text: str, keep_units: bool = False) -> str:
    """Lowercase `text` with spelled numbers as digits, "$21"/"21 dollars" as "21", clock times as "h:mm".

    keep_units: keep what a number is of, for a reader that needs it (the answer judge: 12 dollars is not
    12 cents): "$21" becomes "21 dollars", "21 dollars" stays, and "4:40 p.m." becomes "4:40 pm".
    """
    text = text.lower()
    text = _CURRENCY.sub(lambda m: f"{m.group(2)} {_CURRENCY_WORDS[m.group(1)]}" if keep_units else m.group(2), text)
    for pat, rep in _PRE:
        text = pat.sub(rep, text)
    tokens = list(_WORD_RE.finditer(text))
    words = [m.group() for m in tokens]
    out, pos, i = [], 0, 0
    while i < len(words):
        parsed = _parse_number(words, i)
        if parsed is None:
            i += 1
            continue
        value, j = parsed
        # Only join words separated by blanks/hyphens: "one, two" stays two numbers.
        while j - 1 > i and not all(
            _SEP_OK.fullmatch(text[tokens[k].end() : tokens[k + 1].start()]) for k in range(i, j - 1)
        ):
            reparsed = _parse_number(words[: j - 1], i)
            if reparsed is None:
                break
            value, j = reparsed
        out.append(text[pos : tokens[i].start()])
        out.append(value)
        pos = tokens[j - 1].end()
        i = j
    out.append(text[pos:])
    text = "".join(out)
    if not keep_units:
        text = _DOLLARS.sub("", text)
    text = _MINUS.sub("-", text)
    for pat in _CLOCK_RULES:
        text = pat.sub(_clock_sub(keep_units), text)
    return text


_TOKEN_RE = re.compile(r"[a-z0-9.]+")


def normalize(text: str) -> list[str]:
    """Lowercase tokens over [a-z0-9.]; sentence dots are stripped, decimal points kept ("2.5")."""
    toks = (t.strip(".") for t in _TOKEN_RE.findall(text.lower()))
    return [t for t in toks if t]


_TIME_RE = re.compile(r"(?<![\d.])(\d{1,2}):(\d{2})(?!\d)")
_NUM_RE = re.compile(r"(?<![\w.:])-?\d+(?:\.\d+)?(?![\d:])")


def times_in(text: str) -> list[str]:
    """Clock times as "h:mm" (no leading zero on the hour), after words_to_numbers."""
    return [f"{int(h)}:{m}" for h, m in _TIME_RE.findall(words_to_numbers(text))]


def numbers_in(text: str) -> list[float]:
    """Every number in `text` (spelled or written), clock times excluded (see times_in)."""
    t = _TIME_RE.sub(" ", words_to_numbers(text))
    return [float(m.group()) for m in _NUM_RE.finditer(t)]
