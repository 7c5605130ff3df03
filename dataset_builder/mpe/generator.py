"""Deterministic Duplex-MPE script generation: one seeded scene -> an (explicit, implicit) pair of Scripts.

Everything for pair `index` comes from one `random.Random` seeded by a stable digest of (seed, index), so a
pair is identical whatever `n_pairs` is (the mini build is a prefix of the full one) and across processes.

A scene is a small story. The activity picks a plausible setting and a task family whose facts arise from it;
side talk is made of whole exchanges from the phrase banks (`phrasebank.py`): the activity's, the setting's, the
relationship's and the register's, plus a mention of Aria and commands to the other device. Layout:
[side talk + task facts (+ N4 pair)] -> setup turn (N2, raises the question to the T speaker) -> T -> [side
talk (+ N4 pair)]. The N4 pair never touches T: before T the setup turn separates them, after T at least one
turn does. The two scripts of a pair differ only in the setup turn and T: the implicit T never names Aria and
is never the explicit T minus the name; its cue is one of schema.CUE_KINDS.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from dataset_builder.diagnostics import split_sentences
from dataset_builder.mpe.attributes import (
    ACTIVITY_SETTINGS,
    DEVICE_CONTEXTS,
    DEVICE_NAMES,
    HUMAN_NAMES,
    REGISTERS,
    RELATIONSHIPS,
)
from dataset_builder.mpe.phrasebank import PHRASES_DIR, Block, Line, PhraseBank, load_bank
from dataset_builder.mpe.tasks import RECALL_FAMILIES, Task, build_task, derive_gold, families_for
from dataset_builder.schema import (
    ASSISTANT_NAME,
    CUE_KINDS,
    POSITION_BUCKETS,
    SchemaError,
    Script,
    Speaker,
    Turn,
    validate_pair,
)
from dataset_builder.tts.voices import assign_voices

N4_RATE = 0.75  # share of scenes that get an N4Q/N4R pair (when the layout has room for one)
TURNS_MIN, TURNS_MAX = 8, 14
# Where side talk comes from, by weight; "device" only in scenes with another voice device.
SOURCE_WEIGHTS = {"activity": 0.40, "setting": 0.17, "relationship": 0.17, "register": 0.12, "mention": 0.04,
                  "device": 0.10}
N4R_WEIGHTS: dict[str, float] = {"answer_other": 0.5, "answer_self": 0.35, "dismiss": 0.15}
N4R_TAIL_RATE = 0.5  # share of N4R answers that end by telling Aria it need not answer
SETUP_OPENER_RATE = 0.5  # share of implicit setup sentences led by a register opener
# Turns allowed to contain the name: N1 mentions it, N4 asks it, explicit T addresses it.
NAME_LABELS = ("N1", "N4Q", "N4R")
COMPOSER_FILE = PHRASES_DIR / "composer.yaml"


@functools.cache
def composer() -> dict[str, Any]:
    return yaml.safe_load(COMPOSER_FILE.read_text(encoding="utf-8"))


@functools.cache
def _keep_capitals() -> frozenset[str]:
    """Words that stay capitalised after a vocative or opener: "I" forms, the name, and every word the banks
    write capitalised in mid-sentence (Mum, Dad, proper names)."""
    bank = load_bank()
    lines = [ln.text for group in (bank.activities, bank.settings, bank.relationships, bank.registers)
             for blocks in group.values() for b in blocks for ln in b.lines]
    lines += [ln.text for b in bank.mentions for ln in b.lines]
    found = set(re.findall(r"(?<=[a-z,;:] )([A-Z][A-Za-z']*)", " ".join(lines)))
    return frozenset(found | {"I", "I'm", "I've", "I'll", "I'd", ASSISTANT_NAME, f"{ASSISTANT_NAME}'s"})


def _decap(text: str) -> str:
    """The text as it reads after a lead-in: first letter lowercased unless it starts a name or "I"."""
    first = text.split(" ", 1)[0].rstrip(",.!?;:")
    if first.startswith("{") or first in _keep_capitals() or first.isupper():
        return text
    return text[:1].lower() + text[1:]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _has_lead(text: str, names: list[str]) -> bool:
    """A line that opens with an interjection ("Oh, ...") or two clauses of lead-in ("Aria, quick one, ...")."""
    head = text.split()[:5]
    first = head[0].rstrip(",") if head else ""
    starts = bool(head) and head[0].endswith(",") and first not in (ASSISTANT_NAME, *names)
    return starts or sum(w.endswith(",") for w in head) >= 2


def with_vocative(text: str, name: str, rng: random.Random) -> str:
    """`text` said to `name`: the name leads the line, or closes its first sentence."""
    sentences = split_sentences(text)
    first = sentences[0]
    if rng.random() < 0.5 and first[-1:] in ".?!":
        sentences[0] = f"{first[:-1]}, {name}{first[-1]}"
        return " ".join(sentences)
    return f"{name}, {_decap(text)}"


def _derive(*parts: object) -> int:
    """A stable 64-bit seed from parts (Python's hash() of str is salted per process)."""
    digest = hashlib.sha256("/".join(["duplex-mpe", *map(str, parts)]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def pair_seed(seed: int, index: int) -> int:
    """The seed of pair `index` in a build with `seed`; stored as `Script.seed` of both scripts."""
    return _derive(seed, index) & (2**63 - 1)  # stored in an int64 column


def position_bucket(index: int, seed: int) -> str:
    """T's position bucket: each block of 3 consecutive pairs gets a seeded permutation of the 3 buckets."""
    order = list(POSITION_BUCKETS)
    random.Random(_derive(seed, "bucket", index // 3)).shuffle(order)
    return order[index % 3]


def _bucket_positions(lo: int, hi: int, bucket: str) -> list[int]:
    """The third of the eligible T positions [lo, hi] that `bucket` names."""
    n = hi - lo + 1
    j = POSITION_BUCKETS.index(bucket)
    return list(range(lo + round(j * n / 3), lo + round((j + 1) * n / 3)))


def _layout(rng: random.Random, task: Task, bucket: str, min_side: int) -> list[str]:
    """Slot kinds in order: "fact", "filler", "n4q", "n4r", "setup", "t"; at least `min_side` fillers."""
    nf = len(task.facts)
    has_n4 = rng.random() < N4_RATE
    # Room for: facts, setup, T, the side talk every scene has, the N4 pair, and >=3 eligible T positions.
    n_turns = max(rng.randint(TURNS_MIN, TURNS_MAX), nf + 3 + min_side, nf + 2 + min_side + 2 * has_n4)
    t = rng.choice(_bucket_positions(nf + 1, n_turns - 2, bucket))
    n_before, n_after = t - 1, n_turns - 1 - t  # turns before the setup turn / after T
    options = [w for w, ok in (("before", n_before - nf >= 2), ("after", n_after >= 3)) if ok]
    n4 = rng.choice(options) if has_n4 and options else None
    before = ["fact"] * nf + ["filler"] * (n_before - nf - 2 * (n4 == "before")) + ["n4"] * (n4 == "before")
    rng.shuffle(before)
    after = ["filler"] * (n_after - 2 * (n4 == "after"))
    if n4 == "after":
        after.insert(rng.randint(1, len(after)), "n4")  # never first after T
    slots: list[str] = []
    for kind in [*before, "setup", "t", *after]:
        slots.extend(["n4q", "n4r"] if kind == "n4" else [kind])
    return slots


def _runs(slots: list[str]) -> list[list[int]]:
    """Maximal runs of consecutive filler slots, as lists of slot indices."""
    runs: list[list[int]] = []
    for i, kind in enumerate(slots):
        if kind != "filler":
            continue
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


class _Deck:
    """Draw without repeats within a scene (a pool is reshuffled only when it runs out)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.piles = rng, {}

    def draw(self, key: str, pool: list[Any], fits: Callable[[Any], bool] | None = None) -> Any:
        """An unused item of `pool` that `fits`; once none is left, a fresh shuffle; None if nothing fits."""
        for fresh in (False, True):
            pile = self.piles.get(key)
            if fresh or not pile:
                pile = self.piles[key] = self.rng.sample(pool, len(pool))
            for j in range(len(pile) - 1, -1, -1):
                if fits is None or fits(pile[j]):
                    return pile.pop(j)
        return None


@dataclass
class _Row:
    speaker: str
    explicit: str
    implicit: str
    label: str
    addressee: str | None


@dataclass
class _Scene:
    """One scene being composed: who is present, what has been said, and the draws that keep it varied."""

    rng: random.Random
    bank: PhraseBank
    attributes: dict[str, str]
    style: str
    names: list[str]
    device: str | None

    def __post_init__(self) -> None:
        self.deck = _Deck(self.rng)
        self.used: set[str] = set()
        self.prev: str | None = None
        self.part_of: dict[str, str] = {}  # person -> the part ("parent", "child") they play in this scene
        self.rates = composer()["vocative_rate"]

    def pick(self, *exclude: str | None) -> str:
        """A speaker not in `exclude`, preferring people who have not spoken yet, so every speaker is heard."""
        cands = [n for n in self.names if n not in exclude]
        fresh = [n for n in cands if n not in self.used]
        who = self.rng.choice(fresh or cands)
        self.used.add(who)
        return who

    def wording(self, key: str, kind: str | None = None) -> str:
        table = composer()[key] if kind is None else composer()[key][kind]
        return self.rng.choice(table[self.style])

    def opener(self, text: str, rate: float) -> str:
        """Sometimes lead `text` with one of the register's openers, unless it already has a lead-in ("Oh, ..."
        or "Aria, quick one, ...") that a second one would pile onto."""
        if self.rng.random() >= rate or _has_lead(text, self.names):
            return text
        lead = self.rng.choice(self.bank.openers[self.attributes["register"]])
        return f"{lead} {_decap(text)}"

    def spot(self) -> str:
        return self.rng.choice(composer()["spots"][self.attributes["setting"]])

    # --- side talk ---------------------------------------------------------------------------------------

    def pool(self, source: str) -> list[Block]:
        a = self.attributes
        return {"activity": self.bank.activities[a["activity"]], "setting": self.bank.settings[a["setting"]],
                "relationship": self.bank.relationships[a["relationship"]],
                "register": self.bank.registers[a["register"]], "mention": self.bank.mentions}[source]

    def draw_block(self, source: str, room: int, single_n3: bool = False) -> Block | None:
        """A block of `source` in the scene's style within `room` turns; a longer one is cut after a line that
        leaves no question to a person unanswered (an exchange can end before its last reply)."""
        def fits(b: Block) -> bool:
            if single_n3:
                return len(b.lines) == 1 and b.lines[0].addressee is None and not b.lines[0].mentions_name
            return b.fits(self.style) and (len(b.lines) <= room or b.prefix_ok(room))
        block = self.deck.draw(source, self.pool(source), fits)
        return block.cut(room) if block is not None and len(block.lines) > room else block

    def plan_run(self, length: int, required: list[tuple[str, Block | None]]) -> list[tuple[str, Block | None]]:
        """(source, block) units filling exactly `length` turns, `required` ones included, in a random order; a
        "device" unit is one command to the other device."""
        room = length - sum(1 if b is None else len(b.lines) for _, b in required)
        chosen = list(required)
        sources = [s for s in SOURCE_WEIGHTS if s != "device" or self.device]
        while room > 0:
            source = self.rng.choices(sources, weights=[SOURCE_WEIGHTS[s] for s in sources])[0]
            if source == "device":
                chosen.append(("device", None))
                room -= 1
                continue
            block = self.draw_block(source, room)
            if block is not None:
                chosen.append((source, block))
                room -= len(block.lines)
        self.rng.shuffle(chosen)
        return chosen

    def castings(self, block: Block, *, parts: bool = True) -> list[dict[str, str]]:
        """Every way to give the block's roles to people: distinct people, the first speaker not the one who
        just spoke, and (with `parts`) nobody taking a part other than the one they already play in this scene."""
        order: list[str] = []
        for ln in block.lines:
            for role in (ln.speaker, ln.addressee, *re.findall(r"\{([ABC])\}", ln.text)):
                if role and role not in order:
                    order.append(role)
        wanted = dict(block.parts) if parts else {}
        out = []
        for people in itertools.permutations(self.names, len(order)):
            cast = dict(zip(order, people, strict=True))
            if cast[block.lines[0].speaker] == self.prev:
                continue
            if any(self.part_of.get(cast[r], p) != p for r, p in wanted.items()):
                continue
            out.append(cast)
        return out

    def speak_block(self, block: Block, source: str) -> list[_Row]:
        """The block's lines as turns. A block whose parts cannot be cast consistently at this point of the scene
        gives way to another of the same source and length that can."""
        options = self.castings(block)
        if not options:
            def castable(b: Block) -> bool:
                return b.fits(self.style) and len(b.lines) == len(block.lines) and bool(self.castings(b))
            replacement = self.deck.draw(source, self.pool(source), castable)
            if replacement is not None:
                block, options = replacement, self.castings(replacement)
            else:
                options = self.castings(block, parts=False)
        # Prefer people who have not spoken yet, so every speaker is heard.
        speakers = {ln.speaker for ln in block.lines}
        fresh = [sum(c[r] not in self.used for r in speakers) for c in options]
        cast = self.rng.choice([c for c, f in zip(options, fresh, strict=True) if f == max(fresh)])
        self.used.update(cast[r] for r in speakers)
        for role, part in block.parts:
            self.part_of.setdefault(cast[role], part)
        rows = []
        for i, ln in enumerate(block.lines):
            rows.append(self.line_row(ln, cast, first=i == 0))
            self.prev = rows[-1].speaker
        return rows

    def line_row(self, ln: Line, cast: dict[str, str], first: bool) -> _Row:
        text = ln.text.format_map(cast)
        to = cast[ln.addressee] if ln.addressee else None
        if to is not None:
            rate = self.rates["question"] if ln.asks_person else self.rates["first" if first else "reply"]
            if self.rng.random() < rate:
                text = with_vocative(text, to, self.rng)
        text = self.opener(text, composer()["opener_rate"])
        label = "N1" if ln.mentions_name else ("N2" if to else "N3")
        return _Row(cast[ln.speaker], _cap(text), _cap(text), label, to)

    def device_row(self) -> _Row:
        kind = DEVICE_CONTEXTS[self.attributes["device_context"]]
        command = self.deck.draw(f"device:{kind}", self.bank.devices[kind])
        text = self.wording("device").format(device=self.device, command=command)
        speaker = self.pick(self.prev)
        self.prev = speaker
        return _Row(speaker, text, text, "N2", self.device)


def _fill_side_talk(scene: _Scene, slots: list[str]) -> dict[int, list[tuple[str, Block | None]]]:
    """For each filler run (keyed by its first slot), the units that fill it: a mention of Aria (N1) and a
    thought said aloud (N3) in every scene, a command to the other device in every scene that has one, the rest
    drawn by SOURCE_WEIGHTS."""
    runs = _runs(slots)
    room = {r[0]: len(r) for r in runs}
    required: dict[int, list[tuple[str, Block | None]]] = {r[0]: [] for r in runs}
    if scene.device:
        start = scene.rng.choice([s for s, n in room.items() if n >= 3] or list(room))
        required[start].append(("device", None))
        room[start] -= 1
    # The one-line thought first: the layout leaves at least two side-talk turns, so a mention always fits after.
    for source, single in (("register", True), ("mention", False)):
        # A run picked in proportion to its room, so longer mention exchanges get their share.
        starts = [s for s, n in room.items() if n > 0]
        start = scene.rng.choices(starts, weights=[room[s] for s in starts])[0]
        block = scene.draw_block(source, room[start], single_n3=single)
        if block is None:
            raise SchemaError(f"no {source} block fits a run of {room[start]}")
        required[start].append((source, block))
        room[start] -= len(block.lines)
    return {r[0]: scene.plan_run(len(r), required[r[0]]) for r in runs}


def _n4_rows(scene: _Scene) -> list[_Row]:
    """An N4 pair: someone asks Aria a question that fits the activity; a person answers or waves it off."""
    rng, bank = scene.rng, scene.bank
    item = scene.deck.draw("n4", bank.n4[scene.attributes["activity"]])
    asker = scene.pick(scene.prev)
    q = item.question
    text = scene.opener(scene.wording("n4q").format(q=q, Q=_cap(q)), composer()["opener_rate"])
    rows = [_Row(asker, _cap(text), _cap(text), "N4Q", ASSISTANT_NAME)]
    form = rng.choices(list(N4R_WEIGHTS), weights=list(N4R_WEIGHTS.values()))[0]
    if form == "dismiss":
        line = scene.deck.draw("dismiss", bank.dismiss, lambda d: d.style in ("any", scene.style))
        speaker = asker if rng.random() < 0.5 else scene.pick(asker)
        answer, to = line.text, ASSISTANT_NAME
    else:
        own = form == "answer_self"
        speaker = asker if own else scene.pick(asker)
        answer = rng.choice(item.own if own else item.other)
        to = ASSISTANT_NAME if own else asker
        if not own and rng.random() < scene.rates["reply"] * 2:
            answer = with_vocative(answer, asker, rng)
        if ASSISTANT_NAME not in answer and rng.random() < N4R_TAIL_RATE:
            tail = scene.wording("n4r_tail")
            answer = f"{answer.rstrip('.!?')}, {tail}."
    rows.append(_Row(speaker, _cap(answer), _cap(answer), "N4R", to))
    scene.prev = speaker
    return rows


def _t_rows(scene: _Scene, task: Task, cue: str) -> list[_Row]:
    """The setup turn (N2: someone raises the question to the T speaker) and T, in both conditions."""
    asker = scene.pick(scene.prev)
    t_speaker = scene.pick(asker)
    raised = _cap(task.raise_text.format(to=t_speaker))
    setup_implicit = raised
    if cue in ("nobody", "second_person"):
        kind = cue + ("_recall" if task.task_type in RECALL_FAMILIES else "")
        extra = scene.wording("implicit_setup", kind).format(spot=scene.spot())
        setup_implicit = f"{raised} {_cap(scene.opener(extra, SETUP_OPENER_RATE))}."
    q, iq = task.ask, task.ask_indirect
    explicit = scene.opener(scene.wording("explicit_t").format(q=q, Q=_cap(q), iq=iq), composer()["opener_rate"])
    implicit = scene.wording("implicit_t", cue).format(q=q, Q=_cap(q), iq=iq, spot=scene.spot())
    scene.prev = t_speaker
    return [_Row(asker, raised, setup_implicit, "N2", t_speaker),
            _Row(t_speaker, _cap(explicit), _cap(implicit), "T", ASSISTANT_NAME)]


def generate_pair(index: int, seed: int, voices: list[str]) -> tuple[Script, Script]:
    """The (explicit, implicit) scripts of pair `index`; both validated, and validated as a pair."""
    ps = pair_seed(seed, index)
    rng = random.Random(ps)
    activity = rng.choice(sorted(ACTIVITY_SETTINGS))
    attributes = {
        "setting": rng.choice(ACTIVITY_SETTINGS[activity]),
        "activity": activity,
        "relationship": rng.choice(RELATIONSHIPS),
        "device_context": rng.choice(list(DEVICE_CONTEXTS)),
        "register": rng.choice(list(REGISTERS)),
    }
    style = str(REGISTERS[attributes["register"]]["style"])
    device = rng.choice(DEVICE_NAMES) if DEVICE_CONTEXTS[attributes["device_context"]] else None
    names = rng.sample(HUMAN_NAMES, rng.choice([3, 4]))
    task = build_task(rng.choice(families_for(activity)), activity, rng, style, len(names))
    bucket = position_bucket(index, seed)
    # Side talk every scene has: a thought aloud (N3), a mention of Aria (N1), a command to the other device.
    slots = _layout(rng, task, bucket, min_side=2 + (device is not None))
    # "earlier" continues an exchange with the assistant, so it needs an N4 pair before T.
    cues = [c for c in CUE_KINDS if c != "earlier" or slots.index("n4q" if "n4q" in slots else "t")
            < slots.index("t")]
    cue = rng.choice(cues)

    scene = _Scene(rng, load_bank(), attributes, style, names, device)
    side_talk = _fill_side_talk(scene, slots)
    rows: list[_Row] = []
    facts = iter(task.facts)
    i = 0
    while i < len(slots):
        kind = slots[i]
        if kind == "filler":
            for source, block in side_talk[i]:
                rows.extend([scene.device_row()] if block is None else scene.speak_block(block, source))
            i += len(_runs(slots[i:])[0])
            continue
        if kind == "fact":
            fact = next(facts)
            speaker = scene.pick(scene.prev)
            to = scene.rng.choice([n for n in names if n != speaker]) if fact.label == "N2" else None
            text = _cap(fact.text.format(to=to))
            if to is None:
                text = _cap(scene.opener(text, composer()["opener_rate"]))
            rows.append(_Row(speaker, text, text, fact.label, to))
            scene.prev = speaker
        elif kind == "n4q":
            rows.extend(_n4_rows(scene))
            i += 1  # the n4r slot is filled too
        elif kind == "setup":
            rows.extend(_t_rows(scene, task, cue))
            i += 1  # and T
        i += 1

    voice_map = assign_voices(names, voices, ps)
    pair_id = f"mpe-{index:05d}"
    scripts = []
    for condition in ("explicit", "implicit"):
        turns = [Turn(f"t{j:02d}", r.speaker, r.explicit if condition == "explicit" else r.implicit, r.label,
                      r.addressee) for j, r in enumerate(rows)]
        script = Script(
            script_id=f"{pair_id}-{condition}", pair_id=pair_id, condition=condition, seed=ps,
            attributes=attributes, speakers=[Speaker(n, voice_map[n]) for n in names], turns=turns,
            question=task.question, gold_answer=task.gold_answer, gold_aliases=list(task.gold_aliases),
            task_type=task.task_type, t_position=bucket, cue=cue,
        )
        script.validate()
        check_name_mentions(script)
        check_gold(script)
        scripts.append(script)
    validate_pair(scripts[0], scripts[1])
    return scripts[0], scripts[1]


def check_name_mentions(script: Script) -> None:
    """Only N1, N4Q, N4R and the explicit T may contain the assistant's name (as any substring)."""
    for turn in script.turns:
        allowed = turn.label in NAME_LABELS or (turn.label == "T" and script.condition == "explicit")
        if not allowed and ASSISTANT_NAME.lower() in turn.text.lower():
            raise SchemaError(f"{turn.label} turn mentions {ASSISTANT_NAME}: {turn.text!r}",
                              row=script.script_id, field=f"turns[{turn.turn_id}].text")
        if turn.label in ("N1", "N4Q") and ASSISTANT_NAME.lower() not in turn.text.lower():
            raise SchemaError(f"{turn.label} turn must name {ASSISTANT_NAME}",
                              row=script.script_id, field=f"turns[{turn.turn_id}].text")


def check_gold(script: Script) -> None:
    """The gold answer follows from the words said before and in T (tasks.derive_gold)."""
    ti = script.t_index
    derived = derive_gold(script.task_type, [t.text for t in script.turns[:ti]], script.turns[ti].text)
    if derived != script.gold_answer:
        raise SchemaError(f"the text gives {derived!r}, the gold answer is {script.gold_answer!r}",
                          row=script.script_id, field="gold_answer")


def generate_scripts(n_pairs: int, seed: int, voices: list[str]) -> list[Script]:
    """Explicit then implicit script of pairs 0..n_pairs-1; pair i does not depend on n_pairs."""
    out: list[Script] = []
    for index in range(n_pairs):
        out.extend(generate_pair(index, seed, voices))
    return out


def check_balance(scripts: list[Script]) -> dict[str, Any]:
    """Per-pair counts of T position buckets, task families and N4 presence (one count per pair)."""
    firsts = {s.pair_id: s for s in scripts if s.condition == "explicit"}
    buckets = Counter(s.t_position for s in firsts.values())
    counts = {b: buckets.get(b, 0) for b in POSITION_BUCKETS}
    return {
        "pairs": len(firsts),
        "t_position": counts,
        "t_position_spread": max(counts.values()) - min(counts.values()) if firsts else 0,
        "task_type": dict(sorted(Counter(s.task_type for s in firsts.values()).items())),
        "with_n4": sum(any(t.label == "N4Q" for t in s.turns) for s in firsts.values()),
    }
