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

import json
from typing import Any

import datasets
import evaluate

from metrics.m3.headline import headline
from metrics.m3.rules import rules_from

_CITATION = """\
@misc{m3_duplexbench,
  title = {M3-DuplexBench: A Multi-Turn, Multilingual, Multidomain Benchmark for Full-Duplex Spoken Dialogue Models},
  eprint = {2607.29125},
  archivePrefix = {arXiv},
  url = {https://arxiv.org/abs/2607.29125}
}
"""

_DESCRIPTION = """\
M3-DuplexBench takeover rate (TOR): the share of SHIFT events (the user hands the turn over: higher is better)
and of PAUSE events (the user only pauses: lower is better) in which the model takes the floor, i.e. begins an
utterance at or after s - 0.4 s that reaches into the 10 s window after the event start s. Per
<lang>_<domain>_<condition> group, with the None&Full representative per language and domain. Computed from the
per-episode measurements `duplex-eval score` writes (RUN_DIR/measurements.jsonl), under the paper's rules or the
authors' code's (rules="authors") or any single rule parameter, without re-running the model or the VAD.
"""

_KWARGS_DESCRIPTION = """
Args:
    measurements: list of JSON strings, the lines of measurements.jsonl (one per episode; every event type may be
        passed, only SHIFT and PAUSE enter TOR). A failed episode counts against the model: a SHIFT without a
        takeover, a PAUSE taken over.
    rules: "paper" (default) or "authors".
    any other keyword: one parameter of metrics.m3.rules.Rules replaced (window_s, max_overlap_s, ipu_gap_s,
        shift_pick, pause_takeover, ignore_backchannels, ...), as `duplex-eval score --param` takes it.
Returns:
    takeover_rate: {group: {"shift_tor", "pause_tor"}}, each {"value", "n", "k", "ci" (Wilson 95%, None under
        ci=false), "n_failed", "n_dropped", "interval"}.
    representative: {lang_domain: {"shift_tor", "pause_tor"}}: mean of the None and Full values.
    dropped_events: events the rule set does not score ({"n", "rule"}).
    rules: the rule set applied, every parameter.
Examples:
    >>> tor = evaluate.load(metric_dir("takeover_rate"))
    >>> tor.compute(measurements=lines)["takeover_rate"]["en_chat_user"]["shift_tor"]["value"]
    1.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class TakeoverRate(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # One JSON string per episode: the records are nested (VAD spans, timings per rule set, content).
            features=datasets.Features({"measurements": datasets.Value("string")}),
        )

    def _compute(self, measurements: list[str], rules: str = "paper", **params: Any) -> dict[str, Any]:
        chosen, _ = rules_from({"rules": rules, **params})
        return headline([json.loads(m) for m in measurements], "takeover_rate", chosen)
