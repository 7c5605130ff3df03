"""Task families for T: facts that arise from the activity, the question they raise, and a gold answer from code.

A family draws its numbers from the scene's rng, so the gold answer is correct by construction; its wording comes
from `phrases/tasks.yaml`, per activity (a bill at a night out, a head count for a party, a train time on a trip).
`derive_gold` re-derives the answer from the spoken text alone (the facts said before T and T itself), and the
generator refuses a script where the two disagree: the text always carries what the answer needs.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dataset_builder.mpe import answers

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
TASKS_FILE = Path(__file__).with_name("phrases") / "tasks.yaml"

# unit_conversion: (from, to) -> factor. The factor is code, the units' wording is data.
CONVERSIONS: dict[tuple[str, str], int] = {
    ("hours", "minutes"): 60, ("minutes", "seconds"): 60, ("weeks", "days"): 7, ("kilograms", "grams"): 1000,
    ("litres", "millilitres"): 1000, ("kilometres", "metres"): 1000, ("dozen", "cupcakes"): 12,
}
UNIT_WORDS = sorted({u for pair in CONVERSIONS for u in pair}, key=len, reverse=True)


@dataclass(frozen=True)
class Fact:
    label: str  # "N2" (said to {to}) or "N3" (no addressee)
    text: str  # keeps {to} for the addressee's name


@dataclass(frozen=True)
class Task:
    task_type: str
    facts: list[Fact]
    raise_text: str  # the setup turn's question to the T speaker, with {to}
    ask: str  # T's question, direct: lowercase, no question mark
    ask_indirect: str  # the same question as a clause ("what each of us owes")
    question: str  # neutral statement of the request, for the judge
    gold_answer: str
    gold_aliases: list[str] = field(default_factory=list)


@functools.cache
def task_text() -> dict[str, Any]:
    return yaml.safe_load(TASKS_FILE.read_text(encoding="utf-8"))


def families_for(activity: str) -> list[str]:
    """The task families that can arise in `activity`, in file order."""
    return [f for f, spec in task_text().items() if activity in spec["activities"]]


def _styled(options: Any, style: str) -> list[str]:
    """A wording list: a plain list fits any style; a dict has casual/formal/any keys."""
    if isinstance(options, list):
        return options
    return [*options.get(style, []), *options.get("any", [])]


def _duration_text(minutes: int) -> str:
    h, m = divmod(minutes, 60)
    hours = f"{h} hour" + ("s" if h > 1 else "")
    if h == 0:
        return f"{m} minutes"
    return hours if m == 0 else f"{hours} and {m} minutes"


def _bill_split(rng: random.Random, n_people: int, ctx: dict) -> tuple[dict, str, list[str]]:
    share = rng.randint(6, 45)
    return {"total": share * n_people, "n": n_people}, *answers.money(share)


def _total_cost(rng: random.Random, n_people: int, ctx: dict) -> tuple[dict, str, list[str]]:
    price, qty = rng.randint(3, 25), rng.randint(2, 9)
    return {"price": price, "qty": qty}, *answers.money(price * qty)


def _headcount(rng: random.Random, n_people: int, ctx: dict) -> tuple[dict, str, list[str]]:
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    return {"a": a, "b": b}, *answers.count(a + b, ctx["things"])


def _arrival_time(rng: random.Random, n_people: int, ctx: dict) -> tuple[dict, str, list[str]]:
    # Start no later than 9:55 and at most two hours: the end stays before 12:00, so a 12-hour reading without
    # am/pm is unambiguous.
    dep_h, dep_m = rng.randint(1, 9), 5 * rng.randint(0, 11)
    dur = 5 * rng.randint(3, 24)
    arr_h, arr_m = divmod(dep_h * 60 + dep_m + dur, 60)
    params = {"dep": f"{dep_h}:{dep_m:02d}", "dur": _duration_text(dur)}
    return params, *answers.clock(arr_h, arr_m)


def _weekday_shift(rng: random.Random, n_people: int, ctx: dict) -> tuple[dict, str, list[str]]:
    day, k, later = rng.randrange(7), rng.randint(1, 4), rng.random() < 0.6
    new = WEEKDAYS[(day + (k if later else -k)) % 7]
    params = {"day": WEEKDAYS[day], "shift": f"{k} day" + ("s" if k > 1 else ""),
              "direction": "later" if later else "earlier"}
    return params, *answers.weekday(new)


def _unit_conversion(rng: random.Random, n_people: int, ctx: dict) -> tuple[dict, str, list[str]]:
    x = rng.randint(2, 9)
    value = x * CONVERSIONS[(ctx["unit_from"], ctx["unit_to"])]
    return {"x": x}, *answers.quantity(value, ctx["unit_to"])


def _fact_recall(rng: random.Random, n_people: int, ctx: dict) -> tuple[dict, str, list[str]]:
    kind, noun = ctx["kind"], ctx.get("noun", "")
    if kind == "code":
        digits = "".join(str(rng.randint(1, 9)) for _ in range(4))
        return {"spoken": " ".join(digits)}, *answers.code(digits)  # said digit by digit, as people read codes
    if kind == "label":
        letter, num = rng.choice("ABCDEF"), rng.randint(2, 30)
        return {"spoken": f"{letter} {num}"}, *answers.label(f"{letter}{num}", noun)
    value = rng.randint(101, 489) if kind == "number" else rng.randint(10, 99)
    return {"spoken": str(value)}, *answers.label(str(value), noun)


FAMILIES: dict[str, Callable[[random.Random, int, dict], tuple[dict, str, list[str]]]] = {
    "bill_split": _bill_split,
    "total_cost": _total_cost,
    "headcount": _headcount,
    "arrival_time": _arrival_time,
    "weekday_shift": _weekday_shift,
    "unit_conversion": _unit_conversion,
    "fact_recall": _fact_recall,
}
# Families whose request is a plain recall, not a sum: the implicit setup turn must not talk about working out.
RECALL_FAMILIES = frozenset({"fact_recall"})
# Context keys that replace the family's wording instead of filling a slot.
_OVERRIDES = ("facts", "raise", "ask", "ask_indirect", "question")


def _fill(template: str, slots: dict) -> str:
    """Format every slot but {to}, which is filled once speakers are known."""
    return template.format_map({**slots, "to": "{to}"})


def build_task(family: str, activity: str, rng: random.Random, style: str, n_people: int) -> Task:
    """A task of `family` as it arises in `activity`, worded in `style`, for a scene of `n_people` people."""
    spec = task_text()[family]
    context = dict(rng.choice(spec["activities"][activity]))
    wording = {key: context.pop(key, spec.get(key)) for key in _OVERRIDES}
    slots = {k: rng.choice(v) if isinstance(v, list) else v for k, v in context.items()}
    params, gold, aliases = FAMILIES[family](rng, n_people, slots)
    slots.update(params)
    # Slots may hold slots ("the train leaves at {dep}"): fill them in twice.
    slots = {k: v.format_map({**slots, "to": "{to}"}) if isinstance(v, str) else v for k, v in slots.items()}
    facts = []
    for fact in wording["facts"]:
        text = _fill(rng.choice(_styled(fact, style)), slots)
        facts.append(Fact("N2" if "{to}" in text else "N3", text))
    return Task(
        task_type=family,
        facts=facts,
        raise_text=_fill(rng.choice(_styled(wording["raise"], style)), slots),
        ask=_fill(rng.choice(_styled(wording["ask"], style)), slots),
        ask_indirect=_fill(rng.choice(_styled(wording["ask_indirect"], style)), slots),
        question=_fill(wording["question"], slots)[:1].upper() + _fill(wording["question"], slots)[1:],
        gold_answer=gold,
        gold_aliases=[a for a in dict.fromkeys(aliases) if a != gold],
    )


# --- the gold answer from the words alone -------------------------------------------------------------------

_INT = re.compile(r"(?<![\d:])(\d+)(?![\d:])")
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_DURATION = re.compile(r"\b(?:(\d+) hours?(?: and (\d+) minutes)?|(\d+) minutes)\b")
_SHIFT = re.compile(r"\b(\d+) days? (later|earlier)\b")
_CODE = re.compile(r"\b(\d(?: \d){3})\b")
_LABEL = re.compile(r"\b([A-F]) (\d+)\b")


class GoldMismatch(ValueError):
    """The spoken facts do not give the stored gold answer."""


def derive_gold(task_type: str, before_t: Sequence[str], t_text: str) -> str:
    """The answer the words imply: `before_t` are the turn texts before T (only task facts hold digits or
    weekdays there), `t_text` is T. Raises GoldMismatch when the words do not determine an answer."""
    said = " ".join(before_t)
    ints = [int(x) for x in _INT.findall(_CLOCK.sub(" ", said))]
    try:
        if task_type == "bill_split":
            total, n = ints
            if total % n:
                raise GoldMismatch(f"{total} does not split evenly {n} ways")
            return str(total // n)
        if task_type == "total_cost":
            price, qty = ints
            return str(price * qty)
        if task_type == "headcount":
            a, b = ints
            return str(a + b)
        if task_type == "arrival_time":
            (h, m), = [(int(a), int(b)) for a, b in _CLOCK.findall(said)]
            (hours, mins, only), = _DURATION.findall(_CLOCK.sub(" ", said))
            total = h * 60 + m + (int(only) if only else int(hours) * 60 + int(mins or 0))
            return f"{total // 60}:{total % 60:02d}"
        if task_type == "weekday_shift":
            day, = [d for d in WEEKDAYS if re.search(rf"\b{d}\b", said)]
            (k, direction), = _SHIFT.findall(said)
            step = int(k) if direction == "later" else -int(k)
            return WEEKDAYS[(WEEKDAYS.index(day) + step) % 7]
        if task_type == "unit_conversion":
            x, = ints
            unit_from = next(u for u in UNIT_WORDS if re.search(rf"\b{x} {u}\b", said))
            unit_to = next(u for u in UNIT_WORDS if u != unit_from and re.search(rf"\b{u}\b", t_text + " " + said)
                           and (unit_from, u) in CONVERSIONS)
            return str(x * CONVERSIONS[(unit_from, unit_to)])
        if task_type == "fact_recall":
            if m := _CODE.search(said):
                return m.group(1).replace(" ", "")
            if m := _LABEL.search(said):
                return m.group(1) + m.group(2)
            value, = ints
            return str(value)
    except (ValueError, StopIteration) as err:
        raise GoldMismatch(f"{task_type}: the facts before T do not determine an answer ({err})") from None
    raise GoldMismatch(f"unknown task type {task_type!r}")
