"""How the M3 dialogue text reads, per config, with a PASS/FAIL per target: what `build m3 --diagnostics` prints
beside the diversity numbers (`diagnostics.py`), and what `tests/test_m3_chat_audit.py` holds the full preset to.

Measured on the scripts (the text and the utterance relations), so a `--scripts-only` build has them all:

- **distinct turn texts**: distinct TURN lines / lines (a held pause's halves joined, `Dialogue.lines`).
- **top sentence share**: the most repeated TURN sentence's share of dialogues (`diversity.py`, the 1 % rule).
- **doubled words** (composed task text): "the the", "the next the ferry", "のときのとき"
  (`speech_forms.doubled_words`); must be 0. Authored chat says "give her a", "平気平気" on purpose.
- **lead-in markers said twice** (composed task text): a reaction and a lead-in joined, each with its own marker
  ("Okay, got it, okay, and when ...", `speech_forms.repeated_markers`); must be 0.
- **conversations, distinct storylines, turns, repeated lines across conversations**; **PAUSE marks by what
  precedes them** (the last word; Japanese the last three characters); **backchannel words by what they answer**
  (`bc_functions.host_class` of the words before each); **follow-ups opened by a topic-change lead-in** (task;
  `dialogues.connective_problems`); must be 0.
- **BCs inside questions**: user backchannels whose host turn has a question where the backchannel may fall
  (`speech_forms.bc_in_question`: the middle 15-85 % of the host, where the timeline places them).
- **mixed-register turns** (Japanese): turns ending one clause polite and another casual, and turns where a
  speaker leaves the register they started the dialogue in (`speech_forms.dialogue_problems`).
- **PAUSEs after a complete sentence**: held pauses whose first half ends a sentence (`speech_forms.
  complete_sentence`): there the listener may rightly take the turn, so the PAUSE would score a right move wrong.
- **SHIFT mean**: the dialogues placed on a timeline with the config's default timing statistics and clip lengths
  estimated from the text (`diversity.SPEECH_RATE`), the mean user->system SHIFT duration (t - s) against the
  paper's Table II average SHIFT duration (0.88 s English chat, 0.72 s Japanese chat, 0.45 s English task,
  0.35 s Japanese task); within 0.1 s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dataset_builder.m3.bc_functions import host_class
from dataset_builder.m3.dialogues import Dialogue, connective_problems
from dataset_builder.m3.diversity import SPEECH_RATE, sentence_counts
from dataset_builder.m3.language import LANGUAGES
from dataset_builder.m3.schema import config_name
from dataset_builder.m3.speech_forms import (
    bc_in_question,
    complete_sentence,
    dialogue_problems,
    doubled_words,
    question_at,
    repeated_markers,
    turn_register,
)
from dataset_builder.m3.timeline import BC_MAX_MS, BC_MIN_MS, TURN_MIN_MS, TimelineError, place
from dataset_builder.rules.m3_timing_stats import default_stats

# M3-DuplexBench Table II: the average SHIFT duration of the evaluation data, per language and domain (s).
PAPER_SHIFT_MEAN_S = {("en", "chat"): 0.88, ("ja", "chat"): 0.72, ("en", "task"): 0.45, ("ja", "task"): 0.35}


@dataclass(frozen=True)
class AuditTargets:
    # distinct TURN lines / lines: the 1 % rule lets a sentence into 2 of 200 dialogues (a floor of 0.5); at
    # 0.75 at most a quarter of the lines say again what another dialogue said.
    min_distinct_turns: float = 0.75
    max_sentence_share: float = 0.01  # the 1 % rule (diversity.py)
    max_bc_in_question: float = 0.05
    max_pause_after_sentence: float = 0.10
    max_shift_mean_diff_s: float = 0.1
    # The SHIFT mean is judged over at least this many SHIFTs (the full preset has ~1,800 per config): the sampled
    # gaps spread about 0.7 s, so the mean of 400 is within 0.1 s of its expectation 99 % of the time.
    min_shifts: int = 400


def _share(n: int, d: int) -> float:
    return round(n / d, 4) if d else 0.0


def _clip_ms(lang: str, text: str, kind: str) -> int:
    """An estimate of how long `text` takes to say, kept inside the timeline's limits for its kind."""
    language = LANGUAGES[lang]
    ms = int(1000 * language.size(text) / SPEECH_RATE[language.unit])
    if kind == "bc":
        return min(max(ms, BC_MIN_MS + 50), BC_MAX_MS - 50)
    return max(ms, TURN_MIN_MS + 200)


def shift_durations(dialogue: Dialogue) -> list[float] | None:
    """The SHIFT durations (s) of `dialogue` placed with its config's default timing statistics and estimated
    clip lengths; None when the estimate cannot be placed (a barge-in too tight for the guessed lengths)."""
    stats = default_stats(dialogue.language, dialogue.domain)
    clips = {u.utt_id: _clip_ms(dialogue.language, u.text, u.kind) for u in dialogue.utterances}
    try:
        timeline = place(dialogue, clips, stats)
    except TimelineError:
        return None
    return [(i.t_ms - i.s_ms) / 1000 for i in timeline.intended if i.type == "SHIFT"]


def _ending(text: str, lang: str) -> str:
    """What a PAUSE follows, as diagnostics group it: the last word (English), the last three characters
    (Japanese)."""
    t = text.strip()
    if lang == "ja":
        return t[-3:]
    words = t.split()
    return words[-1].lower() if words else ""


def _follow_ups(d: Dialogue) -> int:
    """The user questions of a task dialogue about the same entity as the question before."""
    n, last = 0, ""
    for u in d.utterances:
        if u.speaker == "user" and u.kind == "turn" and u.relation != "pause":
            n += bool(u.topic) and u.topic == last
            last = u.topic
    return n


def config_audit(dialogues: Sequence[Dialogue], targets: AuditTargets = AuditTargets()) -> dict[str, Any]:
    """The measures and verdicts of one config's dialogues (all of one language and domain)."""
    if not dialogues:
        raise ValueError("no dialogues to audit")
    lang, domain = dialogues[0].language, dialogues[0].domain
    lines = [text for d in dialogues for _, text in d.lines()]
    counts = sentence_counts(dialogues)
    top = counts.most_common(1)[0] if counts else ("", 0)
    doubled: list[str] = []
    bcs = bcs_in_q = pauses = pauses_done = mixed = switches = 0
    examples: dict[str, list[str]] = {"doubled": [], "bc_in_question": [], "pause_after_sentence": [],
                                      "register": [], "markers": []}
    shifts: list[float] = []
    unplaced = 0
    before_pause: Counter[str] = Counter()
    answers: Counter[str] = Counter()
    follow_ups = topic_changed = 0
    for d in dialogues:
        if domain == "task":
            follow_ups += _follow_ups(d)
            found = [p for p in connective_problems(d) if "topic-change" in p]
            topic_changed += len(found)
            examples.setdefault("topic_change", []).extend(found)
        host = None
        for u in d.utterances:
            # Slot fills and joined lead-ins can double a word or a marker; authored chat says "give her a" and
            # "And honestly, ... and I'm thirty-five" on purpose.
            for w in doubled_words(u.text, lang) if domain == "task" else ():
                doubled.append(f"{u.utt_id}: {w!r}")
            if domain == "task" and u.kind == "turn" and repeated_markers(u.text, lang):
                examples["markers"].append(f"{u.utt_id}: {u.text!r}")
            if u.kind == "bc" and host is not None:
                said = host.text[:u.bc_at_chars] if u.bc_at_chars else host.text
                answers[f"{host_class(said, lang)}: {u.text}"] += 1
            if u.kind == "bc" and u.speaker == "user" and host is not None:
                bcs += 1
                if (question_at(host.text, u.bc_at_chars, lang) if u.bc_at_chars
                        else bc_in_question(host.text, lang, before_chars=u.bc_before_chars)):
                    bcs_in_q += 1
                    examples["bc_in_question"].append(f"{u.utt_id} {u.text!r} in {host.text!r}")
            if u.kind == "turn":
                if u.relation == "pause" and host is not None:
                    pauses += 1
                    before_pause[_ending(host.text, lang)] += 1
                    if complete_sentence(host.text, lang):
                        pauses_done += 1
                        examples["pause_after_sentence"].append(f"{u.utt_id}: {host.text!r} | {u.text!r}")
                if lang == "ja" and turn_register(u.text) == "mixed":
                    mixed += 1
                host = u
        if lang == "ja":
            regs = [p for p in dialogue_problems(d.dialogue_id, lang, d.utterances) if " speaks " in p.rule]
            switches += len(regs)
            examples["register"] += [str(p) for p in regs]
        got = shift_durations(d)
        if got is None:
            unplaced += 1
        else:
            shifts += got
    examples["doubled"] = doubled
    shift_mean = round(sum(shifts) / len(shifts), 3) if shifts else 0.0
    paper = PAPER_SHIFT_MEAN_S.get((lang, domain), 0.0)
    judged = len(shifts) >= targets.min_shifts
    seen_in: dict[str, set[str]] = {}
    for d in dialogues:
        for _, text in d.lines():
            seen_in.setdefault(" ".join(text.lower().split()), set()).add(d.dialogue_id)
    repeated = sorted(((len(ids), t) for t, ids in seen_in.items() if len(ids) > 1), reverse=True)
    measures = {
        "conversations": len(dialogues),
        "distinct_storylines": len({d.topics for d in dialogues}),
        "turns": len(lines),
        "pause_preceded_by": dict(before_pause.most_common(12)),
        "bc_words_by_what_they_answer": dict(sorted(answers.items(), key=lambda kv: (-kv[1], kv[0]))[:20]),
        "follow_ups": follow_ups if domain == "task" else None,
        "follow_ups_topic_change": _share(topic_changed, follow_ups) if domain == "task" else None,
        "repeated_lines": len(repeated),
        "repeated_lines_top": [f"{n}x {t}" for n, t in repeated[:5]],
        "distinct_turns": _share(len(set(lines)), len(lines)),
        "top_sentence_share": _share(top[1], len(dialogues)),
        "top_sentence": top[0],
        "doubled_words": len(doubled),
        "repeated_markers": len(examples["markers"]),
        "user_bcs": bcs,
        "bc_in_question": _share(bcs_in_q, bcs),
        "pauses": pauses,
        "pause_after_sentence": _share(pauses_done, pauses),
        "mixed_register_turns": mixed if lang == "ja" else None,
        "register_switches": switches if lang == "ja" else None,
        "shift_mean_s": shift_mean,
        "shift_paper_s": paper,
        "shifts": len(shifts),
        "unplaced_dialogues": unplaced,
    }
    checks = {
        "distinct turn texts": (measures["distinct_turns"] >= targets.min_distinct_turns,
                                f"{measures['distinct_turns']:.3f} (>= {targets.min_distinct_turns})"),
        "top repeated sentence": (measures["top_sentence_share"] <= targets.max_sentence_share
                                  or len(dialogues) * targets.max_sentence_share < 1,
                                  f"{100 * measures['top_sentence_share']:.1f} % of dialogues "
                                  f"(<= {100 * targets.max_sentence_share:.0f} %)"),
        "doubled words": (not doubled, f"{len(doubled)} (0)"),
        "conversations, storylines, turns": (
            measures["distinct_storylines"] == len(dialogues) or domain == "task",
            f"{len(dialogues)} conversations, {measures['distinct_storylines']} distinct storylines, "
            f"{len(lines)} turns"),
        "repeated lines across conversations": (True, f"{len(repeated)}" + (
            f" (most: {repeated[0][0]}x {repeated[0][1][:50]!r})" if repeated else "")),
        "lead-in markers said twice": (not examples["markers"], f"{len(examples['markers'])} (0)"),
        "BCs inside questions": (measures["bc_in_question"] <= targets.max_bc_in_question,
                                 f"{100 * measures['bc_in_question']:.1f} % of {bcs} user BCs "
                                 f"(<= {100 * targets.max_bc_in_question:.0f} %)"),
        "PAUSEs after a complete sentence": (
            measures["pause_after_sentence"] <= targets.max_pause_after_sentence,
            f"{100 * measures['pause_after_sentence']:.1f} % of {pauses} "
            f"(<= {100 * targets.max_pause_after_sentence:.0f} %)"),
        "SHIFT mean vs the paper": (abs(shift_mean - paper) <= targets.max_shift_mean_diff_s or not judged,
                                    f"{shift_mean:.3f} s over {len(shifts)} SHIFTs vs {paper:.2f} s "
                                    f"(within {targets.max_shift_mean_diff_s} s; estimated clip lengths"
                                    f"{f', {unplaced} dialogues not placed' if unplaced else ''}"
                                    f"{'' if judged else f'; not judged under {targets.min_shifts} SHIFTs'})"),
    }
    if domain == "task":
        checks["follow-ups opened by a topic-change lead-in"] = (
            topic_changed == 0, f"{100 * (measures['follow_ups_topic_change'] or 0):.1f} % of {follow_ups} (0)")
    checks["PAUSE marks by what precedes them"] = (True, ", ".join(f"{k!r} {n}" for k, n in
                                                                   before_pause.most_common(6)) or "none")
    checks["backchannel words by what they answer"] = (True, ", ".join(f"{k} {n}" for k, n in
                                                                       answers.most_common(8)) or "none")
    if lang == "ja":
        checks["mixed-register turns"] = (mixed == 0, f"{mixed} (0)")
        if domain == "chat":  # one register per speaker per dialogue is a chat rule (task users may vary)
            checks["register switches by a speaker"] = (switches == 0, f"{switches} (0)")
    return {"config": config_name(lang, domain), "measures": measures,
            "checks": {k: {"ok": ok, "value": v} for k, (ok, v) in checks.items()},
            "ok": all(ok for ok, _ in checks.values()),
            "examples": {k: v[:5] for k, v in examples.items()}}


def text_audit(dialogues: Sequence[Dialogue], targets: AuditTargets = AuditTargets()) -> dict[str, dict[str, Any]]:
    """config -> `config_audit`, for dialogues of any configs."""
    by: dict[str, list[Dialogue]] = {}
    for d in dialogues:
        by.setdefault(config_name(d.language, d.domain), []).append(d)
    return {c: config_audit(ds, targets) for c, ds in by.items()}


def format_audit_block(block: dict[str, Any]) -> list[str]:
    lines = [f"  text checks ({block['config']}):"]
    for name, c in block["checks"].items():
        lines.append(f"    [{'PASS' if c['ok'] else 'FAIL'}] {name}: {c['value']}")
    for name, ex in block["examples"].items():
        check = block["checks"].get(_EXAMPLE_CHECK[name], {"ok": True})
        if ex and not check["ok"]:
            lines += [f"      e.g. {e}" for e in ex[:3]]
    return lines


_EXAMPLE_CHECK = {"doubled": "doubled words", "bc_in_question": "BCs inside questions",
                  "pause_after_sentence": "PAUSEs after a complete sentence", "register": "mixed-register turns",
                  "markers": "lead-in markers said twice",
                  "topic_change": "follow-ups opened by a topic-change lead-in"}
