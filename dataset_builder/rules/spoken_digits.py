"""Digits said one by one: the words for 0-9 a speaker says and an ASR writes ("four one seven two", "four oh
four"), shared by the READBACK rule, the text normaliser and the answer matcher."""

from __future__ import annotations

DIGIT_WORDS: tuple[str, ...] = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
# Each digit word's value, with "oh" for zero as it is said inside a digit run.
DIGIT_VALUES: dict[str, int] = {w: i for i, w in enumerate(DIGIT_WORDS)} | {"oh": 0}
