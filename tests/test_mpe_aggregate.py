"""Known answers for Duplex-MPE aggregation (metrics/mpe/aggregate.py): which window enters which denominator,
per condition and per label, the Wilson cells, the paired difference over complete pairs only, failed windows."""

from __future__ import annotations

from typing import Any

import pytest

from metrics.mpe.aggregate import LABEL_GROUPS, aggregate, paired_summary, paired_tests, summarise
from metrics.mpe.verdicts import METRICS, Thresholds

TH = Thresholds()


def t_rec(pair: str, cond: str, latency: float | None, verdict: str | None = "correct", active: bool = False
          ) -> dict[str, Any]:
    return {"case_id": f"{pair}-{cond}", "pair_id": pair, "condition": cond, "kind": "T", "label": "T",
            "active_at_end": active, "onset_latency_s": latency, "answer_verdict": verdict}


def s_rec(pair: str, cond: str, label: str, speech_s: float, ack: str | None = None) -> dict[str, Any]:
    return {"case_id": f"{pair}-{cond}", "pair_id": pair, "condition": cond, "kind": "silence", "label": label,
            "speech_s": speech_s, "ack_verdict": ack}


def n4_rec(pair: str, cond: str, window_speech_s: float, active: bool, stop: float | None, new: int
           ) -> dict[str, Any]:
    return {"case_id": f"{pair}-{cond}", "pair_id": pair, "condition": cond, "kind": "N4", "label": "N4",
            "window_speech_s": window_speech_s, "active_at_r_start": active, "stop_latency_s": stop,
            "new_onsets_in_r": new}


def failed(pair: str, cond: str, kind: str, label: str) -> dict[str, Any]:
    return {"case_id": f"{pair}-{cond}", "pair_id": pair, "condition": cond, "kind": kind, "label": label,
            "failed": True, "reason": "step raised"}


RECORDS = [
    t_rec("a", "explicit", 1.0), t_rec("a", "implicit", None, None),
    t_rec("b", "explicit", 2.0, "incorrect"), t_rec("b", "implicit", 0.5),
    t_rec("c", "explicit", None, None, active=True),  # already talking at T end: presence, not fresh onset
    s_rec("a", "explicit", "N1", 0.0), s_rec("a", "implicit", "N2", 1.2),
    s_rec("b", "explicit", "N3", 0.4, "acknowledgement"), s_rec("b", "implicit", "N1", 0.3, "intrusion"),
    n4_rec("a", "explicit", 0.0, False, None, 0), n4_rec("a", "implicit", 0.8, True, 0.5, 0),
    n4_rec("b", "explicit", 0.0, True, 1.5, 0), n4_rec("b", "implicit", 0.0, False, None, 1),
    failed("d", "implicit", "T", "T"), failed("d", "implicit", "silence", "N2"), failed("d", "implicit", "N4", "N4"),
]


def kn(entry: dict[str, Any]) -> tuple[int, int]:
    return entry["k"], entry["n"]


def test_overall_denominators_and_successes() -> None:
    s = aggregate(RECORDS, TH)["scores"]
    assert kn(s["fresh_onset_rate"]) == (3, 6)  # a-e, b-e, b-i; not c (active), not a-i, not the failed d
    assert kn(s["response_presence"]) == (4, 6)  # + c (already talking)
    assert kn(s["answer_accuracy"]) == (2, 5)  # a-e, b-i correct; b-e wrong; c has no verdict; d failed counts
    assert kn(s["silence_preservation"]) == (2, 5)  # a-e empty, b-e an ack; a-i, b-i intrude; d failed
    assert kn(s["window_response"]) == (1, 5)  # only a-i spoke in the answering window
    assert kn(s["answering_window_yield"]) == (2, 5)  # a-e, a-i (stopped in 0.5 s); b-e late, b-i new onset, d


def test_per_condition_and_per_label() -> None:
    res = aggregate(RECORDS, TH)
    assert sorted(res["by_condition"]) == ["explicit", "implicit"]
    exp, imp = res["by_condition"]["explicit"], res["by_condition"]["implicit"]
    assert kn(exp["fresh_onset_rate"]) == (2, 3) and kn(imp["fresh_onset_rate"]) == (1, 3)
    assert kn(exp["silence_preservation"]) == (2, 2) and kn(imp["silence_preservation"]) == (0, 3)
    assert set(res["by_label"]) == set(LABEL_GROUPS)
    assert set(res["by_label"]["T"]) == {"fresh_onset_rate", "response_presence", "answer_accuracy"}
    assert kn(res["by_label"]["N1"]["silence_preservation"]) == (1, 2)
    assert kn(res["by_label"]["N2"]["silence_preservation"]) == (0, 2)
    assert kn(res["by_label"]["N3"]["silence_preservation"]) == (1, 1)
    assert kn(res["by_label"]["N4"]["answering_window_yield"]) == (2, 5)
    assert set(res["scores"]) == set(METRICS)


def test_thresholds_move_the_verdicts() -> None:
    strict = aggregate(RECORDS, Thresholds(t_onset_window_s=0.9, yield_tolerance_s=0.4))["scores"]
    assert kn(strict["fresh_onset_rate"]) == (1, 6)  # only the 0.5 s onset
    assert kn(strict["answering_window_yield"]) == (1, 5)  # a-i's 0.5 s stop is now too late


def test_summarise_cells() -> None:
    assert summarise([]) == {"value": None, "n": 0, "k": 0, "ci": None}
    cell = summarise([True, False, False, True])
    assert (cell["value"], cell["n"], cell["k"]) == (0.5, 4, 2)
    assert cell["ci"] == [0.15, 0.85]  # Wilson 95 % for 2/4, rounded to 4 places
    assert summarise([True] * 3)["ci"] == [0.4385, 1.0]


def test_paired_summary_counts_only_complete_pairs_and_discordant_ones() -> None:
    assert paired_summary([]) == {"n_pairs": 0, "explicit_only": 0, "implicit_only": 0, "difference": None,
                                  "mcnemar_p": None}
    out = paired_summary([(True, True), (True, False), (True, False), (False, True), (False, False)])
    assert (out["n_pairs"], out["explicit_only"], out["implicit_only"]) == (5, 2, 1)
    assert out["difference"] == pytest.approx((3 - 2) / 5)
    assert out["mcnemar_p"] == pytest.approx(1.0)  # 2 * P(X <= 1 | n=3) = 2 * 4/8, capped at 1
    paired = paired_tests(RECORDS, TH)
    p = paired["response_presence"]
    assert (p["n_pairs"], p["explicit_only"], p["implicit_only"]) == (2, 1, 0)  # pairs a and b; c, d lack a twin
    assert p["difference"] == pytest.approx(0.5)
    f = paired["fresh_onset_rate"]
    assert (f["n_pairs"], f["explicit_only"], f["implicit_only"]) == (2, 1, 0)


def test_a_failed_twin_counts_as_not_responding() -> None:
    records = [t_rec("e", "explicit", 1.0), failed("e", "implicit", "T", "T")]
    p = paired_tests(records, TH)["response_presence"]
    assert (p["n_pairs"], p["explicit_only"], p["implicit_only"], p["difference"]) == (1, 1, 0, 1.0)
