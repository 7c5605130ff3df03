"""Duplex-MPE as an `evaluate` metric: stored window measurements in, the six MPE scores out.

    import evaluate
    from metrics import metric_dir
    mpe = evaluate.load(metric_dir("duplex_mpe"))   # from any working directory
    result = mpe.compute(measurements=open("RUN_DIR/measurements.jsonl").read().splitlines())

The module holds no scoring logic: verdicts and aggregation are `metrics.mpe.verdicts` and
`metrics.mpe.aggregate.aggregate`, the same functions `duplex-eval score` uses, so both paths give one number.
"""

# evaluate reads this file line by line to find the packages it needs: one import per line, no comma imports.
from __future__ import annotations

from typing import Any

from metrics.evaluate_modules.base import MPEMetric
from metrics.mpe.aggregate import aggregate
from metrics.mpe.verdicts import thresholds_in

_DESCRIPTION = """\
Scores a full-duplex spoken dialogue model on the Duplex-MPE benchmark (multi-party scenes with an assistant
named Aria) from the continuous per-window measurements written by `duplex-eval score`
(RUN_DIR/measurements.jsonl). Thresholds are applied here, so they can be changed without re-running the model,
the VAD or the ASR. Six metrics, each with its own denominator and a Wilson 95% interval; no aggregate score.
"""

_KWARGS_DESCRIPTION = """
Args:
    measurements: list of JSON strings, one window measurement each (a line of measurements.jsonl).
        kind "T" (one per T turn), "silence" (one per N1/N2/N3 window) or "N4" (one per N4Q/N4R event).
        A record with "failed": true (a window of a failed episode) counts as a failure in every metric of its kind.
    t_onset_window_s: seconds after T ends within which a voiced onset counts as a response.
    yield_tolerance_s: seconds model speech active at N4R onset may continue and still count as a yield.
        Each defaults to None: the value the run was recorded with, stored in each measurement, so the result
        is scores.json's. Another value is checked as `duplex-eval score --reuse --param` checks it (an onset
        window wider than the recorded one is refused: the scheduler stopped waiting there) and gives that
        scores-NAME=VALUE.json's numbers.
Returns:
    scores: {metric: {"value", "n", "k", "ci"}} over all windows, for fresh_onset_rate, response_presence,
        answer_accuracy, silence_preservation, window_response, answering_window_yield
        ("value" and "ci" are None when "n" is 0).
    by_condition: the same per condition ("explicit", "implicit").
    by_label: the metrics of each label group (T, N1, N2, N3, N4).
    paired: explicit vs implicit on the same scenario for response_presence and fresh_onset_rate:
        n_pairs, explicit_only, implicit_only, difference, mcnemar_p.
Examples:
    >>> mpe = evaluate.load(metric_dir("duplex_mpe"))
    >>> lines = open("runs/oracle/measurements.jsonl").read().splitlines()
    >>> result = mpe.compute(measurements=lines, t_onset_window_s=3.0)   # the run's own thresholds when left out
    >>> sorted(result)
    ['by_condition', 'by_label', 'paired', 'scores']
"""


class DuplexMPE(MPEMetric):
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION

    def _compute(self, measurements: list[str], t_onset_window_s: float | None = None,
                 yield_tolerance_s: float | None = None) -> dict[str, Any]:
        records = self.records(measurements)
        th = thresholds_in(records, {"t_onset_window_s": t_onset_window_s, "yield_tolerance_s": yield_tolerance_s})
        return aggregate(records, th)
