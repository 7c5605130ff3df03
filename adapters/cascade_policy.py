"""The cascade's text policies: decide whether it is addressed, and compute what it can from what it heard.

A deliberately simple, transparent baseline. In a room (`Policy`, Duplex-MPE) it answers only when it hears its
name in a request (so it shows the explicit-vs-implicit gap), and it works answers out from facts it heard earlier
in the room (amounts, counts, times, durations, weekdays, conversions, things people said "is" something).
One to one (`TurnPolicy`, DSB-IFEval) every turn is addressed to it: it reads back the numbers it heard, or
acknowledges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from metrics.textnorm import words_to_numbers

# How ASR tends to spell the name; whisper tiny writes "Aria" as "area" surprisingly often.
NAME_FORMS = ("aria", "area", "arya", "ariya", "ariah", "arria")
# A request to it is a question, or starts with one of these (after its name).
IMPERATIVES = ("tell", "remind", "work out", "calculate", "convert", "figure out", "give")
MAX_REQUEST_WORDS = 30  # longer stretches are announcements (e.g. the duty preamble), not requests
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
UNIT_FACTORS = {("hours", "minutes"): 60, ("hour", "minutes"): 60, ("kilometres", "metres"): 1000,
                ("kilometers", "meters"): 1000, ("kilograms", "grams"): 1000, ("dozen", "eggs"): 12,
                ("weeks", "days"): 7, ("litres", "millilitres"): 1000, ("liters", "milliliters"): 1000}
NUM = r"(\d+(?:\.\d+)?)"


def normalise(text: str) -> str:
    return words_to_numbers(text.lower()).replace(",", "")


def addressed(text: str) -> bool:
    words = re.findall(r"[a-z]+", text.lower())
    return any(w in NAME_FORMS for w in words)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.findall(r"[^.?!]+[.?!]?", text) if s.strip()]


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


def _last(pattern: str, memory: list[str]) -> re.Match[str] | None:
    for line in reversed(memory):
        found = list(re.finditer(pattern, line))
        if found:
            return found[-1]
    return None


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass
class Policy:
    memory: list[str] = field(default_factory=list)  # normalised transcripts heard so far

    def hear(self, transcript: str) -> str | None:
        """Remember the utterance; return what to say, or None to stay silent."""
        self.memory.append(normalise(transcript))
        request = addressed_request(transcript)
        if request is None:
            return None
        answer = self.compute(normalise(request))
        return f"The answer is {answer}." if answer else "Sorry, I am not sure."

    def compute(self, q: str) -> str | None:
        mem = self.memory[:-1]
        for solver in (self._convert, self._share, self._total, self._count, self._arrival, self._weekday,
                       self._recall):
            try:
                answer = solver(q, mem)
            except (ValueError, ZeroDivisionError, IndexError):
                answer = None
            if answer:
                return answer
        return None

    def _convert(self, q: str, mem: list[str]) -> str | None:
        m = re.search(r"how many (\w+) (?:is|are|in) " + NUM + r" (\w+)", q) or re.search(
            r"convert " + NUM + r" (\w+) (?:in)?to (\w+)", q)
        if not m:
            return None
        if q.startswith("convert") or "convert" in m.group(0):
            x, src, dst = float(m.group(1)), m.group(2), m.group(3)
        else:
            dst, x, src = m.group(1), float(m.group(2)), m.group(3)
        factor = UNIT_FACTORS.get((src, dst))
        return _fmt(x * factor) if factor else None

    def _share(self, q: str, mem: list[str]) -> str | None:
        if not any(k in q for k in ("each person", "share", "owe")):
            return None
        money = [x for x in mem if re.search(r"dollar|\$|bill|total|altogether|for all that", x)]
        total = _last(r"\$?" + NUM + r"(?! ways)", money)
        ways = _last(NUM + r" ways", mem)
        return _fmt(float(total.group(1)) / float(ways.group(1))) if total and ways else None

    def _total(self, q: str, mem: list[str]) -> str | None:
        if "cost" not in q and "total" not in q:
            return None
        price = _last(r"\$?" + NUM + r" (?:dollars )?(?:each|apiece)", mem)
        qty = _last(r"need " + NUM + r"|" + NUM + r" [a-z-]+(?: [a-z-]+)? (?:we )?(?:need|needed)", mem)
        if not price or not qty:
            return None
        return _fmt(float(price.group(1)) * float(qty.group(1) or qty.group(2)))

    def _count(self, q: str, mem: list[str]) -> str | None:
        if "how many" not in q:
            return None
        adults = _last(NUM + r" adults", mem)
        kids = _last(NUM + r" (?:kids|children)", mem)
        return _fmt(float(adults.group(1)) + float(kids.group(1))) if adults and kids else None

    def _arrival(self, q: str, mem: list[str]) -> str | None:
        if not any(k in q for k in ("what time", "arrive", "get there", "arrival", "when do we")):
            return None
        # "5:05", "5 05" or whisper's digit run "505"
        dep = _last(r"(?:leaves|departs) at (\d{1,2})(?:[: ](\d{2})|(?<=\d)(\d{2}))?\b", mem)
        hours = _last(r"takes (\d+) hours?(?: and (\d+) minutes)?", mem)
        mins = _last(r"(?:takes|journey is|trip is) (\d+) minutes", mem)
        if not dep or not (hours or mins):
            return None
        start = int(dep.group(1)) * 60 + int(dep.group(2) or dep.group(3) or 0)
        dur = int(hours.group(1)) * 60 + int(hours.group(2) or 0) if hours else int(mins.group(1))
        h, m = divmod(start + dur, 60)
        return f"{(h - 1) % 12 + 1}:{m:02d}"

    def _weekday(self, q: str, mem: list[str]) -> str | None:
        if "day" not in q:
            return None
        day = _last(r"\b(" + "|".join(WEEKDAYS) + r")\b", mem)
        shift = _last(NUM + r" days? (later|earlier)", mem)
        if not day or not shift:
            return None
        k = int(float(shift.group(1))) * (1 if shift.group(2) == "later" else -1)
        return WEEKDAYS[(WEEKDAYS.index(day.group(1)) + k) % 7].capitalize()

    def _recall(self, q: str, mem: list[str]) -> str | None:
        m = re.search(r"(?:what was|remind us of) the ([a-z ]+?)(?: again)?[?.]?$", q.strip())
        if not m:
            return None
        fact = _last(re.escape(m.group(1)) + r" is ([a-z0-9 ]+?)[.!]?$", mem)
        return fact.group(1).strip() if fact else None


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
