"""DSB-IFEval Instruction Adherence Score (IAS) and its level gaps as an `evaluate` metric: stored case
measurements in, IAS overall, per level, action and role, the Entailment Gap, Redundancy Gain and Role Tax out.

    import evaluate
    from metrics import metric_dir
    ias = evaluate.load(metric_dir("instruction_adherence"))   # from any working directory, offline
    result = ias.compute(measurements=open("RUN_DIR/measurements.jsonl").read().splitlines())

No scoring logic lives here: `metrics.ifeval.headline` reads every number from `metrics.ifeval.aggregate.aggregate`,
the function `duplex-eval score` uses, so both give one number.
"""

# evaluate reads this file line by line to find the packages it needs: one import per line, no comma imports.
from __future__ import annotations

from typing import Any

from metrics.evaluate_modules.base import IFEvalMetric
from metrics.ifeval.headline import headline
from metrics.ifeval.verdicts import checked_thresholds

_DESCRIPTION = """\
DSB-IFEval Instruction Adherence Score: the share of cases in which a full-duplex voice agent does the floor
action its role implies (listen through a pause, take the turn, interrupt on a red flag, backchannel, read back,
yield, continue, accept overlap), checked deterministically from the two-channel recording, under five
conditioning levels of the system prompt. Also the level differences: Entailment Gap IAS(L1) - IAS(L2),
Redundancy Gain IAS(L3) - IAS(L2), Role Tax IAS(L3) - IAS(L1), with Newcombe intervals and the paired McNemar view.
Computed from the per-case measurements `duplex-eval score` writes (RUN_DIR/measurements.jsonl).
"""

_KWARGS_DESCRIPTION = """
Args:
    measurements: list of JSON strings, the lines of measurements.jsonl (one per case). A record with
        "failed": true never passes.
    take_turn_max_wait_s, yield_max_latency_ms, interrupt_max_latency_ms, bc_ceiling_s, readback_min_coverage:
        run-wide replacements of a verifier threshold for every case of its action (default None: each case
        keeps the thresholds stored in its own gold, role overrides included, as in the run's scores.json; a
        value gives what `duplex-eval score --reuse --param` gives, and one out of range is refused).
Returns:
    instruction_adherence: IAS = k / n (None when n is 0); n: cases; k: passes; ci: Wilson 95% [low, high].
    by_level (L0, L1, L2, L3, L4a, L4b), by_action, by_role: {"value", "n", "k", "ci"} each.
    entailment_gap, redundancy_gain, role_tax: {"value", "a", "b", "n_a", "n_b", "ci" (Newcombe 95%),
        "paired": {"n_pairs", "a_only", "b_only", "mcnemar_p"}}.
    matched_audio: IAS on the matched-audio subset by role, role and probe, level, and all_roles_pass.
    thresholds: each threshold's run-wide value, or "per case".
Examples:
    >>> ias = evaluate.load(metric_dir("instruction_adherence"))
    >>> ias.compute(measurements=lines)["entailment_gap"]["value"]
    0.0
"""


class InstructionAdherence(IFEvalMetric):
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION

    def _compute(self, measurements: list[str], take_turn_max_wait_s: float | None = None,
                 yield_max_latency_ms: float | None = None, interrupt_max_latency_ms: float | None = None,
                 bc_ceiling_s: float | None = None, readback_min_coverage: float | None = None) -> dict[str, Any]:
        # Checked as `score --param` checks them (a value out of range is refused in one line).
        th = checked_thresholds({"take_turn_max_wait_s": take_turn_max_wait_s,
                                 "yield_max_latency_ms": yield_max_latency_ms,
                                 "interrupt_max_latency_ms": interrupt_max_latency_ms,
                                 "bc_ceiling_s": bc_ceiling_s, "readback_min_coverage": readback_min_coverage},
                                prefix="")
        return headline(self.records(measurements), th)
