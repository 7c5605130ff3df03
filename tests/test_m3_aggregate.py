"""M3 aggregation on hand-made measurement records: the nine keys per group with their intervals, failures
counted against the model, the authors' event filter, content normalisation, and the None&Full representative."""

from __future__ import annotations

import math
from typing import Any

import pytest

from dataset_builder.errors import UsageError
from metrics.m3.aggregate import KEYS, aggregate
from metrics.m3.rules import RULE_SETS, Rules, rules_from
from metrics.stats import t_interval

PAPER, AUTHORS = RULE_SETS["paper"], RULE_SETS["authors"]


def meas(kind: str, spans: list[list[float]], *, cond: str = "user", s: float = 5.0, t: float | None = None,
         b: float | None = None, lang: str = "en", domain: str = "task", n: int = 1, failed: bool = False,
         **extra: Any) -> dict[str, Any]:
    t = t if t is not None else {"SHIFT": 5.3, "PAUSE": 6.5, "BC": 5.5, "BARGE_IN": 7.0}[kind]
    b = b if b is not None else (s if kind in ("BC", "BARGE_IN") else s - 3.0)
    m = {"case_id": f"{lang}-{domain}-d001-e{n:02d}-{cond}", "event_type": kind, "language": lang, "domain": domain,
         "condition": cond, "group": f"{lang}_{domain}_{cond}", "label": kind, "prompt_start_s": b,
         "event_start_s": s, "event_end_s": t, "window_end_s": s + 10.0, "duration_s": s + 10.0}
    if failed:
        return m | {"failed": True, "reason": "step raised"} | extra
    return m | {"vad_spans": spans} | extra


def test_t_interval_known_values() -> None:
    """Student t, 4 degrees of freedom: t(0.975) = 2.7764451; mean 3, sd sqrt(2.5)."""
    block = t_interval([1, 2, 3, 4, 5])
    half = 2.7764451 * math.sqrt(2.5) / math.sqrt(5)
    assert block["value"] == 3 and block["n"] == 5 and block["sd"] == pytest.approx(math.sqrt(2.5))
    assert block["ci"] == pytest.approx([3 - half, 3 + half], abs=1e-6)
    assert t_interval([]) == {"value": None, "n": 0, "sd": None, "ci": None}
    assert t_interval([2.0]) == {"value": 2.0, "n": 1, "sd": None, "ci": None}


def test_nine_keys_and_known_values() -> None:
    ms = [meas("SHIFT", [[5.3, 7.0]], n=1), meas("SHIFT", [[5.8, 7.0]], n=2), meas("SHIFT", [], n=3),
          meas("PAUSE", [[6.0, 6.2]], n=4), meas("PAUSE", [], n=5),
          meas("BC", [[2.0, 8.0]], n=6), meas("BC", [], n=7), meas("BARGE_IN", [[2.0, 5.25]], n=8)]
    res = aggregate(ms, PAPER)
    g = res["scores"]["en_task_user"]
    assert list(g) == list(KEYS)
    assert (g["shift_tor"]["k"], g["shift_tor"]["n"]) == (2, 3)
    assert g["shift_latency"]["value"] == pytest.approx(0.55) and g["shift_latency"]["n"] == 2
    assert g["shift_latency"]["n_undefined"] == 1 and g["shift_latency"]["ci"] is not None
    assert (g["pause_tor"]["k"], g["pause_tor"]["n"]) == (1, 2)
    assert g["pause_latency"]["value"] == pytest.approx(1.0) and g["pause_latency"]["n"] == 1
    assert g["bc_stop_latency"]["value"] == pytest.approx(3.0)
    assert g["bc_stop_latency"]["n_undefined"] == 1
    assert g["barge_in_stop_latency"]["value"] == pytest.approx(0.25)
    for key in ("relevance", "consistency", "qa_accuracy"):
        assert g[key]["value"] is None and g[key]["computed"] is False


def test_failures_count_against_the_model() -> None:
    """A failed SHIFT is a miss, a failed PAUSE a takeover; latencies cannot be invented, so they are counted."""
    ok = [meas("SHIFT", [[5.3, 7.0]], n=1), meas("PAUSE", [], n=2)]
    crashed = ok + [meas("SHIFT", [], n=3, failed=True), meas("PAUSE", [], n=4, failed=True)]
    a, b = aggregate(ok, PAPER)["scores"]["en_task_user"], aggregate(crashed, PAPER)["scores"]["en_task_user"]
    assert (a["shift_tor"]["k"], a["shift_tor"]["n"]) == (1, 1) and (b["shift_tor"]["k"], b["shift_tor"]["n"]) == (1, 2)
    assert (a["pause_tor"]["k"], a["pause_tor"]["n"]) == (0, 1) and (b["pause_tor"]["k"], b["pause_tor"]["n"]) == (1, 2)
    assert b["shift_latency"]["n"] == 1 and b["shift_latency"]["n_failed"] == 1 and b["shift_tor"]["n_failed"] == 1


def test_rule_sets_differ_where_the_spec_says() -> None:
    # (8) a gap of exactly 0.5 s joins for the paper, splits for the code: one utterance from s - 0.3 s, or a
    # blip ending before s (no candidate) and a takeover at s + 0.4 s
    shift = meas("SHIFT", [[4.7, 4.9], [5.4, 6.0]])
    assert aggregate([shift], PAPER)["scores"]["en_task_user"]["shift_latency"]["value"] == pytest.approx(-0.3)
    assert aggregate([shift], AUTHORS)["scores"]["en_task_user"]["shift_latency"]["value"] == pytest.approx(0.4)
    # (1) earliest vs closest can only differ under a finer segmentation: with segments >= 0.5 s apart, a later
    # candidate starts >= 0.5 s after s while the earliest starts within 0.4 s of it
    two = meas("SHIFT", [[4.65, 5.05], [5.3, 6.0]])
    fine = Rules(ipu_gap_s=0.2)
    assert aggregate([two], fine)["scores"]["en_task_user"]["shift_latency"]["value"] == pytest.approx(-0.35)
    closest = Rules(ipu_gap_s=0.2, shift_pick="closest")
    assert aggregate([two], closest)["scores"]["en_task_user"]["shift_latency"]["value"] == pytest.approx(0.3)
    assert aggregate([two], AUTHORS)["scores"]["en_task_user"]["shift_latency"]["value"] == pytest.approx(-0.35)
    # (2) + (3): a model turn begun 2 s before a PAUSE and running into it: the code takes it over, the paper not;
    # no takeover at all: the paper leaves latency undefined, the code uses the window end
    pause = meas("PAUSE", [[3.0, 5.6]], n=2)
    silent = meas("PAUSE", [], n=3)
    p, a = aggregate([pause, silent], PAPER)["scores"]["en_task_user"], aggregate(
        [pause, silent], AUTHORS)["scores"]["en_task_user"]
    assert (p["pause_tor"]["k"], p["pause_latency"]["n"]) == (0, 0)
    assert (a["pause_tor"]["k"], a["pause_latency"]["n"]) == (1, 2)
    assert a["pause_latency"]["value"] == pytest.approx(((3.0 - 5.0) + 10.0) / 2)  # -2.0 (P starts at 2.0) and 10
    # (4) stop latency: speech starting 0.3 s after s is no speech at s for the paper, the code takes it
    bc = meas("BC", [[5.3, 7.0]], n=4)
    assert aggregate([bc], PAPER)["scores"]["en_task_user"]["bc_stop_latency"]["n"] == 0
    assert aggregate([bc], AUTHORS)["scores"]["en_task_user"]["bc_stop_latency"]["value"] == pytest.approx(2.0)
    # (10) no CI in the code
    assert aggregate([shift, shift], AUTHORS)["scores"]["en_task_user"]["shift_tor"]["ci"] is None


def test_authors_event_filter_drops_overlapping_shifts() -> None:
    """(6) A SHIFT whose reply starts before s (t < s) is dropped by the code, scored by the paper."""
    overlapped = meas("SHIFT", [[4.8, 7.0]], t=4.8, context=[["user", "q", 2.0, 5.0]])
    res_p, res_a = aggregate([overlapped], PAPER), aggregate([overlapped], AUTHORS)
    assert res_p["scores"]["en_task_user"]["shift_tor"]["n"] == 1 and res_p["dropped_events"]["n"] == 0
    assert res_a["scores"]["en_task_user"]["shift_tor"]["n"] == 0
    assert res_a["scores"]["en_task_user"]["shift_tor"]["n_dropped"] == 1 and res_a["dropped_events"]["n"] == 1


def test_content_normalised_failures_zero() -> None:
    def shift(n: int, rel: int | None, status: str = "ok", **kw: Any) -> dict[str, Any]:
        return meas("SHIFT", [[5.3, 7.0]], n=n, gold_answer="1905", response={"onset_s": 5.3},
                    content={"relevance": {"status": status, "score": rel, "judge": "j", "heuristic": False},
                             "qa_accuracy": {"status": "ok", "score": 2, "judge": "heuristic-v1", "heuristic": True}},
                    **kw)

    ms = [shift(1, 2), shift(2, 1), shift(3, None, "unparseable"), meas("SHIFT", [], n=4, failed=True,
                                                                        gold_answer="1905")]
    g = aggregate(ms, PAPER)["scores"]["en_task_user"]
    assert g["relevance"]["value"] == pytest.approx((1.0 + 0.5 + 0 + 0) / 4)
    assert g["relevance"]["n_unparseable"] == 1 and g["relevance"]["n_failed"] == 1
    assert g["qa_accuracy"]["value"] == pytest.approx(3 / 4) and g["qa_accuracy"]["heuristic"] is True
    assert aggregate(ms, AUTHORS)["scores"]["en_task_user"]["relevance"]["value"] == pytest.approx(3.0 / 4)  # 0-2
    assert g["consistency"]["computed"] is False


def test_representative_is_the_mean_of_none_and_full_else_full() -> None:
    ms = [meas("SHIFT", [[5.3, 7.0]], cond="none", n=1), meas("SHIFT", [[5.5, 7.0]], cond="full", n=1),
          meas("BC", [[2.0, 6.0]], cond="full", n=2), meas("SHIFT", [], cond="user", n=1)]
    rep = aggregate(ms, PAPER)["representative"]["en_task"]
    assert rep["shift_latency"]["value"] == pytest.approx(0.4) and rep["shift_latency"]["from"] == ["none", "full"]
    assert rep["bc_stop_latency"]["value"] == pytest.approx(1.0) and rep["bc_stop_latency"]["from"] == ["full"]
    no_full = aggregate([meas("SHIFT", [[5.3, 7.0]], cond="none")], PAPER)["representative"]["en_task"]
    assert no_full["shift_tor"]["value"] is None  # Full skipped: no representative, never None alone


def test_rule_overrides_are_checked() -> None:
    rules, applied = rules_from({"rules": "authors", "shift_pick": "earliest"})
    assert rules.shift_pick == "earliest" and rules.view == "input" and applied == {"rules": "authors",
                                                                                     "shift_pick": "earliest"}
    assert rules_from(None) == (PAPER, {})
    assert rules_from({"ci": "false"})[0] == Rules(name="paper+ci=False", ci=False)
    for bad in ({"rules": "mine"}, {"shift_pik": "closest"}, {"shift_pick": "latest"}, {"bc_max_words": 2.5},
                {"window_s": 0}, {"name": "x"}):
        with pytest.raises(UsageError):
            rules_from(bad)
