"""M3 English task dialogues under the rules first written for Japanese (dataset_builder/m3/dialogues.py): no
lead-in clause said again in a later question ("I'll write that down," twice), no hedge closing two answers in a
row (", if I remember right."), and no question whose answer every English-speaking listener knows ("Which
country is Washington, D.C. the capital of?"). Known answers on both sides, then the shipped full preset."""

from __future__ import annotations

import pytest

from dataset_builder.m3.dialogues import (
    PRESETS,
    Dialogue,
    connective_problems,
    generate_dialogues,
    lead_clauses,
    own_country,
)
from tests.m3_handmade import task_dialogue


def test_a_lead_in_clause_said_again_known_answers() -> None:
    before = "Oh, 1867, I'll write that down, who invented the explosive?"
    again = "Okay, Fuendetodos, I'll write that down, and when did the painter die?"
    fresh = "Okay, Fuendetodos, and when did the painter die?"
    assert lead_clauses(again, "en") & lead_clauses(before, "en") == {"i'll write that down"}
    assert not lead_clauses(fresh, "en") & lead_clauses(before, "en")
    # Case does not make a phrase new; short words ("Okay", "so") and the question itself are not set phrases.
    assert lead_clauses("Out of curiosity, where was he born?", "en") == {"out of curiosity"}
    assert lead_clauses("Okay, so, where was he born?", "en") == set()
    assert lead_clauses("Out of curiosity, where was he born?", "fr") == set()  # no rule for a language without one


@pytest.mark.parametrize("gold, code, known", [
    ("the United States", "en", True),
    ("The United Kingdom", "en", True),
    ("the United Arab Emirates", "en", False),
    ("Canada", "en", False),
    ("日本", "ja", True),
    ("the United States", "ja", False),  # a Japanese listener asks where the Empire State Building is
    ("日本", "en", False),
])
def test_the_listeners_own_country_known_answers(gold: str, code: str, known: bool) -> None:
    assert own_country(gold, code) is known


def _dialogue(lines: list[tuple[str, str, str]]) -> Dialogue:
    return task_dialogue("en", lines, fact="country")


def test_the_build_check_refuses_each_fault_and_passes_a_clean_dialogue() -> None:
    clean = _dialogue([("user", "Quick question, which museum is Guernica in?", ""),
                       ("system", "It's in the Museo Reina Sofia.", "the Museo Reina Sofia"),
                       ("user", "Oh, I'll write that down, and which city is that in?", ""),
                       ("system", "That's in Madrid.", "Madrid")])
    assert connective_problems(clean) == []
    faults = {
        "said again": [("user", "Out of curiosity, which city is Guernica in?", ""),
                       ("system", "It's in Madrid.", "Madrid"),
                       ("user", "Okay, out of curiosity, which country is that in?", ""),
                       ("system", "That's Spain.", "Spain")],
        "every speaker knows": [("user", "Which country is Washington, D.C. the capital of?", ""),
                                ("system", "It's the capital of the United States.", "the United States")],
    }
    for rule, lines in faults.items():
        found = connective_problems(_dialogue(lines))
        assert len(found) == 1 and rule in found[0], (rule, found)


@pytest.fixture(scope="module")
def full() -> list[Dialogue]:
    return generate_dialogues("en", "task", PRESETS["full"])


def test_the_full_preset_passes_the_check(full: list[Dialogue]) -> None:
    assert [p for d in full for p in connective_problems(d)] == []
    assert not any(own_country(u.gold_answer, "en") for d in full for u in d.utterances if u.gold_answer)


def test_consecutive_answers_end_differently(full: list[Dialogue]) -> None:
    """", if I remember right." closing two answers in a row reads as a tic (2 pairs over the full preset before
    the rule, 27 before the hedges were varied; 0 with it)."""
    pairs = answers = 0
    for d in full:
        before = ""
        for u in d.utterances:
            if u.speaker == "system" and u.kind == "turn":
                ending = u.text.rpartition(", ")[2] if ", " in u.text else ""
                pairs += bool(ending) and ending == before
                answers += 1
                before = ending
    assert answers > 2000 and pairs == 0, (pairs, answers)
