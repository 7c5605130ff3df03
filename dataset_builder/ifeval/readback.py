"""READBACK targets generated in code, so the target text is exact; the token normalisation the READBACK verifier
and the build gate share is the rule in `dataset_builder/rules/readback.py` (docs/benchmarks/ifeval.md, App. E.5).

A dictation probe's text has slots `{c1}` .. `{cN}`; `generate(kind, n, seed)` returns N spoken chunks (what the
user says, digits said one by one) and the written target (what the model should read back). The builder fills
slot k with `<chunk:SPOKEN_k>`. Numbers in targets are digit strings or single digits, so a spoken readback
("four one seven two") and a written one ("4172") normalise to the same tokens.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

import numpy as np

from dataset_builder.rules.readback import readback_tokens
from dataset_builder.rules.spoken_digits import DIGIT_WORDS

KINDS = ("phone", "address", "dose", "order")
_SPOKEN_DIGIT = ("oh", *DIGIT_WORDS[1:])


@dataclass(frozen=True)
class Dictation:
    kind: str
    chunks: list[str]  # spoken, one per `{cN}` slot
    target: str  # written


def _rng(seed: int, key: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{key}:readback".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _say_digits(digits: str) -> str:
    return " ".join(_SPOKEN_DIGIT[int(d)] for d in digits)


def _digits(rng: np.random.Generator, n: int, first_nonzero: bool = True) -> str:
    out = [str(int(rng.integers(1 if first_nonzero else 0, 10)))]
    out += [str(int(d)) for d in rng.integers(0, 10, size=n - 1)]
    return "".join(out)


STREETS = ("Maple Street", "Cedar Lane", "Birch Avenue", "Harbor Road", "Willow Drive", "Lincoln Avenue",
           "Quarry Road", "Orchard Lane", "Franklin Street", "Juniper Court", "Mill Road", "Ridge Avenue",
           "Sycamore Drive", "Chestnut Street", "Lakeview Terrace", "Granite Way", "Prospect Street",
           "Fairview Road", "Hawthorn Lane", "Kingsley Avenue")
MEDICATIONS = ("warfarin", "metoprolol", "lisinopril", "metformin", "amlodipine", "sertraline",
               "levothyroxine", "atorvastatin", "gabapentin", "prednisone", "clopidogrel", "furosemide",
               "digoxin", "lorazepam", "oxycodone", "omeprazole")
# How each is dispensed in the US (capsules for gabapentin and omeprazole, tablets otherwise) and how many a dose
# is: one for the drugs taken as a single tablet, one to three for those often taken as several.
CAPSULES = ("gabapentin", "omeprazole")
MAX_UNITS = {"warfarin": 3, "metoprolol": 2, "lisinopril": 2, "metformin": 2, "prednisone": 3, "furosemide": 2,
             "gabapentin": 3, "lorazepam": 2, "oxycodone": 2, "sertraline": 2}
DOSE_TIMES = (("seven this morning", "7"), ("eight this morning", "8"), ("nine last night", "9"),
              ("six this evening", "6"), ("two this afternoon", "2"), ("five this morning", "5"),
              ("four this afternoon", "4"), ("three this afternoon", "3"))
ORDER_SIZED = ("fries", "iced tea", "lemonade", "cola", "vanilla shake", "chocolate shake", "onion rings",
               "coffee", "root beer", "strawberry shake", "diet cola", "sweet tea")
ORDER_PLAIN = ("cheeseburger", "chicken sandwich", "fish sandwich", "veggie burger", "apple pie",
               "double cheeseburger", "spicy chicken wrap", "bacon burger")
SIZES = ("small", "medium", "large")
MODIFIERS = {"fries": ("no salt", "extra salt"), "iced tea": ("no ice", "unsweetened"), "cola": ("no ice",),
             "lemonade": ("no ice", "light ice"), "coffee": ("black", "extra cream"),
             "cheeseburger": ("no pickles", "no onions", "extra cheese"),
             "chicken sandwich": ("no mayo", "extra pickles"), "double cheeseburger": ("no pickles", "no mustard"),
             "veggie burger": ("no tomato",), "bacon burger": ("no onions", "extra bacon"),
             "spicy chicken wrap": ("no lettuce",), "fish sandwich": ("no tartar sauce",)}
_QTY_WORDS = ("", "one", "two", "three", "four")


def generate(kind: str, n: int, seed: int, key: str) -> Dictation:
    """N spoken chunks and the written target of one dictation, deterministic in (seed, key)."""
    rng = _rng(seed, key)
    if kind == "phone":
        if n != 3:
            raise ValueError(f"a phone number is dictated in 3 chunks, the text has {n} slots")
        parts = [str(int(rng.integers(2, 10))) + _digits(rng, 2, False), _digits(rng, 3), _digits(rng, 4, False)]
        return Dictation(kind, [_say_digits(p) for p in parts], "-".join(parts))
    if kind == "address":
        if n not in (2, 3):
            raise ValueError(f"an address is dictated in 2 or 3 chunks, the text has {n} slots")
        number = _digits(rng, int(rng.integers(3, 5)))
        street = STREETS[int(rng.integers(len(STREETS)))]
        chunks, target = [_say_digits(number), street], f"{number} {street}"
        if n == 3:
            unit = _digits(rng, int(rng.integers(1, 4)))
            chunks.append(f"apartment {_say_digits(unit)}")
            target += f", apartment {unit}"
        return Dictation(kind, chunks, target)
    if kind == "dose":
        if n not in (2, 3):
            raise ValueError(f"a dose is dictated in 2 or 3 chunks, the text has {n} slots")
        med = MEDICATIONS[int(rng.integers(len(MEDICATIONS)))]
        amount = int(rng.integers(1, MAX_UNITS.get(med, 1) + 1))
        unit = "capsules" if med in CAPSULES else "tablets"
        unit = unit if amount > 1 else unit[:-1]  # "1 tablet", "2 tablets"
        chunks, target = [med, f"{_SPOKEN_DIGIT[amount] if amount else 'zero'} {unit}"], f"{med}, {amount} {unit}"
        if n == 3:
            said, digit = DOSE_TIMES[int(rng.integers(len(DOSE_TIMES)))]
            chunks.append(f"at {said}")
            target += f", at {digit}"
        return Dictation(kind, chunks, target)
    if kind == "order":
        if not 2 <= n <= 5:
            raise ValueError(f"an order has 2 to 5 items, the text has {n} slots")
        chunks, written = [], []
        pool = list(ORDER_SIZED + ORDER_PLAIN)
        for _ in range(n):
            item = pool.pop(int(rng.integers(len(pool))))
            qty = int(rng.integers(1, 4))
            size = f"{SIZES[int(rng.integers(3))]} " if item in ORDER_SIZED else ""
            mods = MODIFIERS.get(item, ())
            mod = f" {mods[int(rng.integers(len(mods)))]}" if mods and rng.random() < 0.5 else ""
            plural = "s" if qty > 1 and item.endswith(("burger", "sandwich", "wrap", "pie", "shake", "cola",
                                                        "coffee", "lemonade", "tea", "beer")) else ""
            plural = "es" if plural and item.endswith("sandwich") else plural
            name = f"{size}{item}{plural}{mod}"
            chunks.append(f"{_QTY_WORDS[qty]} {name}")
            written.append(f"{qty} {name}")
        return Dictation(kind, chunks, ", ".join(written))
    raise ValueError(f"readback kind {kind!r} not in {KINDS}")


def check_target_in_chunks(target: str, chunks: list[str]) -> list[str]:
    """Target tokens that the dictated chunks do not contain (multiset); empty when the target is covered."""
    have = Counter(readback_tokens(" ".join(chunks)))
    missing = []
    for tok in readback_tokens(target):
        if have[tok] > 0:
            have[tok] -= 1
        else:
            missing.append(tok)
    return missing
