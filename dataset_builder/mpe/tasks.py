"""Task families for T: the facts stated earlier, the request, and a gold answer computed in code.

Each family draws its numbers from the scene's rng, so the gold answer is correct by construction. A family
returns a `Task`: fact turns (label N2 = said to a human, N3 = thought aloud), the explicit and implicit
request, a neutral `question`, the canonical `gold_answer` (digits, "5:15", weekday names) and `gold_aliases`.
Texts keep a `{to}` placeholder for the human addressee, filled in when speakers are assigned.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from dataset_builder.mpe.numbers import clock_aliases, number_words

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True)
class Fact:
    label: str  # "N2" (said to {to}) or "N3" (no addressee)
    text: str


@dataclass(frozen=True)
class Task:
    task_type: str
    facts: list[Fact]
    t_explicit: str
    t_implicit: str
    question: str
    gold_answer: str
    gold_aliases: list[str] = field(default_factory=list)


# Per family: one entry per fact (in the order they are said), each {label: {style: [templates]}}; then the
# request in both conditions. Implicit requests never name the assistant; the turn before them does
# (turns.PRE_T).
TEXT: dict[str, dict] = {
    "bill_split": {
        "facts": [
            {"N2": {"casual": ["{to}, the bill came to {total} dollars.",
                               "{to}, it's {total} dollars in total."],
                    "formal": ["{to}, the total comes to {total} dollars."]},
             "N3": {"casual": ["Wow, {total} dollars for all that."],
                    "formal": ["So the bill is {total} dollars altogether."]}},
            {"N2": {"casual": ["{to}, we're splitting it {n} ways, yeah?", "{to}, it's {n} ways, remember."],
                    "formal": ["{to}, we agreed to divide it {n} ways."]},
             "N3": {"casual": ["Okay, {n} ways, everyone pays the same."],
                    "formal": ["Right, it is to be divided {n} ways."]}},
        ],
        "explicit": {"casual": ["Aria, how much does each person owe?", "What's each person's share, Aria?"],
                     "formal": ["Aria, could you calculate each person's share?"]},
        "implicit": {"casual": ["Can you work out what each person owes?"],
                     "formal": ["Could you calculate each person's share, please?"]},
        "question": "A bill of {total} dollars is split evenly {n} ways. How much does each person pay?",
    },
    "total_cost": {
        "facts": [
            {"N2": {"casual": ["{to}, the {things} are {price} dollars each."],
                    "formal": ["{to}, the {things} cost {price} dollars each."]},
             "N3": {"casual": ["Huh, {price} dollars each for the {things}."],
                    "formal": ["So the {things} are {price} dollars apiece."]}},
            {"N2": {"casual": ["{to}, we need {qty} {things}."],
                    "formal": ["{to}, we shall need {qty} {things}."]},
             "N3": {"casual": ["So that's {qty} {things} we need."],
                    "formal": ["I count {qty} {things} needed."]}},
        ],
        "explicit": {"casual": ["Aria, how much will that cost altogether?", "What's the total, Aria?"],
                     "formal": ["Aria, what would the total cost be?"]},
        "implicit": {"casual": ["Can you tell us the total cost?"],
                     "formal": ["Could you work out the total cost for us?"]},
        "question": "{qty} {things} at {price} dollars each. What is the total cost in dollars?",
    },
    "headcount": {
        "facts": [
            {"N2": {"casual": ["{to}, there are {adults} adults coming."],
                    "formal": ["{to}, we are expecting {adults} adults."]},
             "N3": {"casual": ["Okay, {adults} adults so far."],
                    "formal": ["So that makes {adults} adults."]}},
            {"N2": {"casual": ["{to}, and {kids} kids as well."],
                    "formal": ["{to}, there will also be {kids} children."]},
             "N3": {"casual": ["Plus {kids} kids, I nearly forgot."],
                    "formal": ["And {kids} children, I must not forget."]}},
        ],
        "explicit": {"casual": ["Aria, how many {things} do we need in total?"],
                     "formal": ["Aria, how many {things} will we need altogether?"]},
        "implicit": {"casual": ["So how many {things} do we need in total?"],
                     "formal": ["Could you tell us how many {things} we need altogether?"]},
        "question": "{adults} adults and {kids} children each need one of the {things}. How many in total?",
    },
    "arrival_time": {
        "facts": [
            {"N2": {"casual": ["{to}, the {vehicle} leaves at {dep}."],
                    "formal": ["{to}, the {vehicle} departs at {dep}."]},
             "N3": {"casual": ["Right, the {vehicle} leaves at {dep}."],
                    "formal": ["So the {vehicle} departs at {dep}."]}},
            {"N2": {"casual": ["{to}, the trip takes {dur}."],
                    "formal": ["{to}, the journey takes {dur}."]},
             "N3": {"casual": ["And the trip takes {dur}, apparently."],
                    "formal": ["And the journey is {dur}."]}},
        ],
        "explicit": {"casual": ["Aria, what time do we get there?", "So when do we arrive, Aria?"],
                     "formal": ["Aria, at what time will we arrive?"]},
        "implicit": {"casual": ["What time do we get there then?"],
                     "formal": ["Could you tell us our arrival time?"]},
        "question": "A {vehicle} leaves at {dep} and the trip takes {dur}. At what time does it arrive?",
    },
    "weekday_shift": {
        "facts": [
            {"N2": {"casual": ["{to}, the {event} is on {day}."],
                    "formal": ["{to}, the {event} is scheduled for {day}."]},
             "N3": {"casual": ["So the {event} is on {day}."],
                    "formal": ["Now, the {event} falls on {day}."]}},
            {"N2": {"casual": ["{to}, they moved it {shift} {direction}."],
                    "formal": ["{to}, it has been moved {shift} {direction}."]},
             "N3": {"casual": ["Oh, the email says it moved {shift} {direction}."],
                    "formal": ["I see it has been moved {shift} {direction}."]}},
        ],
        "explicit": {"casual": ["Aria, what day is the {event} now?"],
                     "formal": ["Aria, which day is the {event} on now?"]},
        "implicit": {"casual": ["So which day is the {event} now?"],
                     "formal": ["Could you tell us which day the {event} is now?"]},
        "question": "The {event} was on {day} and was moved {shift} {direction}. Which weekday is it now?",
    },
    "unit_conversion": {
        "facts": [
            {"N2": {"casual": ["{to}, {statement}."], "formal": ["{to}, I understand {statement}."]},
             "N3": {"casual": ["Huh, {statement}."], "formal": ["So {statement}."]}},
        ],
        "explicit": {"casual": ["Aria, how many {unit_to} is {x} {unit_from}?"],
                     "formal": ["Aria, could you convert {x} {unit_from} into {unit_to}?"]},
        "implicit": {"casual": ["How many {unit_to} is {x} {unit_from}?"],
                     "formal": ["Could you convert {x} {unit_from} into {unit_to}, please?"]},
        "question": "Convert {x} {unit_from} into {unit_to}.",
    },
    "fact_recall": {
        "facts": [
            {"N2": {"casual": ["{to}, the {thing} is {spoken}."],
                    "formal": ["{to}, for the record, the {thing} is {spoken}."]},
             "N3": {"casual": ["Note to self, the {thing} is {spoken}."],
                    "formal": ["I must remember, the {thing} is {spoken}."]}},
        ],
        "explicit": {"casual": ["Aria, what was the {thing} again?"],
                     "formal": ["Aria, could you remind us of the {thing}?"]},
        "implicit": {"casual": ["What was the {thing} again?"],
                     "formal": ["Could you remind us of the {thing}?"]},
        "question": "What {thing} was stated earlier in the conversation?",
    },
}

# Families whose request is a plain recall: the cue turn before T must not talk about working things out.
RECALL_FAMILIES = frozenset({"fact_recall"})

THINGS_PRICED = ["tickets", "pizzas", "bus passes", "T-shirts", "museum passes", "sandwiches"]
THINGS_COUNTED = ["tickets", "chairs", "plates", "life jackets", "wristbands", "seats"]
VEHICLES = ["bus", "train", "ferry", "coach"]
EVENTS = ["meeting", "dentist appointment", "match", "party", "exam", "team dinner"]

# unit_conversion kinds: what is stated, and the factor that converts it.
CONVERSIONS: list[dict] = [
    {"statement": "the film runs {x} hours", "unit_from": "hours", "unit_to": "minutes", "factor": 60},
    {"statement": "the trail is {x} kilometres long", "unit_from": "kilometres", "unit_to": "metres",
     "factor": 1000},
    {"statement": "the recipe needs {x} kilograms of flour", "unit_from": "kilograms", "unit_to": "grams",
     "factor": 1000},
    {"statement": "we ordered {x} dozen eggs", "unit_from": "dozen", "unit_to": "eggs", "factor": 12},
    {"statement": "the trip lasts {x} weeks", "unit_from": "weeks", "unit_to": "days", "factor": 7},
    {"statement": "the punch bowl holds {x} litres", "unit_from": "litres", "unit_to": "millilitres",
     "factor": 1000},
]


def _money_aliases(value: int) -> list[str]:
    words = number_words(value)
    return [f"{value} dollars", f"${value}", words, f"{words} dollars"]


def _bill_split(rng: random.Random) -> tuple[dict, str, list[str]]:
    n = rng.randint(2, 6)
    share = rng.randint(6, 45)
    return {"total": share * n, "n": n}, str(share), _money_aliases(share)


def _total_cost(rng: random.Random) -> tuple[dict, str, list[str]]:
    price, qty = rng.randint(3, 25), rng.randint(2, 9)
    total = price * qty
    params = {"price": price, "qty": qty, "things": rng.choice(THINGS_PRICED)}
    return params, str(total), _money_aliases(total)


def _headcount(rng: random.Random) -> tuple[dict, str, list[str]]:
    adults, kids = rng.randint(2, 9), rng.randint(2, 9)
    total = adults + kids
    things = rng.choice(THINGS_COUNTED)
    return ({"adults": adults, "kids": kids, "things": things}, str(total),
            [number_words(total), f"{total} {things}"])


def _duration_text(minutes: int) -> str:
    h, m = divmod(minutes, 60)
    hours = f"{h} hour" + ("s" if h > 1 else "")
    if h == 0:
        return f"{m} minutes"
    return hours if m == 0 else f"{hours} and {m} minutes"


def _arrival_time(rng: random.Random) -> tuple[dict, str, list[str]]:
    # Departure no later than 9:55 and at most two hours of travel: arrival stays before 12:00, so a 12-hour
    # clock reading without am/pm is unambiguous.
    dep_h, dep_m = rng.randint(1, 9), 5 * rng.randint(0, 11)
    dur = 5 * rng.randint(3, 24)
    arr = dep_h * 60 + dep_m + dur
    arr_h, arr_m = divmod(arr, 60)
    gold = f"{arr_h}:{arr_m:02d}"
    params = {"vehicle": rng.choice(VEHICLES), "dep": f"{dep_h}:{dep_m:02d}", "dur": _duration_text(dur)}
    return params, gold, clock_aliases(arr_h, arr_m)


def _weekday_shift(rng: random.Random) -> tuple[dict, str, list[str]]:
    day = rng.randrange(7)
    k = rng.randint(1, 4)
    later = rng.random() < 0.6
    new = WEEKDAYS[(day + (k if later else -k)) % 7]
    params = {"event": rng.choice(EVENTS), "day": WEEKDAYS[day], "shift": f"{k} day" + ("s" if k > 1 else ""),
              "direction": "later" if later else "earlier"}
    return params, new, [new.lower(), f"on {new}"]


def _unit_conversion(rng: random.Random) -> tuple[dict, str, list[str]]:
    kind = rng.choice(CONVERSIONS)
    x = rng.randint(2, 9)
    value = x * kind["factor"]
    params = {"x": x, "unit_from": kind["unit_from"], "unit_to": kind["unit_to"],
              "statement": kind["statement"].format(x=x)}
    return params, str(value), [f"{value} {kind['unit_to']}", number_words(value)]


def _fact_recall(rng: random.Random) -> tuple[dict, str, list[str]]:
    kind = rng.choice(["door code", "room number", "gate", "locker number"])
    if kind == "door code":
        digits = [rng.randint(1, 9) for _ in range(4)]
        gold = "".join(map(str, digits))
        spoken = " ".join(map(str, digits))  # said digit by digit, as people read codes
        aliases = [spoken, " ".join(number_words(d) for d in digits)]
    elif kind == "room number":
        value = rng.randint(101, 489)
        gold = spoken = str(value)
        aliases = [f"room {value}", number_words(value), " ".join(number_words(int(c)) for c in gold)]
    elif kind == "gate":
        letter, num = rng.choice("ABCDEF"), rng.randint(2, 30)
        gold, spoken = f"{letter}{num}", f"{letter} {num}"
        aliases = [spoken, f"gate {letter}{num}", f"{letter} {number_words(num)}"]
    else:
        value = rng.randint(10, 99)
        gold = spoken = str(value)
        aliases = [f"locker {value}", number_words(value)]
    return {"thing": kind, "spoken": spoken}, gold, aliases


FAMILIES: dict[str, Callable[[random.Random], tuple[dict, str, list[str]]]] = {
    "bill_split": _bill_split,
    "total_cost": _total_cost,
    "headcount": _headcount,
    "arrival_time": _arrival_time,
    "weekday_shift": _weekday_shift,
    "unit_conversion": _unit_conversion,
    "fact_recall": _fact_recall,
}


def _fill(template: str, params: dict) -> str:
    """Format everything but {to}, which is filled once speakers are known."""
    return template.format(to="{to}", **params)


def build_task(family: str, rng: random.Random, style: str) -> Task:
    params, gold, aliases = FAMILIES[family](rng)
    text = TEXT[family]
    facts = []
    for fact in text["facts"]:
        label = rng.choice(sorted(fact))
        facts.append(Fact(label, _fill(rng.choice(fact[label][style]), params)))
    return Task(
        task_type=family,
        facts=facts,
        t_explicit=_fill(rng.choice(text["explicit"][style]), params),
        t_implicit=_fill(rng.choice(text["implicit"][style]), params),
        question=text["question"].format(**params),
        gold_answer=gold,
        gold_aliases=[a for a in dict.fromkeys(aliases) if a != gold],
    )
