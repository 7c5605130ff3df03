"""M3-DuplexBench dialogue records (`Dialogue`, `DialogueUtterance`) and the seeded task dialogues (DESIGN.md
"Dialogues"). Chat dialogues are authored whole and read from the corpus (`corpus.py`); both kinds end up as the
same records, which the timeline and the rows read.

`generate(language, "task", index, seed)` returns task dialogue `index` of a config; `generate_dialogues(language,
"task", n, seed)` the first `n`. A dialogue is a list of utterances in speaking order, each with how it relates to
what comes before (`RELATIONS`): the timeline places them (PAUSE / SHIFT / BC timings, barge-in cuts); nothing
here knows about time or audio.

- **task**: 2-6 entities of `texts/knowledge.yaml`; the user asks about an entity by name, follows up 1-3 times
  with questions that need the history ("and when was it finished?"), then switches entity. Every system answer
  says the value and carries its gold (`knowledge.gold`). The next entity is sometimes one the last answers
  named (the Seine after "Paris"), as topic shifts go in TopiOCQA. A topic-change lead-in ("By the way,",
  "ところで、") opens only a question about another entity; a follow-up's reaction never echoes the answer as a
  question (`connective_problems` checks both).
- A user line with a `|` (or two user lines joined) may become two TURNs with a held PAUSE between them; 1-3
  system turns are cut by a user barge-in (an opener joined to the user's next line; the system's answer runs on
  with a second fact so the cut comes after the answer, `cut_after_chars`); listeners backchannel in long turns.

Draws are spread evenly across a config: every choice (entity, relation, phrasing, lead-in) takes one of its
least-used options so far, ties broken by the dialogue's seeded random. So dialogue `index` depends on the seed and
on dialogues 0..index-1 only: the first n dialogues are the same whatever the preset.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dataset_builder.m3.knowledge import MAX_DIALOGUES_PER_GOLD, Entity, Knowledge, said
from dataset_builder.m3.language import LANGUAGES, Language, capitalise
from dataset_builder.m3.schema import DOMAINS, KINDS, SPEAKERS
from dataset_builder.m3.schema import LANGUAGES as LANGS
from dataset_builder.m3.speech_forms import (
    bc_in_question,
    check_dialogue,
    echoes_as_question,
    question_spans,
    topic_change_lead,
    unfinished,
    without_repeated_marker,
)
from dataset_builder.m3.textbank import PAUSE, PLACEHOLDER, LanguageBank, TextBank, load_bank
from dataset_builder.schema import SchemaError

RELATIONS = ("first", "shift", "pause", "bc", "barge_in")
PRESETS = {"mini": 1, "full": 200}  # dialogues per (language, domain)


@dataclass(frozen=True)
class Shape:
    """How a dialogue is put together: counts and rates, one place for every knob."""

    task_entities: tuple[tuple[int, float], ...] = ((5, 0.4), (6, 0.6))  # the most; fewer when they suffice
    task_questions: tuple[int, int] = (10, 13)  # user questions per task dialogue
    max_follow_ups: int = 3
    transition_p: float = 0.75  # a new task entity is asked about after a lead-in
    opener_p: float = 0.9  # the first task question has a lead-in
    reaction_p: float = 0.6  # a follow-up question starts with a reaction to the last answer
    long_answer_p: float = 0.3  # a task answer runs on after its value ("..., if I'm remembering that right")
    single_p: float = 0.35  # a task entity may be one with a single question left to ask
    chain_p: float = 0.7  # the next entity is the one the last answer named (asked about as "she", "it"), when fresh
    pauses: tuple[tuple[int, float], ...] = ((1, 0.45), (2, 0.40), (3, 0.15))
    barge_ins: tuple[tuple[int, float], ...] = ((1, 0.45), (2, 0.40), (3, 0.15))
    # A listener backchannels in a long turn (Language.host_min) with this probability, per (domain, listener).
    bc_p: dict[str, float] = field(default_factory=lambda: {"user": 0.40, "system": 0.10})
    max_bcs: int = 6
    task_bc_asides: tuple[tuple[int, float], ...] = ((1, 0.6), (2, 0.4))  # task answers run on for a user BC


SHAPE = Shape()


# --- records ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DialogueUtterance:
    """One IPU-to-be of a dialogue's text: a TURN (or half of one, after a held pause) or a backchannel."""

    utt_id: str  # "{dialogue_id}-u{NN}"
    speaker: str  # "user" | "system"
    kind: str  # "turn" | "bc"
    text: str
    relation: str  # RELATIONS: how it follows what came before
    topic: str = ""  # the chat conversation id ("en-chat-001"), or the task entity id the turn is about
    fact: str = ""  # task: the relation asked or answered ("height")
    gold_answer: str = ""  # task system answers: the gold, computed from the knowledge base
    gold_aliases: tuple[str, ...] = ()
    context_dependent: bool = False  # task system answers: the question needed the history
    follows_answer: bool = False  # task system answers: the question was about the previous answer itself
    cut_after_chars: int = 0  # a system turn a barge-in cuts: cut no earlier than this many characters in
    # A backchannel in a turn that goes on to ask something: it ends within the host turn's first this many
    # characters (its telling, before the question); 0: anywhere in the host.
    bc_before_chars: int = 0
    # A backchannel placed by meaning (the chat corpus's `{bc: word}`): it comes right after this many characters
    # of its host TURN have been said; 0: where the statistics' offset puts it.
    bc_at_chars: int = 0
    why: str = ""  # a barge-in's reason as its author wrote it (the corpus's `{why: ...}`; never spoken)

    def validate(self, where: str) -> None:
        _require(self.speaker in SPEAKERS, f"speaker {self.speaker!r} not in {SPEAKERS}", where, "speaker")
        _require(self.kind in KINDS, f"kind {self.kind!r} not in {KINDS}", where, "kind")
        _require(self.relation in RELATIONS, f"relation {self.relation!r} not in {RELATIONS}", where, "relation")
        _require(bool(self.text.strip()) and PAUSE not in self.text and not PLACEHOLDER.search(self.text),
                 "text is empty or holds a '|' or a placeholder", where, "text")
        _require((self.kind == "bc") == (self.relation == "bc"), "a bc utterance has relation bc and only it",
                 where, "relation")
        _require(not self.gold_answer or (self.speaker == "system" and self.kind == "turn"),
                 "only system turns carry a gold answer", where, "gold_answer")
        _require(self.gold_answer or not (self.gold_aliases or self.context_dependent),
                 "aliases and context_dependent need a gold answer", where, "gold_aliases")
        _require(self.context_dependent or not self.follows_answer,
                 "a question about the previous answer is context-dependent", where, "follows_answer")
        _require(0 <= self.cut_after_chars < len(self.text), "cut_after_chars out of the text", where,
                 "cut_after_chars")
        _require(self.bc_before_chars >= 0 and (self.kind == "bc" or not self.bc_before_chars),
                 "bc_before_chars is a backchannel's, and not negative", where, "bc_before_chars")
        _require(self.bc_at_chars >= 0 and (self.kind == "bc" or not self.bc_at_chars),
                 "bc_at_chars is a backchannel's, and not negative", where, "bc_at_chars")
        _require(not self.why or self.relation == "barge_in", "only a barge-in has a why", where, "why")


@dataclass(frozen=True)
class Dialogue:
    dialogue_id: str  # "{lang}-{domain}-d{NNN}"
    language: str
    domain: str
    index: int
    seed: int  # the seed of this dialogue's draws (from the build seed, language, domain and index)
    topics: tuple[str, ...]  # chat: the storyline's topics; task: entity ids, in order
    utterances: tuple[DialogueUtterance, ...]

    def validate(self) -> None:
        where = f"dialogue {self.dialogue_id}"
        _require(self.language in LANGS, f"language {self.language!r} not in {LANGS}", where, "language")
        _require(self.domain in DOMAINS, f"domain {self.domain!r} not in {DOMAINS}", where, "domain")
        _require(self.dialogue_id == dialogue_id(self.language, self.domain, self.index), "dialogue_id does not "
                 "match language, domain and index", where, "dialogue_id")
        _require(bool(self.utterances), "no utterances", where, "utterances")
        last_turn: DialogueUtterance | None = None
        for i, u in enumerate(self.utterances):
            at = f"{where} utterance {i}"
            u.validate(at)
            _require(u.utt_id == f"{self.dialogue_id}-u{i:02d}", "utt_ids run u00, u01, ... in order", at, "utt_id")
            _require((i == 0) == (u.relation == "first"), "the first utterance, and only it, is 'first'", at,
                     "relation")
            if i == 0:
                _require(u.kind == "turn", "a dialogue starts with a turn", at, "kind")
            elif u.relation == "bc":
                _require(last_turn is not None and last_turn.speaker != u.speaker,
                         "a bc is the listener's, during the other speaker's turn", at, "speaker")
            elif u.relation == "pause":
                _require(last_turn is not None and last_turn.speaker == u.speaker,
                         "a pause continues the same speaker's turn", at, "relation")
            elif u.relation == "shift":
                _require(last_turn is not None and last_turn.speaker != u.speaker,
                         "a shift is the other speaker taking the turn", at, "relation")
            elif u.relation == "barge_in":
                _require(last_turn is not None and last_turn.speaker == "system" and u.speaker == "user",
                         "a barge-in is the user cutting into a system turn", at, "relation")
            if u.gold_answer:
                _require(self.domain == "task", "gold answers belong to task dialogues", at, "gold_answer")
            if u.kind == "turn":
                last_turn = u

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Dialogue:
        d = dict(data)
        try:
            d["utterances"] = tuple(DialogueUtterance(**{**u, "gold_aliases": tuple(u.get("gold_aliases", ()))})
                                    for u in d.get("utterances", ()))
            d["topics"] = tuple(d.get("topics", ()))
            dialogue = cls(**d)
        except TypeError as err:
            raise SchemaError(str(err), source="dialogue", field="keys") from err
        dialogue.validate()
        return dialogue

    def lines(self) -> list[tuple[str, str]]:
        """(speaker, text) of each TURN line as written: a held pause's halves joined again."""
        joiner = LANGUAGES[self.language].joiner
        out: list[tuple[str, str]] = []
        for u in self.utterances:
            if u.kind != "turn":
                continue
            if u.relation == "pause" and out and out[-1][0] == u.speaker:
                out[-1] = (u.speaker, f"{out[-1][1]}{joiner}{u.text}")
            else:
                out.append((u.speaker, u.text))
        return out

    def count(self, relation: str) -> int:
        return sum(u.relation == relation for u in self.utterances)


def _require(cond: bool, message: str, where: str, fld: str) -> None:
    if not cond:
        raise SchemaError(message, source=where, field=fld)


def dialogue_id(language: str, domain: str, index: int) -> str:
    return f"{language}-{domain}-d{index:03d}"


def dialogue_seed(seed: int, language: str, domain: str, index: int) -> int:
    """A stable seed per dialogue (Python's hash() of str is salted per process)."""
    digest = hashlib.sha256(f"m3-dialogue/{seed}/{language}/{domain}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


# --- spreading the draws ---------------------------------------------------------------------------------------

class Ledger:
    """How often each option of each choice has been taken in a config so far; `pick` takes a least-used one."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, int | str]] = Counter()
        self.cache: dict[Any, Any] = {}  # values a config computes once (gold answers per fact)

    def order(self, key: str, n: int, rng: random.Random) -> list[int]:
        """Option indices from least to most used, ties in seeded random order."""
        jitter = [rng.random() for _ in range(n)]
        return sorted(range(n), key=lambda i: (self.counts[key, i], jitter[i]))

    def take(self, key: str, i: int | str) -> None:
        self.counts[key, i] += 1

    def pick(self, key: str, n: int, rng: random.Random, ok: Callable[[int], bool] | None = None) -> int:
        """A least-used option among those `ok` accepts (among all when it accepts none)."""
        order = self.order(key, n, rng)
        allowed = [i for i in order if ok is None or ok(i)] or order
        self.take(key, allowed[0])
        return allowed[0]

    def pick_said(self, key: str, templates: Sequence[str], realise: Callable[[str], str], rng: random.Random,
                  ok: Callable[[int], bool] | None = None, prefer: Callable[[int], bool] | None = None) -> int:
        """A template (among those `ok` accepts) whose realised text has been said least in the config, then
        one `prefer` likes, then the least-used template: one template with a name or a noun in it says
        something new each time, one without it does not."""
        jitter = [rng.random() for _ in templates]
        said_as = [_said_key(realise(t)) for t in templates]
        allowed = [i for i in range(len(templates)) if ok is None or ok(i)] or list(range(len(templates)))
        best = min(allowed, key=lambda i: (self.counts["said", said_as[i]], prefer is not None and not prefer(i),
                                           self.counts[key, i], jitter[i]))
        self.take(key, best)
        self.take("said", said_as[best])  # type: ignore[arg-type]
        return best

    def choose(self, key: str, options: Sequence[str], rng: random.Random) -> str:
        return options[self.pick(key, len(options), rng)]


def _said_key(text: str) -> str:
    return " ".join(text.replace(PAUSE, " ").lower().split())


def _weighted(pairs: tuple[tuple[int, float], ...], rng: random.Random) -> int:
    values, weights = zip(*pairs, strict=True)
    return rng.choices(values, weights=weights)[0]


# --- turns before realisation ----------------------------------------------------------------------------------

@dataclass
class _Turn:
    """A speaker's turn as text pieces: the boundaries between pieces are candidate held pauses (user only)."""

    speaker: str
    pieces: list[str]
    topic: str = ""
    topic_start: bool = False
    fact: str = ""
    gold: tuple[str, list[str]] | None = None
    context_dependent: bool = False
    follows_answer: bool = False
    barge_host: bool = False  # a system turn the user's next turn cuts into
    bc_host: bool = False  # a system turn the user backchannels in, whatever the draw
    barge_opener: str = ""  # the user's turn: the lead-in it cuts in with
    barged: bool = False  # the user's turn cuts into the system turn before it (with or without an opener)
    # The turn's template and slot values without its own lead-in: a barge-in opener replaces the lead-in and
    # is composed with the template, so a name keeps its capital after the opener (None: a joined turn).
    bare: tuple[str, dict[str, str]] | None = None
    cut_after_chars: int = 0
    value_end: int = 0  # a task answer: where the value it says ends in the text (0: not found)


def _fill(text: str, values: dict[str, str]) -> str:
    """`text` with each `{slot}` replaced by its value; a value's own article is dropped where the text already
    has one before the slot ("a new {device}" with "the printer": "a new printer", never "a new the printer"),
    and an "a"/"an" right before the slot is made to fit the value ("an {instrument}": "a guitar")."""
    out, at = [], 0
    for m in PLACEHOLDER.finditer(text):
        head = text[at:m.start()]
        v = values[m.group(1)]
        before = "".join(out) + head
        if _SLOT_DET.search(before):
            v = _VALUE_DET.sub("", v, count=1)
            if (art := _A_AN.search(head)) and v[:1].isalpha():
                an = "an" if v[0].lower() in "aeiou" else "a"
                head = head[:art.start()] + (an.capitalize() if art.group(1)[0] == "A" else an) + " "
        out += [head, v]
        at = m.end()
    out.append(text[at:])
    return "".join(out)


# English: an article or possessive (and at most one word, "the next", "a new") right before a slot, and an article
# a value starts with; "a"/"an" right before a slot.
_SLOT_DET = re.compile(r"(?i)\b(?:the|a|an|my|our|your|his|her|their)\s+(?:(?:next|last|first|other|same|whole|old|new|"
                       r"little|big|local|usual|only|proper|secondhand|favorite|real|good|cheap)\s+)?$")
_VALUE_DET = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_A_AN = re.compile(r"\b([Aa]n?) $")


def _compose(lang: Language, lead: str, template: str, values: dict[str, str]) -> str:
    """A lead-in and a template said as one line, placeholders filled after joining (so a name keeps its
    capitals after a lead-in) and the line's first letter capitalised."""
    if lead:  # "Okay, got it," + "Okay, and when ...": the marker once
        template = without_repeated_marker(lead, template, lang.code)
        if _ENDS_IN_CONJUNCTION.search(lead):  # "Sorry, not to interrupt, but" + "and when ...": one "but"
            template = _unmarked(lang, template)
    text = _fill(lang.join(lead, template) if lead else template, values)
    return capitalise(text) if lang.code == "en" else text


# Discourse markers a chat line may start with: said after a lead-in or a barge-in opener that already says the
# same ("Oh, that reminds me, oh, by the way, ..."; "あ、その話で思い出した、そういえば、..."), they are dropped.
_MARKER = {"en": re.compile(r"^(?:(?:oh|so|anyway|by the way|actually|okay|right),\s*|(?:so|and)\s+)+",
                            re.IGNORECASE),
           "ja": re.compile(r"^(?:(?:あ|あっ|そういえば|そうそう|ところで|ねえ|ねえねえ)、)+")}


_ENDS_IN_CONJUNCTION = re.compile(r"\b(?:and|but|so)\W*$", re.IGNORECASE)


def _unmarked(lang: Language, text: str) -> str:
    rest = _MARKER[lang.code].sub("", text, count=1)
    return rest if lang.size(rest.replace(PAUSE, " ")) >= lang.turn_min else text


def _pieces(text: str) -> list[str]:
    return [p.strip() for p in text.split(PAUSE)]


def _lead_pieces(lang: Language, lead: str, template: str, values: dict[str, str]) -> list[str]:
    """`_compose`'s line as pieces, with a candidate held pause after the lead-in too ("Okay, next question,
    | how tall is it?"): people often hold the floor there."""
    text = _compose(lang, lead, template, values)
    if not lead:
        return _pieces(text)
    head = _compose(lang, "", lead, values)
    if not text.startswith(head):  # the lead-in reads differently once joined: no pause there
        return _pieces(text)
    return [head, *_pieces(text[len(head):])]


# Japanese: a lead-in that ends in a concessive clause ("話は変わるんですけど、") before a question that opens with
# one of its own ("{entity}の伝記を読んでるんですけど、…") stacks two 〜けど clauses, which nobody says in one breath.
_CLAUSE = {"ja": re.compile(r"(?:けど|が)、")}
# A lead-in clause ("もう一つ聞きたいんですけど、", "I'll write that down,") said again in a later question of the
# same dialogue reads as one phrase pasted in twice, and so does a hedge closing two answers in a row
# ("、記憶が正しければですけどね。", ", if I remember right."); clauses this long (characters) count. A clause is
# what stands between the language's commas.
_REPEAT_MIN = {"ja": 7, "en": 12}
_COMMA = {"ja": "、", "en": ", "}
# A question whose answer every speaker of the language knows is not asked: a Japanese speaker does not ask which
# country Tokyo is the capital of, nor an English speaker which country Washington, D.C. or London is the capital
# of (the English voices are American, the chat corpus British: both countries are home to the listener).
_OWN_COUNTRY = {"ja": frozenset({"日本"}), "en": frozenset({"the united states", "the united kingdom"})}


def own_country(gold: str, code: str) -> bool:
    """Whether `gold` names the country the language's speakers live in (every one of them knows it)."""
    return gold_key(gold) in _OWN_COUNTRY.get(code, frozenset())


def stacked_clauses(lead: str, template: str, code: str) -> bool:
    """Whether `lead` ends in a concessive clause and the question after it opens with another (Japanese)."""
    rule = _CLAUSE.get(code)
    if rule is None or not lead.strip():
        return False
    ends = rule.search(lead.rstrip()[-3:]) is not None
    return ends and rule.search(template.split("？")[0]) is not None


def lead_clauses(text: str, code: str) -> set[str]:
    """The comma-ended clauses of a line that are long enough to be heard as a set phrase when said twice."""
    least = _REPEAT_MIN.get(code)
    if least is None:
        return set()
    out = set()
    for line in text.replace(PAUSE, "").split("\n"):
        parts = line.split(_COMMA[code])[:-1]  # the last part is the question itself
        out |= {p.strip().lower() for p in parts if len(p.strip()) >= least}
    return out


def _ending(text: str, code: str) -> str:
    """What a line says after its last comma ("記憶が正しければですけどね。", "if I remember right."; "" without
    one)."""
    comma = _COMMA[code]
    return text.rpartition(comma)[2] if comma in text else ""


def _repeats(text: str, previous: str, code: str) -> bool:
    comma = _COMMA.get(code, "")
    whole = text.rstrip().removesuffix(comma.strip()) + comma  # a lead-in's own last clause counts too
    return bool(lead_clauses(whole, code) & lead_clauses(previous, code))


def overlapping_answers(a: str, b: str) -> bool:
    """Whether one gold answer names the other ("アムステルダム国立美術館" and "アムステルダム"): once one is said,
    asking for the other asks what was just said. Numbers are never compared so (a year is not an atomic number)."""
    a, b = gold_key(a), gold_key(b)
    return bool(a) and bool(b) and not (a.isdigit() or b.isdigit()) and (a in b or b in a)


# --- task ------------------------------------------------------------------------------------------------------

def _asked_entities(knowledge: Knowledge, bank: LanguageBank) -> list[Entity]:
    """Entities with a fact this language has questions for, in knowledge-base order."""
    return [e for e in knowledge.entities if any(r in bank.relations for r in e.facts)]


def gold_key(gold: str) -> str:
    """A gold answer as the per-config count of dialogues (`MAX_DIALOGUES_PER_GOLD`) knows it."""
    return " ".join(gold.lower().split())


@dataclass
class _TaskPlan:
    """One entity of a task dialogue: the relations asked about it, in order, and whether its first question is
    about the previous answer itself ("Who wrote Emma?" "Jane Austen." "And when was she born?")."""

    entity: Entity
    asked: list[str]
    spare: list[str]
    follows: bool


def _plan_task(bank: LanguageBank, knowledge: Knowledge, code: str, ledger: Ledger, rng: random.Random,
               shape: Shape) -> list[_TaskPlan]:
    """The entities and questions of one task dialogue. Every choice takes the least-used option of the config
    (entity, then the relation whose gold answer has answered fewest dialogues so far); no gold answer answers a
    question in more than `MAX_DIALOGUES_PER_GOLD` dialogues of a config, nor twice in one dialogue; after an
    answer that names another entity the next questions may be about that entity (`shape.chain_p`), asked as
    follow-ups that need the answer to be understood, as TopiOCQA's conversations go (M3-DuplexBench §III-B)."""
    pool = _asked_entities(knowledge, bank)
    slot = {e.id: i for i, e in enumerate(pool)}
    golds: dict[tuple[str, str], str] = ledger.cache.setdefault(("golds", code), {})
    n_q = rng.randint(*shape.task_questions)
    n_e = _weighted(shape.task_entities, rng)
    here: set[str] = set()  # the gold answers of this dialogue so far
    plans: list[_TaskPlan] = []

    def key(e: Entity, r: str) -> str:
        if (e.id, r) not in golds:
            golds[e.id, r] = gold_key(knowledge.gold(e, r, code)[0])
        return golds[e.id, r]

    def fresh(e: Entity, taken: set[str]) -> list[str]:
        out = []
        for r in _relations(e, bank):
            k = key(e, r)
            target = knowledge.link(e.facts[r])
            if (not any(k == h or overlapping_answers(k, h) for h in here)
                    and ledger.counts["gold", k] < MAX_DIALOGUES_PER_GOLD
                    and not own_country(k, code)
                    and (target is None or target.id not in taken)):  # never back to an entity just discussed
                out.append(r)
        return out

    low = min(ledger.counts["task/entity", i] for i in range(len(pool)))
    asked_n = 0
    while asked_n < n_q and len(plans) < n_e:
        taken = {p.entity.id for p in plans}
        left = n_q - asked_n
        entity, follows = None, False
        if plans:
            last = plans[-1]
            target = knowledge.link(last.entity.facts[last.asked[-1]])
            chained = len(plans) >= 2 and plans[-1].follows and plans[-2].follows
            if (not chained and target is not None and target.id in slot and target.id not in taken
                    and fresh(target, taken)
                    and ledger.counts["task/entity", slot[target.id]] <= low + 1 and rng.random() < shape.chain_p):
                entity, follows = target, True
        if entity is None:
            # Mostly an entity with a follow-up to ask; now and then one with a single fresh fact (a state's
            # capital), so that those are asked too.
            need = 2 if left >= 2 and rng.random() >= shape.single_p else 1
            order = ledger.order("task/entity", len(pool), rng)
            i = next((i for i in order if pool[i].id not in taken and len(fresh(pool[i], taken)) >= need), None)
            if i is None:
                break
            entity = pool[i]
        ledger.take("task/entity", slot[entity.id])
        rels = fresh(entity, taken)
        jitter = {r: rng.random() for r in rels}
        rels.sort(key=lambda r: (ledger.counts["gold", key(entity, r)], ledger.counts[f"task/rel/{entity.id}", r],
                                 ledger.counts["task/relation/" + r, 0], jitter[r]))
        order_of = {r: i for i, r in enumerate(rels)}
        rels = list({key(entity, r): r for r in rels[::-1]}.values())[::-1]  # one question per answer
        rels.sort(key=lambda r: order_of[r])
        kept: list[str] = []
        for r in rels:  # nor one whose answer names another's ("アムステルダム国立美術館", "アムステルダム")
            if not any(overlapping_answers(key(entity, r), key(entity, o)) for o in kept):
                kept.append(r)
        rels = kept
        k = min(len(rels), 1 + shape.max_follow_ups, left)
        # An entity with facts to spare keeps one unasked: the system may volunteer it (`_task_asides`).
        if len(rels) >= 4 and k == len(rels):
            k -= 1
        asked, spare = rels[:k], rels[k:]
        # An answer that names an entity the dialogue could go on to is asked last, so the next question may
        # be about it.
        onward = [r for r in asked if (t := knowledge.link(entity.facts[r])) is not None and t.id in slot
                  and t.id not in taken and t.id != entity.id]
        if onward and len(asked) > 1:
            asked.remove(onward[0])
            asked.append(onward[0])
        for r in asked:
            here.add(key(entity, r))
            ledger.take(f"task/rel/{entity.id}", r)
            ledger.take("task/relation/" + r, 0)
        plans.append(_TaskPlan(entity, asked, spare, follows))
        asked_n += len(asked)
    for k in here:
        ledger.take("gold", k)
    return plans


def _task_turns(bank: LanguageBank, knowledge: Knowledge, lang: Language, ledger: Ledger, rng: random.Random,
                shape: Shape) -> tuple[list[_Turn], list[str]]:
    """The turns of one task dialogue: per planned entity, each question and its answer, then the asides
    (`_task_asides`); also the entity ids, in order."""
    code = lang.code
    plans = _plan_task(bank, knowledge, code, ledger, rng, shape)
    turns: list[_Turn] = []
    last_value = ""  # the previous answer's value, for a reaction that echoes it
    previous = ""  # the user's questions so far, whose lead-in clauses a later one does not say again
    for k, plan in enumerate(plans):
        e = plan.entity
        values = {"entity": e.name[code], "pronoun": e.pronoun}
        if not plan.follows:
            last_value = ""
        for q, r in enumerate(plan.asked):
            values["noun"] = _noun(e, code, ledger, rng)
            if q == 0 and not plan.follows:
                template, lead = _opening_question(bank, r, values, k, ledger, rng, shape, code, previous)
            else:
                template, lead = _follow_up_question(bank, r, values, last_value, ledger, rng, shape, code, previous)
            turns.append(_Turn("user", _lead_pieces(lang, lead, template, values), topic=e.id,
                               topic_start=q == 0, fact=r, bare=(template, dict(values))))
            # the line as said, and its template: "{entity}って聞いたことはあるんですけど、" twice in a row is the
            # same phrase whatever the name
            previous += "\n" + _text(lang, turns[-1].pieces) + "\n" + template
            last_value = said(e.facts[r], code)
            turns.append(_answer_turn(bank, knowledge, lang, plan, q, r, values, last_value, ledger, rng, shape,
                                      _text(lang, turns[-2].pieces) if len(turns) > 1 else ""))
    entities = [p.entity for p in plans]
    _task_asides(turns, entities, {p.entity.id: list(p.spare) for p in plans}, bank, lang, ledger, rng, shape)
    return turns, [e.id for e in entities]


def _opening_question(bank: LanguageBank, r: str, values: dict[str, str], k: int, ledger: Ledger,
                      rng: random.Random, shape: Shape, code: str, previous: str) -> tuple[str, str]:
    """The first question about the `k`-th entity of the dialogue (template, lead): it names the entity; an
    opener may lead the dialogue's first question in, a transition a later one. Neither says a lead-in clause of
    the `previous` question again, nor stacks a concessive clause on the question's own (`stacked_clauses`)."""
    texts = bank.relations[r]
    asks = texts.ask_first
    template = asks[ledger.pick_said(f"task/{r}/ask_first", asks, lambda t, v=values: _fill(t, v), rng,
                                     ok=lambda i: not _repeats(_fill(asks[i], values), previous, code)
                                     and not _repeats(asks[i], previous, code))]
    leads, key = (), ""
    if k == 0 and bank.openers and rng.random() < shape.opener_p:
        leads, key = bank.openers, "task/opener"
    elif k > 0 and bank.transitions["task"] and rng.random() < shape.transition_p:
        leads, key = bank.transitions["task"], "task/transition"
    lead = _lead(leads, key, template, previous, code, ledger, rng) if leads else ""
    return template, lead


def _lead(leads: Sequence[str], key: str, template: str, previous: str, code: str, ledger: Ledger,
          rng: random.Random) -> str:
    """A least-used lead-in that fits before `template` after the `previous` question (any, if none does)."""
    return leads[ledger.pick(key, len(leads), rng, lambda i: not stacked_clauses(leads[i], template, code)
                             and not _repeats(leads[i], previous, code))]


def _follow_up_question(bank: LanguageBank, r: str, values: dict[str, str], last_value: str, ledger: Ledger,
                        rng: random.Random, shape: Shape, code: str, previous: str) -> tuple[str, str]:
    """A follow-up question (template, lead), which needs the earlier turns to be understood; neither part says a
    lead-in clause of the `previous` question again."""
    texts = bank.relations[r]
    asks = texts.ask_follow
    template = asks[ledger.pick_said(f"task/{r}/ask_follow", asks, lambda t, v=values: _fill(t, v), rng,
                                     ok=lambda i: not _repeats(_fill(asks[i], values), previous, code)
                                     and not _repeats(asks[i], previous, code))]
    lead = ""
    # A reaction leads in now and then, and always when the question alone has been asked twice.
    stale = ledger.counts["said", _said_key(_fill(template, values))] >= 2
    echo = [_fill(t, {"value": last_value}) for t in bank.reactions if "{value}" in t] if stale and last_value else []
    if echo:  # a stale question gets a reaction that echoes the answer: a sentence said once
        lead = _lead(echo, "task/reaction/echo", template, previous, code, ledger, rng)
    elif bank.reactions and (stale or rng.random() < shape.reaction_p):
        said_now = [_fill(t, {"value": last_value}) for t in bank.reactions]
        lead = _lead(said_now, "task/reaction", template, previous, code, ledger, rng)
    return template, lead


def _answer_turn(bank: LanguageBank, knowledge: Knowledge, lang: Language, plan: _TaskPlan, q: int, r: str,
                 values: dict[str, str], value: str, ledger: Ledger, rng: random.Random, shape: Shape,
                 before: str = "") -> _Turn:
    """The system's answer to question `q` of `plan` (relation `r`), saying `value`; it never ends as the answer
    `before` it did ("、記憶が正しければですけどね。", ", if I remember right." twice in a row)."""
    texts = bank.relations[r]
    e = plan.entity
    # Some answers run on after the value (hosts for a backchannel or a barge-in).
    runs_on = [j for j, t in enumerate(texts.answer) if lang.size(t.partition("{value}")[2]) >= lang.tail_min]
    want_long = bool(runs_on) and rng.random() < shape.long_answer_p
    filled = {**values, "value": value}
    last_end = _ending(before, lang.code) if lang.code in _REPEAT_MIN else ""
    answer = texts.answer[ledger.pick_said(f"task/{r}/answer", texts.answer, lambda t, v=filled: _fill(t, v),
                                           rng, ok=lambda j: not last_end
                                           or _ending(texts.answer[j], lang.code) != last_end,
                                           prefer=lambda j, lo=runs_on, w=want_long: (j in lo) == w)]
    text = _one_stop(_compose(lang, "", answer, filled))
    at = _value_at(text, value)
    return _Turn("system", [text], topic=e.id, fact=r, gold=knowledge.gold(e, r, lang.code),
                 context_dependent=q > 0 or plan.follows, follows_answer=q == 0 and plan.follows,
                 value_end=at + len(value) if at >= 0 else 0)


def connective_problems(d: Dialogue) -> list[str]:
    """A task dialogue's follow-ups opened by a topic-change lead-in ("By the way, when was it built?" about the
    same entity), user turns that echo the last answer as a question ("1889?"), user questions that stack two
    concessive clauses ("話は変わるんですけど、…の伝記を読んでるんですけど、") or say a lead-in clause of an
    earlier question again, answers an earlier answer already named, and questions whose answer every speaker of
    the language knows, as `utt_id: rule: text`."""
    out: list[str] = []
    last_topic, last_answer, previous = "", "", ""
    golds: list[str] = []  # the answers so far
    clause = _CLAUSE.get(d.language)
    turns = [u for u in d.utterances if u.kind == "turn"]
    for j, u in enumerate(turns):
        if u.speaker == "system":
            if u.gold_answer:
                if any(overlapping_answers(u.gold_answer, g) for g in golds):
                    out.append(f"{u.utt_id}: the answer {u.gold_answer!r} was named by an earlier one: {u.text}")
                if own_country(u.gold_answer, d.language):
                    out.append(f"{u.utt_id}: a question whose answer every speaker knows ({u.gold_answer}): "
                               f"{u.text}")
            last_answer = u.gold_answer or last_answer
            golds += [u.gold_answer] if u.gold_answer else []
            continue
        if u.relation == "pause":
            continue
        line = u.text
        for v in turns[j + 1:]:  # the rest of the turn after a held pause
            if v.speaker != "user" or v.relation != "pause":
                break
            line += v.text
        if u.topic and u.topic == last_topic and topic_change_lead(u.text, d.language):
            out.append(f"{u.utt_id}: a follow-up on the same entity opened by a topic-change lead-in: {u.text}")
        if echoes_as_question(u.text, last_answer, d.language):
            out.append(f"{u.utt_id}: the answer {last_answer!r} echoed as a question: {u.text}")
        if clause is not None and len(clause.findall(line.split("？")[0])) >= 2:
            out.append(f"{u.utt_id}: two concessive clauses stacked before the question: {line}")
        if again := lead_clauses(line, d.language) & lead_clauses(previous, d.language):
            out.append(f"{u.utt_id}: the lead-in {sorted(again)[0]!r} of an earlier question said again: {line}")
        last_topic, previous = u.topic, previous + "\n" + line
    return out


def _relations(e: Entity, bank: LanguageBank) -> list[str]:
    """The entity's relations this language has questions for."""
    return [r for r in e.facts if r in bank.relations]


def _noun(e: Entity, code: str, ledger: Ledger, rng: random.Random) -> str:
    nouns = e.noun.get(code) or (("one",) if code == "en" else ("それ",))
    return ledger.choose(f"task/noun/{e.id}", nouns, rng)


def _task_asides(turns: list[_Turn], entities: list[Entity], spare: dict[str, list[str]], bank: LanguageBank,
                 lang: Language, ledger: Ledger, rng: random.Random, shape: Shape) -> None:
    """1-3 system answers the user cuts into, and 1-2 the user backchannels in: an answer that runs on after its
    value ("It was finished in 1889, if I'm remembering that correctly.") is cut after the value; a short one
    first runs on with a second fact of the same entity that nobody asks about (`spare`, each used once), and is
    cut after the answer itself. Either way the user has heard the answer before cutting in."""
    code = lang.code
    by_id = {e.id: e for e in entities}
    # A volunteered fact is never one a question of the dialogue asks for ("余談ですが、その門はドイツにあります。"
    # and then "その都市はどの国にあるんですか？" would ask what was just said).
    asked = {gold_key(v) for t in turns if t.gold for v in (t.gold[0], *t.gold[1])}
    hosts = [i for i, t in enumerate(turns) if t.speaker == "system"]
    rng.shuffle(hosts)
    n_barge, n_bc = _weighted(shape.barge_ins, rng), _weighted(shape.task_bc_asides, rng)
    for i in sorted(hosts, key=lambda i: not _tail_ok(lang, turns[i])):  # runs-on first: they need no aside
        turn = turns[i]
        e = by_id[turn.topic]
        can_barge = n_barge > 0 and i < len(turns) - 1
        if _tail_ok(lang, turn) and can_barge:
            n_barge -= 1
            turn.barge_host, turn.cut_after_chars = True, turn.value_end
            continue
        # After a number (a year, a height) the volunteered fact is not a number: a reply that states two numbers
        # is not a clear answer (metrics/answer_match.py rejects it).
        numeric = e.facts[turn.fact].kind != "text"
        other = [r for r in spare[e.id] if (not numeric or e.facts[r].kind == "text")
                 and gold_key(said(e.facts[r], code)) not in asked]
        if not other or not (can_barge or n_bc):
            continue
        r = other[0]
        spare[e.id].remove(r)
        answers = bank.relations[r].answer
        standalone = [j for j, t in enumerate(answers) if not (code == "en" and _DEICTIC.match(t))]
        template = answers[ledger.pick(f"task/{r}/answer", len(answers), rng, lambda j, ok=standalone: j in ok)]
        lead = ledger.choose("task/also", bank.also, rng) if bank.also else ""
        aside = _compose(lang, lead, template, {"entity": e.name[code], "noun": _noun(e, code, ledger, rng),
                                                "pronoun": e.pronoun, "value": said(e.facts[r], code)})
        first = turn.pieces[0]
        turn.pieces = [lang.join(first, aside)]
        if can_barge:
            n_barge -= 1
            turn.barge_host, turn.cut_after_chars = True, len(first)
        else:
            n_bc -= 1
            turn.bc_host = True
    if not any(t.barge_host for t in turns):
        # Every dialogue gets a barge-in: an answer says its value early and runs on, and the user cuts in there.
        for i in hosts:
            turn, e = turns[i], by_id[turns[i].topic]
            answers = bank.relations[turn.fact].answer
            runs_on = [j for j, t in enumerate(answers) if lang.size(t.partition("{value}")[2]) >= lang.tail_min]
            if i == len(turns) - 1 or not runs_on:
                continue
            value = said(e.facts[turn.fact], code)
            filled = {"entity": e.name[code], "noun": _noun(e, code, ledger, rng), "pronoun": e.pronoun,
                      "value": value}
            j = ledger.pick_said(f"task/{turn.fact}/answer", answers, lambda t, v=filled: _fill(t, v), rng,
                                 ok=lambda j, lo=runs_on: j in lo)
            text = _one_stop(_compose(lang, "", answers[j], filled))
            at = _value_at(text, value)
            if at < 0:
                continue
            turn.pieces, turn.value_end = [text], at + len(value)
            turn.barge_host, turn.cut_after_chars = True, turn.value_end
            break


def _tail_ok(lang: Language, turn: _Turn) -> bool:
    """Whether an answer runs on long enough after its value to be cut there."""
    text = _text(lang, turn.pieces)
    return turn.value_end > 0 and lang.size(text[turn.value_end:]) >= lang.tail_min


_DOUBLE_STOP = re.compile(r"(?<=[A-Z]\.)\.(?=\s|$)")  # an initial's "." ("D.C.") before the sentence's own


def _one_stop(text: str) -> str:
    """`text` with one full stop where a value that ends in one meets the sentence's own ("Washington, D.C..")."""
    return _DOUBLE_STOP.sub("", text)


def _value_at(text: str, value: str) -> int:
    """Where `text` says `value` as a whole word (-1: it does not): in "Indianapolis is the state capital of Indiana."
    the gold "Indiana" is the last word, not the city's first letters, so a cut after it follows the answer. Only
    Latin letters and digits join a word ("1889年" says 1889)."""
    m = re.search(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", text, re.IGNORECASE)
    return m.start() if m else -1


_DEICTIC = re.compile(r"^(?:that|that's|that'd|that one's|that would|the next one|right after it|born in|next on)\b",
                      re.IGNORECASE)  # needs the question


# --- realisation: pauses, barge-ins, backchannels ----------------------------------------------------------------

def _text(lang: Language, pieces: Sequence[str]) -> str:
    return lang.joiner.join(p for p in pieces if p)


def _realise(turns: list[_Turn], bank: LanguageBank, lang: Language, ledger: Ledger, rng: random.Random,
             shape: Shape, did: str) -> tuple[DialogueUtterance, ...]:
    """A task dialogue's turns as utterances: barge-in openers, held pauses, backchannels."""
    openers = bank.barge_in
    # Barge-ins: the user's turn after a host starts with an opener and is not split by a pause.
    for i, t in enumerate(turns[:-1]):
        if t.barge_host and openers:
            nxt = turns[i + 1]
            nxt.barged = True
            bare = nxt.bare[0] if nxt.bare is not None else _text(lang, nxt.pieces)
            before = [_text(lang, u.pieces) for u in turns[:i] if u.speaker == "user"]
            after = [_text(lang, u.pieces) for u in turns[i + 2:] if u.speaker == "user"]
            near = before + after  # an opener says no lead-in clause of the dialogue's other questions

            def fits(j: int, b: str = bare, near: list[str] = near) -> bool:
                return not stacked_clauses(openers[j], b, lang.code) and not any(
                    _repeats(openers[j], t, lang.code) for t in near)
            nxt.barge_opener = openers[ledger.pick("barge_in", len(openers), rng, fits)]
            strip = _unmarked  # "Sorry, not to interrupt, but" + "and when ...": the opener leads in alone
            if nxt.bare is not None:
                template, values = nxt.bare
                nxt.pieces = [_compose(lang, nxt.barge_opener, _text(lang, _pieces(strip(lang, template))), values)]
            else:
                nxt.pieces = [lang.join(nxt.barge_opener, strip(lang, _text(lang, nxt.pieces)))]
            if lang.code == "en":
                nxt.pieces[0] = capitalise(nxt.pieces[0])
        elif t.barge_host:
            t.barge_host = False
    # Held pauses: at most one per user turn, at a boundary whose halves are both TURN-long, and only where the
    # speaker has audibly not finished (a lead-in, a clause that goes on): after a complete sentence the other
    # may rightly take the turn, so a model doing so would be scored wrong (speech_forms.unfinished).
    candidates = []
    for i, t in enumerate(turns):
        if t.speaker != "user" or t.barged:
            continue
        ok = [b for b in range(1, len(t.pieces))
              if lang.size(_text(lang, t.pieces[:b])) >= lang.half_min
              and lang.size(_text(lang, t.pieces[b:])) >= lang.half_min
              and unfinished(_text(lang, t.pieces[:b]), lang.code)]
        if ok:
            candidates.append((i, rng.choice(ok)))
    if not candidates:
        # No marked pause in this dialogue: hold the floor at a comma of the longest user turn that has one.
        # Failing that (English: no comma far enough in), mid-clause, as speakers hesitate ("I have to tell you |
        # what Mochi did yesterday").
        for cutter in (_comma_cut, _word_cut):
            for i in sorted(range(len(turns)), key=lambda i: -lang.size(_text(lang, turns[i].pieces))):
                t = turns[i]
                cut = cutter(lang, _text(lang, t.pieces)) if t.speaker == "user" else None
                if cut and not t.barged:
                    t.pieces = list(cut)
                    candidates.append((i, 1))
                    break
            if candidates:
                break
    chosen = dict(rng.sample(candidates, min(_weighted(shape.pauses, rng), len(candidates))))

    ipus: list[tuple[_Turn, str, str, int]] = []  # (turn, text, relation, cut_after_chars)
    for i, t in enumerate(turns):
        rel = "first" if i == 0 else ("barge_in" if t.barged else "shift")
        if i in chosen:
            b = chosen[i]
            ipus.append((t, _text(lang, t.pieces[:b]), rel, 0))
            ipus.append((t, _text(lang, t.pieces[b:]), "pause", 0))
        else:
            ipus.append((t, _text(lang, t.pieces), rel, t.cut_after_chars))

    # Backchannels: the listener in a long TURN that is not cut, during its telling: never through a question (a
    # listener answers a question rather than "mm-hm"s through it), so in a turn that goes on to ask, the
    # backchannel ends before the question (`bc_before_chars`); at least one by the user when any can be.
    rates = shape.bc_p
    room = {k: _held_bc_room(lang, text, _rest_after_pause(ipus, k)) for k, (t, text, _, _) in enumerate(ipus)
            if not t.barge_host}
    hosts = [k for k, r in room.items() if r is not None]
    bcs = {k for k in hosts if ipus[k][0].bc_host or rng.random() < rates[_other(ipus[k][0].speaker)]}
    if not any(ipus[k][0].speaker == "system" for k in bcs):
        # Every dialogue gets a user backchannel when any system turn can host one (a shorter telling will do
        # here, BC_MIN_LEAD: a backchannel fits after its first clause): in the longest.
        short = lang.turn_min + BC_MIN_LEAD
        long_ = [k for k, (t, text, _, _) in enumerate(ipus) if t.speaker == "system" and not t.barge_host
                 and _bc_room(lang, text, short) is not None]
        if long_:
            k = max(long_, key=lambda k: (lang.size(ipus[k][1]), -k))
            room[k] = _bc_room(lang, ipus[k][1], short)
            bcs.add(k)
    while len(bcs) > shape.max_bcs:
        bcs.discard(rng.choice(sorted(k for k in bcs if ipus[k][0].speaker == "user") or sorted(bcs)))

    out: list[DialogueUtterance] = []

    def add(speaker: str, kind: str, text: str, relation: str, turn: _Turn | None, cut: int = 0,
            before: int = 0) -> None:
        gold = turn.gold if turn is not None and relation != "pause" else None
        out.append(DialogueUtterance(
            utt_id=f"{did}-u{len(out):02d}", speaker=speaker, kind=kind, text=text, relation=relation,
            topic=turn.topic if turn else "", fact=turn.fact if turn else "",
            gold_answer=gold[0] if gold else "", gold_aliases=tuple(gold[1]) if gold else (),
            context_dependent=bool(gold) and turn is not None and turn.context_dependent,
            follows_answer=bool(gold) and turn is not None and turn.follows_answer, cut_after_chars=cut,
            bc_before_chars=before))

    for k, (t, text, relation, cut) in enumerate(ipus):
        add(t.speaker, "turn", text, relation, t, cut)
        if k in bcs:
            listener = _other(t.speaker)
            options = bank.backchannels.get(f"{listener}_task") or bank.backchannels[listener]
            if options:
                add(listener, "bc", ledger.choose(f"bc/{listener}", options, rng), "bc", None,
                    before=room[k] or 0)
    return tuple(out)


BC_MIN_LEAD = 1  # words / morae over a TURN's minimum that a telling needs before a backchannel fits in it


def _rest_after_pause(ipus: Sequence[tuple[_Turn, str, str, int]], k: int) -> str:
    """The rest of the turn after IPU `k` when a held pause splits it ("" when none does)."""
    nxt = ipus[k + 1] if k + 1 < len(ipus) else None
    return nxt[1] if nxt is not None and nxt[2] == "pause" and nxt[0] is ipus[k][0] else ""


def _held_bc_room(lang: Language, text: str, rest: str) -> int | None:
    """`_bc_room` of the first half of a turn that goes on after a held pause (`rest`): a question that starts in
    it and ends after the pause ("so what's the | hometown of the filmmaker?") is a question too, so the listener
    says nothing inside it."""
    room = _bc_room(lang, text)
    if room is None or not rest:
        return room
    spans = question_spans(lang.joiner.join((text, rest)), lang.code)
    if not spans or spans[0][0] >= len(text):
        return room
    start = spans[0][0]
    return start if lang.size(text[:start]) >= lang.host_min else None


def _bc_room(lang: Language, text: str, min_size: int | None = None) -> int | None:
    """Where a listener may backchannel in a turn: 0 anywhere (a turn of `min_size` or more, default
    `Language.host_min`, that asks nothing where a backchannel falls), n within its first n characters (a telling
    that long before a question), None nowhere."""
    min_size = lang.host_min if min_size is None else min_size
    if lang.size(text) < min_size:
        return None
    if not bc_in_question(text, lang.code):
        return 0
    start = question_spans(text, lang.code)[0][0]
    return start if lang.size(text[:start]) >= min_size else None


def _comma_cut(lang: Language, text: str) -> tuple[str, str] | None:
    """The text split after the comma nearest its middle where both sides are TURN-long halves, or None."""
    best = None
    for m in re.finditer(r"[,、]\s*", text):
        a, b = text[:m.start() + 1].strip(), text[m.end():].strip()
        if lang.size(a) >= lang.half_min and lang.size(b) >= lang.half_min and unfinished(a, lang.code):
            d = abs(lang.size(a) - lang.size(b))
            if best is None or d < best[0]:
                best = (d, a, b)
    return (best[1], best[2]) if best else None


def _word_cut(lang: Language, text: str) -> tuple[str, str] | None:
    """English: the text split between two words of its first sentence near its middle, both halves TURN-long and
    the first unfinished, never inside a name; None for Japanese (no spaces) or when no such split exists."""
    if lang.code != "en":
        return None
    first = lang.sentences(text)[0]
    words_ = first.split()
    best = None
    for k in range(1, len(words_)):
        a, b = " ".join(words_[:k]), " ".join(words_[k:]) + text[len(first):]
        if k > 1 and words_[k - 1][:1].isupper() and words_[k][:1].isupper():
            continue  # inside a name: "a photo of The | Last Supper"
        if (a[-1].isalpha() and lang.size(a) >= lang.half_min and lang.size(b) >= lang.half_min
                and unfinished(a, lang.code)):
            d = abs(lang.size(a) - lang.size(b))
            if best is None or d < best[0]:
                best = (d, a, b.strip())
    return (best[1], best[2]) if best else None


def _other(speaker: str) -> str:
    return "system" if speaker == "user" else "user"


# --- the API ---------------------------------------------------------------------------------------------------

class _Stream:
    """The dialogues of one (language, domain, seed), generated in order and kept, with the shared ledger."""

    def __init__(self, bank: TextBank, language: str, domain: str, seed: int, shape: Shape) -> None:
        self.bank, self.language, self.domain, self.seed, self.shape = bank, language, domain, seed, shape
        self.ledger = Ledger()
        self.dialogues: list[Dialogue] = []

    def upto(self, n: int) -> list[Dialogue]:
        lb = self.bank.language(self.language)
        lang = LANGUAGES[self.language]
        while len(self.dialogues) < n:
            index = len(self.dialogues)
            ds = dialogue_seed(self.seed, self.language, self.domain, index)
            rng = random.Random(ds)
            turns, topics = _task_turns(lb, self.bank.knowledge, lang, self.ledger, rng, self.shape)
            did = dialogue_id(self.language, self.domain, index)
            utts = _realise(turns, lb, lang, self.ledger, rng, self.shape, did)
            d = Dialogue(did, self.language, self.domain, index, ds, tuple(topics), utts)
            d.validate()
            check_dialogue(did, self.language, utts, register_rules=False)  # no doubled word anywhere
            if problems := connective_problems(d):
                raise SchemaError(problems[0], source=f"dialogue {did}", field="connective")
            self.dialogues.append(d)
        return self.dialogues[:n]


_STREAMS: dict[tuple[int, str, str, int, str], _Stream] = {}


def generate_dialogues(language: str, domain: str, n: int, seed: int = 0, *, bank: TextBank | None = None,
                       shape: Shape = SHAPE) -> list[Dialogue]:
    """The first `n` dialogues of config (language, domain) for a build seed; validated."""
    if language not in LANGS or domain not in DOMAINS:
        raise ValueError(f"unknown config ({language!r}, {domain!r}); languages {LANGS}, domains {DOMAINS}")
    if domain == "chat":
        raise ValueError("chat dialogues are authored, not composed: dataset_builder.m3.corpus.corpus_dialogues")
    bank = bank if bank is not None else load_bank((language,))  # one language's errors never stop another
    key = (id(bank), language, domain, seed, repr(shape))
    if key not in _STREAMS or _STREAMS[key].bank is not bank:  # an id may be reused once a bank is gone
        _STREAMS[key] = _Stream(bank, language, domain, seed, shape)
    return list(_STREAMS[key].upto(n))


def generate(language: str, domain: str, index: int, seed: int = 0, *, bank: TextBank | None = None,
             shape: Shape = SHAPE) -> Dialogue:
    """Dialogue `index` of config (language, domain) for a build seed."""
    if index < 0:
        raise ValueError(f"index must be >= 0, got {index}")
    return generate_dialogues(language, domain, index + 1, seed, bank=bank, shape=shape)[index]
