"""The chat words that depend on the speakers' register and on why someone speaks (`texts/{lang}/chat_lexicon.yaml`,
format in `texts/README.md` "Chat lexicon"): topic-change lead-ins, barge-in openers that give a reason to cut in,
and backchannels that fit any news, per register (`any` for English; `casual` / `polite` for Japanese, the
register a chat topic declares).

A language without the file uses its shared lists (`transitions.yaml`, `barge_in.yaml`, `backchannels.yaml`).
Every entry is checked: lead-ins end in a comma or a word and are short, backchannels fit in 0.8 s, and a Japanese
entry never shows the other register's sentence ending (`speech_forms.clause_register`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from dataset_builder.m3.bankio import TEXTS_DIR, Problems, read_yaml, rel, where
from dataset_builder.m3.language import LANGUAGES
from dataset_builder.m3.speech_forms import CASUAL, POLITE, bc_register, registers

LEXICON_FILE = "chat_lexicon.yaml"
FIELDS = ("transitions", "barge_in", "user_bc", "system_bc")
ANY = "any"


@dataclass(frozen=True)
class ChatWords:
    """One register's lists (an empty list: use the language's shared one)."""

    transitions: tuple[str, ...] = ()
    barge_in: tuple[str, ...] = ()
    user_bc: tuple[str, ...] = ()
    system_bc: tuple[str, ...] = ()

    def bc(self, listener: str) -> tuple[str, ...]:
        return self.user_bc if listener == "user" else self.system_bc


class ChatLexiconError(ValueError):
    pass


def _check(lang: str, register: str, fld: str, text: str, at: str, problems: Problems) -> None:
    language = LANGUAGES[lang]
    if fld.endswith("_bc"):
        if why := language.bc_problem(text):
            problems.fail(at, why, text)
    elif language.size(text) > language.turn_max // 2:
        problems.fail(at, "lead-in too long", text)
    elif text.rstrip()[-1:] in ("?", "？", ".", "。"):
        problems.fail(at, "a lead-in runs into the next line: end it with a comma or a word", text)
    if lang == "ja" and register in (CASUAL, POLITE):
        other = POLITE if register == CASUAL else CASUAL
        shown = {bc_register(text)} if fld.endswith("_bc") else set(registers(text))
        if other in shown:
            problems.fail(at, f"a {register} entry ends in the {other} register", text)


def load_lexicon_unchecked(lang: str, texts_dir: Path = TEXTS_DIR) -> tuple[dict[str, ChatWords], Problems]:
    problems = Problems()
    path = Path(texts_dir) / lang / LEXICON_FILE
    if not path.exists():
        return {}, problems
    data = read_yaml(path, problems)
    out: dict[str, ChatWords] = {}
    if not isinstance(data, dict):
        if data is not None:
            problems.fail(rel(path), "expected a mapping register -> lists at the top", type(data).__name__)
        return out, problems
    for register, block in data.items():
        if not isinstance(block, dict):
            problems.fail(where(path, register, str(register)), "expected a mapping of lists", block)
            continue
        lists: dict[str, tuple[str, ...]] = {}
        for fld, values in block.items():
            at = where(path, fld, f"{register}.{fld}")
            if fld not in FIELDS:
                problems.fail(at, f"unknown list {fld!r} (known: {', '.join(FIELDS)})", fld)
                continue
            if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip()
                                                                     for v in values):
                problems.fail(at, "expected a non-empty list of texts", values)
                continue
            for v in values:
                _check(lang, str(register), fld, v, where(path, v, f"{register}.{fld}"), problems)
            if len(set(values)) < len(values):
                problems.warn(at, "an entry listed twice", fld)
            lists[fld] = tuple(dict.fromkeys(str(v).strip() for v in values))
        out[str(register)] = ChatWords(**lists)
    return out, problems


@functools.cache
def load_lexicon(lang: str) -> dict[str, ChatWords]:
    """register -> ChatWords of a language's shipped lexicon; raises listing every error."""
    lexicon, problems = load_lexicon_unchecked(lang)
    if problems.errors:
        raise ChatLexiconError("\n".join([f"{len(problems.errors)} problem(s) in {lang}/{LEXICON_FILE}:",
                                          *map(str, problems.errors)]))
    return lexicon


def words_for(lang: str, register: str) -> ChatWords:
    """The lists of a register (English: `any`); empty lists where the lexicon has none."""
    lexicon = load_lexicon(lang)
    return lexicon.get(register or ANY) or lexicon.get(ANY) or ChatWords()
