"""How long a piece of text is when spoken, how it splits into sentences and how lead-ins join it, per language.

The M3 banks need these measures to keep the intended events true before any audio exists: a backchannel has to
fit in 0.8 s (else the extractor reads a TURN), a TURN has to last longer than that, and both halves of a held
pause have to be TURNs. English is measured in words and syllables, Japanese in morae (kana; a kanji counts as
two, the usual reading length), since Japanese writes no spaces.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from dataset_builder.diagnostics import split_sentences, words

_VOWEL_GROUP = re.compile(r"[aeiouy]+")
# A sentence piece ending in an initial ("J.", "R.R.") or a title abbreviation does not end a sentence.
_ABBREVIATION = re.compile(r"(?:^|\s)(?:[A-Z]\.)+$|\b(?:St|Mt|Mr|Mrs|Ms|Dr)\.$")
_JA_SENTENCE_END = re.compile(r"(?<=[。！？!?])")
_SMALL_KANA = set("ゃゅょぁぃぅぇぉゎャュョァィゥェォヮ")
_PUNCT_CATEGORIES = ("P", "Z", "S")


def syllables(word: str) -> int:
    """A rough English syllable count: vowel groups, a silent final 'e' dropped, at least one."""
    w = word.lower().strip("'")
    if w.endswith("e") and not w.endswith(("le", "ee")) and len(w) > 2:
        w = w[:-1]
    return max(1, len(_VOWEL_GROUP.findall(w)))


def _number_words(digits: str) -> int:
    """About how many words a written number takes to say: "7" one, "634" two, "1889" three."""
    return max(1, len(digits) - 1)


def morae(text: str) -> int:
    """A Japanese length in morae: each kana (small ya/yu/yo and small vowels not counted, the long-vowel mark
    and small tsu counted), each kanji or digit two, each Latin letter one; punctuation and spaces nothing."""
    n = 0
    for ch in unicodedata.normalize("NFKC", text):
        cat = unicodedata.category(ch)
        if cat[0] in _PUNCT_CATEGORIES:
            continue
        if ch in _SMALL_KANA:
            continue
        n += 2 if "\u4e00" <= ch <= "\u9fff" or ch == "々" or ch.isdigit() else 1  # a digit reads as ~2 morae
    return n


@dataclass(frozen=True)
class Language:
    """The measures and joins of one language. `size` is what the length limits count (words or morae)."""

    code: str
    unit: str  # "words" | "morae"
    bc_max: int  # a backchannel is at most this long (fits in 0.8 s)
    bc_max_syllables: int  # English only: a backchannel has at most this many syllables
    turn_min: int  # a TURN line is at least this long (lasts > 0.8 s)
    half_min: int  # each side of a held pause ('|') is at least this long
    turn_max: int  # a TURN line is at most this long
    host_min: int  # a turn this long can host a listener's backchannel or be cut by a barge-in
    tail_min: int  # a turn cut after its answer runs on at least this long past it
    joiner: str  # between two sentences or a lead-in and its line

    def size(self, text: str) -> int:
        """Words (English) or morae (Japanese); a number counts as it is read ("1889": eighteen eighty-nine)."""
        if self.unit == "words":
            return sum(_number_words(w) if w.isdigit() else 1 for w in words(text))
        return morae(text)

    def sentences(self, text: str) -> list[str]:
        """Sentences of a line: split after . ! ? and a space (English; not after an initial or an abbreviation:
        "J. R. R. Tolkien", "St. Louis"), after 。！？ (Japanese)."""
        if self.code == "en":
            out: list[str] = []
            for piece in split_sentences(text):
                if out and _ABBREVIATION.search(out[-1]):
                    out[-1] = f"{out[-1]} {piece}"
                else:
                    out.append(piece)
            return out
        return [s.strip() for s in _JA_SENTENCE_END.split(text.strip()) if s.strip()]

    def join(self, first: str, second: str) -> str:
        """Two pieces said as one turn: a lead-in and its line, or two lines of one speaker."""
        first, second = first.strip(), second.strip()
        if not first:
            return second
        if self.code != "en":
            return first + second
        if first[-1] in ".!?":
            return f"{first} {capitalise(second)}"
        return f"{first} {decapitalise(second)}"

    def bc_problem(self, text: str) -> str | None:
        """Why `text` is too long for a backchannel, or None."""
        n = self.size(text)
        if n > self.bc_max:
            return f"BC too long in {self.unit} ({n} > {self.bc_max})"
        if self.code == "en":
            syl = sum(syllables(w) for w in words(text))
            if syl > self.bc_max_syllables:
                return f"BC too long in syllables ({syl} > {self.bc_max_syllables})"
        return None


_KEEP_CAPITAL = re.compile(r"^(?:I|I'm|I've|I'd|I'll|OK)\b")


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def decapitalise(text: str) -> str:
    """The line after a lead-in: its first letter lowered, unless the first word is 'I' (and its contractions)
    or keeps a capital inside (a name, 'TV')."""
    first = text.split(" ", 1)[0]
    if _KEEP_CAPITAL.match(text) or any(c.isupper() for c in first[1:]):
        return text
    return text[:1].lower() + text[1:]


# Limits: ~2.5 words or ~8 morae per second of relaxed speech. A BC of 0.8 s holds about two words (four
# syllables) or six morae; a TURN of four words / eight morae lasts well over 0.8 s.
LANGUAGES: dict[str, Language] = {
    "en": Language("en", "words", bc_max=3, bc_max_syllables=4, turn_min=4, half_min=3, turn_max=55,
                   host_min=7, tail_min=5, joiner=" "),
    "ja": Language("ja", "morae", bc_max=7, bc_max_syllables=0, turn_min=8, half_min=6, turn_max=150,
                   host_min=18, tail_min=12, joiner=""),
}
