"""Verdicts from stored measurements under a set of thresholds (docs/benchmarks/mpe.md, Table 2 numerators)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dataset_builder.benchmark_params import MPEProtocol


@dataclass(frozen=True)
class Thresholds:
    """The scoring thresholds; their defaults are the protocol's, the values a run records in rec.json."""

    t_onset_window_s: float = MPEProtocol.t_onset_window_s
    yield_tolerance_s: float = MPEProtocol.yield_tolerance_s

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Thresholds:
        return cls(**{k: float(params[k]) for k in ("t_onset_window_s", "yield_tolerance_s") if k in params})


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
