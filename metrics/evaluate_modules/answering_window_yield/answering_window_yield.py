"""Duplex-MPE answering-window yield as an `evaluate` metric: stored window measurements in, the rate out.

    import evaluate
    from metrics import metric_dir
    yielding = evaluate.load(metric_dir("answering_window_yield"))   # from any working directory, offline
    result = yielding.compute(measurements=open("RUN_DIR/measurements.jsonl").read().splitlines())

No scoring logic lives here: `metrics.mpe.headline` reads the number from `metrics.mpe.aggregate.aggregate`, the
function `duplex-eval score` uses, so both give one number.
"""

# evaluate reads this file line by line to find the packages it needs: one import per line, no comma imports.
from __future__ import annotations

from typing import Any

from metrics.evaluate_modules.base import MPEMetric
from metrics.mpe.headline import headline
from metrics.mpe.verdicts import thresholds_in

_DESCRIPTION = """\
Duplex-MPE answering-window yield: after a person asks the assistant a question (N4Q) and another person answers
it (N4R), the share of such windows in which the assistant yields: any speech it has going when N4R starts ends
within yield_tolerance_s, and it starts nothing new during N4R. Computed from the per-window measurements
`duplex-eval score` writes (RUN_DIR/measurements.jsonl), so the tolerance can change without re-running the
model or the VAD. Wilson 95% interval; per condition.
"""

_KWARGS_DESCRIPTION = """
Args:
    measurements: list of JSON strings, the lines of measurements.jsonl (records of every kind may be passed;
        only kind "N4" windows enter this rate). A record with "failed": true counts as a failure.
    yield_tolerance_s: seconds model speech active at N4R onset may continue and still count (default None: the
        value the run was recorded with, stored in each measurement, so the result is scores.json's; another
        value gives what `duplex-eval score --reuse --param` gives).
Returns:
    answering_window_yield: k / n (None when n is 0); n: N4 windows; k: yields; ci: Wilson 95% [low, high].
    by_condition: {"explicit", "implicit"}: {"value", "n", "k", "ci"}.
    by_label: {"N4": the same block}.
    thresholds: the threshold applied.
Examples:
    >>> yielding = evaluate.load(metric_dir("answering_window_yield"))
    >>> yielding.compute(measurements=lines, yield_tolerance_s=0.5)["answering_window_yield"]
    0.5
"""


class AnsweringWindowYield(MPEMetric):
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION

    def _compute(self, measurements: list[str], yield_tolerance_s: float | None = None) -> dict[str, Any]:
        records = self.records(measurements)
        th = thresholds_in(records, {"yield_tolerance_s": yield_tolerance_s})
        return headline(records, "answering_window_yield", th)
