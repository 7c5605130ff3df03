"""M3-DuplexBench takeover rate (TOR) as an `evaluate` metric: stored episode measurements in, SHIFT TOR and
PAUSE TOR per language, domain and context condition out, with the "None&Full" representative.

    import evaluate
    from metrics import metric_dir
    tor = evaluate.load(metric_dir("takeover_rate"))   # from any working directory, offline
    result = tor.compute(measurements=open("RUN_DIR/measurements.jsonl").read().splitlines())
    authors = tor.compute(measurements=lines, rules="authors")   # the M3 authors' code's rules

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
_OVERLAP = f"{_RULES.max_overlap_s:g}"  # how long before s a takeover may begin, in seconds

_DESCRIPTION = f"""\
M3-DuplexBench takeover rate (TOR): the share of SHIFT events (the user hands the turn over: higher is better)
and of PAUSE events (the user only pauses: lower is better) in which the model takes the floor, i.e. begins an
utterance at or after s - {_OVERLAP} s that reaches into the {_DELTA} s window after the event start s. Per
<lang>_<domain>_<condition> group, with the None&Full representative per language and domain. Computed from the
per-episode measurements `duplex-eval score` writes (RUN_DIR/measurements.jsonl), under the paper's rules or the
authors' code's (rules="authors") or any single rule parameter, without re-running the model or the VAD.
"""

_KWARGS_DESCRIPTION = f"""
Args:
    measurements: list of JSON strings, the lines of measurements.jsonl (one per episode; every event type may be
        passed, only SHIFT and PAUSE enter TOR). A failed episode counts against the model: a SHIFT without a
        takeover, a PAUSE taken over.
    rules: "{m3_rules.DEFAULT_RULES}" (default) or "authors".
    any other keyword: one parameter of metrics.m3.rules.Rules replaced (window_s, max_overlap_s, ipu_gap_s,
        shift_pick, pause_takeover, ignore_backchannels, ...), as `duplex-eval score --param` takes it.
Returns:
    takeover_rate: {{group: {{"shift_tor", "pause_tor"}}}}, each {{"value", "n", "k", "ci" (Wilson 95%, None under
        ci=false), "n_failed", "n_dropped", "interval"}}.
    representative: {{lang_domain: {{"shift_tor", "pause_tor"}}}}: mean of the None and Full values.
    dropped_events: events the rule set does not score ({{"n", "rule"}}).
    rules: the rule set applied, every parameter.
Examples:
    >>> tor = evaluate.load(metric_dir("takeover_rate"))
    >>> tor.compute(measurements=lines)["takeover_rate"]["en_chat_user"]["shift_tor"]["value"]
    1.0
"""


class TakeoverRate(M3Metric):
    DESCRIPTION = _DESCRIPTION
    KWARGS_DESCRIPTION = _KWARGS_DESCRIPTION

    def _compute(self, measurements: list[str], rules: str = m3_rules.DEFAULT_RULES, **params: Any) -> dict[str, Any]:
        chosen, _ = m3_rules.rules_from({"rules": rules, **params})
        return headline(self.records(measurements), "takeover_rate", chosen)
