"""Words of a model utterance, as the M3-DuplexBench authors' backchannel filter counts them (README
"M3-DuplexBench"; metrics/m3/rules.py difference (2)): a model segment shorter than 1 s with fewer than 4 words is a
backchannel, not a takeover. Their code counts the words their forced aligner placed in the segment; we count the
words of its ASR transcript with the one rule below, and both users of the count read it from here: scoring stores
the count of each short PAUSE segment (score.py) and the export writes those same words as the segment's `chunks`
(export.py), so their filter on our export counts what ours counted.

- English (and any language written with spaces): a word is a run of letters or digits, with one inner apostrophe
  ("don't"); punctuation and hyphens separate words. "Mm-hm, mm-hm." is four words (Mm, hm, mm, hm).
- Japanese (written without spaces): the short units of a morphological analyser, MeCab with UniDic (fugashi and
  unidic-lite, pinned in pyproject.toml), without punctuation. On the authors' Japanese toy data (txt_align word
  times, words joined into utterances at gaps >= 0.5 s) its units agree with theirs better than janome's do
  (word-boundary F1 0.911 vs 0.895 on magicdata_toy, 0.987 vs 0.944 on topiocqa_ja_toy; the < 4 words verdict
  agrees on 188 of 190 utterances vs 183): benchmarks/bench_ja_words.py measures it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_HAS_WORD_CHAR = re.compile(r"[^\W_]")
UNSPACED = ("ja",)  # languages written without spaces: words come from the morphological analyser


@lru_cache(maxsize=1)
def _tagger() -> Any:
    """MeCab with the unidic-lite dictionary, named explicitly (fugashi would prefer a full `unidic` if one were
    installed, whose units differ)."""
    import fugashi
    import unidic_lite

    return fugashi.Tagger(f'-d "{unidic_lite.DICDIR}"')


def words(text: str, language: str) -> list[str]:
    """The words of a transcript in `language` (ISO code), in order (see the module docstring)."""
    if language in UNSPACED:
        return [w.surface for w in _tagger()(text) if _HAS_WORD_CHAR.search(w.surface)]
    return _WORD.findall(text)


def word_count(text: str, language: str) -> int:
    return len(words(text, language))
