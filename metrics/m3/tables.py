"""M3-DuplexBench's text tables (paper Tables IV–V): per run and per language and domain, the conditions as rows
and the nine metrics as columns (value with its 95 % CI: ± for means, [lo,hi] for rates; n), the "None&Full"
representative row, and the skipped and failed episodes; plus the per-episode plot windows for the report."""

from __future__ import annotations

from typing import Any

from dataset_builder.m3.schema import CONDITIONS
from metrics.m3.aggregate import KEYS
from metrics.m3.rules import RULE_SETS, Rules, verdict
from metrics.tables import cases_cell, failed_cell

HEADERS = {"shift_tor": "SHIFT TOR↑", "shift_latency": "SHIFT lat↓", "pause_tor": "PAUSE TOR↓",
           "pause_latency": "PAUSE lat↑", "bc_stop_latency": "BC stop↑", "barge_in_stop_latency": "BARGE stop↓",
           "relevance": "relevance", "consistency": "consistency", "qa_accuracy": "QA acc"}
REPRESENTATIVE = "None&Full"


def metric_cell(block: dict[str, Any] | None) -> str:
    """`0.675±0.025 n=40` for a mean with its t interval, `0.950 [0.83,0.99] n=40` for a rate with its Wilson
    interval (never a ± that would reach below 0 or above 1), `n/a` without a value, `-` where not computed."""
    if block is None:
        return "-"
    if block.get("computed") is False:
        return "-"
    if block["value"] is None:
        return f"n/a n={block['n']}"
    ci = block.get("ci")
    if not ci:
        return f"{block['value']:.3f} n={block['n']}"
    below, above = block["value"] - ci[0], ci[1] - block["value"]
    if abs(below - above) < 5e-4:  # a t interval: the paper's "mean ± 95 % CI"
        return f"{block['value']:.3f}±{above:.3f} n={block['n']}"
    return f"{block['value']:.3f} [{ci[0]:.2f},{ci[1]:.2f}] n={block['n']}"  # Wilson: not symmetric


def _grid(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def lang_domains(result: dict[str, Any]) -> list[str]:
    return sorted({g.rsplit("_", 1)[0] for g in result.get("scores", {})}
                  | {g.rsplit("_", 1)[0] for g in result.get("skipped", {}).get("by_group", {}) if g != "unknown"})


def table(result: dict[str, Any], ld: str) -> str:
    """One language and domain of one run."""
    rows = [["context", *[HEADERS[k] for k in KEYS], "skipped"]]
    skipped = result.get("skipped", {}).get("by_group", {})
    for cond in CONDITIONS:
        group = f"{ld}_{cond}"
        block = result.get("scores", {}).get(group)
        if block is None and not skipped.get(group):
            continue
        rows.append([cond, *[metric_cell(block.get(k)) if block else "-" for k in KEYS], str(skipped.get(group, 0))])
    rep = result.get("representative", {}).get(ld)
    if rep:
        rows.append([REPRESENTATIVE, *[f"{rep[k]['value']:.3f}" if rep[k]["value"] is not None else "n/a"
                                       for k in KEYS], ""])
    return _grid(rows)


def notes(result: dict[str, Any]) -> str:
    rules = result.get("rules", {})
    lines = [f"rules: {rules.get('name', 'paper')}; cases: {cases_cell(result)}; failed episodes: "
             f"{failed_cell(result)}; skipped episodes: {result.get('skipped', {}).get('n', 0)}"]
    for reason, n in result.get("skipped", {}).get("reasons", {}).items():
        lines.append(f"skipped ({n}): {reason}")
    dropped = result.get("dropped_events", {}).get("n")
    if dropped:
        lines.append(f"dropped by the rule set's event filter: {dropped}")
    lines += [f"content: {n}" for n in result.get("content_notes", [])]
    return "\n".join(lines)


def tables(results: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(title, text) sections: per run, per language and domain."""
    out = []
    for name, result in results.items():
        for ld in lang_domains(result):
            lang, domain = ld.split("_", 1)
            out.append((f"{name}: {lang} {domain}", table(result, ld)))
        out.append((f"{name}: notes", notes(result)))
    return out


def _ok(m: dict[str, Any], v: dict[str, Any]) -> bool:
    """A plot label only (the scores have no pass/fail): SHIFT taken, PAUSE not taken, BC talked through (the
    model still speaking when the user's backchannel ended), BARGE_IN yielded before the user's turn ended."""
    kind = m["event_type"]
    if kind == "SHIFT":
        return bool(v.get("takeover"))
    if kind == "PAUSE":
        return not v.get("takeover")
    stop = v.get("stop_latency_s")
    length = float(m["event_end_s"]) - float(m["event_start_s"])
    if kind == "BC":
        return stop is not None and stop > length
    return stop is not None and stop < length


def plot_windows(measurements: list[dict[str, Any]], result: dict[str, Any]
                 ) -> list[tuple[float, float, bool, list[list[float]]]]:
    """Each episode's window W as (s, window end, plot label under the result's rules, the model's utterances
    overlapping it)."""
    given = dict(result.get("rules") or {})
    rules = Rules(**given) if given else RULE_SETS["paper"]
    out = []
    for m in measurements:
        if m.get("failed"):
            continue
        v = verdict(m, rules)
        if not v["scored"]:
            continue
        a, b = v["window"]
        segs = [g for g in m["timing"].get(rules.name, m["timing"]["paper"])["segments"] if g[1] > a and g[0] < b]
        out.append((a, b, _ok(m, v), segs))
    return out
