"""The Duplex-MPE script generator: determinism, the label rules (docs/benchmarks/mpe.md), pairing, gold answers,
balance, scale."""

from __future__ import annotations

import copy
import re
from dataclasses import replace

import pytest

from dataset_builder.mpe import check_balance, duty_preamble, generate_pair, generate_scripts
from dataset_builder.mpe.attributes import DEVICE_NAMES, HUMAN_NAMES, attribute_values
from dataset_builder.mpe.tasks import FAMILIES, WEEKDAYS
from dataset_builder.schema import SCENE_ATTRIBUTES, SchemaError, Script, validate_pair
from dataset_builder.tts.voices import assign_voices

VOICES = ["voice-a", "voice-b", "voice-c", "voice-d", "voice-e"]
SEED = 7
N = 300


@pytest.fixture(scope="module")
def pairs() -> list[tuple[Script, Script]]:
    return [generate_pair(i, SEED, VOICES) for i in range(N)]


@pytest.fixture(scope="module")
def scripts(pairs) -> list[Script]:
    return [s for pair in pairs for s in pair]


def _labels(s: Script) -> list[str]:
    return [t.label for t in s.turns]


def _facts_before_t(s: Script) -> list[str]:
    """Texts of the N2/N3 turns before T: side talk carries no digits, so every number here is a task fact."""
    return [t.text for t in s.turns[: s.t_index] if t.label in ("N2", "N3")]


# --- determinism -------------------------------------------------------------------------------------------

def test_same_seed_same_scripts_and_different_seed_differs():
    a = [s.to_dict() for s in generate_scripts(6, SEED, VOICES)]
    b = [s.to_dict() for s in generate_scripts(6, SEED, VOICES)]
    c = [s.to_dict() for s in generate_scripts(6, SEED + 1, VOICES)]
    assert a == b
    assert a != c
    assert [x["turns"] for x in a] != [x["turns"] for x in c]


def test_pair_does_not_depend_on_n_pairs():
    small = generate_scripts(3, SEED, VOICES)
    large = generate_scripts(9, SEED, VOICES)
    assert [s.to_dict() for s in small] == [s.to_dict() for s in large[:6]]
    assert [s.script_id for s in small] == ["mpe-00000-explicit", "mpe-00000-implicit", "mpe-00001-explicit",
                                            "mpe-00001-implicit", "mpe-00002-explicit", "mpe-00002-implicit"]


# --- schema and label rules (docs/benchmarks/mpe.md) ---------------------------------------------------------

def test_every_script_validates_and_round_trips(scripts):
    for s in scripts:
        s.validate()
        assert Script.from_dict(s.to_dict()) == s
        assert tuple(s.attributes) == SCENE_ATTRIBUTES
        for key, value in s.attributes.items():
            assert value in attribute_values()[key]


def test_attributes_are_data_with_enough_values():
    values = attribute_values()
    assert set(values) == set(SCENE_ATTRIBUTES)
    assert all(len(v) >= 6 for v in values.values())
    assert "another smart speaker in the room" in values["device_context"]
    assert len(FAMILIES) >= 6


def test_t_once_never_first_never_last(scripts):
    for s in scripts:
        labels = _labels(s)
        assert labels.count("T") == 1
        assert 0 < s.t_index < len(labels) - 1
        assert 8 <= len(labels) <= 14
        assert 3 <= len(s.speakers) <= 4
        assert {"N1", "N2", "N3"} <= set(labels)


def test_n4_pairs_adjacent_and_apart_from_t(scripts):
    with_n4 = 0
    for s in scripts:
        labels, t = _labels(s), s.t_index
        qs = [i for i, lab in enumerate(labels) if lab == "N4Q"]
        assert len(qs) <= 1
        for q in qs:
            with_n4 += 1
            assert labels[q + 1] == "N4R"
            assert q + 1 <= t - 2 or q >= t + 2, f"{s.script_id}: N4 touches T"
        assert labels.count("N4R") == len(qs)
    assert 0.6 <= with_n4 / len(scripts) <= 0.9  # "most scenes", about 75 %


def test_speakers_and_addressees(scripts):
    for s in scripts:
        names = {sp.name for sp in s.speakers}
        assert all("aria" not in n.lower() for n in names)
        assert {t.speaker for t in s.turns} == names  # everybody talks
        assert {sp.name: sp.voice for sp in s.speakers} == assign_voices([sp.name for sp in s.speakers],
                                                                          VOICES, s.seed)
        for t in s.turns:
            if t.label == "N3":
                assert t.addressee is None
            if t.label == "N2":
                assert t.addressee in names | set(DEVICE_NAMES) and t.addressee != t.speaker
            if t.label in ("T", "N4Q"):
                assert t.addressee == "Aria"
            if t.label == "N2" and t.addressee in DEVICE_NAMES:
                assert s.attributes["device_context"] != "no other voice devices"
        assert s.turns[s.t_index - 1].addressee == s.turns[s.t_index].speaker  # the setup turn talks to the asker


def test_pools_never_contain_the_name():
    assert all("aria" not in n.lower() for n in HUMAN_NAMES + DEVICE_NAMES)
    assert not set(HUMAN_NAMES) & set(DEVICE_NAMES)


def test_only_labelled_turns_mention_aria(scripts):
    for s in scripts:
        for t in s.turns:
            mentions = "aria" in t.text.lower()
            if t.label in ("N1", "N4Q"):
                assert mentions, t.text
            elif t.label == "T":
                assert mentions == (s.condition == "explicit"), t.text
            elif t.label != "N4R":
                assert not mentions, t.text
            if t.label == "N1":  # a mention talks about Aria, never to it
                assert not re.match(r"(hey |okay )?aria\b\s*,", t.text, re.IGNORECASE), t.text
                assert not re.search(r",\s*aria[.?!]$", t.text, re.IGNORECASE), t.text
                assert t.addressee != "Aria"


def test_turns_are_short(scripts):
    for s in scripts:
        for t in s.turns:
            assert 3 <= len(t.text.split()) <= 45, t.text


def test_side_talk_questions_get_answered(scripts):
    """A question to a person is answered by that person, or deferred to the assistant (the setup turn before
    T is answered by T's speaker turning to it)."""
    for s in scripts:
        for i, t in enumerate(s.turns):
            if t.label != "N2" or "?" not in t.text or t.addressee not in {sp.name for sp in s.speakers}:
                continue
            later = s.turns[i + 1:]
            assert any(u.speaker == t.addressee and (u.addressee == t.speaker or u.label == "T") for u in later), (
                s.script_id, t.text)


def test_scene_words_follow_the_attributes(scripts):
    """The setting picks the place the assistant sits in a role cue; the activity picks the task family."""
    from dataset_builder.mpe.attributes import ACTIVITY_SETTINGS
    from dataset_builder.mpe.tasks import families_for

    for s in scripts:
        assert s.attributes["setting"] in ACTIVITY_SETTINGS[s.attributes["activity"]]
        assert s.task_type in families_for(s.attributes["activity"])


# --- pairing ---------------------------------------------------------------------------------------------

def _without_name(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z']+", text.lower()) if w not in ("aria", "hey", "okay")]


def test_pair_invariants(pairs):
    kinds = set()
    for explicit, implicit in pairs:
        validate_pair(explicit, implicit)
        t = explicit.t_index
        assert _labels(explicit) == _labels(implicit)
        assert (explicit.gold_answer, explicit.gold_aliases, explicit.question) == (
            implicit.gold_answer, implicit.gold_aliases, implicit.question)
        assert (explicit.t_position, explicit.task_type, explicit.seed, explicit.cue) == (
            implicit.t_position, implicit.task_type, implicit.seed, implicit.cue)
        assert "aria" not in implicit.turns[t].text.lower()
        # never the explicit request minus the name: the implicit one says more, or something else
        assert _without_name(explicit.turns[t].text) != _without_name(implicit.turns[t].text)
        kinds.add(implicit.cue)
        for i, (a, b) in enumerate(zip(explicit.turns, implicit.turns, strict=True)):
            assert (a.turn_id, a.speaker, a.label, a.addressee) == (b.turn_id, b.speaker, b.label, b.addressee)
            if i == t or (i == t - 1 and implicit.cue in ("nobody", "second_person")):
                assert a.text != b.text  # the request, and the setup turn when it carries the cue
            else:
                assert a.text == b.text
        if implicit.cue in ("nobody", "second_person"):  # the cue follows the question, in the same turn
            assert implicit.turns[t - 1].text.startswith(explicit.turns[t - 1].text)
        if implicit.cue == "earlier":  # continues an exchange with the assistant: an N4 pair before T
            assert "N4Q" in _labels(implicit)[:t]
    assert kinds == {"role", "earlier", "nobody", "second_person"}


def test_broken_pair_is_rejected(pairs):
    explicit, implicit = pairs[0]
    broken = copy.deepcopy(implicit)
    i = next(i for i, t in enumerate(broken.turns) if t.label == "N3")
    broken.turns[i] = replace(broken.turns[i], label="N2")
    with pytest.raises(SchemaError):
        validate_pair(explicit, broken)
    with pytest.raises(SchemaError):
        validate_pair(explicit, replace(implicit, gold_answer="nope"))
    with pytest.raises(SchemaError):
        validate_pair(explicit, replace(implicit, turns=implicit.turns[:-1]))


# --- gold answers, recomputed from the stated facts --------------------------------------------------------

def _of_type(scripts, task_type):
    found = [s for s in scripts if s.condition == "explicit" and s.task_type == task_type]
    assert found, f"no {task_type} scene in the sample"
    return found


def test_bill_split_gold(scripts):
    for s in _of_type(scripts, "bill_split"):
        text = " ".join(_facts_before_t(s))
        total = int(re.search(r"(\d+) dollars", text).group(1))
        m = re.search(r"(\d+) ways|the (\d+) of us", text)
        ways = int(m.group(1) or m.group(2))
        assert sorted(map(int, re.findall(r"\d+", text))) == sorted([total, ways])
        assert ways == len(s.speakers)  # split between the people present
        assert total % ways == 0
        assert s.gold_answer == str(total // ways)


def test_headcount_and_total_cost_gold(scripts):
    for s in _of_type(scripts, "headcount"):
        numbers = [int(x) for x in re.findall(r"\d+", " ".join(_facts_before_t(s)))]
        assert len(numbers) == 2 and s.gold_answer == str(sum(numbers))
    for s in _of_type(scripts, "total_cost"):
        numbers = [int(x) for x in re.findall(r"\d+", " ".join(_facts_before_t(s)))]
        assert len(numbers) == 2 and s.gold_answer == str(numbers[0] * numbers[1])


def test_arrival_time_gold(scripts):
    for s in _of_type(scripts, "arrival_time"):
        text = " ".join(_facts_before_t(s))
        h, m = map(int, re.search(r"(\d+):(\d\d)", text).groups())
        dur_h = re.search(r"(\d+) hours?", text)
        dur_m = re.search(r"(\d+) minutes", text)
        total = h * 60 + m + (int(dur_h.group(1)) * 60 if dur_h else 0) + (int(dur_m.group(1)) if dur_m else 0)
        assert s.gold_answer == f"{total // 60}:{total % 60:02d}"


def test_weekday_shift_gold(scripts):
    for s in _of_type(scripts, "weekday_shift"):
        text = " ".join(_facts_before_t(s))
        day = next(d for d in WEEKDAYS if d in text)
        shift = re.search(r"(\d+) days? (later|earlier)", text)
        k, sign = int(shift.group(1)), 1 if shift.group(2) == "later" else -1
        assert s.gold_answer == WEEKDAYS[(WEEKDAYS.index(day) + sign * k) % 7]


def test_gold_fields_present(scripts):
    for s in scripts:
        assert s.gold_answer.strip() and s.question.strip()
        assert s.gold_answer not in s.gold_aliases
        assert s.task_type in FAMILIES


# --- balance and scale -----------------------------------------------------------------------------------

def test_position_buckets_balanced(scripts):
    report = check_balance(scripts)
    assert report["pairs"] == N
    counts = report["t_position"]
    assert max(counts.values()) - min(counts.values()) <= 1
    assert set(report["task_type"]) == set(FAMILIES)
    # early / middle / late really move T: mean relative position rises across buckets
    rel: dict[str, list[float]] = {b: [] for b in counts}
    for s in scripts:
        rel[s.t_position].append(s.t_index / (len(s.turns) - 1))
    means = [sum(v) / len(v) for v in (rel["early"], rel["middle"], rel["late"])]
    assert means[0] < means[1] < means[2]


def test_full_preset_meets_the_text_targets():
    """The full preset's text is varied (>= 70 % distinct turns, no sentence in more than 1 % of
    conversations, every label >= 30 % distinct) and each of the five attributes changes the words."""
    from dataset_builder.diagnostics import text_diagnostics

    full = generate_scripts(2000, SEED, VOICES)
    assert len(full) == 4000
    texts = {tuple(t.text for t in s.turns) for s in full if s.condition == "explicit"}
    assert len(texts) == 2000
    counts = check_balance(full)["t_position"]
    assert max(counts.values()) - min(counts.values()) <= 1
    failed = [c for c in text_diagnostics(full)["checks"] if not c["ok"]]
    assert not failed, failed


# --- preamble --------------------------------------------------------------------------------------------

def test_duty_preamble():
    text = duty_preamble()
    assert "Aria" in text
    assert 2 <= len(re.findall(r"[.!?](\s|$)", text)) <= 4
    for word in ("answer", "quiet", "stop"):
        assert word in text.lower()
    assert "Juniper" in duty_preamble("Juniper")


def test_people_keep_their_part_through_a_scene():
    """A block tagged "@ A=parent B=child" never casts this scene's parent as a child, whichever role they took."""
    import random as _random

    from dataset_builder.mpe.generator import _Scene
    from dataset_builder.mpe.phrasebank import Block, Line, load_bank

    def block(parent: str, child: str) -> Block:
        lines = (Line(parent, child, "Have you packed your bag for school yet?", "x"),
                 Line(child, parent, "Nearly, I just need my trainers now.", "x"))
        return Block("any", lines, ((parent, "parent"), (child, "child")))

    attributes = {"setting": "a kitchen at home", "activity": "cooking dinner together", "relationship": "a family",
                  "device_context": "no other voice devices", "register": "warm and friendly"}
    for seed in range(100):
        names = ["Sam", "Priya", "Tom", "Lena"][: 3 + seed % 2]
        scene = _Scene(_random.Random(seed), load_bank(), attributes, "casual", names, None)
        seen: dict[str, set[str]] = {}
        for b in [block("A", "B"), block("B", "A"), block("A", "B"), block("B", "A")]:
            parts = dict(b.parts)
            for row, line in zip(scene.speak_block(b, "relationship"), b.lines, strict=True):
                seen.setdefault(row.speaker, set()).add(parts[line.speaker])
        assert all(len(parts) == 1 for parts in seen.values()), (seed, seen)
