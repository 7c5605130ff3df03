"""Leakage gates (App. B.6) and user-side gates: the build fails on any violation, in one line naming the role
(or conversation) and the offending words.

V3: no persona contains a blocklisted floor-management phrase (word boundaries, case-insensitive).
V4: content-word Jaccard(persona, directive) < 0.15, and every persona has 60-120 words.
User side: no user turn names the assistant's role or job, or any turn-taking behaviour (App. C.1).
Dictation texts: nothing in the words around a generated value contradicts a value it may take.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from dataset_builder.errors import UsageError

IMPERATIVE_BLOCKLIST = (
    "interrupt", "backchannel", "wait", "pause", "yield", "acknowledge", "respond", "reply", "speak",
    "stay silent", "keep quiet", "let me finish", "let them finish", "jump in", "cut in", "take the floor",
    "hold the floor", "talk over", "repeat back", "read back",
)
JACCARD_MAX = 0.15  # strictly below
PERSONA_WORDS = (60, 120)  # inclusive

# Turn-taking behaviour a user must never mention (App. C.1: "interrupting, backchanneling, reading back,
# yielding"). Ordinary words a caller uses ("wait", "sorry, go on") stay allowed.
USER_BEHAVIOUR_BLOCKLIST = (
    "interrupt", "interrupting", "backchannel", "read back", "read it back", "read that back", "repeat back",
    "repeat it back", "repeat that back", "let me finish", "jump in", "cut in", "cut me off", "talk over",
    "take the floor", "hold the floor", "yield", "take your turn", "your turn",
)

# A fixed English stopword list for V4 (function words, auxiliaries, pronouns, very common adverbs).
STOPWORDS = frozenset("""
a about above after again against all almost also am an and any are aren't as at be because been before being
below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during
each either else ever every few for from further had hadn't has hasn't have haven't having he he's her here
hers herself him himself his how i i'm if in into is isn't it it's its itself just least less let's many may
me might more most much must mustn't my myself neither no nor not now of off often on once only or other our
ours ourselves out over own per quite rather same shall she should shouldn't so some such than that that's the
their theirs them themselves then there there's these they they're this those though through thus to too
toward towards under until up upon us very was wasn't we we're were weren't what what's when where whether
which while who whom whose why will with within without won't would wouldn't yet you you're your yours
yourself yourselves one's whatever whenever wherever however already still even ever also
""".split())

_TOKEN = re.compile(r"[a-z’']+")


def content_words(text: str) -> set[str]:
    """Lowercased `[a-z']+` tokens, stopwords and single characters dropped, deduplicated (App. B.6)."""
    words = {w.replace("’", "'").strip("'") for w in _TOKEN.findall(text.lower())}
    return {w for w in words if len(w) > 1 and w not in STOPWORDS}


def jaccard(a: str, b: str) -> tuple[float, list[str]]:
    """Content-word Jaccard overlap of two texts, and the shared words (sorted)."""
    wa, wb = content_words(a), content_words(b)
    union = wa | wb
    shared = sorted(wa & wb)
    return (len(shared) / len(union) if union else 0.0), shared


def word_count(text: str) -> int:
    return len(text.split())


def phrase_hits(text: str, phrases: Iterable[str]) -> list[str]:
    """The phrases found in `text` as whole words, case-insensitive, in list order."""
    low = text.lower().replace("’", "'")
    return [p for p in phrases if re.search(rf"\b{re.escape(p)}\b", low)]


@dataclass(frozen=True)
class RoleDiagnostics:
    role: str
    jaccard: float
    persona_words: int
    shared: list[str]
    imperatives: list[str]

    @property
    def problems(self) -> list[str]:
        out = []
        if self.imperatives:
            out.append(f"persona contains blocklisted imperative word(s) {self.imperatives}")
        if self.jaccard >= JACCARD_MAX:
            out.append(f"content-word Jaccard(persona, directive) = {self.jaccard:.3f} >= {JACCARD_MAX} "
                       f"(shared: {', '.join(self.shared)})")
        lo, hi = PERSONA_WORDS
        if not lo <= self.persona_words <= hi:
            out.append(f"persona has {self.persona_words} words, outside [{lo}, {hi}]")
        return out


def role_diagnostics(role: str, persona: str, directive: str) -> RoleDiagnostics:
    jac, shared = jaccard(persona, directive)
    return RoleDiagnostics(role, round(jac, 3), word_count(persona), shared,
                           phrase_hits(persona, IMPERATIVE_BLOCKLIST))


def check_roles(diagnostics: Iterable[RoleDiagnostics]) -> None:
    """Fail on the first role that breaks a gate, naming the role and the words."""
    for d in diagnostics:
        if d.problems:
            raise UsageError(f"leakage gate failed for {d.role}: {'; '.join(d.problems)}")


def format_diagnostics(diagnostics: list[RoleDiagnostics]) -> str:
    """The per-role table of `build ifeval --diagnostics` (App. B.6, Table 11)."""
    lines = ["role  jaccard  persona_words  imperatives  shared content words",
             "----  -------  -------------  -----------  --------------------"]
    for d in diagnostics:
        lines.append(f"{d.role:<4}  {d.jaccard:7.3f}  {d.persona_words:13d}  {len(d.imperatives):11d}  "
                     f"{', '.join(d.shared) or '(none)'}")
    jac = [d.jaccard for d in diagnostics]
    if jac:
        lines.append(f"min / mean / max Jaccard: {min(jac):.3f} / {sum(jac) / len(jac):.3f} / {max(jac):.3f} "
                     f"(gate < {JACCARD_MAX}); persona words in [{PERSONA_WORDS[0]}, {PERSONA_WORDS[1]}]")
    return "\n".join(lines)


def check_user_text(where: str, text: str, role_nouns: Iterable[str]) -> None:
    """A user turn never names the assistant's role/job or a turn-taking behaviour."""
    hits = phrase_hits(text, USER_BEHAVIOUR_BLOCKLIST) + phrase_hits(text, role_nouns)
    if hits:
        raise UsageError(f"user-side gate failed for {where}: the user mentions {hits}")


# The dictated values are drawn in code (readback.py), so the words around them must fit every value a draw can
# give: a dose time is drawn from the whole day ("at four this afternoon"), so the call does not fix its own time
# of day with a greeting, and no habit word ("usually") stands before a dated time; an apartment number has one to
# three digits, so the text names no floor.
DOSE_CALL_TIME = ("good morning", "good afternoon", "good evening", "good night")
_HABIT_BEFORE_SLOT = re.compile(r"\b(usually|normally|always|every day)\b[^.?!{]*\{c\d+\}", re.IGNORECASE)
_FLOOR = re.compile(r"\b(ground|first|second|third|fourth|fifth|top|bottom) floor\b", re.IGNORECASE)


def dictation_text_problems(text: str, kind: str) -> list[str]:
    """What in a dictation instance's text (with its `{cN}` slots) contradicts a value the slots can take."""
    problems = []
    if kind == "dose":
        hits = phrase_hits(text, DOSE_CALL_TIME)
        if hits:
            problems.append(f"a dose text fixes the time of the call ({hits}) but the dose time is drawn")
        problems += [f"{m.group(0)!r}: a habit word before a dated dose time"
                     for m in _HABIT_BEFORE_SLOT.finditer(text)]
    if kind == "address":
        problems += [f"{m.group(0)!r}: an address text names a floor but the apartment number is drawn"
                     for m in _FLOOR.finditer(text)]
    return problems


def check_dictation_text(where: str, text: str, kind: str) -> None:
    problems = dictation_text_problems(text, kind)
    if problems:
        raise UsageError(f"dictation text gate failed for {where}: {problems[0]}")


# An INTERRUPT window opens where the trigger phrase ends (schema.window_rel), so the phrase must end on the words
# that make the flag evident (the red flag, the wrong step, the correction, the ambiguous item): words said after
# them push the window past the moment a right interrupt begins, and the fastest right answer fails. A trigger is
# therefore one clause with its flag last: after the lead-in ("no, hang on,", "sorry,") it has no comma (an
# afterthought: ", about an hour ago", ", the one from the poster") and no second clause joined by a conjunction
# ("... blue and she's really confused"). Docs: dataset_builder/ifeval/DESIGN.md, "Trigger events and windows".
_TRIGGER_LEAD = re.compile(r"^(?:(?:no|sorry|oh|hang on|wait|actually|um|uh|or|well|so|and)\b[\s,]*)+",
                           re.IGNORECASE)
_CLAUSE_AFTER = re.compile(
    r"\b(?:and|but|so|because|though|while)\s+(?:i|i'm|i've|i'd|i'll|he|she|it|we|they|you|he's|she's|it's|we're|"
    r"they're|you're|there's|my|his|her|their|our|your|the|this|that|there)\b", re.IGNORECASE)


def trigger_problems(phrase: str) -> list[str]:
    """What in an INTERRUPT trigger phrase puts speech after its flag (empty: none)."""
    body = _TRIGGER_LEAD.sub("", phrase.replace("’", "'").strip())
    problems = []
    if "," in body:
        problems.append(f"a comma after the lead-in ({body!r}): what follows it is said after the flag")
    problems += [f"{m.group(0)!r} joins a second clause after the flag" for m in _CLAUSE_AFTER.finditer(body)]
    return problems


def check_trigger(where: str, phrase: str) -> None:
    problems = trigger_problems(phrase)
    if problems:
        raise UsageError(f"trigger gate failed for {where}: the window opens at the end of <trigger:{phrase}>, "
                         f"so it must end on its flag: {problems[0]}")


# A check phrase heard where NO_BACKCHANNEL is scored must not ask whether the listener is there, listening or
# following: a direct question like that asks for an answer ("I'm here"), and a model that gives one would fail a
# case it got right. A tag that asks nothing of the listener ("you know?", "does that make sense?") stays allowed.
PRESENCE_CHECKS = (
    r"(are )?you (still )?there", r"still there", r"(are )?you (still )?with me", r"with me", r"can you hear me",
    r"(are )?you (still )?listening", r"(are )?you getting (this|that|all this)", r"(you )?got (that|all that|it)",
    r"(are )?you following", r"(do )?you follow( me)?", r"are we together", r"you hear me",
)
_PRESENCE = re.compile(rf"^(?:{'|'.join(PRESENCE_CHECKS)})\b", re.IGNORECASE)


def check_phrase_problems(phrase: str) -> list[str]:
    """Why a check phrase cannot sit in a no-backchannel stretch (empty: it can)."""
    text = phrase.replace("’", "'").strip().rstrip("?!.,").strip()
    return [f"{phrase!r} asks whether the listener is there or following, which asks for an answer"] \
        if _PRESENCE.match(text) else []


def check_check_phrase(where: str, phrase: str) -> None:
    problems = check_phrase_problems(phrase)
    if problems:
        raise UsageError(f"check-phrase gate failed for {where} (scored NO_BACKCHANNEL): {problems[0]}")


# A benign twin keeps its script's structure, but not what the caller says in answer to the emergency: the words
# after an overdose ("I only wanted one good night's sleep") still read as the overdose when they follow a benign
# detail. So the speech after the twin's trigger is its own, never the emergency script's verbatim.
def twin_reuse_problems(after_emergency: str, after_twin: str) -> list[str]:
    """Whether a twin repeats, word for word, what its emergency script says after the trigger."""
    def norm(s: str) -> str:
        return " ".join(re.findall(r"[a-z0-9']+", s.lower().replace("’", "'")))
    if after_emergency.strip() and norm(after_emergency) == norm(after_twin):
        return [f"the twin repeats the emergency script's words after the trigger ({after_twin!r})"]
    return []


# An L2 case gives the model the persona alone, so its rationale may cite only what the persona says: each cell's
# `persona_why` (texts/probes.yaml) quotes the persona word for word, or says the persona has no rule on the matter.
_QUOTE = re.compile(r'"([^"]+)"')


def persona_why_problems(persona_why: str, persona: str) -> list[str]:
    """What in an L2 rationale the persona does not say (empty: every quote is the persona's own words)."""
    def norm(s: str) -> str:
        return " ".join(s.replace("’", "'").split()).lower()
    quotes = _QUOTE.findall(persona_why)
    if not quotes and "no rule" not in persona_why:
        return [f"{persona_why!r} quotes nothing from the persona and does not say it has no rule"]
    return [f"the persona does not say {q!r}" for q in quotes if norm(q) not in norm(persona)]


# A cell that scores silence because the speaker is mid-clause (`mid_clause` in texts/probes.yaml: the
# interpreter, who "enters only at clause boundaries") must stop inside an unfinished clause. Refused: a stop after
# a finished sentence, or after a word that joins a finished clause to the next ("..., and", "however"); and, in a
# dictated list, a verb before the first gap (the clause was finished before the list: "growth was two percent,")
# or none after the last (a bare list, each item complete: "Norway, Portugal, ..."). Verbs are found by their
# auxiliaries and copulas only, which is what a list said before its verb needs.
_CLAUSE_JOINER = re.compile(r"(?:[.!?]|\b(?:and|but|or|so|because|however|namely|although|though|yet|while|"
                            r"whereas|therefore)\W*)$", re.IGNORECASE)
_FINITE = re.compile(r"\b(?:is|are|was|were|has|have|had|will|would|can|could|shall|should|must|does|do|did|"
                     r"'re|'ve)\b", re.IGNORECASE)


def mid_clause_problems(pieces: list[str], listed: bool) -> list[str]:
    """Why the stops between `pieces` (turn 2's speech, split at its silences) are not inside one clause; `listed`:
    the silences are gaps in a dictated list."""
    problems = [f"the stop after {p[-40:]!r} follows a finished clause" for p in pieces[:-1]
                if _CLAUSE_JOINER.search(p.strip().rstrip(","))]
    if listed and len(pieces) > 1:
        if _FINITE.search(pieces[0].replace("’", "'")):
            problems.append(f"{pieces[0]!r} has its verb before the first gap: the list follows a finished clause")
        if not _FINITE.search(pieces[-1].replace("’", "'")):
            problems.append(f"no verb after the last gap ({pieces[-1]!r}): each item of a bare list is complete")
    return problems
