"""M3-DuplexBench's report pieces: its leaderboard (the paper's representative row) and the per-condition
breakdown, and the detail behind an event's verdict."""

from __future__ import annotations

from typing import Any

from eval.report_site.boards import run_cell
from eval.report_site.collect import RunView
from eval.report_site.model import Cell, Table, dash, mean, name


def boards(runs: list[RunView]) -> list[Table]:
    from dataset_builder.m3.schema import CONDITIONS
    from metrics.m3.aggregate import KEYS
    from metrics.m3.tables import HEADERS, REPRESENTATIVE, lang_domains

    heads = [HEADERS[k] for k in KEYS]
    board = Table("m3-leaderboard", f"M3-DuplexBench leaderboard ({REPRESENTATIVE})",
                  ["run", "language", "domain", *heads], n_keys=3,
                  note="The paper's representative row: the mean of the None and Full values (Full alone where "
                       "None has none; none without Full). ↑ higher is better, ↓ lower. No interval (paper §V-B); "
                       "the per-condition table below has them.")
    cond = Table("m3-condition", "M3-DuplexBench by language, domain and condition",
                 ["run", "language", "domain", "condition", *heads, "skipped"], n_keys=4,
                 note="Rates: value [Wilson 95% CI]; means (latencies in s, content scores): value ± Student-t 95% "
                      "CI; n per cell; hover a cell for undefined, censored, failed and dropped counts.")
    for run in runs:
        r = run.result
        skipped = (r.get("skipped") or {}).get("by_group", {})
        for ld in lang_domains(r):
            lang, domain = ld.split("_", 1)
            rep = (r.get("representative") or {}).get(ld)
            if rep:
                board.add([run_cell(run), name(lang), name(domain),
                           *[Cell(f"{rep[k]['value']:.3f}", float(rep[k]["value"]),
                                  title="from " + "&".join(rep[k].get("from", [])))
                             if rep[k].get("value") is not None else dash(rep[k].get("reason", "no value"))
                             for k in KEYS]])
            for c in CONDITIONS:
                group = f"{ld}_{c}"
                block = (r.get("scores") or {}).get(group)
                if block is None and not skipped.get(group):
                    continue
                n_skip = int(skipped.get(group, 0))
                cond.add([run_cell(run), name(lang), name(domain), name(c),
                          *[mean(block.get(k)) if block else dash("all skipped") for k in KEYS],
                          Cell(str(n_skip), float(n_skip))])
    return [board, cond]


def window_detail(m: dict[str, Any], result: dict[str, Any]) -> str:
    """The event's verdict under the rule set the scores were computed with (the paper's by default), led by why
    its window is marked failed."""
    from metrics.m3.rules import RULE_SETS, Rules, verdict
    from metrics.m3.tables import plot_windows

    given = dict(result.get("rules") or {})
    v = verdict(m, Rules(**given) if given else RULE_SETS["paper"])
    failed = [w for w in plot_windows([m], result) if not w[2]]
    keys = ("takeover", "latency_s", "stop_latency_s", "censored", *(() if failed else ("why",)), "dropped")
    numbers = ", ".join(f"{k} {v[k]}" for k in keys if v.get(k) is not None)
    return f"{_why(m, v)}; {numbers}" if failed else numbers


def _why(m: dict[str, Any], v: dict[str, Any]) -> str:
    """Why an event's window is marked failed (the plot label of metrics/m3/tables.py), in words."""
    kind, stop = m["event_type"], v.get("stop_latency_s")
    length = float(m["event_end_s"]) - float(m["event_start_s"])
    if kind == "SHIFT":
        return "did not take the turn in the window"
    if kind == "PAUSE":
        return f"took the turn {v['latency_s']:.2f} s into the user's pause"
    if stop is None:
        return ("not speaking when the user's backchannel began (nothing to talk through)" if kind == "BC"
                else "not speaking when the user barged in (nothing to yield)")
    if kind == "BC":
        return f"stopped {stop:.2f} s into the user's {length:.2f} s backchannel (it should talk through it)"
    return ("never stopped before the window's end" if v.get("censored") else
            f"kept speaking {stop:.2f} s, past the end of the user's {length:.2f} s barge-in")
