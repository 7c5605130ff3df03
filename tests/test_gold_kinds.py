"""Every gold-answer kind the Duplex-MPE generator can produce, recomputed independently (tests/MUTATION.md, bug 5).

The generator computes each gold answer in code from the numbers it draws. Here the same answer is worked out
again from what the scene *says* (the fact turns and the neutral question), with tables and rules written in
this file from first principles — 1 km = 1000 m, a week is 7 days — never read from
`dataset_builder/mpe/tasks.py`. Each family is sampled over many seeds in both registers, so every unit
conversion and every recall kind is hit; a family or conversion the generator gains without a check here fails
the coverage test.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import random
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from dataset_builder.mpe import generate_pair
from dataset_builder.mpe.attributes import ACTIVITIES
from dataset_builder.mpe.generator import check_gold
from dataset_builder.mpe.numbers import number_words
from dataset_builder.mpe.tasks import CONVERSIONS, FAMILIES, GoldMismatch, Task, build_task, families_for
from dataset_builder.schema import SchemaError
from metrics.textnorm import numbers_in, times_in, words_to_numbers

SEEDS = range(1000)  # enough that a draw range moved by one changes the sample (locker 10-99: seed 789; room: 994)
STYLES = ("casual", "formal")

# From first principles, not from the generator: (unit stated, unit asked for) -> how many of the second in one
# of the first.
UNIT_FACTORS = {
    ("hours", "minutes"): 60,
    ("minutes", "seconds"): 60,
    ("kilometres", "metres"): 1000,
    ("kilograms", "grams"): 1000,
    ("dozen", "cupcakes"): 12,
    ("weeks", "days"): 7,
    ("litres", "millilitres"): 1000,
}
RECALL_KINDS = {"code", "number", "label", "locker"}
DAY_NAMES = list(calendar.day_name)  # Monday .. Sunday, from the standard library


def facts_text(task: Task) -> str:
    return " ".join(f.text for f in task.facts)


def ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]


def tasks(family: str) -> list[Task]:
    """The family drawn over SEEDS x STYLES, cycling through the activities it arises in and 3 or 4 people."""
    activities = families_activities(family)
    return [build_task(family, activities[seed % len(activities)], random.Random(seed), style, 3 + seed % 2)
            for seed in SEEDS for style in STYLES]


def families_activities(family: str) -> list[str]:
    return [a for a in ACTIVITIES if family in families_for(a)]


# --- the gold, recomputed from what is said ------------------------------------------------------------------

def gold_bill_split(task: Task) -> str:
    total, ways = map(int, re.fullmatch(r".+ came to (\d+) dollars, split evenly between (\d+) people\. .*",
                                        task.question).groups())
    assert total % ways == 0, "a share in whole dollars"
    assert ints(facts_text(task)) == [total, ways]
    assert ways in (3, 4), "split between the people present"
    return str(total // ways)


def gold_total_cost(task: Task) -> str:
    things, price, qty = re.fullmatch(r"(.+) cost (\d+) dollars each and (\d+) are needed\. .*",
                                      task.question).groups()
    text = facts_text(task)
    assert f"{price} dollars" in text and f"{qty} {things.lower()}" in text
    return str(int(qty) * int(price))


def gold_headcount(task: Task) -> str:
    a, b = map(int, re.fullmatch(r"(\d+) .+ and (\d+) .+ each need one of the .+\. How many .*",
                                 task.question).groups())
    assert ints(facts_text(task)) == [a, b]
    return str(a + b)


def _minutes(duration: str) -> int:
    m = re.fullmatch(r"(?:(\d+) hours?)?(?: and )?(?:(\d+) minutes)?", duration)
    assert m and duration, duration
    return 60 * int(m.group(1) or 0) + int(m.group(2) or 0)


ARRIVAL = r".* at (\d{1,2}:\d\d) and .*?\b(?:takes|needs|lasts|runs for) (.+?)\. At what time .*"


def gold_arrival_time(task: Task) -> str:
    dep, dur = re.fullmatch(ARRIVAL, task.question).groups()
    h, m = map(int, dep.split(":"))
    text = facts_text(task)
    assert dep in text and dur in text
    arrival = h * 60 + m + _minutes(dur)
    assert arrival < 12 * 60, "arrival before noon: a 12-hour reading without am/pm is unambiguous"
    return f"{arrival // 60}:{arrival % 60:02d}"


def gold_weekday_shift(task: Task) -> str:
    day, k, direction = re.fullmatch(r".+ was on (\w+) and has moved (\d+) days? (later|earlier)\. .*",
                                     task.question).groups()
    text = facts_text(task)
    assert day in text and f"{k} day" in text and direction in text
    step = int(k) if direction == "later" else -int(k)
    return DAY_NAMES[(DAY_NAMES.index(day) + step) % 7]


def gold_unit_conversion(task: Task) -> str:
    x, unit_from, unit_to = re.fullmatch(r"(\d+) (\w+): how many (\w+) is that\?", task.question).groups()
    assert f"{x} {unit_from}" in facts_text(task)  # the scene states the quantity that is asked about
    assert unit_to in task.ask and unit_to in task.ask_indirect  # T names the unit asked for
    return str(int(x) * UNIT_FACTORS[(unit_from, unit_to)])


SPOKEN = r"\b([A-F] \d+|[1-9] [1-9] [1-9] [1-9]|\d+)\b"


def gold_fact_recall(task: Task) -> str:
    assert re.fullmatch(r"What was .+, as stated earlier in the conversation\?", task.question)
    spoken, = re.findall(SPOKEN, facts_text(task))
    return spoken.replace(" ", "")  # codes are read digit by digit, gates as letter + number


INDEPENDENT: dict[str, Callable[[Task], str]] = {
    "bill_split": gold_bill_split,
    "total_cost": gold_total_cost,
    "headcount": gold_headcount,
    "arrival_time": gold_arrival_time,
    "weekday_shift": gold_weekday_shift,
    "unit_conversion": gold_unit_conversion,
    "fact_recall": gold_fact_recall,
}


def test_every_family_has_an_independent_check() -> None:
    assert set(FAMILIES) == set(INDEPENDENT)
    assert all(families_activities(f) for f in FAMILIES)  # every family arises in some activity


def test_every_unit_conversion_kind_has_an_independent_factor() -> None:
    assert set(CONVERSIONS) == set(UNIT_FACTORS)
    seen = {re.fullmatch(r"\d+ (\w+): how many (\w+) .*", t.question).groups() for t in tasks("unit_conversion")}
    assert seen == set(UNIT_FACTORS)  # the sample reaches every kind


@pytest.mark.parametrize("family", sorted(INDEPENDENT))
def test_gold_recomputed_from_what_the_scene_says(family: str) -> None:
    """tests/MUTATION.md bug 5: a wrong factor (km -> m by 100) or any wrong gold rule in any family fails here."""
    for task in tasks(family):
        assert task.task_type == family
        assert task.gold_answer == INDEPENDENT[family](task), (task.question, facts_text(task))
        assert task.gold_answer not in task.gold_aliases
        assert len(set(task.gold_aliases)) == len(task.gold_aliases)
        assert {f.label for f in task.facts} <= {"N2", "N3"}
        for fact in task.facts:  # N2 is said to a human, named when speakers are known; N3 to nobody
            assert fact.text.count("{to}") == (fact.label == "N2")
        assert "{to}" in task.raise_text
        texts = [task.question, task.ask, task.ask_indirect, task.raise_text, *task.gold_aliases, facts_text(task)]
        assert all("aria" not in t.lower() for t in texts)
        assert not re.search(r"\d", task.ask + task.ask_indirect + task.raise_text)  # T never restates a fact
        assert "{" not in " ".join(texts).replace("{to}", "")
        assert not any(re.search(r"\bNone\b", t) for t in texts)


# What each recalled thing looks like when said: a code is four digits (no zero, so never read "oh"), a number
# three digits, a label a letter and a number, a locker (or table) number two digits.
RECALL_FORMS = {"code": r"[1-9] [1-9] [1-9] [1-9]", "number": r"[1-4]\d\d", "label": r"[A-F] ([2-9]|[12]\d|30)",
                "locker": r"[1-9]\d"}


def _recall_kind(spoken: str) -> str:
    return next(k for k, form in RECALL_FORMS.items() if re.fullmatch(form, spoken))


def test_recall_kinds_all_reached_each_in_its_form() -> None:
    seen = set()
    for t in tasks("fact_recall"):
        spoken, = re.findall(SPOKEN, facts_text(t))
        seen.add(_recall_kind(spoken))
    assert seen == RECALL_KINDS


def test_arrival_times_are_valid_morning_clock_times() -> None:
    """Departures 1:00-9:55 on five-minute steps, trips of 15 min to 2 h: every time is a valid reading before noon."""
    deps, durs = [], []
    for t in tasks("arrival_time"):
        dep, dur = re.fullmatch(ARRIVAL, t.question).groups()
        h, m = map(int, dep.split(":"))
        assert 1 <= h <= 9 and 0 <= m <= 55 and m % 5 == 0, dep
        deps.append(h * 60 + m)
        durs.append(_minutes(dur))
        arr_h, arr_m = map(int, t.gold_answer.split(":"))
        assert 1 <= arr_h <= 11 and 0 <= arr_m < 60
    assert min(durs) == 15 and max(durs) == 120 and all(d % 5 == 0 for d in durs)
    assert max(deps) == 9 * 60 + 55


def test_weekday_shifts_both_ways_and_across_the_week_end() -> None:
    qs = [t.question for t in tasks("weekday_shift")]
    assert any("later" in q for q in qs) and any("earlier" in q for q in qs)
    assert any("Sunday" in q and "later" in q for q in qs) and any("Monday" in q and "earlier" in q for q in qs)
    assert {int(re.search(r"moved (\d+) day", q).group(1)) for q in qs} == {1, 2, 3, 4}
    assert any(" 1 day " in q for q in qs) and any(" 2 days " in q for q in qs)


def test_durations_read_as_spoken() -> None:
    durs = {re.fullmatch(ARRIVAL, t.question).group(2) for t in tasks("arrival_time")}
    assert {"1 hour", "2 hours", "15 minutes", "1 hour and 5 minutes"} <= durs
    assert not any(re.search(r"\b(1 hours|0 minutes|0 hours?)\b", d) for d in durs)


def test_scenes_carry_the_gold_of_their_facts() -> None:
    """Through the scene generator: T's gold follows from the fact turns said before it, recomputed here, and the
    generator's own parser (tasks.derive_gold) refuses a scene whose words were changed."""
    for i in range(120):
        for script in generate_pair(i, 11, ["v1", "v2", "v3", "v4", "v5"]):
            before_t = [t.text for t in script.turns[: script.t_index]]
            text = " ".join(before_t)
            digits = [t for t in before_t if re.search(r"\d", t)]
            assert 1 <= len(digits) <= 2, "only the task's facts carry numbers"
            assert not any(re.search(r"\d", t.text) for t in script.turns[script.t_index:])
            if script.task_type == "unit_conversion":
                x, unit_from, unit_to = re.fullmatch(r"(\d+) (\w+): how many (\w+) .*", script.question).groups()
                assert f"{x} {unit_from}" in text
                assert script.gold_answer == str(int(x) * UNIT_FACTORS[(unit_from, unit_to)])
            elif script.task_type == "fact_recall":
                spoken, = re.findall(SPOKEN, text)
                assert script.gold_answer == spoken.replace(" ", "")
            elif script.task_type == "bill_split":
                assert ints(text)[1] == len(script.speakers)  # split between the people present
            check_gold(script)
            i_fact = script.turns.index(next(t for t in script.turns if re.search(r"\d", t.text)))
            bumped = re.sub(r"\d+", lambda m: str(int(m.group(0)) + 1), script.turns[i_fact].text, count=1)
            script.turns[i_fact] = replace(script.turns[i_fact], text=bumped)
            with pytest.raises((SchemaError, GoldMismatch)):
                check_gold(script)


# --- aliases: every spoken form names the gold ---------------------------------------------------------------

def _clock(alias: str) -> str:
    """A clock alias read back without the generator's rules: 'quarter to six' -> 5:45."""
    named = re.fullmatch(r"(quarter past|half past|quarter to) (.+)", alias)
    if named:
        h = int(numbers_in(named.group(2))[0])
        return {"quarter past": f"{h}:15", "half past": f"{h}:30", "quarter to": f"{(h - 2) % 12 + 1}:45"}[
            named.group(1)]
    spoken_oh = re.fullmatch(r"(\w+) oh (\w+)", alias)  # "seven oh five": 7:05, not the digit run 705
    if spoken_oh:
        return f"{int(numbers_in(spoken_oh.group(1))[0])}:0{int(numbers_in(spoken_oh.group(2))[0])}"
    if times_in(alias):
        return times_in(alias)[0]
    if re.fullmatch(r"\d+\.\d\d", alias):
        return alias.replace(".", ":")
    nums = [int(x) for x in numbers_in(alias)]
    return f"{nums[0]}:{nums[1]:02d}" if len(nums) == 2 else f"{nums[0]}:00"


def _names_number(alias: str, gold: str) -> bool:
    nums = numbers_in(alias)
    return float(gold) in nums or "".join(str(int(x)) for x in nums) == gold


@pytest.mark.parametrize("family", sorted(INDEPENDENT))
def test_every_alias_names_the_gold(family: str) -> None:
    for task in tasks(family)[:200]:
        gold = task.gold_answer
        for alias in task.gold_aliases:
            if family == "arrival_time":
                assert _clock(alias) == gold, (alias, gold)
            elif family == "weekday_shift":
                assert alias.lower().removeprefix("on ") == gold.lower()
            elif re.fullmatch(r"[A-F]\d+", gold):  # a gate
                assert re.sub(r"\s", "", words_to_numbers(alias)).upper().endswith(gold), (alias, gold)
            else:
                assert _names_number(alias, gold), (alias, gold)
        if family in ("bill_split", "total_cost"):
            assert {f"{gold} dollars", f"${gold}"} <= set(task.gold_aliases)
        if family in ("bill_split", "total_cost", "headcount", "unit_conversion"):
            assert any(re.fullmatch(r"[a-z -]+", a) for a in task.gold_aliases)  # a spelled-out form


# --- the spoken forms themselves --------------------------------------------------------------------------------

@pytest.mark.parametrize("n, words", [
    (0, "zero"), (7, "seven"), (10, "ten"), (13, "thirteen"), (19, "nineteen"), (20, "twenty"),
    (21, "twenty-one"), (40, "forty"), (99, "ninety-nine"), (100, "one hundred"), (101, "one hundred one"),
    (115, "one hundred fifteen"), (340, "three hundred forty"), (999, "nine hundred ninety-nine"),
    (1000, "one thousand"), (1001, "one thousand one"), (3500, "three thousand five hundred"),
    (9000, "nine thousand"), (12012, "twelve thousand twelve"),
    (999999, "nine hundred ninety-nine thousand nine hundred ninety-nine"),
])  # fmt: skip
def test_number_words_known_answers(n: int, words: str) -> None:
    assert number_words(n) == words


def test_number_words_read_back() -> None:
    for n in [*range(0, 2000), *range(2000, 1_000_000, 997), 999_999]:
        assert words_to_numbers(number_words(n)) == str(n), n


@pytest.mark.parametrize("n", [-1, 1_000_000])
def test_number_words_range(n: int) -> None:
    with pytest.raises(ValueError, match="0..999999"):
        number_words(n)


# --- the released draws, frozen per seed ---------------------------------------------------------------------------

GOLDEN = Path(__file__).resolve().parent / "golden" / "mpe_tasks.json"


def _snapshot() -> dict[str, Any]:
    """Per family: a hash over every task drawn for SEEDS x STYLES, and the seed-0 tasks in full (a readable diff)."""
    out: dict[str, Any] = {}
    for family in sorted(FAMILIES):
        drawn = [asdict(t) for t in tasks(family)]
        out[family] = {"sha256": hashlib.sha256(json.dumps(drawn, sort_keys=True).encode()).hexdigest(),
                       "seed0": drawn[: len(STYLES)]}
    return out


def test_task_draws_are_frozen() -> None:
    """Same seed, same scenes (docs/release.md): any change to what the generator draws changes the released sets.

    If the change is intended (a new dataset version), rewrite the golden with
    `.venv/bin/python tests/test_gold_kinds.py --write-golden` and say so in the changelog.
    """
    golden = json.loads(GOLDEN.read_text())
    now = _snapshot()
    for family in sorted(FAMILIES):
        assert now[family]["seed0"] == golden[family]["seed0"], family
        assert now[family]["sha256"] == golden[family]["sha256"], f"{family}: the draws over {len(SEEDS)} seeds changed"
    assert set(now) == set(golden)


if __name__ == "__main__" and sys.argv[1:] == ["--write-golden"]:
    GOLDEN.write_text(json.dumps(_snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
