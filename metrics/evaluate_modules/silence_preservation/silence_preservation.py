"""Duplex-MPE silence preservation as an `evaluate` metric: stored window measurements in, the rate out.

    import evaluate
    from metrics import metric_dir
    silence = evaluate.load(metric_dir("silence_preservation"))   # from any working directory, offline
    result = silence.compute(measurements=open("RUN_DIR/measurements.jsonl").read().splitlines())

No scoring logic lives here: `metrics.mpe.headline` reads the number from `metrics.mpe.aggregate.aggregate`, the
function `duplex-eval score` uses, so both give one number.
"""

# evaluate reads this file line by line to find the packages it needs: one import per line, no comma imports.
from __future__ import annotations

from typing import Any

from metrics.evaluate_modules.base import MPEMetric
from metrics.mpe.headline import headline
from metrics.mpe.verdicts import Thresholds

_DESCRIPTION = """\
Duplex-MPE silence preservation: the share of windows the assistant should leave to the people (N1: it is only
mentioned; N2: speech addressed to someone else; N3: addressed to no one) in which it says nothing, or only a
brief acknowledgement as judged from its transcript. Computed from the per-window measurements `duplex-eval
score` writes (RUN_DIR/measurements.jsonl); no threshold applies. Wilson 95% interval; per condition and label.
"""

_KWARGS_DESCRIPTION = """
Args:
    measurements: list of JSON strings, the lines of measurements.jsonl (records of every kind may be passed;
        only kind "silence" windows enter this rate). A record with "failed": true counts as a failure.
Returns:
    silence_preservation: k / n (None when n is 0); n: N1/N2/N3 windows; k: preserved; ci: Wilson 95%.
    by_condition: {"explicit", "implicit"}: {"value", "n", "k", "ci"}.
    by_label: {"N1", "N2", "N3"}: the same block.
    thresholds: {} (no threshold changes this rate).
Examples:
    >>> silence = evaluate.load(metric_dir("silence_preservation"))
    >>> silence.compute(measurements=lines)["by_label"]["N2"]["n"]
    12
"""


class SilencePreservation(MPEMetric):
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION

    def _compute(self, measurements: list[str]) -> dict[str, Any]:
        return headline(self.records(measurements), "silence_preservation", Thresholds())
