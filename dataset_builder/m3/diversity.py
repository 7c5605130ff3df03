"""How varied the M3 dialogue text is, per config (`m3_chat_en`, ...): what `duplex-eval build m3 --diagnostics`
prints, and what `tests/test_m3_diversity.py` holds the banks to.

Measurements first, the verdict afterwards (`DiversityTargets`). Definitions, on the dialogues' TURN text as
written (backchannels are not counted: "yeah" repeats in real talk too):

- A **line** is a speaker's TURN as written: the two halves of a held pause are joined back, since a pause splits
  a sentence in time, not in two (`Dialogue.lines`).
- A **sentence** is a piece of a line split after `.`, `!`, `?` (and `。！？` in Japanese), compared lowercased
  with its whitespace collapsed; one shorter than `MIN_SENTENCE` ("Okay.", "Oh no.", "そうなんだ。") is a
  reaction that repeats in real talk as backchannels do, and is not counted, nor is a set phrase of thanks or
  greeting (`FORMULAE`: "ありがとうございます。"). Its **count** is the number of dialogues that say it at least
  once; its **share** that count over the config's dialogues. The rule: no sentence's share above `max_sentence_share`
  (1 %: on the `full` preset's 200 dialogues, no sentence in more than 2).
- Also reported, not judged: distinct lines / lines, distinct IPU texts (a pause half on its own) and the most
  repeated of them, utterances per dialogue, the events per dialogue (PAUSEs, BCs, barge-ins) and the estimated
  speech time (2.5 words or 8 morae a second).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dataset_builder.m3.dialogues import Dialogue
from dataset_builder.m3.language import LANGUAGES
from dataset_builder.m3.schema import config_name

SPEECH_RATE = {"words": 2.5, "morae": 8.0}  # units a second of relaxed speech, for the length estimate
MIN_SENTENCE = {"en": 4, "ja": 10}  # words / morae: a shorter sentence is a reaction, not counted
# Set phrases of thanks and greeting, said as such in any conversation: not counted either.
FORMULAE = {"ありがとうございます", "ありがとうございました", "よろしくお願いします", "よろしくお願いいたします",
            "おはようございます", "お疲れさまです", "お疲れさまでした", "おやすみなさい", "thank you so much",
            "thank you very much"}


@dataclass(frozen=True)
class DiversityTargets:
    max_sentence_share: float = 0.01  # no TURN sentence in more than this share of a config's dialogues
    top: int = 10  # how many of the most repeated sentences to list


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def sentence_counts(dialogues: Sequence[Dialogue]) -> Counter[str]:
    """Each TURN sentence -> the number of dialogues that say it."""
    counts: Counter[str] = Counter()
    for d in dialogues:
        lang = LANGUAGES[d.language]
        counts.update({_norm(s) for _, line in d.lines() for s in lang.sentences(line)
                       if lang.size(s) >= MIN_SENTENCE[d.language] and _norm(s).rstrip("。！.!") not in FORMULAE})
    return counts


def _ranked(counts: Counter[str]) -> list[tuple[str, int]]:
    """Most frequent first, ties in text order: `most_common` breaks ties by insertion order, which follows set
    iteration and so the process's hash seed, and the diagnostics must read the same from run to run."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def config_diversity(dialogues: Sequence[Dialogue], targets: DiversityTargets = DiversityTargets()
                     ) -> dict[str, Any]:
    """The numbers of one config's dialogues (all of one language and domain)."""
    n = len(dialogues)
    counts = sentence_counts(dialogues)
    limit = targets.max_sentence_share * n
    over = [(s, c) for s, c in _ranked(counts) if c > limit]
    lines = [_norm(t) for d in dialogues for _, t in d.lines()]
    ipus = Counter(_norm(u.text) for d in dialogues for u in d.utterances if u.kind == "turn")
    ipu_dialogues: Counter[str] = Counter()
    for d in dialogues:
        ipu_dialogues.update({_norm(u.text) for u in d.utterances if u.kind == "turn"})
    seconds = []
    for d in dialogues:
        lang = LANGUAGES[d.language]
        seconds.append(sum(lang.size(u.text) for u in d.utterances) / SPEECH_RATE[lang.unit])
    return {
        "dialogues": n,
        "turn_lines": len(lines),
        "distinct_turn_lines": len(set(lines)),
        "distinct_line_ratio": round(len(set(lines)) / len(lines), 4) if lines else None,
        "sentences": sum(counts.values()),
        "distinct_sentences": len(counts),
        "max_sentence_dialogues": max(counts.values(), default=0),
        "max_sentence_share": round(max(counts.values(), default=0) / n, 4) if n else None,
        "top_sentences": [[s, c] for s, c in _ranked(counts)[:targets.top]],
        "over_limit": [[s, c] for s, c in over],
        "distinct_ipu_texts": len(ipus),
        "top_ipu_texts": [[s, c] for s, c in _ranked(ipu_dialogues)[:targets.top]],
        "utterances_per_dialogue": _mean([len(d.utterances) for d in dialogues]),
        "utterances_range": [min((len(d.utterances) for d in dialogues), default=0),
                             max((len(d.utterances) for d in dialogues), default=0)],
        "pauses_per_dialogue": _mean([d.count("pause") for d in dialogues]),
        "bcs_per_dialogue": _mean([d.count("bc") for d in dialogues]),
        "user_bcs_per_dialogue": _mean([sum(u.relation == "bc" and u.speaker == "user" for u in d.utterances)
                                        for d in dialogues]),
        "barge_ins_per_dialogue": _mean([d.count("barge_in") for d in dialogues]),
        "dialogues_without": {ev: sum(not any(u.relation == ev and u.speaker == "user" for u in d.utterances)
                                      for d in dialogues) for ev in ("pause", "bc", "barge_in")},
        "speech_seconds_per_dialogue": _mean(seconds),
        "ok": not over,
    }


def text_diversity(dialogues: Sequence[Dialogue], targets: DiversityTargets = DiversityTargets()
                   ) -> dict[str, dict[str, Any]]:
    """`config_diversity` of each config present, keyed by config name (`m3_chat_en`)."""
    by_config: dict[str, list[Dialogue]] = {}
    for d in dialogues:
        by_config.setdefault(config_name(d.language, d.domain), []).append(d)
    return {name: config_diversity(ds, targets) for name, ds in sorted(by_config.items())}


def format_text_diversity(result: dict[str, dict[str, Any]], targets: DiversityTargets = DiversityTargets()
                          ) -> str:
    out = []
    for name, d in result.items():
        verdict = "PASS" if d["ok"] else "FAIL"
        out.append(f"== {name}: {d['dialogues']} dialogues, {d['utterances_per_dialogue']} utterances each "
                   f"({d['utterances_range'][0]}-{d['utterances_range'][1]}), ~{d['speech_seconds_per_dialogue']} s "
                   "of speech")
        out.append(f"  TURN lines: {d['distinct_turn_lines']}/{d['turn_lines']} distinct "
                   f"({d['distinct_line_ratio']}); sentences: {d['distinct_sentences']} distinct of "
                   f"{d['sentences']}; IPU texts: {d['distinct_ipu_texts']} distinct")
        out.append(f"  [{verdict}] most repeated sentence in {d['max_sentence_dialogues']} dialogues "
                   f"({d['max_sentence_share']:.1%}; limit {targets.max_sentence_share:.0%}); "
                   f"{len(d['over_limit'])} sentence(s) over the limit")
        out.append(f"  per dialogue: {d['pauses_per_dialogue']} pauses, {d['bcs_per_dialogue']} backchannels "
                   f"({d['user_bcs_per_dialogue']} by the user), {d['barge_ins_per_dialogue']} barge-ins; "
                   f"dialogues without a user pause/bc/barge-in: {d['dialogues_without']}")
        out.append("  most repeated sentences (dialogues):")
        out += [f"    {c:4d}  {s}" for s, c in d["top_sentences"]]
        out.append("  most repeated IPU texts (dialogues):")
        out += [f"    {c:4d}  {s}" for s, c in d["top_ipu_texts"]]
    return "\n".join(out)
