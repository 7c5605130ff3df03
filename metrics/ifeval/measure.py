"""Continuous measurements of one DSB-IFEval case (docs/benchmarks/ifeval.md, App. E.1-E.4); no threshold is applied
here.

One record per case: its trigger window [w0, w1) placed in recording time (the realised start of turn 2 plus
gold `window_rel_s`), the model spans that start in it (genuine onsets: speech carried in from before w0 is
not one), the first model offset at or after w0, model/user overlap in the window, whether the user resumes
after the window, readback coverage, and the VAD label at the case's own ceiling (for reading; `verdicts`
re-derives it under any ceiling from the stored span durations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dataset_builder.atomic import round_ms
from dataset_builder.ifeval.schema import ACTIONS, LEVELS, VERIFIER_DEFAULTS
from dataset_builder.rules.readback import coverage
from metrics.ifeval.verdicts import case_params, vad_label
from metrics.spans import Span, onsets_in

ANCHOR = "t2"  # DESIGN.md: every window is an offset from the realised clip_start of turn "t2"
# A span ending this close to the end of the recording was cut by the end, not ended by the model: no offset.
OPEN_END_S = 0.05
# gold keys the measurement cannot do without (DESIGN.md, "rec.json gold")
REQUIRED_GOLD = ("expected_action", "level", "role", "event", "window_rel_s")
IDENTITY = ("conversation_id", "role", "probe", "instance", "level", "expected_action", "base_action", "event",
            "resolution_target", "matched_audio", "matched_group")


def gold_problem(gold: Any, t2: tuple[float, float] | None) -> str | None:
    """What a case's measurement needs from rec.json and does not find there, or None."""
    if not isinstance(gold, dict):
        return "rec.json has no gold"
    missing = [k for k in REQUIRED_GOLD if k not in gold]
    if missing:
        return f"gold lacks {missing}"
    if gold["expected_action"] not in ACTIONS:
        return f"gold expected_action {gold['expected_action']!r} is not one of {ACTIONS}"
    if gold["level"] not in LEVELS:
        return f"gold level {gold['level']!r} is not one of {LEVELS}"
    rel = gold["window_rel_s"]
    if not (isinstance(rel, list | tuple) and len(rel) == 2 and isinstance(rel[0], int | float)
            and (rel[1] is None or isinstance(rel[1], int | float))):
        return f"gold window_rel_s {rel!r} is not [w0, w1 or null]"
    if gold["expected_action"] == "READBACK" and not gold.get("readback_target"):
        return "a READBACK case without a readback_target"
    if t2 is None:
        return f"turn {ANCHOR} was never played, so its trigger window has no place in the recording"
    return None


def identity(gold: dict[str, Any], case_id: str) -> dict[str, Any]:
    out = {"case_id": case_id, **{k: gold.get(k) for k in IDENTITY}}
    out["label"] = gold["expected_action"]  # what run health and the report call a window
    out["matched_audio"] = bool(gold.get("matched_audio"))
    out["verifier"] = case_params(gold["expected_action"], gold["role"], gold.get("verifier"))
    return out


def window_abs(gold: dict[str, Any], t2_start_s: float, duration_s: float) -> tuple[float, float]:
    w0_rel, w1_rel = gold["window_rel_s"]
    w0 = t2_start_s + float(w0_rel)
    w1 = duration_s if w1_rel is None else min(duration_s, t2_start_s + float(w1_rel))
    return round_ms(w0), round_ms(max(w0, w1))


def _clip(spans: Sequence[Span], a: float, b: float) -> list[tuple[float, float]]:
    return [(max(s.start_s, a), min(s.end_s, b)) for s in spans if s.start_s < b and s.end_s > a]


def overlap_s(model: Sequence[Span], user: Sequence[Span], a: float, b: float) -> float:
    """Seconds in [a, b) where model and user both speak (each channel's spans are disjoint after merging)."""
    total = 0.0
    for ma, mb in _clip(model, a, b):
        for ua, ub in _clip(user, a, b):
            total += max(0.0, min(mb, ub) - max(ma, ua))
    return total


def first_offset(model: Sequence[Span], w0: float, duration_s: float) -> tuple[float | None, bool]:
    """(first model offset at or after w0, minus w0; whether the model was still speaking when the recording
    ended instead). A span cut by the end of the recording has no offset."""
    for s in sorted(model, key=lambda s: s.end_s):
        if s.end_s >= w0:
            if s.end_s >= duration_s - OPEN_END_S:
                return None, True
            return round_ms(s.end_s - w0), False
    return None, False


def user_resumes_at(gold: dict[str, Any], t2: tuple[float, float], w1: float) -> float | None:
    """When the user's next speech after the window starts (recording time), if turn 2 has such speech and the
    realised clip reached it; None otherwise. Turn 2 is one contiguous clip, so its segment times hold."""
    start, end = t2
    for seg in gold.get("turn2_segments") or []:
        at = start + float(seg["start_s"])
        if seg.get("kind") == "speech" and at >= w1 - 1e-6 and at < end:
            return round_ms(at)
    return None


def measure_case(case_id: str, gold: dict[str, Any], t2: tuple[float, float], duration_s: float,
                 model: Sequence[Span], user: Sequence[Span], readback: tuple[str, str] | None = None
                 ) -> dict[str, Any]:
    """The measurement record of one usable episode. `t2` is the realised (start, end) of turn 2's clip;
    `model`/`user` are the VAD spans of ch1/ch0; `readback` is (source, text) of what the model said from w0 on
    ("model_text" or "asr"), needed for READBACK cases only."""
    w0, w1 = window_abs(gold, t2[0], duration_s)
    starts = onsets_in(model, w0, w1)
    carried = [s for s in model if s.start_s < w0 < s.end_s]
    off, open_end = first_offset(model, w0, duration_s)
    resumes = user_resumes_at(gold, t2, w1)
    m = identity(gold, case_id) | {
        "t2_start_s": round_ms(t2[0]), "t2_end_s": round_ms(t2[1]), "window": [w0, w1],
        "carried_in": [round_ms(carried[0].start_s), round_ms(carried[0].end_s)] if carried else None,
        "onsets": [[round_ms(s.start_s), round_ms(s.end_s)] for s in starts],
        "n_onsets": len(starts),
        "onset_durations_s": [round_ms(s.duration_s) for s in starts],
        "genuine_onset_s": round_ms(starts[0].start_s - w0) if starts else None,
        "first_offset_s": off, "speaking_at_end": open_end,
        "overlap_s": round_ms(overlap_s(model, user, w0, w1)),
        "model_speech_s": round_ms(sum(b - a for a, b in _clip(model, w0, w1))),
        "user_speech_s": round_ms(sum(b - a for a, b in _clip(user, w0, w1))),
        "user_resumes": resumes is not None, "user_resumes_at_s": resumes,
        "spans": [[round_ms(s.start_s), round_ms(s.end_s)] for s in model if s.start_s < w1 and s.end_s > w0],
        "model_spans_n": len(model),
        # what decided turn 2's start (the plan's note: "gap", "endpoint", "cap", "model_onset", "timeout")
        "t2_cause": (gold.get("t2_start") or {}).get("cause") if isinstance(gold.get("t2_start"), dict) else None,
        "readback": None,
    }
    m["vad_label"] = vad_label(m, m["verifier"].get("bc_ceiling_s", VERIFIER_DEFAULTS["BACKCHANNEL"]["bc_ceiling_s"]))
    if gold["expected_action"] == "READBACK":
        source, text = readback or ("none", "")
        target = str(gold["readback_target"])
        m["readback"] = {"source": source, "target": target, "text": text, "coverage": coverage(target, text)}
    return m


def failed_record(case_id: str, gold: dict[str, Any], reason: str) -> dict[str, Any]:
    """The case of a failed episode, marked failed: `verdicts.passes` counts it as a failure."""
    return identity(gold, case_id) | {"failed": True, "reason": reason}
