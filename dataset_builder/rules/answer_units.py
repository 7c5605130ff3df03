"""Units of measure, weekdays and label nouns: what kind of answer a Duplex-MPE gold is and which unit it is in.

The gold-answer generator (`dataset_builder.mpe.answers`: aliases and near misses) and the answer matcher that
judges a transcript against the gold (`metrics.answer_match`) read the same tables, so "300 seconds" is never
300 minutes on either side.
"""

from __future__ import annotations

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# Units of measure: canonical name -> (dimension, other ways to write it: singular, US spelling, abbreviation).
# Single letters ("m", "g", "s") are left out: in a transcript they are more often letters than units.
# "pounds" is a weight here; as money it would still differ from dollars, which is all a judge needs.
UNITS: dict[str, tuple[str, tuple[str, ...]]] = {
    "seconds": ("time", ("second", "sec", "secs")),
    "minutes": ("time", ("minute", "min", "mins")),
    "hours": ("time", ("hour", "hr", "hrs")),
    "days": ("time", ("day",)),
    "weeks": ("time", ("week",)),
    "months": ("time", ("month",)),
    "years": ("time", ("year",)),
    "millimetres": ("length", ("millimetre", "millimeter", "millimeters", "mm")),
    "centimetres": ("length", ("centimetre", "centimeter", "centimeters", "cm")),
    "metres": ("length", ("metre", "meter", "meters")),
    "kilometres": ("length", ("kilometre", "kilometer", "kilometers", "km")),
    "miles": ("length", ("mile",)),
    "feet": ("length", ("foot", "ft")),
    "inches": ("length", ("inch",)),
    "yards": ("length", ("yard",)),
    "milligrams": ("mass", ("milligram", "mg")),
    "grams": ("mass", ("gram", "gramme", "grammes")),
    "kilograms": ("mass", ("kilogram", "kilo", "kilos", "kg")),
    "pounds": ("mass", ("pound", "lb", "lbs")),
    "ounces": ("mass", ("ounce", "oz")),
    "millilitres": ("volume", ("millilitre", "milliliter", "milliliters", "ml")),
    "litres": ("volume", ("litre", "liter", "liters")),
    "cups": ("volume", ("cup",)),
    "pints": ("volume", ("pint",)),
    "gallons": ("volume", ("gallon",)),
    "dollars": ("money", ("dollar", "bucks", "buck", "usd")),
    "cents": ("money", ("cent",)),
    "euros": ("money", ("euro",)),
    "dozen": ("count", ("dozens",)),
}
_CANONICAL = {v: unit for unit, (_, variants) in UNITS.items() for v in (unit, *variants)}

# Words that name what a label number belongs to ("gate B12", "room 340", "locker 57"): the noun comes first.
LABEL_NOUNS = frozenset({
    "gate", "room", "flat", "apartment", "suite", "unit", "locker", "table", "page", "bay", "platform", "stand",
    "seat", "row", "desk", "door", "floor", "level", "terminal", "pier", "dock", "lane", "aisle", "track",
    "carriage", "coach", "bus", "route", "flight", "code", "pin", "number",
})  # fmt: skip

_IRREGULAR_SINGULAR = {"people": "person", "children": "child", "men": "man", "women": "woman", "feet": "foot",
                       "teeth": "tooth", "mice": "mouse", "geese": "goose", "dozen": "dozen"}


def singular(noun: str) -> str:
    """The singular of an English plural noun, by the common rules ("chairs" -> "chair", "boxes" -> "box")."""
    if noun in _IRREGULAR_SINGULAR:
        return _IRREGULAR_SINGULAR[noun]
    if noun.endswith("ies") and len(noun) > 4:
        return noun[:-3] + "y"
    if noun.endswith(("ches", "shes", "sses", "xes", "zes")):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith("ss"):
        return noun[:-1]
    return noun


def canonical_unit(word: str) -> str | None:
    """The canonical name of a unit of measure however it is written ("metre", "meters" -> "metres"); None for
    other words."""
    return _CANONICAL.get(word.lower())


def unit_key(word: str) -> str:
    """One key per unit or counted noun, whatever its spelling or number: "meters", "metre" -> "metres";
    "chairs", "chair" -> "chair"."""
    word = word.lower()
    return _CANONICAL.get(word) or singular(word)


def unit_dimension(word: str) -> str | None:
    """"time", "length", "mass", "volume", "money" or "count" for a unit of measure; None for other words."""
    unit = _CANONICAL.get(word.lower())
    return UNITS[unit][0] if unit else None
