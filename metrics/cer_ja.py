"""Character error rate for Japanese, on the written characters and on the reading.

Japanese has no spaces to count words by, so ASR quality is a character error rate (CER): the Levenshtein
alignment of `metrics.intelligibility.align_words` over characters, errors / reference characters.

- Written CER (`written_chars`): NFKC-normalised text without punctuation, symbols or spaces. It counts every
  spelling choice as an error: もともと vs 元々, 控えめ vs 控え目, and homophones (習慣 vs 週間).
- Reading CER (`reading_chars`): both texts turned into their katakana reading by OpenJTalk (pyopenjtalk-plus,
  the reading front end Kokoro uses too), then compared the same way. Spelling variants and homophones read the
  same, so this counts what was heard wrong (郵便局 heard as 有名曲: ユービンキョク vs ユーメーキョク).
  OpenJTalk's own reading errors hit reference and transcript alike and mostly cancel.
"""

from __future__ import annotations

import unicodedata

from metrics.intelligibility import WordErrors, align_words

_DROP = ("P", "Z", "S", "C")  # punctuation, separators, symbols, control characters


def written_chars(text: str) -> list[str]:
    return [c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c)[0] not in _DROP]


def reading_chars(text: str) -> list[str]:
    import pyopenjtalk

    normal = "".join(written_chars(text))
    reading = str(pyopenjtalk.g2p(normal, kana=True)) if normal else ""
    return written_chars(reading)


def character_errors(reference: str, hypothesis: str, reading: bool = False) -> WordErrors:
    """Edit counts over characters (`ref_words` counts reference characters); `.rate` is the CER."""
    chars = reading_chars if reading else written_chars
    return align_words(chars(reference), chars(hypothesis))
