"""Written forms a TTS front end reads wrongly, rewritten as people say them before synthesis.

Scripts keep the written form a transcript would show ("9:05", the form the gold answers and the fact parser
use); what the voice says is the spoken form. espeak-ng, which phonemises for piper and the espeak backend,
reads "9:05" as "nine zero five" and "4:00" as "four zero zero".
"""

from __future__ import annotations

import re

from dataset_builder.mpe.numbers import number_words

# Part of every backend name that applies spoken_form: bump it when a rule changes, so cached clips are redone.
SPOKEN_FORM_VERSION = 1
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})\b")


def _clock(match: re.Match[str]) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    if minute == 0:
        return f"{number_words(hour)} o'clock"
    if minute < 10:
        return f"{number_words(hour)} oh {number_words(minute)}"
    return f"{number_words(hour)} {number_words(minute)}"


def spoken_form(text: str) -> str:
    """`text` with clock times as they are said: 4:00 -> four o'clock, 9:05 -> nine oh five, 9:40 -> nine forty."""
    return _CLOCK.sub(_clock, text)
