"""One Duplex-MPE score as its own `evaluate` module returns it (metrics/<score>/): the score over all windows,
then the same score per condition and per label, and its paired explicit-vs-implicit test where it has one.

Every number is read from `metrics.mpe.aggregate.aggregate`, the function `duplex-eval score` writes scores.json
with, so a module and the CLI cannot disagree; this file only chooses which of its blocks a module shows.
"""

from __future__ import annotations

from typing import Any

from metrics.mpe.aggregate import aggregate
from metrics.mpe.verdicts import Thresholds

# The MPE scores that are headline numbers with a module of their own (the others are reported beside them), with
# the thresholds each one reads.
HEADLINE_SCORES: dict[str, tuple[str, ...]] = {
    "fresh_onset_rate": ("t_onset_window_s",),
    "silence_preservation": (),
    "answering_window_yield": ("yield_tolerance_s",),
}


def headline(measurements: list[dict[str, Any]], score: str, th: Thresholds) -> dict[str, Any]:
    """{score: value, "n", "k", "ci", "by_condition", "by_label", ["paired"], "thresholds"} of stored window
    measurements under `th`; "by_label" holds only the labels whose windows enter the score, "thresholds" only
    the thresholds the score reads."""
    if score not in HEADLINE_SCORES:
        raise ValueError(f"unknown Duplex-MPE headline score {score!r}; known: {list(HEADLINE_SCORES)}")
    agg = aggregate(measurements, th)
    overall = agg["scores"][score]
    out: dict[str, Any] = {score: overall["value"], "n": overall["n"], "k": overall["k"], "ci": overall["ci"],
                           "by_condition": {c: block[score] for c, block in agg["by_condition"].items()},
                           "by_label": {lab: block[score] for lab, block in agg["by_label"].items()
                                        if score in block}}
    if score in agg["paired"]:
        out["paired"] = agg["paired"][score]
    return out | {"thresholds": {name: getattr(th, name) for name in HEADLINE_SCORES[score]}}
