"""The READBACK rule (DSB-IFEval App. E.5): how a read-back is tokenised and how much of the target it covers.

The build gate (`dataset_builder.ifeval.readback`: every target really dictated) and the READBACK verifier
(`metrics.ifeval.measure`) apply this one rule. Numbers in targets are digit strings or single digits, so a
spoken readback ("four one seven two") and a written one ("4172") normalise to the same tokens.
"""

from __future__ import annotations

import re
from collections import Counter

from dataset_builder.rules.spoken_digits import DIGIT_VALUES

_DIGIT_WORDS = {w: str(v) for w, v in DIGIT_VALUES.items()}
_TOKEN = re.compile(r"[a-z0-9]+")


def readback_tokens(text: str) -> list[str]:
    """Lowercase, `[a-z0-9]+` tokens, spelled digits and "oh" -> digits, digit runs split into single digits."""
    out: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        tok = _DIGIT_WORDS.get(tok, tok)
        out.extend(tok if tok.isdigit() else [tok])
    return out


def coverage(target: str, transcript: str) -> float:
    """Multiset token coverage: the share of target tokens matched in a decrementing multiset of transcript
    tokens (App. E.5); 0.0 for an empty target."""
    want = readback_tokens(target)
    if not want:
        return 0.0
    have = Counter(readback_tokens(transcript))
    hit = 0
    for tok in want:
        if have[tok] > 0:
            have[tok] -= 1
            hit += 1
    return hit / len(want)
