"""The text checks of `build m3 --diagnostics` (dataset_builder/m3/chat_audit.py): every target holds on the
full preset of every config, and each measure counts what it says on planted dialogues (a doubled word, a
backchannel inside a question, a PAUSE after a full stop, a turn mixing registers)."""

from __future__ import annotations

import pytest

from dataset_builder.m3.chat_audit import PAPER_SHIFT_MEAN_S, config_audit, format_audit_block
from dataset_builder.m3.corpus import corpus_dialogues
from dataset_builder.m3.dialogues import PRESETS, Dialogue, DialogueUtterance, generate_dialogues
from dataset_builder.m3.textbank import bank_languages, missing_files

LANGS = [code for code in bank_languages() if not missing_files(code)]


@pytest.mark.parametrize("lang, domain", [(lang, d) for lang in LANGS for d in ("chat", "task")])
def test_full_preset_passes_every_text_check(lang: str, domain: str) -> None:
    full = PRESETS["full"]
    block = config_audit(corpus_dialogues(lang, full) if domain == "chat" else generate_dialogues(lang, domain, full))
    m = block["measures"]
    assert m["conversations"] == full and (domain == "task" or m["distinct_storylines"] == full)
    assert block["ok"], "\n".join(format_audit_block(block))
    assert m["doubled_words"] == 0 and m["bc_in_question"] <= 0.05 and m["pause_after_sentence"] <= 0.10
    assert abs(m["shift_mean_s"] - PAPER_SHIFT_MEAN_S[lang, domain]) <= 0.1 and m["shifts"] > 1000
    assert domain == "chat" or m["follow_ups_topic_change"] == 0
    if lang == "ja":
        assert m["mixed_register_turns"] == 0
        assert domain != "chat" or m["register_switches"] == 0


def _dialogue(did: str, rows: list[tuple[str, str, str, str]], before: dict[int, int] | None = None) -> Dialogue:
    lang, domain, idx = did.split("-")
    utts = tuple(DialogueUtterance(f"{did}-u{i:02d}", sp, kind, text, rel, bc_before_chars=(before or {}).get(i, 0))
                 for i, (sp, kind, text, rel) in enumerate(rows))
    return Dialogue(did, lang, domain, int(idx[1:]), 7, ("weekend",), utts)


def test_planted_problems_are_counted_exactly() -> None:
    question = "Oh, side note, are you settled in at the new place yet, or still unpacking boxes?"
    telling = "Honestly, the move went fine, we only broke one glass. Did you get the photos I sent?"
    d = _dialogue("en-task-d000", [  # composed text: the doubled-word and marker rules are the task's
        ("user", "turn", "I finally got around to painting the the hallway last weekend.", "first"),  # doubled
        ("system", "turn", question, "shift"),
        ("user", "bc", "oh no", "bc"),  # inside the question
        ("user", "turn", "Mostly settled, we still have boxes in the hall.", "shift"),
        ("user", "turn", "It will take us another month at this rate, I think.", "pause"),  # after a full stop
        ("system", "turn", telling, "shift"),
        ("user", "bc", "mm-hm", "bc"),  # placed in the telling, before the question
        ("user", "turn", "I did, and the one of the cat on the boxes is, um,", "shift"),
        ("user", "turn", "my favourite, it made my whole week.", "pause"),  # after a filler: unfinished
        ("system", "turn", "Ha, that cat has no shame at all, it sits on everything.", "shift"),
    ], before={6: telling.index("Did")})
    block = config_audit([d])
    m = block["measures"]
    assert m["doubled_words"] == 1 and block["examples"]["doubled"] == ["en-task-d000-u00: 'the the'"]
    assert (m["user_bcs"], m["bc_in_question"]) == (2, 0.5)
    assert (m["pauses"], m["pause_after_sentence"]) == (2, 0.5)
    assert m["pause_preceded_by"] == {"hall.": 1, "um,": 1}
    assert m["bc_words_by_what_they_answer"] == {"telling: mm-hm": 1, "telling: oh no": 1}
    assert (m["conversations"], m["turns"], m["repeated_lines"]) == (1, 6, 0)
    assert m["mixed_register_turns"] is None
    checks = block["checks"]
    assert not checks["doubled words"]["ok"] and not checks["BCs inside questions"]["ok"]
    assert not checks["PAUSEs after a complete sentence"]["ok"] and not block["ok"]
    assert checks["PAUSEs after a complete sentence"]["value"] == "50.0 % of 2 (<= 10 %)"
    text = "\n".join(format_audit_block(block))
    assert "[FAIL] doubled words: 1 (0)" in text and "e.g. en-task-d000-u02 'oh no' in" in text
    assert config_audit([_dialogue("en-chat-d000", [("user", "turn", "Give her a hug from me, will you?", "first")])
                         ])["measures"]["doubled_words"] == 0  # authored: "her a" is meant


def test_planted_register_problems_in_japanese() -> None:
    d = _dialogue("ja-chat-d003", [
        ("user", "turn", "週末は何をされてたんですか？", "first"),
        ("system", "turn", "家でゆっくりしてました、そちらはどうでしたか？", "shift"),
        ("user", "turn", "関係ない話で申し訳ないんですけど、ねえ、普段ご飯ってどうしてる？", "shift"),  # mixed
        ("system", "turn", "だいたい自炊だよ、簡単なものばっかりだけどね。", "shift"),  # switches to casual
    ])
    m = config_audit([d])["measures"]
    assert (m["mixed_register_turns"], m["register_switches"]) == (1, 1)


def test_pronoun_slips_in_english_task_turns() -> None:
    from dataset_builder.m3.task_audit import pronoun_slips
    from dataset_builder.m3.textbank import load_bank
    knowledge = load_bank(("en",)).knowledge

    def utt(i: int, speaker: str, text: str, topic: str, fact: str) -> DialogueUtterance:
        return DialogueUtterance(f"en-task-d000-u{i:02d}", speaker, "turn", text, "first" if i == 0 else "shift",
                                 topic=topic, fact=fact)

    d = Dialogue("en-task-d000", "en", "task", 0, 0, ("albert_einstein", "the_scream"), (
        utt(0, "user", "So Albert Einstein, where were they born?", "albert_einstein", "birthplace"),  # they
        utt(1, "system", "The scientist was born in Ulm.", "albert_einstein", "birthplace"),
        utt(2, "user", "And when was he born?", "albert_einstein", "born"),
        utt(3, "system", "She was born in 1879.", "albert_einstein", "born"),  # the wrong person
        utt(4, "user", "I'm trying to place he in history, when did he die?", "albert_einstein", "died"),  # case
        utt(5, "user", "And if I wanted to see more of their work, who painted it?", "the_scream", "painter"),
        utt(6, "system", "Edvard Munch, one of the most famous pieces they made.", "the_scream", "painter"),
    ))
    assert [s.split(":")[0] for s in pronoun_slips([d], knowledge)] == [
        "en-task-d000-u00", "en-task-d000-u03", "en-task-d000-u04", "en-task-d000-u06"]
