"""M3-DuplexBench timing rules (paper §IV-B1, docs/benchmarks/m3.md): the paper's by default, the authors' code as
`authors`.

Everything here is a pure function of one episode's stored measurement (raw VAD spans of the model channel and
the event times from rec.json gold, all on the stream clock), so a rule set or one of its parameters can change
at score time (`score --param rules=authors`, `--param shift_pick=closest`) without re-running VAD or ASR.
Times are compared in integer milliseconds: stored times are ms-rounded (docs/conventions.md), and integer comparisons
make "a gap of exactly 0.5 s" or "a start exactly 0.4 s before s" decide the same way on every machine.

The paper's rules, as we read them (b = start of the pre-event turn P, s = event start, t = event end, Δ = 10 s):

- Model utterances are IPUs: speech split at silences longer than 0.5 s (the paper's IPU rule, §III-A), made
  from the raw VAD spans of the model channel (ch1) of the whole recording.
- W = [s, s + Δ). A *takeover* is a model utterance that begins at or after s − 0.4 s and lies (at least in
  part) inside W: start >= s − 0.4, start < s + Δ and end > s. An utterance that ends before s is not "within
  the evaluation window", however close it began. The takeover is the earliest such utterance ("the onset of the
  takeover utterance"); latency = its onset − s (in [−0.4, Δ)).
- SHIFT and PAUSE: TOR = share of episodes with a takeover; latency over the episodes with one (undefined without
  a takeover). PAUSE uses the SHIFT rule over W.
- BC and BARGE_IN: stop latency = time from s until the model stops speaking: the model must be speaking at s
  (an utterance with start <= s < end); its end (cut at the window end, marked censored) − s. Not speaking at s:
  undefined (reported, excluded from the mean).

The authors' code (`evaluation/dimensions/timing.py`, `inference/events.py`, `asr/run_aligner.py`) differs; SPEC
§6 lists eleven differences, each a parameter of `Rules` where it applies to scoring:

 (1) `shift_pick`: "earliest" (paper) | "closest" (code: among start >= s − 0.4 and end > s, the start closest
     to s; ties go to the earlier start).
 (2) `pause_takeover`: "window" (paper: the SHIFT rule over W) | "pause_overlap" (code: any model segment
     overlapping the pause (s, t), even one begun long before), with `ignore_backchannels` (code: segments
     shorter than `bc_max_s` = 1.0 s with fewer than `bc_max_words` = 4 words are not takeovers). Word counts
     come from ASR of those segments, counted in English and Japanese alike by metrics/m3/words.py (score.py
     stores them; the export writes the same words as chunks); where none could be had (an ASR that does not
     transcribe the language) the filter is not applied to that episode and the result counts it.
 (3) `pause_latency_fallback`: "undefined" (paper) | "next_onset_or_window_end" (code: without a takeover, the
     first model onset at or after t, else the end of the window, minus s).
 (4) `stop_rule`: "speaking_at_s" (paper) | "earliest_before" (code: the earliest model segment that starts
     before s + `stop_grace_s` (0.5 s); its end − s).
 (5) `extend_window`: False (paper) | True (code: W = [s, s + max(Δ, t − s)) for BC / BARGE_IN). Our recordings
     end at s + Δ, so this only matters for recordings that run longer.
 (6) `drop_unfit_events`: False (paper) | True (code: an event is scored only where the reference system's
     speaking state fits it: not in a system TURN at s for SHIFT / PAUSE (bounds inclusive, so overlapping
     SHIFTs and SHIFTs with t == s are dropped), in one for BC / BARGE_IN). Dropped events are counted.
 (7) Context length (code: the whole history; paper: L = 120 s) shapes the recording, not its scoring: it is the
     runtime plan's C, not a parameter here.
 (8) `split_at_gap`: False (paper: IPUs split at gaps > 0.5 s) | True (code: at gaps >= 0.5 s).
 (9) `content_scale`: "unit" (paper: 0–2 normalised to [0, 1]) | "0-2" (code).
(10) `ci`: True (paper: 95 % intervals) | False (code reports none).
(11) SHORTPAUSE events (code, `--ignore-short-pause`) are events of the data, which has none here; not a
     scoring parameter.

One more consequence of the code, not on SPEC's list, is needed to reproduce it: its model transcript covers
only the model's output over [b, input_end) (P + W; for BC / BARGE_IN [s, ...)), so speech begun before b
starts at b there and speech before it does not exist. `view` = "recording" (paper: the whole recording) |
"input" (code). Without it the code's stop rule would pick model speech that ended long before s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from dataset_builder.atomic import whole_ms as ms  # the rules count time in integer ms
from dataset_builder.errors import UsageError

Ms = int  # integer milliseconds on the stream clock
SegmentMs = tuple[Ms, Ms]

EVENT_TYPES = ("SHIFT", "PAUSE", "BC", "BARGE_IN")
TAKEOVER_EVENTS = ("SHIFT", "PAUSE")
STOP_EVENTS = ("BC", "BARGE_IN")
TURN_MIN_S = 0.8  # an IPU longer than this is a TURN (§III-A); used to read the reference system's state (6)

CHOICES: dict[str, tuple[str, ...]] = {
    "view": ("recording", "input"),
    "shift_pick": ("earliest", "closest"),
    "pause_takeover": ("window", "pause_overlap"),
    "pause_latency_fallback": ("undefined", "next_onset_or_window_end"),
    "stop_rule": ("speaking_at_s", "earliest_before"),
    "content_scale": ("unit", "0-2"),
}


@dataclass(frozen=True)
class Rules:
    """One rule set; every field is named in the module docstring with the difference it encodes."""

    name: str = "paper"
    window_s: float = 10.0  # Δ
    max_overlap_s: float = 0.4  # a takeover may begin this long before s
    ipu_gap_s: float = 0.5
    split_at_gap: bool = False  # (8)
    view: str = "recording"  # what the code's transcript covers, see the docstring
    shift_pick: str = "earliest"  # (1)
    pause_takeover: str = "window"  # (2)
    ignore_backchannels: bool = False  # (2)
    bc_max_s: float = 1.0  # (2)
    bc_max_words: int = 4  # (2)
    pause_latency_fallback: str = "undefined"  # (3)
    stop_rule: str = "speaking_at_s"  # (4)
    stop_grace_s: float = 0.5  # (4)
    extend_window: bool = False  # (5)
    drop_unfit_events: bool = False  # (6)
    content_scale: str = "unit"  # (9)
    ci: bool = True  # (10)

    def __post_init__(self) -> None:
        for key, allowed in CHOICES.items():
            if getattr(self, key) not in allowed:
                raise UsageError(f"--param {key}={getattr(self, key)!r}: expected one of {', '.join(allowed)}")
        for key in ("window_s", "ipu_gap_s", "bc_max_s"):
            if not float(getattr(self, key)) > 0:
                raise UsageError(f"--param {key}={getattr(self, key)!r}: must be > 0")
        for key in ("max_overlap_s", "stop_grace_s"):
            if not float(getattr(self, key)) >= 0:
                raise UsageError(f"--param {key}={getattr(self, key)!r}: must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


RULE_SETS: dict[str, Rules] = {
    "paper": Rules(),
    "authors": Rules(name="authors", split_at_gap=True, view="input", shift_pick="closest",
                     pause_takeover="pause_overlap", ignore_backchannels=True,
                     pause_latency_fallback="next_onset_or_window_end", stop_rule="earliest_before",
                     extend_window=True, drop_unfit_events=True, content_scale="0-2", ci=False),
}
DEFAULT_RULES = "paper"


def _coerce(name: str, kind: type, value: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise UsageError(f"--param {name}={value!r}: expected true or false")
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UsageError(f"--param {name}={value!r}: expected a number")
        if kind is int and float(value) != int(value):
            raise UsageError(f"--param {name}={value!r}: expected a whole number")
        return kind(value)
    if not isinstance(value, str):
        raise UsageError(f"--param {name}={value!r}: expected one of {', '.join(CHOICES.get(name, ()))}")
    return value


def rules_from(overrides: dict[str, Any] | None) -> tuple[Rules, dict[str, Any]]:
    """(the rule set, the overrides that differ from the paper's defaults) for `score --param` values:
    `rules=paper|authors` picks a named set, any other field replaces one parameter of it. UsageError names a
    typo or a bad value."""
    wanted = dict(overrides or {})
    base_name = wanted.pop("rules", DEFAULT_RULES)
    if base_name not in RULE_SETS:
        raise UsageError(f"--param rules={base_name!r}: known rule sets are {', '.join(RULE_SETS)}")
    kinds = {f.name: f.type for f in fields(Rules)}
    types = {"str": str, "float": float, "int": int, "bool": bool}
    changes: dict[str, Any] = {}
    for key, value in wanted.items():
        if key == "name" or key not in kinds:
            known = sorted(k for k in kinds if k != "name")
            raise UsageError(f"--param {key}: unknown M3 rule parameter; known: rules, {', '.join(known)}")
        changes[key] = _coerce(key, types[str(kinds[key])], value)
    rules = RULE_SETS[str(base_name)]
    if changes:
        tag = ",".join(f"{k}={v}" for k, v in sorted(changes.items()))
        rules = replace(rules, name=f"{rules.name}+{tag}", **changes)
    applied = ({"rules": base_name} if base_name != DEFAULT_RULES else {}) | changes
    return rules, applied


# --- time in milliseconds ------------------------------------------------------------------------------------


def sec(millis: Ms) -> float:
    return millis / 1000.0


def segments(spans: list[list[float]], rules: Rules) -> list[SegmentMs]:
    """IPUs from raw VAD spans: spans joined across silences of at most `ipu_gap_s` (paper: a gap > 0.5 s
    splits) or less than it (`split_at_gap`, code: a gap >= 0.5 s splits)."""
    gap = ms(rules.ipu_gap_s)
    out: list[list[int]] = []
    for a, b in sorted((ms(x), ms(y)) for x, y in spans):
        if out:
            g = a - out[-1][1]
            joined = g < gap if rules.split_at_gap else g <= gap
            if joined:
                out[-1][1] = max(out[-1][1], b)
                continue
        out.append([a, b])
    return [(a, b) for a, b in out]


@dataclass(frozen=True)
class EventTimes:
    """The times of one episode, in ms on the stream clock."""

    event_type: str
    b: Ms  # start of P (== s for BC / BARGE_IN)
    s: Ms
    t: Ms
    end: Ms  # end of the recording

    @classmethod
    def of(cls, m: dict[str, Any]) -> EventTimes:
        return cls(m["event_type"], ms(m["prompt_start_s"]), ms(m["event_start_s"]), ms(m["event_end_s"]),
                   ms(m["duration_s"]))


def window_end(ev: EventTimes, rules: Rules) -> Ms:
    """End of W under the rules, never past the recording."""
    length = ms(rules.window_s)
    if rules.extend_window and ev.event_type in STOP_EVENTS:
        length = max(length, ev.t - ev.s)
    return min(ev.s + length, ev.end)


def visible(segs: list[SegmentMs], ev: EventTimes, rules: Rules) -> list[SegmentMs]:
    """The segments the rule set sees: all of them ("recording"), or cut to the code's output [b, W end)
    ("input"); a segment with nothing left is gone."""
    if rules.view == "recording":
        return list(segs)
    lo, hi = ev.b, window_end(ev, rules)
    return [(max(a, lo), min(b, hi)) for a, b in segs if min(b, hi) > max(a, lo)]


def describe(spans: list[list[float]], m: dict[str, Any], rules: Rules) -> dict[str, Any]:
    """The continuous quantities both verdicts read, under one rule set's segmentation and view (stored in the
    measurement for reading; verdicts recompute them from the spans)."""
    ev = EventTimes.of(m)
    segs = visible(segments(spans, rules), ev, rules)
    w_end = window_end(ev, rules)
    lo = ev.s - ms(rules.max_overlap_s)
    cands = [g for g in segs if g[0] >= lo and g[0] < w_end and g[1] > ev.s]
    at_s = next((g for g in segs if g[0] <= ev.s < g[1]), None)
    after = [g for g in segs if g[0] >= ev.s]
    out: dict[str, Any] = {
        "segments": [[sec(a), sec(b)] for a, b in segs],
        "window": [sec(ev.s), sec(w_end)],
        "candidates": [[sec(a), sec(b)] for a, b in cands],
        "earliest": [sec(x) for x in min(cands)] if cands else None,
        "closest": [sec(x) for x in min(cands, key=lambda g: (abs(g[0] - ev.s), g[0]))] if cands else None,
        "speaking_at_s": at_s is not None,
        "segment_at_s": [sec(x) for x in at_s] if at_s else None,
        "next_onset_s": sec(after[0][0]) if after else None,
    }
    if ev.event_type == "PAUSE":
        overlap = [g for g in segs if g[1] > ev.s and g[0] < ev.t]
        out["pause_overlap"] = [[sec(a), sec(b)] for a, b in overlap]
        out["onset_after_pause_s"] = next((sec(g[0]) for g in segs if g[0] >= ev.t), None)
    return out


# --- verdicts ------------------------------------------------------------------------------------------------


def reference_fits(m: dict[str, Any]) -> bool | None:
    """(6) Whether the reference system's speaking state at s fits the event as the code requires: no system
    TURN covering s (bounds inclusive) for SHIFT / PAUSE, one for BC / BARGE_IN. None when rec.json has no
    `context` to read it from. A SHIFT's own reply is a system TURN starting at t, so t <= s does not fit."""
    context = m.get("context")
    if not isinstance(context, list):
        return None
    s = ms(m["event_start_s"])
    turns = [(ms(u[2]), ms(u[3])) for u in context
             if isinstance(u, list | tuple) and len(u) >= 4 and u[0] == "system"
             and ms(u[3]) - ms(u[2]) > ms(TURN_MIN_S)]
    in_turn = any(a <= s <= b for a, b in turns)
    if m["event_type"] == "SHIFT":
        in_turn = in_turn or ms(m["event_end_s"]) <= s
    return in_turn if m["event_type"] in STOP_EVENTS else not in_turn


def unfit_reason(m: dict[str, Any]) -> str | None:
    """(6) Why the code does not score this event, or None when it does (or rec.json cannot tell)."""
    if reference_fits(m) is not False:
        return None
    kind = m["event_type"]
    if kind == "SHIFT" and ms(m["event_end_s"]) <= ms(m["event_start_s"]):
        ahead = sec(ms(m["event_start_s"]) - ms(m["event_end_s"]))
        return (f"overlapping SHIFT: the reply starts {ahead:g} s before the user's turn ends, so the reference "
                "system is speaking at s (rule 6)")
    if kind in TAKEOVER_EVENTS:
        return f"the reference system is in a turn at s, where a {kind} needs it silent (rule 6)"
    return f"the reference system is not in a turn at s, where a {kind} needs it speaking (rule 6)"


def _is_backchannel(seg: SegmentMs, m: dict[str, Any], rules: Rules, ev: EventTimes) -> bool | None:
    """(2) A short model segment with few words; None when its word count was not measured."""
    if seg[1] - seg[0] >= ms(rules.bc_max_s):
        return False
    words = (m.get("words") or {}).get(segment_key(seg, rules, ev))
    if words is None:
        return None
    return int(words) < rules.bc_max_words


def segment_key(seg: SegmentMs, rules: Rules, ev: EventTimes) -> str:
    """How a segment's word count is stored: its start-end in ms, under the segmentation that made it."""
    return f"{'ge' if rules.split_at_gap else 'gt'}:{seg[0]}-{seg[1]}"


def verdict(m: dict[str, Any], rules: Rules) -> dict[str, Any]:
    """One episode's timing outcome under `rules`: {"scored", "dropped"} and, by event type, "takeover" and
    "latency_s" (SHIFT / PAUSE) or "stop_latency_s", "speaking", "censored" (BC / BARGE_IN). A latency is None
    where the rules leave it undefined; "why" says why."""
    ev = EventTimes.of(m)
    unfit = unfit_reason(m) if rules.drop_unfit_events else None
    if unfit:
        return {"scored": False, "dropped": unfit}
    spans = m.get("vad_spans") or []
    segs = visible(segments(spans, rules), ev, rules)
    w_end = window_end(ev, rules)
    out: dict[str, Any] = {"scored": True, "dropped": None, "window": [sec(ev.s), sec(w_end)]}
    if ev.event_type in TAKEOVER_EVENTS:
        return out | _takeover(m, rules, ev, segs, w_end)
    if ev.event_type in STOP_EVENTS:
        return out | _stop(rules, ev, segs, w_end)
    raise ValueError(f"{m.get('case_id')}: unknown event type {ev.event_type!r}; known: {EVENT_TYPES}")


def _takeover(m: dict[str, Any], rules: Rules, ev: EventTimes, segs: list[SegmentMs], w_end: Ms) -> dict[str, Any]:
    if ev.event_type == "PAUSE" and rules.pause_takeover == "pause_overlap":
        overlap = [g for g in segs if g[1] > ev.s and g[0] < ev.t]
        unknown = False
        if rules.ignore_backchannels:
            kept = []
            for g in overlap:
                bc = _is_backchannel(g, m, rules, ev)
                unknown = unknown or bc is None
                if not bc:
                    kept.append(g)
            overlap = kept
        base = {"bc_filter": "not applied (no word counts)" if unknown else
                ("applied" if rules.ignore_backchannels else "off")}
        if overlap:
            first = min(overlap)
            return base | {"takeover": True, "onset_s": sec(first[0]), "latency_s": sec(first[0] - ev.s),
                           "segment": [sec(first[0]), sec(first[1])]}
        return base | {"takeover": False, "segment": None, **_fallback(rules, ev, segs, w_end)}
    lo = ev.s - ms(rules.max_overlap_s)
    cands = [g for g in segs if g[0] >= lo and g[0] < w_end and g[1] > ev.s]
    if not cands:
        if ev.event_type == "PAUSE":
            return {"takeover": False, "segment": None, **_fallback(rules, ev, segs, w_end)}
        return {"takeover": False, "segment": None, "onset_s": None, "latency_s": None, "why": "no takeover"}
    pick = min(cands) if rules.shift_pick == "earliest" else min(cands, key=lambda g: (abs(g[0] - ev.s), g[0]))
    return {"takeover": True, "onset_s": sec(pick[0]), "latency_s": sec(pick[0] - ev.s),
            "segment": [sec(pick[0]), sec(pick[1])]}


def _fallback(rules: Rules, ev: EventTimes, segs: list[SegmentMs], w_end: Ms) -> dict[str, Any]:
    """(3) PAUSE latency without a takeover."""
    if rules.pause_latency_fallback == "undefined":
        return {"onset_s": None, "latency_s": None, "why": "no takeover"}
    nxt = next((g[0] for g in sorted(segs) if g[0] >= ev.t), None)
    if nxt is None:
        return {"onset_s": None, "latency_s": sec(w_end - ev.s), "why": "no onset: window end"}
    return {"onset_s": sec(nxt), "latency_s": sec(nxt - ev.s), "why": "next onset after the pause"}


def _stop(rules: Rules, ev: EventTimes, segs: list[SegmentMs], w_end: Ms) -> dict[str, Any]:
    if rules.stop_rule == "speaking_at_s":
        seg = next((g for g in segs if g[0] <= ev.s < g[1]), None)
        why = "model not speaking at s"
    else:
        early = [g for g in segs if g[0] < ev.s + ms(rules.stop_grace_s)]
        seg = min(early) if early else None
        why = f"no model segment starting before s + {rules.stop_grace_s:g} s"
    if seg is None:
        return {"speaking": False, "stop_latency_s": None, "censored": False, "segment": None, "why": why}
    end = min(seg[1], w_end)
    return {"speaking": True, "stop_latency_s": sec(end - ev.s), "censored": seg[1] >= w_end,
            "segment": [sec(seg[0]), sec(seg[1])]}
