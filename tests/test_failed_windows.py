"""A failed episode's windows, and the stretch of recording each window's verdicts look at.

Known answers for the rules added with failure-as-a-result (STYLE lesson 10): a failed episode enters every
window its gold labels define, each a failure in every metric of the window, answer accuracy included; an
N4Q counts only when an N4R follows it. And `sound_window`, the span of time run health measures per window.
"""

from __future__ import annotations

import pytest

from metrics.mpe.measure import failed_windows, sound_window
from metrics.mpe.verdicts import METRICS, Thresholds, outcomes

TH = Thresholds()
LABELS = {"t00": "N3", "t01": "T", "t02": "N1", "t03": "N4Q", "t04": "N4R", "t05": "N2", "t06": "N4Q",
          "t07": "N1", "t08": "N4Q"}


def test_failed_windows_follow_the_gold_labels() -> None:
    rows = failed_windows("c7", "p3", "implicit", LABELS, "adapter raised")
    base = {"case_id": "c7", "pair_id": "p3", "condition": "implicit", "failed": True, "reason": "adapter raised"}
    assert rows == [
        base | {"kind": "silence", "label": "N3", "turn_id": "t00"},
        base | {"kind": "T", "label": "T", "turn_id": "t01"},
        base | {"kind": "silence", "label": "N1", "turn_id": "t02"},
        base | {"kind": "N4", "label": "N4", "turn_id": "t03"},   # N4Q then N4R: one answering window
        base | {"kind": "silence", "label": "N2", "turn_id": "t05"},
        base | {"kind": "silence", "label": "N1", "turn_id": "t07"},  # t06: an N4Q not followed by N4R
    ]                                                             # t08: an N4Q at the end
    assert failed_windows("c", "p", "explicit", {}, "x") == []
    # An answering window at the very end of the scene still counts.
    assert [(r["kind"], r["turn_id"]) for r in failed_windows("c", "p", "explicit", {"a": "T", "q": "N4Q", "r": "N4R"},
                                                                 "x")] == [("T", "a"), ("N4", "q")]
    assert failed_windows("c", "p", "explicit", {"a": "N4R", "b": "PRE"}, "x") == []


def test_a_failed_window_fails_every_metric_of_its_kind() -> None:
    rows = failed_windows("c7", "p3", "implicit", LABELS, "stalled")
    got = [outcomes(r, TH) for r in rows]
    assert got[1] == {"fresh_onset_rate": False, "response_presence": False, "answer_accuracy": False}
    assert got[0] == got[2] == got[4] == got[5] == {"silence_preservation": False}
    assert got[3] == {"window_response": False, "answering_window_yield": False}
    assert set().union(*got) == set(METRICS)
    # A failed flag wins over measurements that would otherwise pass.
    passing_t = {"kind": "T", "active_at_end": False, "onset_latency_s": 0.5, "answer_verdict": "correct"}
    assert outcomes(passing_t, TH) == {"fresh_onset_rate": True, "response_presence": True, "answer_accuracy": True}
    assert outcomes(passing_t | {"failed": True}, TH) == dict.fromkeys(
        ("fresh_onset_rate", "response_presence", "answer_accuracy"), False)
    assert outcomes({"kind": "silence", "speech_s": 0.0, "failed": False}, TH) == {"silence_preservation": True}
    with pytest.raises(ValueError, match="unknown measurement kind 'X' in c1"):
        outcomes({"kind": "X", "case_id": "c1", "failed": True}, TH)


@pytest.mark.parametrize("m, window", [
    ({"kind": "T", "t_end_s": 9.0, "next_start_s": 14.5}, (9.0, 14.5)),
    ({"kind": "silence", "window": [12.0, 15.0]}, (12.0, 15.0)),
    ({"kind": "N4", "q_end_s": 17.0, "r_start_s": 20.0, "r_end_s": 22.0}, (17.0, 22.0)),
])  # fmt: skip
def test_sound_window(m: dict, window: tuple[float, float]) -> None:
    assert sound_window(m) == window
