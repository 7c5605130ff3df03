"""Spoken forms of numbers, digit strings and clock times, used for gold answers and their aliases."""

from __future__ import annotations

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n: int) -> str:
    """English words for 0 <= n < 1,000,000 ("twenty-one", "three thousand five hundred")."""
    if not 0 <= n < 1_000_000:
        raise ValueError(f"number_words supports 0..999999, got {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{_ONES[hundreds]} hundred" + (f" {number_words(rest)}" if rest else "")
    thousands, rest = divmod(n, 1000)
    return f"{number_words(thousands)} thousand" + (f" {number_words(rest)}" if rest else "")


def digit_words(digits: str, zero: str = "zero") -> str:
    """A digit string read digit by digit ("4057" -> "four zero five seven"; zero="oh" -> "four oh five seven")."""
    if not digits.isdigit():
        raise ValueError(f"digit_words needs a string of digits, got {digits!r}")
    return " ".join(zero if c == "0" else _ONES[int(c)] for c in digits)


def clock_words(hour: int, minute: int) -> str:
    """The time hour:minute as people read a clock: "five fifteen", "ten oh five", "three o'clock"."""
    h_words = number_words(hour)
    if minute == 0:
        return f"{h_words} o'clock"
    if minute < 10:
        return f"{h_words} oh {number_words(minute)}"
    return f"{h_words} {number_words(minute)}"


def named_clock(hour: int, minute: int) -> str | None:
    """"quarter past five", "half past five" or "quarter to six" for hour:15/30/45 on a 12-hour clock, else None."""
    named = {15: f"quarter past {number_words(hour)}", 30: f"half past {number_words(hour)}",
             45: f"quarter to {number_words(hour % 12 + 1)}"}
    return named.get(minute)
