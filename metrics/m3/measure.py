"""Continuous measurements of one M3-DuplexBench episode (docs/conventions.md, docs/benchmarks/m3.md); no rule is
applied here.

One record per episode, from the model channel (ch1) of its recording and the rec.json gold (stream clock):

- identity (event, language, domain, condition, event type) and the event times b, s, t, the window end and the
  recording length;
- `vad_spans`: the Silero speech spans of the whole model channel (parameters in `vad`). The rules join them into
  utterances (gap > 0.5 s splits in the paper, >= 0.5 s in the authors' code), so either segmentation can be
  applied later without running the VAD again;
- `timing`: for every named rule set, what its verdicts read (`rules.describe`): the IPUs it sees, W, the
  takeover candidates (start >= s − 0.4 s, overlapping W), the earliest and the closest of them, whether the
  model speaks at s and the segment containing s, the next onset, and for a PAUSE the segments overlapping it;
- `context`: the gold transcript before s (the reference system's state at s for the authors' event filter, and
  what a judge reads for context consistency);
- added by the scorer (score.py): `words` (ASR word counts of short model segments overlapping a PAUSE, for the
  authors' backchannel filter), and for a SHIFT the `response` the model gave from its takeover onset to the
  window end (transcript) and its `content` judgements.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from dataset_builder.atomic import round_ms
from dataset_builder.m3.schema import CONDITIONS, DOMAINS, EVENT_TYPES, LANGUAGES
from metrics.m3.rules import RULE_SETS, describe
from metrics.spans import Span
from metrics.vad import VAD_PRESETS

# The VAD of an episode that recorded none (the M3 protocol's, dataset_builder/benchmark_params.py): Silero's
# hysteresis, spans closer than 0.5 s merged (gaps are multiples of the 32 ms chunk, so none of exactly 0.5 s) and
# shorter than 250 ms dropped. The rules join spans into IPUs once more, under their own gap rule, so a VAD that
# merges less (down to raw spans) is scored the same way.
VAD_M3 = VAD_PRESETS["m3"]
REQUIRED_GOLD = ("event_id", "event_type", "language", "domain", "condition", "prompt_start_s", "event_start_s",
                 "event_end_s", "window_end_s")
IDENTITY = ("event_id", "dialogue_id", "event_type", "language", "domain", "condition")
TIMES = ("context_start_s", "prompt_start_s", "event_start_s", "event_end_s", "window_end_s", "forced_end_s",
         "lead_silence_s")
GOLD_TEXT = ("question", "reply", "gold_answer", "gold_aliases", "context_dependent", "context", "transcribed")
LENGTH_TOLERANCE_S = 0.001
_CASE_ID = re.compile(r"^(?P<language>[a-z]+)-(?P<domain>[a-z]+)-d\d+-e\d+-(?P<condition>[a-z]+)$")


def group_of(m: dict[str, Any]) -> str:
    """`<lang>_<domain>_<condition>`: the unit every M3 score is reported per."""
    return f"{m['language']}_{m['domain']}_{m['condition']}"


def identity_from_case_id(case_id: str) -> dict[str, str] | None:
    """Language, domain and condition read back from a case id (`en-task-d003-e07-full`), for an episode whose
    record is unreadable; None when the id is not of that shape."""
    hit = _CASE_ID.match(case_id)
    if not hit or (hit["language"], hit["domain"]) not in {(lang, d) for lang in LANGUAGES for d in DOMAINS} \
            or hit["condition"] not in CONDITIONS:
        return None
    return {"language": hit["language"], "domain": hit["domain"], "condition": hit["condition"]}


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def gold_problem(gold: Any, duration_s: float) -> str | None:
    """What the measurement needs from rec.json's gold and does not find there, or None."""
    if not isinstance(gold, dict):
        return "rec.json has no gold"
    missing = [k for k in REQUIRED_GOLD if k not in gold]
    if missing:
        return f"gold lacks {missing}"
    for key, allowed in (("event_type", EVENT_TYPES), ("language", LANGUAGES), ("domain", DOMAINS),
                         ("condition", CONDITIONS)):
        if gold[key] not in allowed:
            return f"gold {key} {gold[key]!r} is not one of {allowed}"
    bad = [k for k in REQUIRED_GOLD if k.endswith("_s") and not _number(gold[k])]
    if bad:
        return f"gold times {bad} are not numbers"
    b, s, w = float(gold["prompt_start_s"]), float(gold["event_start_s"]), float(gold["window_end_s"])
    if not 0.0 <= b <= s < w:
        return f"gold times out of order: need 0 <= b ({b}) <= s ({s}) < window end ({w})"
    if duration_s < w - LENGTH_TOLERANCE_S:
        return f"the recording ({duration_s:.3f} s) ends before the evaluation window does ({w:.3f} s)"
    return None


def identity(case_id: str, gold: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"case_id": case_id, **{k: gold.get(k) for k in IDENTITY}}
    out["label"] = gold.get("event_type")  # what run health and the report call an episode's window
    out["group"] = group_of(out)
    return out


def measure_episode(case_id: str, gold: dict[str, Any], duration_s: float, model: Sequence[Span],
                    vad: dict[str, Any]) -> dict[str, Any]:
    """The measurement record of one usable episode from the raw VAD spans of its model channel."""
    m = identity(case_id, gold) | {k: round_ms(float(gold[k])) for k in TIMES if _number(gold.get(k))}
    m |= {k: gold[k] for k in GOLD_TEXT if k in gold}
    m |= {"duration_s": round_ms(duration_s), "vad": dict(vad),
          "vad_spans": [[round_ms(s.start_s), round_ms(s.end_s)] for s in model], "model_spans_n": len(model)}
    m["timing"] = {name: describe(m["vad_spans"], m, rules) for name, rules in RULE_SETS.items()}
    return m


def failed_record(case_id: str, gold: dict[str, Any], reason: str) -> dict[str, Any]:
    """An episode that failed, marked failed: aggregation counts it against the model."""
    m = identity(case_id, gold) | {"failed": True, "reason": reason}
    for key in ("event_start_s", "event_end_s", "context"):
        if key in gold:
            m[key] = gold[key]
    return m
