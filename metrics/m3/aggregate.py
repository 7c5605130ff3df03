"""M3-DuplexBench aggregation (docs/benchmarks/m3.md): verdicts of stored measurements under one rule set -> per
`<lang>_<domain>_<condition>` the nine keys, and the "None&Full" representative per `<lang>_<domain>`.

Each key is {"value", "n", "ci"} plus its counts:
- `shift_tor`, `pause_tor`: a rate with its 95 % Wilson interval (`k` takeovers of `n`).
- `shift_latency`, `pause_latency`, `bc_stop_latency`, `barge_in_stop_latency`: a mean in seconds with a 95 %
  Student-t interval (`sd`); episodes where the rules leave the latency undefined are counted in `n_undefined`
  (no takeover; not speaking at s), censored stop latencies (the model still speaking at the window end, whose
  latency is the window length) in `n_censored`.
- `relevance`, `consistency`, `qa_accuracy`: a mean score in [0, 1] (or 0–2 under `content_scale=0-2`) with a
  Student-t interval, or {"value": None, "computed": False, "reason"} where it was not computed.
The CI is None under `ci=false` (the authors' code reports none).

Failures count against the model (STYLE 10): a failed episode is a SHIFT without a takeover (SHIFT TOR), a PAUSE
taken over (PAUSE TOR), and a content score of 0; a latency cannot be invented for it, so it is counted in
`n_failed` beside the mean. Events the rule set drops (the authors' event filter) are counted in `n_dropped`.
Skipped episodes (Full for adapters without teacher forcing) never reach this module: score.py reports them.

The representative ("None&Full", paper §V-B) of each key is the mean of the None and Full values; where None
has no value (BC / BARGE_IN are not run under None, or no None episode defined it) it is the Full value; with no
Full value it is None (an adapter whose Full cases were skipped has no representative). It has no CI.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from dataset_builder.m3.schema import CONDITIONS
from metrics.m3.rules import Rules, unfit_reason, verdict
from metrics.stats import summarise, t_interval

KEYS = ("shift_tor", "shift_latency", "pause_tor", "pause_latency", "bc_stop_latency", "barge_in_stop_latency",
        "relevance", "consistency", "qa_accuracy")
TOR = {"shift_tor": "SHIFT", "pause_tor": "PAUSE"}
LATENCY = {"shift_latency": "SHIFT", "pause_latency": "PAUSE", "bc_stop_latency": "BC",
           "barge_in_stop_latency": "BARGE_IN"}
FAILED_TAKES_OVER = {"SHIFT": False, "PAUSE": True}  # the outcome that counts against the model
REPRESENTATIVE_FROM = ("none", "full")


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _ci(block: dict[str, Any], rules: Rules) -> dict[str, Any]:
    if not rules.ci:
        block["ci"] = None
    elif block.get("ci") is not None:
        block["ci"] = [round(block["ci"][0], 4), round(block["ci"][1], 4)]
    return block


def outcomes(measurements: list[dict[str, Any]], rules: Rules) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(measurement, verdict) of every record; a failed one gets {"failed": True} (or is dropped by the rules
    when its gold shows the event does not fit them)."""
    out = []
    for m in measurements:
        if m.get("failed"):
            dropped = unfit_reason(m) if rules.drop_unfit_events and "event_start_s" in m else None
            out.append((m, {"failed": True, "scored": not dropped, "dropped": dropped}))
        else:
            out.append((m, verdict(m, rules)))
    return out


def _tor(rows: list[tuple[dict[str, Any], dict[str, Any]]], event: str, rules: Rules) -> dict[str, Any]:
    mine = [(m, v) for m, v in rows if m["event_type"] == event]
    scored = [(m, v) for m, v in mine if v["scored"]]
    took = [FAILED_TAKES_OVER[event] if v.get("failed") else bool(v["takeover"]) for _, v in scored]
    block = summarise(took)
    block |= {"n_failed": sum(1 for _, v in scored if v.get("failed")),
              "n_dropped": len(mine) - len(scored), "interval": "wilson-95"}
    return _ci(block, rules)


def _latency(rows: list[tuple[dict[str, Any], dict[str, Any]]], event: str, rules: Rules) -> dict[str, Any]:
    key = "stop_latency_s" if event in ("BC", "BARGE_IN") else "latency_s"
    mine = [(m, v) for m, v in rows if m["event_type"] == event]
    scored = [v for _, v in mine if v["scored"]]
    ok = [v for v in scored if not v.get("failed")]
    values = [float(v[key]) for v in ok if v.get(key) is not None]
    block = t_interval(values)
    block = {"value": _round(block["value"]), "n": block["n"], "ci": block["ci"], "sd": _round(block["sd"]),
             "n_undefined": sum(1 for v in ok if v.get(key) is None),
             "n_failed": len(scored) - len(ok), "n_dropped": len(mine) - len(scored),
             "interval": "student-t-95"}
    if event in ("BC", "BARGE_IN"):
        block["n_censored"] = sum(1 for v in ok if v.get("censored"))
    if event == "PAUSE":
        block["n_bc_filter_not_applied"] = sum(1 for v in ok if str(v.get("bc_filter", "")).startswith("not"))
    return _ci(block, rules)


def _content(rows: list[tuple[dict[str, Any], dict[str, Any]]], key: str, rules: Rules) -> dict[str, Any]:
    shifts = [(m, v) for m, v in rows if m["event_type"] == "SHIFT" and v["scored"]]
    if key == "qa_accuracy":
        shifts = [(m, v) for m, v in shifts if m.get("gold_answer")]
    judged = [((m.get("content") or {}).get(key) or {}) for m, v in shifts if not v.get("failed")]
    done = [j for j in judged if j.get("status") in ("ok", "unparseable")]
    if not done:
        reasons = sorted({str(j.get("reason")) for j in judged if j.get("reason")})
        if key == "qa_accuracy" and not shifts:
            reasons = ["no SHIFT with a gold answer (chat has none)"]
        return {"value": None, "n": 0, "ci": None, "computed": False,
                "reason": "; ".join(reasons) or "not computed (no scored SHIFT response)"}
    scale = 2.0 if rules.content_scale == "0-2" else 1.0
    n_failed = sum(1 for _, v in shifts if v.get("failed"))
    scores = [float(j["score"]) / 2.0 * scale if j["status"] == "ok" else 0.0 for j in done] + [0.0] * n_failed
    block = t_interval(scores)
    if block["ci"] is not None:
        block["ci"] = [max(0.0, block["ci"][0]), min(scale, block["ci"][1])]
    judges = sorted({str(j.get("judge")) for j in done if j.get("judge")})
    return _ci({"value": _round(block["value"]), "n": block["n"], "ci": block["ci"], "sd": _round(block["sd"]),
                "computed": True, "judge": ", ".join(judges), "heuristic": any(j.get("heuristic") for j in done),
                "n_unparseable": sum(1 for j in done if j["status"] == "unparseable"),
                "n_not_computed": len(judged) - len(done), "n_failed": n_failed,
                "n_no_response": sum(1 for m, v in shifts
                                     if not v.get("failed") and (m.get("response") or {}).get("onset_s") is None),
                "scale": rules.content_scale, "interval": "student-t-95"}, rules)


def group_scores(rows: list[tuple[dict[str, Any], dict[str, Any]]], rules: Rules) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in KEYS:
        if key in TOR:
            out[key] = _tor(rows, TOR[key], rules)
        elif key in LATENCY:
            out[key] = _latency(rows, LATENCY[key], rules)
        else:
            out[key] = _content(rows, key, rules)
    return out


def representative(scores: dict[str, Any]) -> dict[str, Any]:
    """"None&Full" per `<lang>_<domain>` from the per-condition blocks (see the module docstring)."""
    out: dict[str, Any] = {}
    pairs = sorted({g.rsplit("_", 1)[0] for g in scores})
    for ld in pairs:
        none, full = scores.get(f"{ld}_none"), scores.get(f"{ld}_full")
        if none is None and full is None:
            continue
        block = {}
        for key in KEYS:
            vn = none[key]["value"] if none else None
            vf = full[key]["value"] if full else None
            if vf is None:
                block[key] = {"value": None, "n": 0, "ci": None, "from": [],
                              "reason": "no Full value (Full not run, skipped, or undefined)"}
            elif vn is None:
                block[key] = {"value": vf, "n": full[key]["n"], "ci": None, "from": ["full"]}
            else:
                block[key] = {"value": _round((vn + vf) / 2.0), "n": none[key]["n"] + full[key]["n"], "ci": None,
                              "from": ["none", "full"]}
        out[ld] = block
    return out


def aggregate(measurements: list[dict[str, Any]], rules: Rules) -> dict[str, Any]:
    """scores.json's `scores` (per group), `representative` (per language and domain) and `dropped` blocks."""
    rows = outcomes(measurements, rules)
    by_group: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for m, v in rows:
        by_group[m["group"]].append((m, v))
    order = {c: i for i, c in enumerate(CONDITIONS)}
    groups = sorted(by_group, key=lambda g: (g.rsplit("_", 1)[0], order.get(g.rsplit("_", 1)[1], 99)))
    scores = {g: group_scores(by_group[g], rules) for g in groups}
    dropped = sum(1 for _, v in rows if not v["scored"])
    return {"scores": scores, "representative": representative(scores),
            "dropped_events": {"n": dropped, "rule": "drop_unfit_events" if dropped else None}}

