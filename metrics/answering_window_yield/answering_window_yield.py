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

import json
from typing import Any

import datasets
import evaluate

from metrics.mpe.headline import headline
from metrics.mpe.verdicts import Thresholds

_CITATION = """\
@misc{duplex_mpe,
  title = {Duplex-MPE: Benchmarking Multi-Party Interaction in Full-Duplex Dialogue}
}
"""

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
    yield_tolerance_s: seconds model speech active at N4R onset may continue and still count (default 1.0).
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


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AnsweringWindowYield(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # One JSON string per window: the records are nested and differ by kind.
            features=datasets.Features({"measurements": datasets.Value("string")}),
        )

    def _compute(self, measurements: list[str], yield_tolerance_s: float = 1.0) -> dict[str, Any]:
        th = Thresholds(yield_tolerance_s=float(yield_tolerance_s))
        return headline([json.loads(m) for m in measurements], "answering_window_yield", th)
