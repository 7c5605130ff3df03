"""Spoken forms of numbers and clock times, used for gold-answer aliases."""

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


def clock_aliases(hour: int, minute: int) -> list[str]:
    """Other ways to say the 12-hour clock time hour:minute ("5 15", "five fifteen", "quarter past five")."""
    h_words = number_words(hour)
    next_words = number_words(hour % 12 + 1)
    out = [f"{hour} {minute:02d}", f"{hour}.{minute:02d}"]
    if minute == 0:
        out += [f"{hour} o'clock", f"{h_words} o'clock", h_words]
    elif minute < 10:
        out.append(f"{h_words} oh {number_words(minute)}")
    else:
        out.append(f"{h_words} {number_words(minute)}")
    named = {15: f"quarter past {h_words}", 30: f"half past {h_words}", 45: f"quarter to {next_words}"}
    if minute in named:
        out.append(named[minute])
    return out
