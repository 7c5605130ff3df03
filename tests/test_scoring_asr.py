"""The scorers' default ASR hears spoken numbers right: a perfect model's answer must not score wrong because the
scorer misheard it (docs/scoring.md, "Speech recognition in the scorer"; benchmarks/bench_asr.py measures the rate)."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.oracle_mpe import answer_sentence
from dataset_builder.audio import SESSION_SR
from metrics.asr import DEFAULT_ASR, SCORING_ASR, WhisperBaseEnglishASR, get_asr, scoring_asr
from metrics.judges import HeuristicJudge
from metrics.scoring import ASR_PAD_S, LazyASR

# (question, gold, aliases): readings whisper tiny.en is known to trip on ("4:30" heard as "for 30").
HARD = [
    ("A ride starts at 4:00 and takes 30 minutes. At what time does it end?", "4:30", ["4 30", "half past four"]),
    ("3 hours: how many minutes is that?", "180", ["180 minutes", "one hundred eighty minutes"]),
    ("What was the wifi code, as stated earlier in the conversation?", "4735", ["4 7 3 5", "four seven three five"]),
    ("A class starts at 11:20 and takes 1 hour and 25 minutes. At what time does it end?", "12:45", ["12 45"]),
    ("Which row were the seats in, as stated earlier in the conversation?", "21st row", ["twenty-first row"]),
]


def test_the_scorers_default_is_whisper_base_told_english_and_the_agents_keep_tiny() -> None:
    asr = scoring_asr()
    assert isinstance(asr, WhisperBaseEnglishASR) and asr.name == SCORING_ASR == "whisper-base-en"
    assert asr.language == "en" and asr.languages == ("en",)
    assert (asr.compute_type, asr.cpu_threads, asr.beam_size) == ("int8", 2, 1)
    assert LazyASR(None).name == SCORING_ASR  # what a scores.json names before any case needed the ASR
    assert get_asr(DEFAULT_ASR).name == "whisper-tiny-en"  # the cascade's ears and the build's gate


@pytest.mark.parametrize("question, gold, aliases", HARD, ids=[g for _, g, _ in HARD])
def test_a_hard_spoken_answer_is_heard_right(speak, question: str, gold: str, aliases: list[str]) -> None:
    pad = np.zeros(int(ASR_PAD_S * SESSION_SR), np.float32)
    clip = np.concatenate([pad, speak(answer_sentence(gold)), pad])
    text = scoring_asr().transcribe(clip, SESSION_SR)
    verdict = HeuristicJudge().judge_answer(question, gold, aliases, text)
    assert verdict.label == "correct", (gold, text, verdict)


# (question, gold, aliases): compound numbers whisper base writes as digit groups ("one thousand five hundred
# twenty-nine" -> "150029"), which the answer rule reads back (metrics/answer_match.py, module docstring).
GROUPED = [
    ("What was the building door code, as stated earlier in the conversation?", "1529",
     ["1 5 2 9", "one five two nine"]),
]


@pytest.mark.parametrize("question, gold, aliases", GROUPED, ids=[g for _, g, _ in GROUPED])
def test_a_compound_number_written_as_digit_groups_is_heard_right(speak, question: str, gold: str,
                                                                   aliases: list[str]) -> None:
    pad = np.zeros(int(ASR_PAD_S * SESSION_SR), np.float32)
    text = scoring_asr().transcribe(np.concatenate([pad, speak(answer_sentence(gold)), pad]), SESSION_SR)
    verdict = HeuristicJudge().judge_answer(question, gold, aliases, text)
    assert verdict.label == "correct", (gold, text, verdict)
    assert "heard as" in verdict.raw, (text, verdict)  # whisper wrote groups: the rule, not luck, decided
