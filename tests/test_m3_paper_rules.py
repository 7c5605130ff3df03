"""Our M3 TOR / latency / stop latency agree to the millisecond with an independent
re-implementation of the paper's timing rules, written here from the paper's text and not from metrics/m3.

The paper (papers/m3-duplexbench.txt §III-A, §IV-A, §IV-B1; docs/benchmarks/m3.md), as implemented below:
- "TURN and BC are inter-pausal units (IPUs) separated by silences longer than 0.5 seconds": the model's speech
  is cut into utterances only at silences > 0.5 s.
- "W = [s, s + Δ]", Δ = 10 s. "TOR is the fraction of samples in which the model takes the turn within the
  evaluation window. Accounting for overlap, a takeover is triggered if system utterance begins after 0.4
  seconds prior to the evaluation window": a model utterance that begins at or after s − 0.4 s and is (partly)
  inside W. "Latency is the time from the event onset to the onset of the takeover utterance": the first such
  utterance's onset − s.
- "Stop latency is the time from the event onset to the point where the model stops speaking": the model is
  speaking at s; the moment its utterance ends (the window's end at the latest) − s.

The re-implementation works on a 1 ms boolean timeline (speech / no speech), not on span lists, so it shares no
algorithm with the scorer: silences of at most 500 ms between speech are filled in, an utterance is a run of
speech, "speaking at s" is the sample at s. It is applied to a seeded set of varied episodes (every event type,
onsets and gaps placed exactly on and beside each boundary: s − 0.4 s, 0.5 s gaps, utterances ending at s or at
the window end), first to the span lists through `metrics.m3.rules`, then through `score_run` on WAV files.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR
from metrics.m3.rules import RULE_SETS, verdict
from metrics.m3.score import score_run
from tests import m3_handmade as H
from tests.handmade import DeafASR

WINDOW_MS = 10_000
OVERLAP_MS = 400
IPU_SILENCE_MS = 500
N_EPISODES = 400


# --- the paper's rules, from its text, on a millisecond timeline -----------------------------------------------


def speech_timeline(spans_ms: list[tuple[int, int]], n_ms: int) -> np.ndarray:
    speech = np.zeros(n_ms, dtype=bool)
    for a, b in spans_ms:
        speech[a:b] = True
    # An IPU only ends at a silence longer than 0.5 s: fill every silence of at most 500 ms between speech.
    idx = np.flatnonzero(speech)
    silent = np.diff(idx) - 1  # silent milliseconds after each speech sample
    for k in np.flatnonzero((silent >= 1) & (silent <= IPU_SILENCE_MS)):
        speech[idx[k] + 1:idx[k + 1]] = True
    return speech


def utterances(speech: np.ndarray) -> list[tuple[int, int]]:
    """Runs of speech as (first ms, first silent ms after it)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], speech.astype(np.int8), [0]])))
    return [(int(a), int(b)) for a, b in zip(edges[0::2], edges[1::2], strict=True)]


def paper_takeover(speech: np.ndarray, s: int) -> int | None:
    """Latency (ms) of the takeover, or None."""
    for start, end in utterances(speech):  # in time order: the first one found is the takeover
        if start >= s - OVERLAP_MS and start < s + WINDOW_MS and end > s:
            return start - s
    return None


def paper_stop(speech: np.ndarray, s: int) -> int | None:
    """Stop latency (ms), or None when the model is not speaking at s."""
    if s >= speech.size or not speech[s]:
        return None
    i = s
    while i < min(speech.size, s + WINDOW_MS) and speech[i]:
        i += 1
    return i - s


def paper_episode(ep: dict[str, Any]) -> dict[str, Any]:
    speech = speech_timeline(ep["spans_ms"], ep["n_ms"])
    if ep["event_type"] in ("SHIFT", "PAUSE"):
        lat = paper_takeover(speech, ep["s_ms"])
        return {"takeover": lat is not None, "latency_ms": lat}
    return {"stop_ms": paper_stop(speech, ep["s_ms"])}


# --- varied episodes --------------------------------------------------------------------------------------------


def episodes(seed: int = 8, n: int = N_EPISODES) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = ("SHIFT", "PAUSE", "BC", "BARGE_IN")[i % 4]
        s = rng.randint(3000, 8000)
        n_ms = s + WINDOW_MS
        t = {"SHIFT": s + rng.randint(-400, 1200), "PAUSE": s + rng.randint(600, 3000),
             "BC": s + rng.randint(200, 800), "BARGE_IN": s + rng.randint(900, 4000)}[kind]
        b = s if kind in ("BC", "BARGE_IN") else s - rng.randint(900, 3000)
        # onsets on and beside the boundaries, and anywhere
        marks = [s - 401, s - 400, s - 399, s, s + 1, s - 2000, s + 9999, s + 9000, t]
        spans: list[tuple[int, int]] = []
        for _ in range(rng.randint(0, 5)):
            a = rng.choice(marks) if rng.random() < 0.5 else rng.randint(0, n_ms - 1)
            how = rng.random()
            if how < 0.2:
                end = s  # ends exactly at s
            elif how < 0.3:
                end = n_ms  # runs to the window end
            else:
                end = a + rng.randint(40, 3000)
            a, end = max(0, a), min(n_ms, end)
            if end > a:
                spans.append((a, end))
                if rng.random() < 0.4:  # a second span after a gap on or beside 0.5 s
                    gap = rng.choice([499, 500, 501, 300, 800])
                    a2 = end + gap
                    e2 = min(n_ms, a2 + rng.randint(40, 2000))
                    if e2 > a2:
                        spans.append((a2, e2))
        out.append({"i": i, "event_type": kind, "s_ms": s, "t_ms": t, "b_ms": b, "n_ms": n_ms,
                    "spans_ms": sorted(spans)})
    return out


def union(spans_ms: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """What a VAD hands over: disjoint runs (overlapping or touching spans joined)."""
    out: list[list[int]] = []
    for a, b in sorted(spans_ms):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def measurement(ep: dict[str, Any]) -> dict[str, Any]:
    return {"case_id": f"ep{ep['i']}", "event_type": ep["event_type"], "prompt_start_s": ep["b_ms"] / 1000,
            "event_start_s": ep["s_ms"] / 1000, "event_end_s": ep["t_ms"] / 1000, "duration_s": ep["n_ms"] / 1000,
            "vad_spans": [[a / 1000, b / 1000] for a, b in union(ep["spans_ms"])]}


def ours(ep: dict[str, Any]) -> dict[str, Any]:
    v = verdict(measurement(ep), RULE_SETS["paper"])
    if ep["event_type"] in ("SHIFT", "PAUSE"):
        lat = v["latency_s"]
        return {"takeover": v["takeover"], "latency_ms": None if lat is None else int(round(lat * 1000))}
    stop = v["stop_latency_s"]
    return {"stop_ms": None if stop is None else int(round(stop * 1000))}


def test_generated_episodes_cover_every_boundary() -> None:
    eps = episodes()
    ref = [paper_episode(e) for e in eps]
    kinds = {e["event_type"] for e in eps}
    assert kinds == {"SHIFT", "PAUSE", "BC", "BARGE_IN"}
    took = [r["takeover"] for e, r in zip(eps, ref, strict=True) if "takeover" in r]
    assert 0.2 < sum(took) / len(took) < 0.8  # both outcomes, often
    lats = [r["latency_ms"] for r in ref if r.get("latency_ms") is not None]
    assert -400 in lats and min(lats) >= -400  # an onset exactly at s - 0.4 s is a takeover, 1 ms earlier is not
    stops = [r["stop_ms"] for r in ref if "stop_ms" in r]
    assert None in stops and WINDOW_MS in stops and any(x is not None and x < WINDOW_MS for x in stops)
    gaps = {b2 - a2 for e in eps for (_, a2), (b2, _) in zip(e["spans_ms"], e["spans_ms"][1:], strict=False)}
    assert {499, 500, 501} <= gaps


def test_paper_rules_agree_to_the_millisecond_on_span_lists() -> None:
    eps = episodes()
    disagree = [(e["i"], e["event_type"], paper_episode(e), ours(e)) for e in eps if paper_episode(e) != ours(e)]
    assert not disagree, f"{len(disagree)} of {len(eps)} episodes differ, e.g. {disagree[:3]}"


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], dict[str, Any], Path]:
    """A run folder of the first 80 generated episodes as WAV + rec.json, scored with the planted VAD."""
    out = tmp_path_factory.mktemp("m3-agree")
    eps = episodes()[:80]
    for e in eps:
        g = H.gold(e["event_type"], s=e["s_ms"] / 1000, t=e["t_ms"] / 1000, b=e["b_ms"] / 1000, event_n=e["i"] % 100,
                   dialogue=e["i"] // 100 + 1)
        cid = f"{g['event_id']}-{g['condition']}"
        H.write(out, cid, g, H.bursts(e["n_ms"] / 1000, [(a / 1000, b / 1000) for a, b in union(e["spans_ms"])]))
        e["case_id"] = cid
    return eps, score_run(out, asr=DeafASR(), vad_factory=H.planted), out


def test_paper_rules_agree_to_the_millisecond_through_score_run(scored: Any) -> None:
    """Through the whole path (WAV, VAD spans, measurements.jsonl, aggregation): TOR and the mean latencies equal
    the re-implementation's over the same episodes, to the millisecond."""
    eps, result, _ = scored
    ref = {e["event_type"]: [] for e in eps}
    for e in eps:
        ref[e["event_type"]].append(paper_episode(e))
    block = result["scores"]["en_task_user"]
    for kind, tor_key, lat_key in (("SHIFT", "shift_tor", "shift_latency"), ("PAUSE", "pause_tor", "pause_latency")):
        takes = [r["takeover"] for r in ref[kind]]
        lats = [r["latency_ms"] for r in ref[kind] if r["latency_ms"] is not None]
        assert (block[tor_key]["k"], block[tor_key]["n"]) == (sum(takes), len(takes))
        assert block[lat_key]["n"] == len(lats)
        assert round(block[lat_key]["value"] * 1000) == round(sum(lats) / len(lats))
    for kind, key in (("BC", "bc_stop_latency"), ("BARGE_IN", "barge_in_stop_latency")):
        stops = [r["stop_ms"] for r in ref[kind] if r["stop_ms"] is not None]
        assert block[key]["n"] == len(stops) and block[key]["n_undefined"] == len(ref[kind]) - len(stops)
        assert round(block[key]["value"] * 1000) == round(sum(stops) / len(stops))


def test_each_stored_measurement_agrees(scored: Any) -> None:
    """Per episode, from measurements.jsonl (what `--reuse` and the report read)."""
    import json

    eps, _, out = scored
    stored = {m["case_id"]: m for m in map(json.loads, (out / "measurements.jsonl").read_text().splitlines())}
    for e in eps:
        got = ours({**e, "spans_ms": [(int(round(a * 1000)), int(round(b * 1000)))
                                      for a, b in stored[e["case_id"]]["vad_spans"]]})
        assert got == paper_episode(e), e["case_id"]


def test_planted_vad_reads_back_exact_spans() -> None:
    """The planted recordings hold speech exactly where the spans say (so the path test above tests rules, not a
    VAD's resolution)."""
    x = H.bursts(3.0, [(0.5, 0.75), (1.001, 2.999)])
    assert [(s.start_s, s.end_s) for s in H.PlantedVAD().spans(x, SESSION_SR)] == [(0.5, 0.75), (1.001, 2.999)]
