"""Pronunciation overrides, defined once in `lexicon.json` and applied by each backend in its own phoneme alphabet.

espeak-ng, which also phonemises for piper, reads some words the way people do not say them ("Aria" as
"area"). Both engines accept phonemes inline in `[[ ]]`; the entry's word is replaced by its phonemes before
synthesis. Piper drops punctuation that directly follows a `[[ ]]` block, so for piper the punctuation moves
inside the block (piper reads ",", "?" etc. as phonemes); espeak-ng keeps it outside, where it still pauses.
An entry may also give `end_mark`: when the word ends a sentence with a full stop, the engine is handed that mark
instead (e.g. "!"), so the sentence's last word keeps its energy instead of the fall of a statement; the written
text is unchanged. An entry marked `call` is a name people call out: `apply(..., call_out=True)` speaks it as a
call, the way people repeat a name that was not heard ("Aria, what's..." -> "Aria! What's...", "..., thanks,
Aria." -> "..., thanks... Aria!"); the speech gate's last retries use it. The http backend sends plain text to a
server that takes no phonemes: it cannot apply the lexicon.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

LEXICON_PATH = Path(__file__).with_name("lexicon.json")
Alphabet = Literal["ipa", "espeak"]
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_IPA_BAD = re.compile(r"[\[\]\sA-Z]")  # brackets would end the block early; capitals are not IPA here
_ESPEAK_OK = re.compile(r"[!-~]+")  # printable ASCII, no spaces: espeak-ng's mnemonics
_TRAILING_PUNCT = "[,.?!;:]*"
_END_MARKS = (".", "!", "?")


class LexiconError(ValueError):
    pass


@dataclass(frozen=True)
class Pronunciation:
    word: str
    ipa: str  # piper (espeak-ng IPA as piper's phoneme map takes it)
    espeak: str  # espeak-ng phoneme mnemonics
    end_mark: str = "."  # the mark spoken for a full stop right after the word
    call: bool = False  # a name that may be called out (`Lexicon.apply(..., call_out=True)`)

    def phonemes(self, alphabet: Alphabet) -> str:
        return self.ipa if alphabet == "ipa" else self.espeak


@dataclass(frozen=True)
class Lexicon:
    entries: tuple[Pronunciation, ...]
    digest: str  # first 8 hex of the sha256 of the entries; part of each backend name that applies it

    def apply(self, text: str, alphabet: Alphabet, call_out: bool = False) -> str:
        """`text` with every whole-word match of an entry replaced by its phonemes in `[[ ]]`; with `call_out`,
        the `call` names that open or close a sentence as a vocative are first set apart as calls."""
        if not self.entries:
            return text
        if call_out:
            text = self.called_out(text)
        return _pattern(self).sub(lambda m: self._block(m, alphabet), text)

    def called_out(self, text: str) -> str:
        """The spoken form with each vocative `call` name called out: one opening a sentence before a comma is
        said with "!" ("Aria, what's..." -> "Aria! What's..."), one closing a sentence after a comma gets a pause
        before it and "!" after it ("..., thanks, Aria." -> "..., thanks... Aria!"). A question keeps its "?".
        Other uses of the name (mid-sentence, possessive) are left alone; the same text comes back if none."""
        names = [re.escape(e.word) for e in self.entries if e.call]
        if not names:
            return text
        name = rf"(?<![\w'-])({'|'.join(names)})(?![\w'-])"
        text = re.sub(rf"(^|[.!?]\s+){name},\s*(\w)", lambda m: f"{m[1]}{m[2]}! {m[3].upper()}", text,
                      flags=re.IGNORECASE)
        return re.sub(rf",\s+{name}([.!])(?=\s|$)", r"... \1!", text, flags=re.IGNORECASE)

    def _block(self, m: re.Match[str], alphabet: Alphabet) -> str:
        said = m.group(1).lower()
        entry = next(e for e in self.entries if e.word.lower() == said)
        punct = m.group(2)
        if punct == ".":
            punct = entry.end_mark
        if alphabet == "ipa":
            return f"[[{entry.phonemes(alphabet)}{punct}]]"
        return f"[[{entry.phonemes(alphabet)}]]{punct}"


@functools.cache
def _pattern(lexicon: Lexicon) -> re.Pattern[str]:
    # Longest first, so "Aria's" wins over "Aria"; the lookarounds keep "Marian" and "Aria-like" apart.
    words = sorted((re.escape(e.word) for e in lexicon.entries), key=len, reverse=True)
    return re.compile(rf"(?<![\w'-])({'|'.join(words)})(?![\w'-])({_TRAILING_PUNCT})", re.IGNORECASE)


def parse_lexicon(data: object, source: str = "lexicon") -> Lexicon:
    """A validated Lexicon from the JSON document; every problem names the entry and the field."""
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise LexiconError(f"{source}: expected an object with an 'entries' list")
    entries, seen = [], set()
    for i, raw in enumerate(data["entries"]):
        where = f"{source}: entries[{i}]"
        if not isinstance(raw, dict):
            raise LexiconError(f"{where}: expected an object")
        unknown = set(raw) - {"word", "ipa", "espeak", "end_mark", "call", "why"}
        if unknown:
            raise LexiconError(f"{where}: unknown field(s) {sorted(unknown)}")
        word, ipa, espeak = raw.get("word"), raw.get("ipa"), raw.get("espeak")
        if not isinstance(word, str) or not _WORD.fullmatch(word):
            raise LexiconError(f"{where}: 'word' must be one word (letters, optionally 's), got {word!r}")
        if word.lower() in seen:
            raise LexiconError(f"{where}: {word!r} is listed twice")
        if not isinstance(ipa, str) or not ipa or _IPA_BAD.search(ipa):
            raise LexiconError(f"{where}: 'ipa' must be non-empty IPA without spaces, brackets or capitals")
        if not isinstance(espeak, str) or not _ESPEAK_OK.fullmatch(espeak) or "[" in espeak or "]" in espeak:
            raise LexiconError(f"{where}: 'espeak' must be espeak-ng mnemonics (ASCII, no spaces or brackets)")
        end_mark = raw.get("end_mark", ".")
        if end_mark not in _END_MARKS:
            raise LexiconError(f"{where}: 'end_mark' must be one of {list(_END_MARKS)}, got {end_mark!r}")
        call = raw.get("call", False)
        if not isinstance(call, bool):
            raise LexiconError(f"{where}: 'call' must be true or false, got {call!r}")
        if not isinstance(raw.get("why", ""), str):
            raise LexiconError(f"{where}: 'why' must be text")
        seen.add(word.lower())
        entries.append(Pronunciation(word, ipa, espeak, end_mark, call))
    # An entry without end_mark hashes as before: its audio did not change. Nor does `call` change the audio
    # unless a backend speaks with call_out, which is then in that backend's name: it is not in the digest.
    canon = json.dumps([[e.word, e.ipa, e.espeak, *([e.end_mark] if e.end_mark != "." else [])] for e in entries],
                       ensure_ascii=False)
    return Lexicon(tuple(entries), hashlib.sha256(canon.encode("utf-8")).hexdigest()[:8])


@functools.cache
def load_lexicon(path: Path = LEXICON_PATH) -> Lexicon:
    path = Path(path)
    return parse_lexicon(json.loads(path.read_text(encoding="utf-8")), source=str(path))
