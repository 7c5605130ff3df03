"""The variety rule of M3's text (DESIGN.md "Dialogues"): on the `full` preset no TURN sentence appears in more
than 1 % of a config's dialogues, for English and for every other language whose bank is complete; and the
check itself counts what it says it counts, on hand-built dialogues."""

from __future__ import annotations

import pytest

from dataset_builder.m3.corpus import corpus_dialogues
from dataset_builder.m3.dialogues import PRESETS, Dialogue, DialogueUtterance, generate_dialogues
from dataset_builder.m3.diversity import (
    DiversityTargets,
    config_diversity,
    format_text_diversity,
    sentence_counts,
    text_diversity,
)
from dataset_builder.m3.textbank import bank_languages, missing_files

LANGS = [code for code in bank_languages() if not missing_files(code)]


@pytest.mark.parametrize("lang, domain", [(lang, d) for lang in LANGS for d in ("chat", "task")])
def test_full_preset_no_sentence_in_more_than_one_percent(lang: str, domain: str) -> None:
    full = PRESETS["full"]
    dialogues = corpus_dialogues(lang, full) if domain == "chat" else generate_dialogues(lang, domain, full)
    result = config_diversity(dialogues)
    assert result["dialogues"] == 200
    assert result["over_limit"] == [], format_text_diversity({f"{lang}_{domain}": result})
    assert result["max_sentence_dialogues"] <= 2


def test_english_is_written_for_the_full_preset() -> None:
    assert "en" in LANGS  # the English banks ship complete; the rule above always runs on them


def _d(index: int, lines: list[tuple[str, str, str, str]]) -> Dialogue:
    utts = [DialogueUtterance(f"en-chat-d{index:03d}-u{i:02d}", sp, kind, text, rel)
            for i, (sp, kind, text, rel) in enumerate(lines)]
    return Dialogue(f"en-chat-d{index:03d}", "en", "chat", index, 0, ("weekend",), tuple(utts))


def test_the_check_counts_dialogues_per_sentence_and_joins_pauses() -> None:
    a = _d(0, [("user", "turn", "I went to the lake. It was lovely,", "first"),
               ("user", "turn", "especially in the morning.", "pause"),
               ("system", "bc", "yeah", "bc"),
               ("system", "turn", "It was lovely, especially in the morning. I went to the lake.", "shift"),
               ("user", "turn", "I went to the lake.", "shift")])
    b = _d(1, [("user", "turn", "I went to the lake.", "first"),
               ("system", "turn", "Sounds nice, did you swim there?", "shift")])
    counts = sentence_counts([a, b])
    assert counts["i went to the lake."] == 2  # once per dialogue, however often it is said there
    assert counts["it was lovely, especially in the morning."] == 1  # the pause's halves are one sentence
    assert "yeah" not in counts  # backchannels are not counted
    result = text_diversity([a, b], DiversityTargets(max_sentence_share=0.5))["m3_chat_en"]  # at most 1 of 2
    assert result["dialogues"] == 2 and result["max_sentence_dialogues"] == 2
    assert result["over_limit"] == [["i went to the lake.", 2]] and not result["ok"]
    assert result["turn_lines"] == 5 and result["distinct_turn_lines"] == 4
    assert result["pauses_per_dialogue"] == 0.5 and result["bcs_per_dialogue"] == 0.5
    assert "FAIL" in format_text_diversity({"m3_chat_en": result})
