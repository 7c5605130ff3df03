"""Deterministic Duplex-MPE script generation: one seeded scene -> an (explicit, implicit) pair of Scripts.

Everything for pair `index` comes from one `random.Random` seeded by a stable digest of (seed, index), so a
pair is identical whatever `n_pairs` is (the mini build is a prefix of the full one) and across processes.
Scene layout: [side talk + task facts (+ N4 pair)] -> cue turn (N2) -> T -> [side talk (+ N4 pair)].
The N4 pair never touches T: before T the cue turn separates them, after T at least one turn does.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from typing import Any

from dataset_builder.mpe.attributes import (
    ACTIVITIES,
    ASSISTANT_REFERENCES,
    DEVICE_COMMANDS,
    DEVICE_CONTEXTS,
    DEVICE_NAMES,
    HUMAN_NAMES,
    REGISTERS,
    RELATIONSHIPS,
    SETTINGS,
)
from dataset_builder.mpe.tasks import FAMILIES, RECALL_FAMILIES, Task, build_task
from dataset_builder.mpe.turns import (
    N1,
    N2_DEVICE,
    N2_HUMAN,
    N3,
    N4_FACTS,
    N4Q,
    N4R,
    N4R_WEIGHTS,
    PRE_T,
    PRE_T_CALC,
)
from dataset_builder.schema import (
    ASSISTANT_NAME,
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
FILLER_LABEL_WEIGHTS = {"N2": 0.5, "N3": 0.33, "N1": 0.17}
DEVICE_TURN_RATE = 0.25  # share of extra N2 side-talk turns addressed to the other device, when there is one
# Turns allowed to contain the name: N1 mentions it, N4 asks it, explicit T addresses it.
NAME_LABELS = ("N1", "N4Q", "N4R")


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


class _Deck:
    """Draw templates without repeats within a scene (reshuffled only when a pool runs out)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.piles = rng, {}

    def draw(self, key: str, pool: list[Any]) -> Any:
        pile = self.piles.get(key)
        if not pile:
            pile = self.piles[key] = self.rng.sample(pool, len(pool))
        return pile.pop()


def _layout(rng: random.Random, task: Task, bucket: str) -> list[str]:
    """Slot kinds in order: "fact", "filler", "n4q", "n4r", "pre_t", "t"."""
    nf = len(task.facts)
    has_n4 = rng.random() < N4_RATE
    # Room for: facts, cue, T, >=2 side-talk turns (N1 and N3), the N4 pair, and >=3 eligible T positions.
    n_turns = max(rng.randint(TURNS_MIN, TURNS_MAX), nf + 5, nf + 4 + 2 * has_n4)
    t = rng.choice(_bucket_positions(nf + 1, n_turns - 2, bucket))
    n_before, n_after = t - 1, n_turns - 1 - t  # turns before the cue turn / after T
    options = [w for w, ok in (("before", n_before - nf >= 2), ("after", n_after >= 3)) if ok]
    n4 = rng.choice(options) if has_n4 and options else None
    before = ["fact"] * nf + ["filler"] * (n_before - nf - 2 * (n4 == "before")) + ["n4"] * (n4 == "before")
    rng.shuffle(before)
    after = ["filler"] * (n_after - 2 * (n4 == "after"))
    if n4 == "after":
        after.insert(rng.randint(1, len(after)), "n4")  # never first after T
    slots: list[str] = []
    for kind in [*before, "pre_t", "t", *after]:
        slots.extend(["n4q", "n4r"] if kind == "n4" else [kind])
    return slots


def _filler_labels(rng: random.Random, n: int) -> list[str]:
    labels = rng.choices(list(FILLER_LABEL_WEIGHTS), weights=list(FILLER_LABEL_WEIGHTS.values()), k=n)
    first, second = rng.sample(range(n), 2)  # every scene has at least one N1 and one N3 (N2: the cue turn)
    labels[first], labels[second] = "N1", "N3"
    return labels


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def generate_pair(index: int, seed: int, voices: list[str]) -> tuple[Script, Script]:
    """The (explicit, implicit) scripts of pair `index`; both validated, and validated as a pair."""
    ps = pair_seed(seed, index)
    rng = random.Random(ps)
    attributes = {
        "setting": rng.choice(SETTINGS),
        "activity": rng.choice(list(ACTIVITIES)),
        "relationship": rng.choice(RELATIONSHIPS),
        "device_context": rng.choice(list(DEVICE_CONTEXTS)),
        "register": rng.choice(list(REGISTERS)),
    }
    register = REGISTERS[attributes["register"]]
    style = str(register["style"])
    activity = ACTIVITIES[attributes["activity"]]
    device_kind = DEVICE_CONTEXTS[attributes["device_context"]]
    device = rng.choice(DEVICE_NAMES) if device_kind else None
    names = rng.sample(HUMAN_NAMES, rng.choice([3, 4]))
    task = build_task(rng.choice(list(FAMILIES)), rng, style)
    bucket = position_bucket(index, seed)
    slots = _layout(rng, task, bucket)

    filler_idx = [i for i, k in enumerate(slots) if k == "filler"]
    filler_label = dict(zip(filler_idx, _filler_labels(rng, len(filler_idx)), strict=True))
    n2_fillers = [i for i in filler_idx if filler_label[i] == "N2"]
    device_turns = set()
    if device and n2_fillers:  # a scene with another device addresses it at least once
        device_turns = {rng.choice(n2_fillers)} | {i for i in n2_fillers if rng.random() < DEVICE_TURN_RATE}

    deck = _Deck(rng)
    used: set[str] = set()

    def pick(*exclude: str | None) -> str:
        # Prefer people who have not spoken yet, so every speaker is heard.
        cands = [n for n in names if n not in exclude]
        fresh = [n for n in cands if n not in used]
        who = rng.choice(fresh or cands)
        used.add(who)
        return who

    def fill(template: str, to: str | None = None) -> str:
        return _cap(template.format(
            to=to, item=rng.choice(activity["items"]), chore=rng.choice(activity["chores"]),
            hm=deck.draw("hm", register["interjections"]), device=device,
            command=rng.choice(DEVICE_COMMANDS[device_kind]) if device_kind else None,
        ))

    # (speaker, explicit text, implicit text, label, addressee) per slot.
    rows: list[tuple[str, str, str, str, str | None]] = []
    prev: str | None = None
    facts = iter(task.facts)
    t_speaker = asker = n4_answer = ""
    for i, kind in enumerate(slots):
        if kind == "pre_t":
            speaker = pick(prev)
            t_speaker = pick(speaker)
            ref = rng.choice(ASSISTANT_REFERENCES)
            cues = PRE_T[style] + ([] if task.task_type in RECALL_FAMILIES else PRE_T_CALC[style])
            explicit, implicit = (s.format(to=t_speaker, ref=ref) for s in rng.choice(cues))
            rows.append((speaker, explicit, implicit, "N2", t_speaker))
        elif kind == "t":
            speaker = t_speaker
            rows.append((speaker, task.t_explicit, task.t_implicit, "T", ASSISTANT_NAME))
        elif kind == "n4q":
            speaker = asker = pick(prev)
            question, answer = deck.draw("n4", N4_FACTS)
            text = deck.draw("n4q", N4Q[style]).format(question=question)
            rows.append((speaker, text, text, "N4Q", ASSISTANT_NAME))
            n4_answer = answer
        elif kind == "n4r":
            form = rng.choices(list(N4R_WEIGHTS), weights=list(N4R_WEIGHTS.values()))[0]
            self_resolves = form == "answer_self" or (form == "dismiss" and rng.random() < 0.5)
            speaker = asker if self_resolves else pick(asker)
            text = _cap(rng.choice(N4R[form][style]).format(asker=asker, answer=n4_answer))
            addressee = asker if form == "answer_other" else ASSISTANT_NAME
            rows.append((speaker, text, text, "N4R", addressee))
        elif kind == "fact":
            fact = next(facts)
            speaker = pick(prev)
            to = rng.choice([n for n in names if n != speaker]) if fact.label == "N2" else None
            text = _cap(fact.text.format(to=to))
            rows.append((speaker, text, text, fact.label, to))
        else:
            label = filler_label[i]
            speaker = pick(prev)
            to = rng.choice([n for n in names if n != speaker])
            if label == "N2" and i in device_turns:
                text, to = fill(deck.draw("dev", N2_DEVICE[style])), device
            elif label == "N2":
                text = fill(deck.draw("n2", N2_HUMAN[style]), to)
            else:
                template = deck.draw(label, (N1 if label == "N1" else N3)[style])
                to = to if "{to}" in template else None
                text = fill(template, to)
            rows.append((speaker, text, text, label, to))
        prev = speaker

    voice_map = assign_voices(names, voices, ps)
    pair_id = f"mpe-{index:05d}"
    scripts = []
    for column, condition in ((1, "explicit"), (2, "implicit")):
        turns = [Turn(f"t{i:02d}", row[0], row[column], row[3], row[4]) for i, row in enumerate(rows)]
        script = Script(
            script_id=f"{pair_id}-{condition}", pair_id=pair_id, condition=condition, seed=ps,
            attributes=attributes, speakers=[Speaker(n, voice_map[n]) for n in names], turns=turns,
            question=task.question, gold_answer=task.gold_answer, gold_aliases=list(task.gold_aliases),
            task_type=task.task_type, t_position=bucket,
        )
        script.validate()
        check_name_mentions(script)
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
