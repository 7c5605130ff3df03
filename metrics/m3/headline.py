"""M3-DuplexBench's headline timing numbers as their `evaluate` modules return them (metrics/evaluate_modules/
takeover_rate/, stop_latency/): per `<lang>_<domain>_<condition>` group the blocks scores.json holds, and the
"None&Full" representative per `<lang>_<domain>`, under one rule set.

Every number is read from `metrics.m3.aggregate.aggregate`, the function `duplex-eval score` writes scores.json
with; this file only chooses which of its keys a module shows.
"""

from __future__ import annotations

from typing import Any

from metrics.m3.aggregate import aggregate
from metrics.m3.rules import Rules

HEADLINES: dict[str, tuple[str, ...]] = {
    "takeover_rate": ("shift_tor", "pause_tor"),
    "stop_latency": ("bc_stop_latency", "barge_in_stop_latency"),
}


def headline(measurements: list[dict[str, Any]], name: str, rules: Rules) -> dict[str, Any]:
    """{name: {group: {key: block}}, "representative": {lang_domain: {key: block}}, "dropped_events", "rules"}."""
    if name not in HEADLINES:
        raise ValueError(f"unknown M3 headline {name!r}; known: {list(HEADLINES)}")
    keys = HEADLINES[name]
    agg = aggregate(measurements, rules)
    return {name: {group: {k: block[k] for k in keys} for group, block in agg["scores"].items()},
            "representative": {ld: {k: block[k] for k in keys} for ld, block in agg["representative"].items()},
            "dropped_events": agg["dropped_events"], "rules": rules.to_dict()}
