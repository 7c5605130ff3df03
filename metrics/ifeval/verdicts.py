"""DSB-IFEval verdicts: pure functions of one case's stored measurements and thresholds (docs/benchmarks/ifeval.md, App.
E.3-E.4).

Each case carries its own thresholds (rec.json gold `verifier`: the SPEC defaults with the role's overrides).
`Thresholds` holds run-wide replacements: a value set there replaces that threshold for every case of its
action, role overrides included — what `score --param` and the 180-configuration sweep do. None keeps each
case's own value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from dataset_builder.errors import UsageError
from dataset_builder.ifeval.schema import ACTIONS, verifier_params
from metrics.thresholds import Limit, validate_overrides

VAD_LABELS = ("silent", "backchannel", "floor_take")
PER_CASE = "per case"  # a threshold no run-wide value replaces: each case's gold `verifier` holds it
_EPS = 1e-9  # stored times are rounded to the millisecond, coverages are exact fractions


@dataclass(frozen=True)
class Thresholds:
    take_turn_max_wait_s: float | None = None  # TAKE_TURN max_wait_s
    yield_max_latency_ms: float | None = None  # YIELD and CONTINUE max_latency_ms
    interrupt_max_latency_ms: float | None = None  # INTERRUPT max_latency_ms
    bc_ceiling_s: float | None = None  # BACKCHANNEL bc_ceiling_s
    readback_min_coverage: float | None = None  # READBACK min_coverage

    def to_dict(self) -> dict[str, float | str]:
        """As stored in scores.json: a value, or PER_CASE where each case keeps its own."""
        return {k: PER_CASE if v is None else v for k, v in asdict(self).items()}

    def applied(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Thresholds:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown IFEval thresholds {unknown}; known: {sorted(known)}")
        return cls(**{k: None if v is None or v == PER_CASE else float(v) for k, v in data.items()})


# What each run-wide threshold may be set to at score time (`score --param`, or an `evaluate` module's argument).
THRESHOLD_LIMITS = {
    "take_turn_max_wait_s": Limit(low=0.0, low_inclusive=False),
    "yield_max_latency_ms": Limit(low=0.0, low_inclusive=False),
    "interrupt_max_latency_ms": Limit(low=0.0, low_inclusive=False),
    "bc_ceiling_s": Limit(low=0.0, low_inclusive=False),
    "readback_min_coverage": Limit(low=0.0),
}


def checked_thresholds(overrides: Mapping[str, Any], recorded: Mapping[str, Any] | None = None,
                       fixed: Iterable[str] = (), prefix: str = "--param ") -> Thresholds:
    """Run-wide threshold replacements (None: each case keeps its own), or UsageError in one line naming the
    parameter. One rule for `score --param` and the `instruction_adherence` module."""
    given = {k: v for k, v in overrides.items() if v is not None}
    wanted = validate_overrides(given, THRESHOLD_LIMITS, fixed, recorded or {}, prefix=prefix)
    if wanted.get("readback_min_coverage", 0.0) > 1.0:
        raise UsageError(f"{prefix}readback_min_coverage={wanted['readback_min_coverage']:g}: out of range; "
                         "a coverage lies in [0, 1]")
    return Thresholds(**wanted)


# Which per-case verifier parameter each run-wide threshold replaces, by action.
REPLACES: dict[str, tuple[tuple[str, ...], str]] = {
    "take_turn_max_wait_s": (("TAKE_TURN",), "max_wait_s"),
    "yield_max_latency_ms": (("YIELD", "CONTINUE"), "max_latency_ms"),
    "interrupt_max_latency_ms": (("INTERRUPT",), "max_latency_ms"),
    "bc_ceiling_s": (("BACKCHANNEL",), "bc_ceiling_s"),
    "readback_min_coverage": (("READBACK",), "min_coverage"),
}


def case_params(action: str, role: str, verifier: dict[str, Any] | None) -> dict[str, float]:
    """The thresholds of one case: its gold `verifier` over the SPEC defaults of its action (with role overrides),
    so a record that lacks a key still gets the contract's value for it."""
    return {**verifier_params(action, role), **{k: float(v) for k, v in (verifier or {}).items()}}


def effective_params(m: dict[str, Any], th: Thresholds) -> dict[str, float]:
    """The case's own thresholds with the run-wide replacements of `th` applied."""
    params = dict(m["verifier"])
    for name, (actions, key) in REPLACES.items():
        value = getattr(th, name)
        if value is not None and m["expected_action"] in actions:
            params[key] = float(value)
    return params


def vad_label(m: dict[str, Any], ceiling_s: float) -> str:
    """App. E.4: silent (no model span starts in the window); backchannel (every span that starts there is
    shorter than the ceiling and the user resumes after the window, so the floor never changed hands);
    floor_take otherwise. Speech carried into the window from before it is not a start."""
    if m["n_onsets"] == 0:
        return "silent"
    if all(d < ceiling_s - _EPS for d in m["onset_durations_s"]) and m["user_resumes"]:
        return "backchannel"
    return "floor_take"


def _within_ms(seconds: float | None, limit_ms: float) -> bool:
    return seconds is not None and round(seconds * 1000.0, 3) <= limit_ms + _EPS


def yielded(m: dict[str, Any], max_latency_ms: float) -> bool:
    """The first model offset at or after w0 came within the latency (App. E.4 `off`)."""
    return _within_ms(m["first_offset_s"], max_latency_ms)


def passes(m: dict[str, Any], th: Thresholds | None = None) -> bool:
    """The case's verdict under `th` (default: each case's own thresholds). A failed episode never passes."""
    if m.get("failed"):
        return False
    action = m["expected_action"]
    p = effective_params(m, th or Thresholds())
    if action == "LISTEN":
        return m["n_onsets"] == 0
    if action == "NO_BACKCHANNEL":
        return m["n_onsets"] <= p["bc_window_max"]
    if action == "TAKE_TURN":
        g = m["genuine_onset_s"]
        return g is not None and g <= p["max_wait_s"] + _EPS
    if action == "INTERRUPT":
        return _within_ms(m["genuine_onset_s"], p["max_latency_ms"])
    if action == "BACKCHANNEL":
        return (vad_label(m, p["bc_ceiling_s"]) == "backchannel"
                and p["bc_window_min"] <= m["n_onsets"] <= p["bc_window_max"])
    if action == "READBACK":
        cov = (m.get("readback") or {}).get("coverage")
        return cov is not None and cov >= p["min_coverage"] - _EPS
    if action == "YIELD":
        return yielded(m, p["max_latency_ms"])
    if action == "CONTINUE":
        # App. E.4 reads "not yielded", which a model that never spoke would pass; continuing needs the floor:
        # the model is speaking when the user barges in (w0) and does not stop within the latency.
        return m["carried_in"] is not None and not yielded(m, p["max_latency_ms"])
    if action == "ACCEPT_OVERLAP":
        return m["overlap_s"] > p["min_overlap_s"] + _EPS
    raise ValueError(f"{m.get('case_id')}: unknown action {action!r}; known: {ACTIONS}")
