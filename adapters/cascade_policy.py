"""The cascade's text policies: decide whether it is addressed, and compute what it can from what it heard.

A deliberately simple, transparent baseline. In a room (`Policy`, Duplex-MPE) it answers only when it hears its
name in a request (so it shows the explicit-vs-implicit gap), and it works the answer out from what people said
earlier in the room. It knows the shapes of everyday facts, not any scene's wording: a sum of money and the number
of ways it is split, a price "each" and a number of things, two groups of people, a clock time and a duration, a
weekday and "N days later/earlier", an amount in a unit that converts to the unit asked for, and a code, number or
label said next to the thing the request names. The request says which kind of answer it wants.
One to one (`TurnPolicy`, DSB-IFEval) every turn is addressed to it: it reads back the numbers it heard, or
acknowledges.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from metrics.textnorm import words_to_numbers

# How ASR tends to spell the name; whisper tiny writes "Aria" as "area" surprisingly often.
NAME_FORMS = ("aria", "area", "arya", "ariya", "ariah", "arria")
# A request to it is a question, or starts with one of these (after its name).
IMPERATIVES = ("tell", "remind", "work out", "calculate", "convert", "figure out", "give")
MAX_REQUEST_WORDS = 30  # longer stretches are announcements (e.g. the duty preamble), not requests
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

# Units it converts between: singular name -> (dimension, size in that dimension's base unit).
UNITS: dict[str, tuple[str, float]] = {
    "second": ("time", 1), "minute": ("time", 60), "hour": ("time", 3600), "day": ("time", 86400),
    "week": ("time", 604800), "milligram": ("mass", 0.001), "gram": ("mass", 1), "kilogram": ("mass", 1000),
    "kilo": ("mass", 1000), "millilitre": ("volume", 1), "milliliter": ("volume", 1), "litre": ("volume", 1000),
    "liter": ("volume", 1000), "millimetre": ("length", 0.001), "millimeter": ("length", 0.001),
    "centimetre": ("length", 0.01), "centimeter": ("length", 0.01), "metre": ("length", 1), "meter": ("length", 1),
    "kilometre": ("length", 1000), "kilometer": ("length", 1000),
}  # fmt: skip
DOZEN = 12
CURRENCY = r"(?:dollars?|bucks|pounds|euros)"
# Words after a number that say it does not count things: units, money, shares ("4 ways", "the 4 of us").
NOT_THINGS = frozenset({*UNITS, *(u + "s" for u in UNITS), "dozen", "dollar", "dollars", "bucks", "pounds",
                        "euros", "ways", "of", "each", "apiece", "hundred", "thousand"})
NOT_PLURAL = frozenset({"was", "has", "its", "yes", "does", "goes", "says", "always", "perhaps", "less"})
IRREGULAR_PLURALS = frozenset({"people", "children", "men", "women", "dice", "feet", "geese", "mice", "teeth"})

# What kind of answer a request wants.
ASKS_RECALL = re.compile(r"\b(?:was|again|remind|recall)\b")
ASKS_DAY = re.compile(r"\bday\b")
ASKS_TIME = re.compile(r"\b(?:what time|when)\b")
ASKS_UNIT = re.compile(r"\b(?:how many|in|into) ([a-z]+)")
ASKS_HOW_MANY = re.compile(r"\b(?:how many|number of) ((?:[a-z]+ ){0,2}[a-z]+)")
ASKS_MONEY = re.compile(r"\b(?:how much|cost|owe|pay|share|total|spend|come to|comes to|each|altogether|all in)")
ASKS_SHARE = re.compile(r"\b(?:each|per|share|owes?|split|portion)\b")
# Words of a recall request that do not name the thing it asks for.
FUNCTION_WORDS = frozenset(
    "the our my your their his her its and for with what was did does say said again remind recall could can "
    "would will please tell any idea work out you help quick hey okay settle this that".split()
)

INT = r"(?<![\d:.])(\d+)(?![\d:]|\.\d)"
NUM = r"(?<![\d:.])(\d+(?:\.\d+)?)(?![\d:]|\.\d)"
# A time of day: "9:05" anywhere; after "at"/"from"/"by" also as ASR writes "nine oh five": "9 05", "9.05", "905",
# "9 oh 5".
CLOCK = re.compile(r"(?<![\d:.])(\d{1,2}):(\d{2})\b"
                   r"|\b(?:at|from|by) (\d{1,2})(?:[ .]?(?=\d{2}\b)| oh (?=\d\b))(\d{1,2})\b")
DURATION = re.compile(rf"{NUM} hours?(?:,? (?:and )?(\d+) minutes?)?|{INT} minutes?\b")
SHIFT = re.compile(r"\b(\d+|a) days? (later|earlier)\b")
WEEKDAY = re.compile(r"\b(" + "|".join(WEEKDAYS) + r")\b")
MONEY = re.compile(rf"{NUM} {CURRENCY}\b")
UNIT_PRICE = re.compile(r"\b(?:each|apiece|a piece|a go|per)\b")
SHARES = re.compile(rf"{INT} ways\b|\bthe {INT} of us\b|\bbetween {INT} (?:people|of us)\b")
# What people say to be remembered: a label ("c 14"), a code said digit by digit ("4 7 1 9"), a number ("147").
VALUE = re.compile(r"(?<![a-z'])([a-z])[ -]?(\d+)(?![\d:])|(?<![\d:.])(\d(?:[ ,-]+\d(?!\d))+)(?![\d:])"
                   r"|(?<![\d:.])(\d+)(?![\d:]|\.\d)")


def normalise(text: str) -> str:
    return words_to_numbers(text.lower()).replace(",", "")


def hearing(text: str) -> str:
    """What it keeps of an utterance: lowercase, numbers as digits, money with its unit ("$21" -> "21 dollars")."""
    return words_to_numbers(text, keep_units=True)


def addressed(text: str) -> bool:
    words = re.findall(r"[a-z]+", text.lower())
    return any(w in NAME_FORMS for w in words)


def sentences(text: str) -> list[str]:
    """Sentences; a dot between digits ("1.5", "9.05") is not a full stop."""
    return [s.strip() for s in re.findall(r"(?:[^.?!\n]|\.(?=\d))+[.?!]?", text) if s.strip()]


def _is_request_sentence(s: str) -> bool:
    s = s.lower()
    after_name = re.sub(r"^(hey |ok |okay )?(" + "|".join(NAME_FORMS) + r")[,.!]?\s*", "", s)
    return s.endswith("?") or after_name.startswith(IMPERATIVES) or s.startswith(("could you", "can you"))


def addressed_request(text: str) -> str | None:
    """The request made to it by name, or None.

    Several turns can reach it as one utterance, so only the sentence that names it counts, or, when that
    sentence is just a vocative ("Hey Aria."), the one right after it.
    """
    if len(text.split()) > MAX_REQUEST_WORDS * 3:
        return None
    parts = sentences(text)
    for i, s in enumerate(parts):
        if not addressed(s):
            continue
        if _is_request_sentence(s) and len(s.split()) <= MAX_REQUEST_WORDS:
            return s
        vocative = len(re.findall(r"[a-z']+", s.lower())) <= 3
        if vocative and i + 1 < len(parts) and _is_request_sentence(parts[i + 1]):
            return parts[i + 1]
    return None


# --- reading facts out of what was said -----------------------------------------------------------------------


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _last(pattern: re.Pattern[str] | str, said: str, before: int | None = None) -> re.Match[str] | None:
    """The last match in `said` (ending before position `before`, if given)."""
    found = [m for m in re.finditer(pattern, said) if before is None or m.end() <= before]
    return found[-1] if found else None


def _unit(word: str) -> str | None:
    """The singular unit name of `word` ("kilometres" -> "kilometre"), or None if it is no unit it knows."""
    for name in (word, word.removesuffix("s")):
        if name in UNITS:
            return name
    return None


def _plural(word: str) -> bool:
    return word in IRREGULAR_PLURALS or (
        len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and word not in NOT_PLURAL)


def _groups(said: str) -> list[re.Match[str]]:
    """Numbers that count a group of things or people: a number, then a plural noun within three words ("5 people
    from work", "2 grown ups", "3 spare dice sets"). A group has at least two members; "one" before a plural is a
    pronoun ("one loses track")."""
    out = []
    for m in re.finditer(rf"{INT} ([a-z]+)((?: [a-z]+){{0,2}})", said):
        words = [m.group(2), *m.group(3).split()]
        if int(m.group(1)) >= 2 and words[0] not in NOT_THINGS and any(_plural(w) for w in words):
            out.append(m)
    return out


def _amounts(said: str) -> list[tuple[float, bool]]:
    """(value, is a unit price) for every sum of money: a number with a currency word; when none was
    said (a transcript without the unit), every number above one that counts or measures nothing. A unit price
    is said with "each", "apiece", "a go" or "per"."""
    found = [(m.start(), float(m.group(1))) for m in MONEY.finditer(said)]
    if not found:
        for m in re.finditer(rf"{NUM}(?: ([a-z]+))?", said):
            word = m.group(2) or ""
            if float(m.group(1)) > 1 and (word in ("each", "apiece") or not (word in NOT_THINGS or _plural(word))):
                found.append((m.start(), float(m.group(1))))
    spans = _sentence_spans(said)
    out = []
    for pos, value in found:
        start, end = next(s for s in spans if s[0] <= pos < s[1])
        out.append((value, bool(UNIT_PRICE.search(said[start:end]))))
    return out


def _sentence_spans(said: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"(?:[^.?!\n]|\.(?=\d))+[.?!]?", said)]


def _clock(m: re.Match[str]) -> int | None:
    """Minutes after midnight (or noon) of a CLOCK match, or None when it cannot be a time of day."""
    h, mins = (int(g) for g in (m.group(1, 2) if m.group(1) else m.group(3, 4)))
    return h * 60 + mins if 0 <= h <= 23 and 0 <= mins <= 59 else None


def _duration(m: re.Match[str]) -> float:
    if m.group(3):
        return float(m.group(3))
    return float(m.group(1)) * 60 + float(m.group(2) or 0)


# --- the room policy ------------------------------------------------------------------------------------------


@dataclass
class Policy:
    memory: list[str] = field(default_factory=list)  # what it heard so far, as `hearing` keeps it

    def hear(self, transcript: str) -> str | None:
        """Remember the utterance; return what to say, or None to stay silent."""
        self.memory.append(hearing(transcript))
        request = addressed_request(transcript)
        if request is None:
            return None
        answer = self.compute(hearing(request))
        return f"The answer is {answer}." if answer else "Sorry, I am not sure."

    def compute(self, q: str) -> str | None:
        """The answer to request `q` from what was said before it, or None. Each solver first checks that the
        request asks for its kind of answer, then looks for the facts it needs."""
        said = "\n".join(self.memory[:-1])
        solvers: list[Callable[[str, str], str | None]] = [
            self._weekday, self._clock_time, self._convert, self._headcount, self._money, self._recall]
        for solver in solvers:
            answer = solver(q, said)
            if answer:
                return answer
        return None

    def _recall(self, q: str, said: str) -> str | None:
        """"What was the door code again?": the value said in the sentence that shares most words with the thing
        named, the one nearest those words."""
        if not ASKS_RECALL.search(q):
            return None
        wanted = {w for w in re.findall(r"[a-z]+", q) if len(w) > 2 and w not in FUNCTION_WORDS | set(NAME_FORMS)}
        best: tuple[int, str] | None = None
        for sentence in sentences(said):
            shared = wanted & set(re.findall(r"[a-z]+", sentence))
            if shared and VALUE.search(sentence) and (best is None or len(shared) >= best[0]):
                best = (len(shared), sentence)
        if best is None:
            return None
        sentence = best[1]
        anchors = [m.start() for w in wanted for m in re.finditer(rf"\b{w}\b", sentence)]
        value = min(VALUE.finditer(sentence), key=lambda m: min(abs(m.start() - a) for a in anchors))
        if value.group(1):
            return value.group(1).upper() + value.group(2)
        return re.sub(r"\D", "", value.group(0))

    def _weekday(self, q: str, said: str) -> str | None:
        """"What day is it now?": the weekday said before "N days later/earlier", moved by N."""
        if not ASKS_DAY.search(q):
            return None
        shift = _last(SHIFT, said)
        day = _last(WEEKDAY, said, before=shift.start()) if shift else None
        if not shift or not day:
            return None
        k = 1 if shift.group(1) == "a" else int(shift.group(1))
        k = k if shift.group(2) == "later" else -k
        return WEEKDAYS[(WEEKDAYS.index(day.group(1)) + k) % 7].capitalize()

    def _clock_time(self, q: str, said: str) -> str | None:
        """"What time do we get in?": the last time of day said, plus the last duration."""
        if not ASKS_TIME.search(q):
            return None
        starts = [t for m in CLOCK.finditer(said) if (t := _clock(m)) is not None]
        duration = _last(DURATION, said)
        if not starts or not duration:
            return None
        h, m = divmod(round(starts[-1] + _duration(duration)), 60)
        return f"{(h - 1) % 12 + 1}:{m:02d}"

    def _convert(self, q: str, said: str) -> str | None:
        """"How many grams is that?": the last amount said in a unit that converts to the one asked for. "How many
        cupcakes is that?" (or "that in cupcakes"): the last number of dozen said, times 12."""
        for asked in ASKS_UNIT.findall(q):
            target = _unit(asked)
            if target is None:
                dozens = _last(rf"{NUM} dozen\b", said)
                if dozens and _plural(asked):
                    return f"{_fmt(float(dozens.group(1)) * DOZEN)} {asked}"
                continue
            dimension, size = UNITS[target]
            for m in reversed(list(re.finditer(rf"{NUM} ([a-z]+)", said))):
                source = _unit(m.group(2))
                if source and source != target and UNITS[source][0] == dimension:
                    return f"{_fmt(round(float(m.group(1)) * UNITS[source][1] / size, 6))} {asked}"
            return None
        return None

    def _headcount(self, q: str, said: str) -> str | None:
        """"How many chairs do we need?": one each for the last two groups of people counted."""
        asked = ASKS_HOW_MANY.search(q)
        groups = _groups(said)
        if not asked or len(groups) < 2:
            return None
        words = asked.group(1).split()
        things = " ".join(words[: next((i + 1 for i, w in enumerate(words) if _plural(w)), 1)])
        return f"{sum(int(m.group(1)) for m in groups[-2:])} {things}"

    def _money(self, q: str, said: str) -> str | None:
        """"What do we each owe?": the last sum said, over the number of ways it is split. "What's the total?": the
        last price said "each", times the last number of things."""
        if not ASKS_MONEY.search(q):
            return None
        amounts = _amounts(said)
        shares = _last(SHARES, said)
        sums = [v for v, each in amounts if not each]
        prices = [v for v, each in amounts if each]
        things = _groups(said)
        ways = int(next(g for g in shares.groups() if g)) if shares else 0
        split = sums[-1] / ways if ways and sums else None
        total = prices[-1] * int(things[-1].group(1)) if prices and things else None
        first, second = (split, total) if ASKS_SHARE.search(q) else (total, split)
        answer = first if first is not None else second
        return None if answer is None else f"{_fmt(round(answer, 2))} dollars"


READBACK_LEAD = "Let me read that back:"
ACKNOWLEDGE = "I hear you. Please go on."


@dataclass
class TurnPolicy:
    """One-to-one sessions: whatever the user said was said to it. No persona, no cleverness: the numbers it heard
    are read back digit by digit, anything else is acknowledged, and an utterance with no words gets nothing."""

    def hear(self, transcript: str) -> str | None:
        text = normalise(transcript)
        if not re.search(r"[a-z0-9]", text):
            return None
        numbers = re.findall(r"\d+", text)
        if numbers:
            return f"{READBACK_LEAD} {', '.join(' '.join(n) for n in numbers)}."
        return ACKNOWLEDGE
