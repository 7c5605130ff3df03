"""Known answers for M3 aggregation (metrics/m3/aggregate.py), block by block with every count: TOR with its
Wilson interval, latency means with their Student-t interval (rounded to 4 places), undefined / failed / dropped
/ censored counts, content scores on both scales with the interval clamped to the scale, the None&Full
representative in each of its three cases, and which conditions each event type is run and scored under (BC and
BARGE_IN have no None case, so their representative is the Full value)."""

from __future__ import annotations

from typing import Any

import pytest

from dataset_builder.m3.schema import CONDITIONS, EVENT_CONDITIONS
from metrics.m3.aggregate import KEYS, aggregate, group_scores, outcomes, representative
from metrics.m3.rules import RULE_SETS, Rules, rules_from

PAPER, AUTHORS = RULE_SETS["paper"], RULE_SETS["authors"]
NO_CI = Rules(ci=False)


def meas(kind: str, spans: list[list[float]], *, cond: str = "user", n: int = 1, t: float | None = None,
         lang: str = "en", domain: str = "task", failed: bool = False, end: float = 15.0,
         **extra: Any) -> dict[str, Any]:
    t = t if t is not None else {"SHIFT": 5.3, "PAUSE": 6.5, "BC": 5.5, "BARGE_IN": 7.0}[kind]
    b = 5.0 if kind in ("BC", "BARGE_IN") else 2.0
    m = {"case_id": f"{lang}-{domain}-d001-e{n:02d}-{cond}", "event_type": kind, "language": lang,
         "domain": domain, "condition": cond, "group": f"{lang}_{domain}_{cond}", "label": kind,
         "prompt_start_s": b, "event_start_s": 5.0, "event_end_s": t, "window_end_s": 15.0, "duration_s": end}
    if failed:
        return m | {"failed": True, "reason": "step raised"} | extra
    return m | {"vad_spans": spans} | extra


def group(ms: list[dict[str, Any]], rules: Rules = PAPER, name: str = "en_task_user") -> dict[str, Any]:
    return aggregate(ms, rules)["scores"][name]


# --------------------------------------------------------------------------------------- conditions


def test_which_conditions_each_event_type_runs_under() -> None:
    assert CONDITIONS == ("none", "user", "full")
    assert EVENT_CONDITIONS == {"SHIFT": ("none", "user", "full"), "PAUSE": ("none", "user", "full"),
                                "BC": ("user", "full"), "BARGE_IN": ("user", "full")}


# ---------------------------------------------------------------------------------------------- TOR


SHIFTS = [meas("SHIFT", [[5.3, 7.0]], n=1), meas("SHIFT", [[5.8, 7.0]], n=2), meas("SHIFT", [[5.45, 7.0]], n=3),
          meas("SHIFT", [], n=4), meas("SHIFT", [], n=5, failed=True)]


def test_shift_tor_and_latency_blocks() -> None:
    g = group(SHIFTS)
    assert g["shift_tor"] == {"value": 0.6, "n": 5, "k": 3, "ci": [0.2307, 0.8824], "n_failed": 1, "n_dropped": 0,
                              "interval": "wilson-95"}
    # latencies 0.3, 0.8, 0.45: mean 0.51667, sd 0.25658, t(0.975, 2) = 4.302653
    assert g["shift_latency"] == {"value": 0.5167, "n": 3, "ci": [-0.1207, 1.154], "sd": 0.2566, "n_undefined": 1,
                                  "n_failed": 1, "n_dropped": 0, "interval": "student-t-95"}
    nc = group(SHIFTS, NO_CI)
    assert nc["shift_tor"]["ci"] is None and nc["shift_latency"]["ci"] is None and nc["shift_latency"]["sd"] == 0.2566
    assert group(SHIFTS, rules_from({"ci": "false"})[0])["shift_tor"]["ci"] is None
    assert group(SHIFTS, AUTHORS)["shift_tor"]["ci"] is None


def test_pause_tor_counts_a_failure_as_a_takeover() -> None:
    ms = [meas("PAUSE", [[6.0, 6.2]], n=1), meas("PAUSE", [], n=2), meas("PAUSE", [], n=3, failed=True)]
    g = group(ms)
    assert g["pause_tor"] == {"value": pytest.approx(2 / 3), "n": 3, "k": 2, "ci": [0.2077, 0.9385], "n_failed": 1,
                              "n_dropped": 0, "interval": "wilson-95"}
    assert g["pause_latency"] == {"value": 1.0, "n": 1, "ci": None, "sd": None, "n_undefined": 1, "n_failed": 1,
                                  "n_dropped": 0, "interval": "student-t-95", "n_bc_filter_not_applied": 0}
    # under the code's rule a short segment without a word count is kept, and counted
    ms = [meas("PAUSE", [[5.5, 6.0]], n=1), meas("PAUSE", [[5.5, 7.5]], n=2)]
    assert group(ms, AUTHORS)["pause_latency"]["n_bc_filter_not_applied"] == 1
    assert group(ms, AUTHORS)["pause_latency"]["value"] == 0.5


def test_stop_latency_blocks_count_censored_and_undefined() -> None:
    ms = [meas("BC", [[2.0, 8.0]], n=1), meas("BC", [[2.0, 16.0]], n=2, end=20.0), meas("BC", [], n=3),
          meas("BC", [], n=4, failed=True)]
    g = group(ms)
    assert g["bc_stop_latency"] == {"value": 6.5, "n": 2, "ci": [-37.9717, 50.9717], "sd": 4.9497,
                                    "n_undefined": 1, "n_failed": 1, "n_dropped": 0, "interval": "student-t-95",
                                    "n_censored": 1}
    assert g["barge_in_stop_latency"] == {"value": None, "n": 0, "ci": None, "sd": None, "n_undefined": 0,
                                          "n_failed": 0, "n_dropped": 0, "interval": "student-t-95",
                                          "n_censored": 0}
    assert "n_censored" not in g["shift_latency"] and "n_bc_filter_not_applied" not in g["shift_latency"]
    assert "n_bc_filter_not_applied" not in g["bc_stop_latency"]
    bi = group([meas("BARGE_IN", [[4.0, 15.0]])])["barge_in_stop_latency"]
    assert (bi["value"], bi["n_censored"], bi["n"]) == (10.0, 1, 1)


def test_dropped_events_are_counted_not_scored() -> None:
    system_at_s = [["system", "so", 3.0, 6.0]]
    ms = [meas("SHIFT", [[5.3, 7.0]], n=1, context=system_at_s), meas("SHIFT", [[5.5, 7.0]], n=2, context=[]),
          meas("SHIFT", [], n=3, failed=True, context=system_at_s), meas("SHIFT", [], n=4, failed=True, context=[])]
    g = group(ms, AUTHORS)
    assert (g["shift_tor"]["n"], g["shift_tor"]["k"], g["shift_tor"]["n_dropped"], g["shift_tor"]["n_failed"]) == (
        2, 1, 2, 1)
    assert (g["shift_latency"]["n"], g["shift_latency"]["n_dropped"], g["shift_latency"]["n_failed"]) == (1, 2, 1)
    assert aggregate(ms, AUTHORS)["dropped_events"] == {"n": 2, "rule": "drop_unfit_events"}
    assert aggregate(ms, PAPER)["dropped_events"] == {"n": 0, "rule": None}
    # a failed record without its event times cannot be read: scored (against the model)
    bare = {k: v for k, v in meas("SHIFT", [], failed=True, context=system_at_s).items() if k != "event_start_s"}
    assert outcomes([bare], AUTHORS)[0][1] == {"failed": True, "scored": True, "dropped": None}
    dropped = outcomes([meas("SHIFT", [], failed=True, context=system_at_s)], AUTHORS)[0][1]
    assert dropped == {"failed": True, "scored": False,
                       "dropped": "the reference system is in a turn at s, where a SHIFT needs it silent (rule 6)"}
    assert outcomes([meas("SHIFT", [], failed=True, context=system_at_s)], PAPER)[0][1]["scored"] is True
    assert outcomes([meas("SHIFT", [], failed=True)], AUTHORS)[0][1]["scored"] is True  # no context: kept


# ------------------------------------------------------------------------------------------ content


def judged(n: int, score: int | None, status: str = "ok", *, gold_answer: str = "1905", onset: float | None = 5.3,
           judge: str = "j", heuristic: bool = False, reason: str | None = None, **kw: Any) -> dict[str, Any]:
    entry = {"status": status, "score": score, "judge": judge, "heuristic": heuristic, "reason": reason}
    return meas("SHIFT", [[5.3, 7.0]], n=n, gold_answer=gold_answer, response={"onset_s": onset},
                content={"relevance": entry, "consistency": entry, "qa_accuracy": entry}, **kw)


def test_content_blocks_on_both_scales() -> None:
    ms = [judged(1, 2), judged(2, 2, judge="k", heuristic=True, onset=None), judged(3, None, "unparseable", onset=None),
          judged(4, None, "not computed", onset=None), meas("SHIFT", [], n=5, failed=True, gold_answer="1905"),
          meas("PAUSE", [], n=6, content={"relevance": {"status": "ok", "score": 2}})]  # content is a SHIFT's only
    g = group(ms)
    # scores 1, 1, 0 (unparseable), 0 (failed); the not-computed one is left out
    assert g["relevance"] == {"value": 0.5, "n": 4, "ci": [0.0, 1.0], "sd": 0.5774, "computed": True,
                              "judge": "j, k", "heuristic": True, "n_unparseable": 1, "n_not_computed": 1,
                              "n_failed": 1, "n_no_response": 3, "scale": "unit", "interval": "student-t-95"}
    two = group(ms, rules_from({"content_scale": "0-2"})[0])["relevance"]
    assert (two["value"], two["ci"], two["sd"], two["scale"]) == (1.0, [0.0, 2.0], 1.1547, "0-2")
    assert group(ms, AUTHORS)["relevance"]["ci"] is None and group(ms, AUTHORS)["relevance"]["value"] == 1.0
    # clamped at 0 only (scores 0, 0.5, 0.5, 0.5: mean 0.375, sd 0.25, t(0.975, 3) = 3.182446)
    low = group([judged(1, 0), judged(2, 1), judged(3, 1), judged(4, 1)])["consistency"]
    assert (low["value"], low["ci"]) == (0.375, [0.0, 0.7728])
    # inside the scale: kept as it is, rounded (0.5 x 5 and 1.0: mean 0.58333, sd 0.20412, t(0.975, 5) = 2.570582)
    mid = group([judged(k, 1 + (k == 6)) for k in range(1, 7)])["consistency"]
    assert (mid["value"], mid["ci"], mid["sd"]) == (0.5833, [0.3691, 0.7975], 0.2041)


def test_qa_accuracy_only_where_there_is_a_gold_answer() -> None:
    ms = [judged(1, 2), judged(2, 0, gold_answer="")]
    g = group(ms)
    assert (g["qa_accuracy"]["value"], g["qa_accuracy"]["n"]) == (1.0, 1)
    assert (g["relevance"]["value"], g["relevance"]["n"]) == (0.5, 2)
    chat = group([judged(1, 2, gold_answer="")])["qa_accuracy"]
    assert chat == {"value": None, "n": 0, "ci": None, "computed": False,
                    "reason": "no SHIFT with a gold answer (chat has none)"}


def test_content_not_computed_says_why() -> None:
    none = group([meas("SHIFT", [[5.3, 7.0]])])["relevance"]
    assert none == {"value": None, "n": 0, "ci": None, "computed": False,
                    "reason": "not computed (no scored SHIFT response)"}
    why = [judged(1, None, "not computed", reason="no judge"), judged(2, None, "not computed", reason="asr en"),
           judged(3, None, "not computed", reason="no judge")]
    assert group(why)["relevance"]["reason"] == "asr en; no judge"
    # only failures: nothing judged, the default reason
    assert group([meas("SHIFT", [], failed=True, gold_answer="x")])["qa_accuracy"]["reason"] == \
        "not computed (no scored SHIFT response)"


# ------------------------------------------------------------------------------------------- None&Full


def test_representative_in_each_case() -> None:
    ms = [meas("SHIFT", [[5.3, 7.0]], cond="none", n=1), meas("SHIFT", [[5.6, 7.0]], cond="none", n=2),
          meas("SHIFT", [[5.5, 7.0]], cond="full", n=1), meas("SHIFT", [], cond="full", n=2),
          meas("SHIFT", [[9.0, 9.5]], cond="user", n=1),
          meas("BC", [[2.0, 6.0]], cond="full", n=3), meas("BC", [[2.0, 8.0]], cond="user", n=3)]
    rep = aggregate(ms, PAPER)["representative"]
    assert list(rep) == ["en_task"]
    r = rep["en_task"]
    assert list(r) == list(KEYS)
    # SHIFT latency: None 0.45 (n 2), Full 0.5 (n 1) -> 0.475 (n 3); TOR None 1.0, Full 0.5 -> 0.75 (n 4)
    assert r["shift_latency"] == {"value": 0.475, "n": 3, "ci": None, "from": ["none", "full"]}
    assert r["shift_tor"] == {"value": 0.75, "n": 4, "ci": None, "from": ["none", "full"]}
    # BC is not run under None: the Full value (never the User one)
    assert r["bc_stop_latency"] == {"value": 1.0, "n": 1, "ci": None, "from": ["full"]}
    # PAUSE was run nowhere: no Full value
    assert r["pause_tor"] == {"value": None, "n": 0, "ci": None, "from": [],
                              "reason": "no Full value (Full not run, skipped, or undefined)"}


def test_representative_rounds_and_needs_full() -> None:
    scores = {"en_task_none": {k: {"value": None, "n": 0} for k in KEYS},
              "en_task_full": {k: {"value": None, "n": 0} for k in KEYS}}
    scores["en_task_none"]["shift_latency"] = {"value": 0.33333, "n": 2}
    scores["en_task_full"]["shift_latency"] = {"value": 0.5, "n": 5}
    scores["en_task_none"]["pause_tor"] = {"value": 0.5, "n": 2}  # None alone: no representative
    rep = representative(scores)["en_task"]
    assert rep["shift_latency"] == {"value": 0.4167, "n": 7, "ci": None, "from": ["none", "full"]}
    assert rep["pause_tor"]["value"] is None and rep["pause_tor"]["from"] == []
    only_none = representative({"ja_chat_none": scores["en_task_none"]})["ja_chat"]
    assert only_none["shift_latency"]["value"] is None
    only_full = representative({"ja_chat_full": scores["en_task_full"]})["ja_chat"]
    assert only_full["shift_latency"] == {"value": 0.5, "n": 5, "ci": None, "from": ["full"]}
    # a language/domain with a User group only has no representative at all
    assert representative({"ja_chat_user": scores["en_task_full"]}) == {}
    assert list(representative({"en_chat_user": scores["en_task_full"], "en_task_full": scores["en_task_full"]})) == [
        "en_task"]
    assert representative({}) == {}


def test_groups_in_order_of_language_domain_then_condition() -> None:
    ms = [meas("SHIFT", [], cond=c, lang=lang, domain=d, n=1)
          for lang, d in (("ja", "chat"), ("en", "task"), ("en", "chat")) for c in ("full", "user", "none")]
    ms.append(meas("SHIFT", [], cond="zzz", lang="en", domain="chat") | {"group": "en_chat_zzz"})
    ms.append(meas("SHIFT", [], cond="aaa", lang="en", domain="chat") | {"group": "en_chat_aaa"})  # after zzz
    res = aggregate(ms, PAPER)
    assert list(res["scores"]) == ["en_chat_none", "en_chat_user", "en_chat_full", "en_chat_zzz", "en_chat_aaa",
                                   "en_task_none", "en_task_user", "en_task_full",
                                   "ja_chat_none", "ja_chat_user", "ja_chat_full"]
    assert list(res["representative"]) == ["en_chat", "en_task", "ja_chat"]
    assert list(group_scores([], PAPER)) == list(KEYS)
    assert aggregate([], PAPER) == {"scores": {}, "representative": {}, "dropped_events": {"n": 0, "rule": None}}


def test_groups_score_separately() -> None:
    ms = [meas("SHIFT", [[5.3, 7.0]], cond="user", n=1), meas("SHIFT", [], cond="full", n=1),
          meas("PAUSE", [[6.0, 7.0]], cond="user", n=2)]
    res = aggregate(ms, PAPER)["scores"]
    assert (res["en_task_user"]["shift_tor"]["k"], res["en_task_user"]["shift_tor"]["n"]) == (1, 1)
    assert (res["en_task_full"]["shift_tor"]["k"], res["en_task_full"]["shift_tor"]["n"]) == (0, 1)
    assert res["en_task_full"]["pause_tor"]["n"] == 0 and res["en_task_user"]["pause_tor"]["k"] == 1
