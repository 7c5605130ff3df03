"""`build m3 --diagnostics`, the task configs: does the QA cover enough of the world, and does it time like the
paper's task subset? Each target is printed PASS or FAIL (`diagnostics.py` calls `task_audit` per task config).

- distinct gold answers (>= 1,000 per language on the full preset) and distinct question/answer facts (>= 1,000):
  the paper's task subset is TopiOCQA, open-domain QA over Wikipedia; a few hundred answers asked over and over
  would measure memory of those few.
- max dialogues per gold answer (<= `MAX_DIALOGUES_PER_GOLD`): no single answer ("the United States") carries a
  large part of the QA score.
- follow-up share: questions that need the history to be understood (>= 50 %), and among them questions about the
  previous answer itself (>= 5 %: "Who wrote Emma?" "Jane Austen." "And when was she born?"), TopiOCQA's point
  (M3-DuplexBench §III-B: multi-turn QA "to evaluate whether models can answer questions based on dialogue
  context").
- pronoun slips (0): an English turn about a person that calls them "they" ("So Albert Einstein, where were they
  born?") or by the other person's pronoun; the person is the entity asked about, and in an answer also the person
  the answer names ("It was painted by Klimt, the most famous piece he made"). A question about a work may say
  "their work" of an artist not yet named.
- SHIFT mean vs the paper's task subset (Table II: 0.45 s English, 0.35 s Japanese) within 0.1 s: measured on the
  built rows (t - s of every SHIFT), or, on a scripts-only folder, the mean of the shipped timing statistics the
  timeline samples SHIFTs from.

The targets are judged on the full preset only (`TaskTargets.full_dialogues` dialogues or more: a mini set's few
SHIFTs say little about a mean); on fewer they are reported and marked "not judged", except the per-gold cap.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataset_builder.hf_dataset import config_shards, has_config, rows_without_audio
from dataset_builder.m3.dialogues import Dialogue, gold_key
from dataset_builder.m3.knowledge import MAX_DIALOGUES_PER_GOLD, Knowledge
from dataset_builder.rules.m3_timing_stats import default_stats

# Mean SHIFT duration per subset, M3-DuplexBench Table II (the shipped timing defaults are built to match them).
PAPER_SHIFT_MEAN_S = {"en_chat": 0.88, "ja_chat": 0.72, "en_task": 0.45, "ja_task": 0.35}


@dataclass(frozen=True)
class TaskTargets:
    min_distinct_golds: int = 1000
    min_distinct_facts: int = 1000
    max_dialogues_per_gold: int = MAX_DIALOGUES_PER_GOLD
    min_follow_up_share: float = 0.5
    min_answer_follow_share: float = 0.05
    shift_tolerance_s: float = 0.1
    full_dialogues: int = 200  # the count targets hold for the full preset


def qa_stats(dialogues: Sequence[Dialogue]) -> dict[str, Any]:
    """Counts of a config's QA pairs (system answers with a gold): distinct golds and facts, dialogues per gold,
    and how many questions needed the history or the previous answer."""
    per_gold: Counter[str] = Counter()
    facts: set[tuple[str, str]] = set()
    pairs = dependent = on_answer = 0
    for d in dialogues:
        golds = set()
        for u in d.utterances:
            if not u.gold_answer:
                continue
            pairs += 1
            dependent += u.context_dependent
            on_answer += u.follows_answer
            golds.add(gold_key(u.gold_answer))
            facts.add((u.topic, u.fact))
        per_gold.update(golds)
    top = per_gold.most_common(5)
    return {"dialogues": len(dialogues), "qa_pairs": pairs, "distinct_golds": len(per_gold),
            "distinct_facts": len(facts), "max_dialogues_per_gold": top[0][1] if top else 0,
            "most_used_golds": [[g, n] for g, n in top],
            "follow_up_share": round(dependent / pairs, 4) if pairs else 0.0,
            "answer_follow_share": round(on_answer / pairs, 4) if pairs else 0.0}


_PRONOUNS = {"they": re.compile(r"\b(?:they|them|their|theirs|themselves)\b", re.IGNORECASE),
             "he": re.compile(r"\b(?:he|him|his|himself)\b", re.IGNORECASE),
             "she": re.compile(r"\b(?:she|her|hers|herself)\b", re.IGNORECASE)}
# A subject pronoun where an object belongs ("I'm trying to place he in history"): {pronoun} is he / she / it.
_SUBJECT_AS_OBJECT = re.compile(r"\b(?:to|for|about|with|from|by|at|of|ask|tell)\s+(?:he|she)\b"
                                r"|\bplace\s+(?:he|she)\s+(?:in|on)\b", re.IGNORECASE)


def pronoun_slips(dialogues: Sequence[Dialogue], knowledge: Knowledge) -> list[str]:
    """English task turns whose pronouns do not fit the people they are about (`utt_id: text`): "they" for a
    person whose facts say he or she, "she" where only a "he" is in question (and the other way round), or "he"
    where "him" belongs."""
    slips = []
    for d in dialogues:
        if d.language != "en":
            continue
        for u in d.utterances:
            if u.kind != "turn" or not u.topic:
                continue
            try:
                e = knowledge.entity(u.topic)
            except KeyError:
                continue
            people = {e.pronoun} - {"it"}
            linked = knowledge.link(e.facts[u.fact]) if u.fact in e.facts else None
            if u.speaker == "system" and linked is not None:  # the answer names this person
                people |= {linked.pronoun} - {"it"}
            said = {p for p, rx in _PRONOUNS.items() if rx.search(u.text)}
            if (people and ("they" in said or said - {"they"} - people)) or _SUBJECT_AS_OBJECT.search(u.text):
                slips.append(f"{u.utt_id}: {u.text}")
    return slips


def shift_mean(folder: Path, config: str, language: str, domain: str) -> dict[str, Any]:
    """The mean SHIFT duration (t - s) of the built rows, or of the shipped timing statistics without rows."""
    if has_config(folder, config):
        durations = [row["event_end_s"] - row["event_start_s"] for shard in config_shards(folder, config)
                     for row in rows_without_audio(shard, ["event_type", "event_start_s", "event_end_s"])
                     if row["event_type"] == "SHIFT"]
        if durations:
            return {"mean_s": round(sum(durations) / len(durations), 3), "n": len(durations),
                    "source": f"data/{config} (SHIFT rows, t - s)"}
    return {"mean_s": round(default_stats(language, domain).shift_gap_s.mean, 3), "n": 0,
            "source": "the shipped timing statistics the timeline samples (scripts only; a --stats build is "
                      "measured on its rows)"}


def task_audit(dialogues: Sequence[Dialogue], folder: Path, config: str, language: str,
               targets: TaskTargets | None = None, knowledge: Knowledge | None = None) -> dict[str, Any]:
    """The task targets of one config: measured values, and per target whether it passes (None: not judged).
    With `knowledge` (English), the pronouns of the turns about people are checked too."""
    targets = targets or TaskTargets()
    qa = qa_stats(dialogues)
    slips = pronoun_slips(dialogues, knowledge) if knowledge is not None and language == "en" else None
    shift = shift_mean(folder, config, language, "task")
    paper = PAPER_SHIFT_MEAN_S[f"{language}_task"]
    full = qa["dialogues"] >= targets.full_dialogues
    checks: dict[str, bool | None] = {
        "distinct_golds": qa["distinct_golds"] >= targets.min_distinct_golds if full else None,
        "distinct_facts": qa["distinct_facts"] >= targets.min_distinct_facts if full else None,
        "max_dialogues_per_gold": qa["max_dialogues_per_gold"] <= targets.max_dialogues_per_gold,
        "follow_up_share": qa["follow_up_share"] >= targets.min_follow_up_share if full else None,
        "answer_follow_share": qa["answer_follow_share"] >= targets.min_answer_follow_share if full else None,
        "shift_mean": abs(shift["mean_s"] - paper) <= targets.shift_tolerance_s if full else None,
    }
    if slips is not None:
        checks["pronoun_slips"] = not slips
    return {"qa": qa, "shift": {**shift, "paper_s": paper}, "checks": checks,
            "pronoun_slips": {"n": len(slips), "examples": slips[:3]} if slips is not None else None,
            "ok": all(v is not False for v in checks.values())}


def format_task_audit(block: dict[str, Any], targets: TaskTargets | None = None) -> list[str]:
    targets = targets or TaskTargets()
    qa, shift, checks = block["qa"], block["shift"], block["checks"]

    def mark(name: str) -> str:
        v = checks[name]
        return "PASS" if v else "FAIL" if v is False else f"not judged (< {targets.full_dialogues} dialogues)"

    top = ", ".join(f"{g} {n}" for g, n in qa["most_used_golds"])
    # The same "[PASS] what: value (target)" lines as the chat checks print above them.
    return [
        f"  task QA: {qa['qa_pairs']} QA pairs in {qa['dialogues']} dialogues",
        f"    [{mark('distinct_golds')}] distinct gold answers: {qa['distinct_golds']} "
        f"(>= {targets.min_distinct_golds})",
        f"    [{mark('distinct_facts')}] distinct question/answer facts: {qa['distinct_facts']} "
        f"(>= {targets.min_distinct_facts})",
        f"    [{mark('max_dialogues_per_gold')}] most dialogues per gold answer: {qa['max_dialogues_per_gold']} "
        f"(<= {targets.max_dialogues_per_gold}; top: {top})",
        f"    [{mark('follow_up_share')}] follow-ups that need the history: {100 * qa['follow_up_share']:.1f} % "
        f"(>= {100 * targets.min_follow_up_share:.0f} %)",
        f"    [{mark('answer_follow_share')}] follow-ups about the previous answer: "
        f"{100 * qa['answer_follow_share']:.1f} % (>= {100 * targets.min_answer_follow_share:.0f} %)",
        f"    [{mark('shift_mean')}] task SHIFT mean vs the paper: {shift['mean_s']:.3f} s vs {shift['paper_s']:.2f} s "
        f"(within {targets.shift_tolerance_s} s; {shift['source']})",
    ] + ([f"    [{mark('pronoun_slips')}] pronoun slips (they/he/she for a person): {block['pronoun_slips']['n']} (0)"]
         + [f"      e.g. {e}" for e in block["pronoun_slips"]["examples"] if not checks["pronoun_slips"]]
         if block.get("pronoun_slips") is not None else [])
