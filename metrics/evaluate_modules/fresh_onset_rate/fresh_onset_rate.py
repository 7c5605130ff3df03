"""Duplex-MPE fresh-onset response rate as an `evaluate` metric: stored window measurements in, the rate out.

    import evaluate
    from metrics import metric_dir
    fresh = evaluate.load(metric_dir("fresh_onset_rate"))   # from any working directory, offline
    result = fresh.compute(measurements=open("RUN_DIR/measurements.jsonl").read().splitlines())

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
Duplex-MPE fresh-onset response rate: the share of requests addressed to the assistant (label T) that it answers
with a new voiced onset within t_onset_window_s after the request ends, without already speaking when it ends.
Computed from the per-window measurements `duplex-eval score` writes (RUN_DIR/measurements.jsonl), so the onset
window can change without re-running the model, the VAD or the ASR. Wilson 95% interval; per condition; the
paired explicit-vs-implicit exact McNemar test.
"""

_KWARGS_DESCRIPTION = """
Args:
    measurements: list of JSON strings, the lines of measurements.jsonl (records of every kind may be passed;
        only kind "T" windows enter this rate). A record with "failed": true counts as a failure.
    t_onset_window_s: seconds after T ends within which a voiced onset counts (default None: the value the run
        was recorded with, stored in each measurement, so the result is scores.json's). Another value is
        checked as `duplex-eval score --reuse --param` checks it: wider than the recorded window is refused
        (the scheduler stopped waiting there), and the result is that scores-NAME=VALUE.json's.
Returns:
    fresh_onset_rate: k / n (None when n is 0); n: T windows; k: fresh onsets; ci: Wilson 95% [low, high].
    by_condition: {"explicit", "implicit"}: {"value", "n", "k", "ci"}.
    by_label: {"T": the same block}.
    paired: n_pairs, explicit_only, implicit_only, difference (explicit - implicit), mcnemar_p.
    thresholds: the threshold applied.
Examples:
    >>> fresh = evaluate.load(metric_dir("fresh_onset_rate"))
    >>> fresh.compute(measurements=lines)["fresh_onset_rate"]
    1.0
"""


class FreshOnsetRate(MPEMetric):
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION

    def _compute(self, measurements: list[str], t_onset_window_s: float | None = None) -> dict[str, Any]:
        records = self.records(measurements)
        th = thresholds_in(records, {"t_onset_window_s": t_onset_window_s})
        return headline(records, "fresh_onset_rate", th)
