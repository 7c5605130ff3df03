"""M3 Japanese task dialogues read as a stranger reads them (dataset_builder/m3/dialogues.py): no two concessive
clauses stacked before a question, no lead-in clause said again in the very next question, no answer that an
earlier answer already named, no fact volunteered that a later question asks for, and no question whose answer
every Japanese speaker knows. Known answers on both sides, then the shipped full preset."""

from __future__ import annotations

import pytest

from dataset_builder.m3.dialogues import (
    PRESETS,
    Dialogue,
    connective_problems,
    generate_dialogues,
    lead_clauses,
    overlapping_answers,
    stacked_clauses,
)
from dataset_builder.m3.textbank import load_bank
from tests.m3_handmade import task_dialogue


@pytest.mark.parametrize("lead, template, stacked", [
    ("話は変わるんですけど、", "{entity}の伝記を読んでるんですけど、生まれたのはどこですか？", True),
    ("えっと、話の途中なんですけど、", "来週{entity}を車で通るんですけど、州都はどこなんですか？", True),
    ("すみません、質問なんですが、", "{entity}のことなんですけど、あの会社は誰が始めたんですか？", True),
    ("話は変わるんですけど、", "{entity}の首都はどこですか？", False),  # one clause: what people say
    ("ところで、", "{entity}の伝記を読んでるんですけど、生まれたのはどこですか？", False),
    ("", "{entity}の伝記を読んでるんですけど、生まれたのはどこですか？", False),
])
def test_stacked_concessive_clauses_known_answers(lead: str, template: str, stacked: bool) -> None:
    assert stacked_clauses(lead, template, "ja") is stacked
    assert stacked_clauses(lead, template, "en") is False  # a Japanese rule


def test_a_lead_in_clause_said_again_known_answers() -> None:
    before = "あ、2010年なんですね、もう一つ聞きたいんですけど、その人は何年生まれなんですか？"
    again = "もう一つ聞きたいんですけど、その作家はどこの生まれなんですか？"
    fresh = "それと、その作家はどこの生まれなんですか？"
    assert lead_clauses(again, "ja") & lead_clauses(before, "ja") == {"もう一つ聞きたいんですけど"}
    assert not lead_clauses(fresh, "ja") & lead_clauses(before, "ja")
    # Short words ("あと", "すみません") and the question itself are not set phrases.
    assert lead_clauses("すみません、あと、その次の元素は何ですか？", "ja") == set()


@pytest.mark.parametrize("a, b, overlap", [
    ("アムステルダム国立美術館", "アムステルダム", True),
    ("東京湾", "東京", True),
    ("シカゴ美術館", "シカゴ", True),
    ("1910", "10", False),  # a year is not an atomic number
    ("ドイツ", "ベルリン", False),
])
def test_an_answer_named_by_an_earlier_one_known_answers(a: str, b: str, overlap: bool) -> None:
    assert overlapping_answers(a, b) is overlap


def _dialogue(lines: list[tuple[str, str, str]]) -> Dialogue:
    return task_dialogue("ja", lines, fact="city")


def test_the_build_check_refuses_each_fault_and_passes_a_clean_dialogue() -> None:
    clean = _dialogue([("user", "ちょっと教えてください、ゲルニカはどこの美術館にあるんですか？", ""),
                       ("system", "ソフィア王妃芸術センターにあります。", "ソフィア王妃芸術センター"),
                       ("user", "それと、その絵はどの都市にあるんですか？", ""),
                       ("system", "マドリードにあります。", "マドリード")])
    assert connective_problems(clean) == []
    faults = {
        "two concessive clauses": [
            ("user", "話は変わるんですけど、ゲルニカの本を読んでるんですけど、どこにあるんですか？", ""),
            ("system", "マドリードにあります。", "マドリード")],
        "said again": [("user", "もう一つ聞きたいんですけど、ゲルニカはどこにあるんですか？", ""),
                       ("system", "マドリードにあります。", "マドリード"),
                       ("user", "もう一つ聞きたいんですけど、その国はどこですか？", ""),
                       ("system", "スペインです。", "スペイン")],
        "named by an earlier one": [("user", "アメリカン・ゴシックはどこの美術館にあるんですか？", ""),
                                    ("system", "シカゴ美術館です。", "シカゴ美術館"),
                                    ("user", "それって、どこの街にあるんですか？", ""),
                                    ("system", "シカゴです。", "シカゴ")],
        "every speaker knows": [("user", "富士山って、どこの国にあるんですか？", ""),
                                ("system", "日本にあります。", "日本")],
    }
    for rule, lines in faults.items():
        found = connective_problems(_dialogue(lines))
        assert len(found) == 1 and rule in found[0], (rule, found)


@pytest.fixture(scope="module")
def full() -> list[Dialogue]:
    return generate_dialogues("ja", "task", PRESETS["full"])


def test_the_full_preset_passes_the_check(full: list[Dialogue]) -> None:
    assert [p for d in full for p in connective_problems(d)] == []


def test_no_fact_is_volunteered_that_a_later_question_asks_for(full: list[Dialogue]) -> None:
    also = load_bank(("ja",)).language("ja").also
    for d in full:
        golds = [u.gold_answer for u in d.utterances if u.gold_answer]
        for u in d.utterances:
            if u.speaker != "system" or not u.gold_answer:
                continue
            tail = u.text[u.text.find(u.gold_answer) + len(u.gold_answer):]
            asides = [tail[tail.find(a) + len(a):] for a in also if a in tail]
            later = golds[golds.index(u.gold_answer) + 1:]
            assert not any(g in a for a in asides for g in later if not g.isdigit()), (d.dialogue_id, u.text)


def test_no_question_frame_is_said_twice_in_a_dialogue(full: list[Dialogue]) -> None:
    """"コンコードって聞いたことはあるんですけど、" then "ダカールって聞いたことはあるんですけど、": the same
    phrase whatever the name, so each question's lead-in clauses are compared with its entity's name taken out."""
    kb = load_bank(("ja",)).knowledge
    names = {e.id: e.name["ja"] for e in kb.entities if "ja" in e.name}
    for d in full:
        seen: set[str] = set()
        for u in d.utterances:
            if u.speaker != "user" or u.kind != "turn" or u.relation == "pause":
                continue
            line = u.text.replace(names.get(u.topic, "\0"), "{entity}")
            # a set phrase around the name: a reaction that echoes a name ("{entity}ですね") is not one
            clauses = {c for c in lead_clauses(line, "ja") if len(c.replace("{entity}", "")) >= 7}
            assert not clauses & seen, (d.dialogue_id, u.text)
            seen |= clauses


def test_consecutive_answers_end_differently(full: list[Dialogue]) -> None:
    """"、記憶が正しければですけどね。" closing two answers in a row reads as a tic (82 pairs in 200 dialogues before
    the rule; an aside the system adds after its answer may still end like the answer before)."""
    pairs = answers = 0
    for d in full:
        before = ""
        for u in d.utterances:
            if u.speaker == "system" and u.kind == "turn":
                ending = u.text.rpartition("、")[2] if "、" in u.text else ""
                pairs += bool(ending) and ending == before
                answers += 1
                before = ending
    assert pairs <= answers // 200, (pairs, answers)
