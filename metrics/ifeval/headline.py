"""DSB-IFEval's headline as its `evaluate` module returns it (metrics/evaluate_modules/instruction_adherence/): the
Instruction Adherence Score over all cases, per level, action and role, the three level differences (Entailment Gap,
Redundancy Gain, Role Tax, each with its paired view) and the matched-audio table.

Every number is read from `metrics.ifeval.aggregate.aggregate`, the function `duplex-eval score` writes
scores.json with; PAS and the conflict profile need a served LLM judge and are not part of this module.
"""

from __future__ import annotations

from typing import Any

from metrics.ifeval.aggregate import DIFFERENCES, aggregate
from metrics.ifeval.verdicts import Thresholds

BREAKDOWNS = ("by_level", "by_action", "by_role", *DIFFERENCES, "matched_audio")


def headline(measurements: list[dict[str, Any]], th: Thresholds) -> dict[str, Any]:
    """{"instruction_adherence": IAS, "n", "k", "ci", *BREAKDOWNS, "thresholds"} of stored case measurements
    under `th` (None fields: each case keeps its own gold thresholds)."""
    agg = aggregate(measurements, th)
    ias = agg["scores"]["ias"]
    return ({"instruction_adherence": ias["value"], "n": ias["n"], "k": ias["k"], "ci": ias["ci"]}
            | {key: agg[key] for key in BREAKDOWNS} | {"thresholds": th.to_dict()})
