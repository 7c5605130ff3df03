"""M3-DuplexBench stop latency as an `evaluate` metric: stored episode measurements in, the mean time the model
takes to stop speaking after a user backchannel (BC) or barge-in (BARGE_IN) out, per language, domain and context
condition, with the "None&Full" representative.

    import evaluate
    from metrics import metric_dir
    stop = evaluate.load(metric_dir("stop_latency"))   # from any working directory, offline
    result = stop.compute(measurements=open("RUN_DIR/measurements.jsonl").read().splitlines())
    authors = stop.compute(measurements=lines, rules="authors")   # the M3 authors' code's rules

No scoring logic lives here: `metrics.m3.headline` reads every number from `metrics.m3.aggregate.aggregate`, the
function `duplex-eval score` uses, so both give one number.
"""

# evaluate reads this file line by line to find the packages it needs: one import per line, no comma imports.
from __future__ import annotations

from typing import Any

from metrics.evaluate_modules.base import M3Metric
from metrics.m3 import rules as m3_rules
from metrics.m3.headline import headline

# The default rule set and its numbers are metrics/m3/rules.py's: one definition for the scorer and this module.
_RULES = m3_rules.RULE_SETS[m3_rules.DEFAULT_RULES]
_DELTA = f"{_RULES.window_s:g}"  # the window Δ, in seconds

_DESCRIPTION = f"""\
M3-DuplexBench stop latency: for BC (the user backchannels while the model speaks: a short stop latency means the
model wrongly gave up the floor) and BARGE_IN (the user interrupts: shorter is better), the time from the event
start s until the model's utterance running at s ends, cut at the {_DELTA} s window end (censored). Episodes where the
model is not speaking at s leave it undefined and are counted, not averaged. Mean with a Student-t 95% interval
per <lang>_<domain>_<condition> group, and the None&Full representative. Computed from the per-episode
measurements `duplex-eval score` writes (RUN_DIR/measurements.jsonl), under the paper's rules or the authors'
code's (rules="authors") or any single rule parameter.
"""

_KWARGS_DESCRIPTION = f"""
Args:
    measurements: list of JSON strings, the lines of measurements.jsonl (one per episode; every event type may be
        passed, only BC and BARGE_IN enter the stop latency). Failed episodes are counted in n_failed, never
        given a latency.
    rules: "{m3_rules.DEFAULT_RULES}" (default) or "authors".
    any other keyword: one parameter of metrics.m3.rules.Rules replaced (window_s, stop_rule, stop_grace_s,
        extend_window, ...), as `duplex-eval score --param` takes it.
Returns:
    stop_latency: {{group: {{"bc_stop_latency", "barge_in_stop_latency"}}}}, each {{"value" (seconds), "n", "ci"
        (Student-t 95%, None under ci=false or n < 2), "sd", "n_undefined", "n_failed", "n_dropped",
        "n_censored", "interval"}}.
    representative: {{lang_domain: {{"bc_stop_latency", "barge_in_stop_latency"}}}}: the Full value (neither event is
        run without context).
    dropped_events: events the rule set does not score ({{"n", "rule"}}).
    rules: the rule set applied, every parameter.
Examples:
    >>> stop = evaluate.load(metric_dir("stop_latency"))
    >>> stop.compute(measurements=lines)["stop_latency"]["en_chat_user"]["barge_in_stop_latency"]["value"]
    0.096
"""


class StopLatency(M3Metric):
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION

    def _compute(self, measurements: list[str], rules: str = m3_rules.DEFAULT_RULES, **params: Any) -> dict[str, Any]:
        chosen, _ = m3_rules.rules_from({"rules": rules, **params})
        return headline(self.records(measurements), "stop_latency", chosen)
