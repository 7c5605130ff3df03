"""Verdicts from stored measurements under a set of thresholds (docs/benchmarks/mpe.md, Table 2 numerators)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.errors import UsageError
from metrics.thresholds import Limit, validate_overrides


@dataclass(frozen=True)
class Thresholds:
    """The scoring thresholds; their defaults are the protocol's, the values a run records in rec.json."""

    t_onset_window_s: float = MPEProtocol.t_onset_window_s
    yield_tolerance_s: float = MPEProtocol.yield_tolerance_s

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Thresholds:
        return cls(**{k: float(params[k]) for k in ("t_onset_window_s", "yield_tolerance_s") if k in params})


# What each threshold may be set to at score time (`score --reuse --param`, or an `evaluate` module's argument).
THRESHOLD_LIMITS = {
    "t_onset_window_s": Limit(low=0.0, low_inclusive=False, at_most_recorded=True, why_recorded=(
        " (the scheduler stopped waiting for an onset there and played the next turn, so a later onset never "
        "had its chance)")),
    "yield_tolerance_s": Limit(low=0.0),
}
# The field of a window measurement holding the thresholds its episode was recorded with (rec.json's protocol),
# so the stored measurements alone say which thresholds reproduce the run's scores.json.
RECORDED = "recorded_thresholds"


def recorded_of(protocol: Mapping[str, Any]) -> dict[str, float]:
    """The thresholds of a recorded protocol (rec.json `params.protocol`), as a measurement stores them."""
    return asdict(Thresholds.from_params(protocol))


def supported_basis(recorded: Thresholds, protocols: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The values overrides are checked against: the recorded thresholds, where a threshold bounded by the
    recording may not exceed the smallest value any episode was recorded with."""
    basis = asdict(recorded)
    for name, lim in THRESHOLD_LIMITS.items():
        values = [float(p[name]) for p in protocols if name in p]
        if lim.at_most_recorded and values:
            basis[name] = min(values)
    return basis


def chosen_thresholds(recorded: Thresholds, overrides: Mapping[str, Any], basis: Mapping[str, Any],
                      fixed: Iterable[str] = (), prefix: str = "--param ") -> tuple[Thresholds, dict[str, float]]:
    """(the thresholds to apply, the overrides that differ from the recorded ones): `overrides` checked against
    THRESHOLD_LIMITS and `basis` (UsageError in one line otherwise) over the recorded thresholds. One rule for
    `score --param` and the `evaluate` modules."""
    wanted = validate_overrides(overrides, THRESHOLD_LIMITS, fixed, basis, prefix=prefix)
    applied = {k: v for k, v in wanted.items() if v != getattr(recorded, k)}
    return replace(recorded, **applied), applied


def thresholds_in(measurements: list[dict[str, Any]], overrides: Mapping[str, Any]) -> Thresholds:
    """The thresholds stored window measurements are scored under by an `evaluate` module: those the run was
    recorded with (each record's RECORDED), with `overrides` (None: keep the recorded one) checked as `score
    --reuse --param` checks them. Measurements that do not record them (stored before they did) are scored
    only under thresholds given in full; UsageError otherwise."""
    given = {k: v for k, v in overrides.items() if v is not None}
    stored = [m[RECORDED] for m in measurements if isinstance(m.get(RECORDED), dict)]
    if not stored:
        missing = sorted(set(overrides) - set(given))
        if missing and measurements:
            raise UsageError(
                f"these measurements do not record the thresholds their run was recorded with (measured by an "
                f"older duplex-eval); pass {', '.join(f'{k}=...' for k in missing)}, or rescore the run with "
                "`duplex-eval score RUN_DIR` to store them")
        return chosen_thresholds(Thresholds(), given, {}, prefix="")[0]
    recorded = Thresholds.from_params(stored[0])
    return chosen_thresholds(recorded, given, supported_basis(recorded, stored), prefix="")[0]


def fresh_onset(m: dict[str, Any], th: Thresholds) -> bool:
    lat = m["onset_latency_s"]
    return not m["active_at_end"] and lat is not None and lat <= th.t_onset_window_s


def response_presence(m: dict[str, Any], th: Thresholds) -> bool:
    lat = m["onset_latency_s"]
    return bool(m["active_at_end"]) or (lat is not None and lat <= th.t_onset_window_s)


def answer_correct(m: dict[str, Any]) -> bool:
    # Unparseable verdicts count as incorrect (docs/benchmarks/mpe.md).
    return m["answer_verdict"] == "correct"


def silence_preserved(m: dict[str, Any]) -> bool:
    # Speech passes only as a judged brief acknowledgement; an empty transcript gets no exemption.
    return m["speech_s"] == 0 or m["ack_verdict"] == "acknowledgement"


def window_response(m: dict[str, Any]) -> bool:
    return m["window_speech_s"] > 0


def answering_window_yield(m: dict[str, Any], th: Thresholds) -> bool:
    stopped = not m["active_at_r_start"] or m["stop_latency_s"] <= th.yield_tolerance_s
    return stopped and m["new_onsets_in_r"] == 0


METRICS = ("fresh_onset_rate", "response_presence", "answer_accuracy", "silence_preservation",
           "window_response", "answering_window_yield")


# The metrics a window of each kind enters. A window of a failed episode enters all of them, as a failure:
# a model that crashes must not score better than one that answers badly (answer accuracy included).
WINDOW_METRICS = {"T": ("fresh_onset_rate", "response_presence", "answer_accuracy"),
                  "silence": ("silence_preservation",),
                  "N4": ("window_response", "answering_window_yield")}


def outcomes(m: dict[str, Any], th: Thresholds) -> dict[str, bool]:
    """Each metric this window counts toward, with its success (a window outside a denominator is absent)."""
    if m.get("failed"):
        if m["kind"] not in WINDOW_METRICS:
            raise ValueError(f"unknown measurement kind {m['kind']!r} in {m.get('case_id')}")
        return dict.fromkeys(WINDOW_METRICS[m["kind"]], False)
    if m["kind"] == "T":
        out = {"fresh_onset_rate": fresh_onset(m, th), "response_presence": response_presence(m, th)}
        if out["response_presence"]:
            out["answer_accuracy"] = answer_correct(m)
        return out
    if m["kind"] == "silence":
        return {"silence_preservation": silence_preserved(m)}
    if m["kind"] == "N4":
        return {"window_response": window_response(m), "answering_window_yield": answering_window_yield(m, th)}
    raise ValueError(f"unknown measurement kind {m['kind']!r} in {m.get('case_id')}")
