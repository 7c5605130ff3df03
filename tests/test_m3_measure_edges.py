"""Known answers for the M3 measurement record (metrics/m3/measure.py): what a usable episode's gold must hold
(each check failing alone, the time order and the recording length at their edges), the record itself field by
field, a failed episode's record, and the case-id reader."""

from __future__ import annotations

from typing import Any

import pytest

from metrics.m3.measure import (
    LENGTH_TOLERANCE_S,
    failed_record,
    gold_problem,
    group_of,
    identity,
    identity_from_case_id,
    measure_episode,
)
from metrics.m3.rules import RULE_SETS, describe
from metrics.spans import Span


def gold(**over: Any) -> dict[str, Any]:
    return {"event_id": "en-task-d001-e02", "dialogue_id": "en-task-d001", "event_type": "SHIFT", "language": "en",
            "domain": "task", "condition": "user", "prompt_start_s": 2.0, "event_start_s": 5.0, "event_end_s": 5.3,
            "window_end_s": 15.0} | over


def test_a_complete_gold_has_no_problem() -> None:
    assert gold_problem(gold(), 15.0) is None
    assert gold_problem(gold(prompt_start_s=0, event_start_s=0, window_end_s=10), 10) is None  # b = 0 = s: edges
    assert gold_problem(gold(prompt_start_s=5.0), 15.0) is None  # b == s
    for lang, dom, cond, kind in (("ja", "chat", "none", "PAUSE"), ("en", "task", "full", "BC"),
                                  ("en", "chat", "user", "BARGE_IN")):
        assert gold_problem(gold(language=lang, domain=dom, condition=cond, event_type=kind), 15.0) is None


@pytest.mark.parametrize(("g", "message"), [
    (None, "rec.json has no gold"),
    ([], "rec.json has no gold"),
    ({k: v for k, v in gold().items() if k not in ("event_id", "window_end_s")},
     "gold lacks ['event_id', 'window_end_s']"),
    (gold(event_type="HOLD"), "gold event_type 'HOLD' is not one of ('SHIFT', 'PAUSE', 'BC', 'BARGE_IN')"),
    (gold(language="fr"), "gold language 'fr' is not one of ('en', 'ja')"),
    (gold(domain="food"), "gold domain 'food' is not one of ('chat', 'task')"),
    (gold(condition="both"), "gold condition 'both' is not one of ('none', 'user', 'full')"),
    (gold(event_start_s="5.0", prompt_start_s=None), "gold times ['prompt_start_s', 'event_start_s'] are not numbers"),
    (gold(window_end_s=True), "gold times ['window_end_s'] are not numbers"),
    (gold(prompt_start_s=-0.001), "gold times out of order: need 0 <= b (-0.001) <= s (5.0) < window end (15.0)"),
    (gold(prompt_start_s=5.001), "gold times out of order: need 0 <= b (5.001) <= s (5.0) < window end (15.0)"),
    (gold(window_end_s=5.0), "gold times out of order: need 0 <= b (2.0) <= s (5.0) < window end (5.0)"),
])
def test_each_gold_problem_alone(g: Any, message: str) -> None:
    assert gold_problem(g, 15.0) == message


def test_the_recording_must_last_to_the_window_end() -> None:
    assert LENGTH_TOLERANCE_S == 0.001
    assert gold_problem(gold(), 15.0 - 0.001) is None  # a millisecond short is rounding
    assert gold_problem(gold(), 15.0 - 0.0011) == \
        "the recording (14.999 s) ends before the evaluation window does (15.000 s)"
    assert gold_problem(gold(), 12.0) == "the recording (12.000 s) ends before the evaluation window does (15.000 s)"


@pytest.mark.parametrize(("case_id", "expected"), [
    ("en-task-d003-e07-full", {"language": "en", "domain": "task", "condition": "full"}),
    ("ja-chat-d1-e12-none", {"language": "ja", "domain": "chat", "condition": "none"}),
    ("en-chat-d010-e01-user", {"language": "en", "domain": "chat", "condition": "user"}),
    ("fr-task-d003-e07-full", None),
    ("en-food-d003-e07-full", None),
    ("en-task-d003-e07-both", None),
    ("en-task-003-e07-full", None),
    ("en-task-d003-e07-full-x", None),
    ("xen-task-d003-e07-full", None),
    ("en-task-dx-e07-full", None),
])
def test_identity_from_case_id(case_id: str, expected: dict[str, str] | None) -> None:
    assert identity_from_case_id(case_id) == expected


def test_identity_and_group() -> None:
    assert group_of({"language": "ja", "domain": "chat", "condition": "none"}) == "ja_chat_none"
    assert identity("en-task-d001-e02-user", gold()) == {
        "case_id": "en-task-d001-e02-user", "event_id": "en-task-d001-e02", "dialogue_id": "en-task-d001",
        "event_type": "SHIFT", "language": "en", "domain": "task", "condition": "user", "label": "SHIFT",
        "group": "en_task_user"}


def test_measurement_record_field_by_field() -> None:
    g = gold(context_start_s=0.0, prompt_start_s=2.0004, forced_end_s=5, lead_silence_s="5", question="q?",
             reply="r.", gold_answer="1905", context=[["user", "q?", 2.0, 5.0]], extra="not copied")
    spans = [Span(4.70049, 5.2), Span(7.0, 8.0006)]
    vad = {"threshold": 0.5}
    m = measure_episode("en-task-d001-e02-user", g, 15.00049, spans, vad)
    base = {"case_id": "en-task-d001-e02-user", "event_id": "en-task-d001-e02", "dialogue_id": "en-task-d001",
            "event_type": "SHIFT", "language": "en", "domain": "task", "condition": "user", "label": "SHIFT",
            "group": "en_task_user", "context_start_s": 0.0, "prompt_start_s": 2.0, "event_start_s": 5.0,
            "event_end_s": 5.3, "window_end_s": 15.0, "forced_end_s": 5.0, "question": "q?", "reply": "r.",
            "gold_answer": "1905", "context": [["user", "q?", 2.0, 5.0]], "duration_s": 15.0,
            "vad": {"threshold": 0.5}, "vad_spans": [[4.7, 5.2], [7.0, 8.001]], "model_spans_n": 2}
    assert {k: v for k, v in m.items() if k != "timing"} == base  # lead_silence_s "5" is no number: not copied
    assert m["vad"] is not vad
    assert m["timing"] == {name: describe(m["vad_spans"], m, rules) for name, rules in RULE_SETS.items()}
    assert list(m["timing"]) == ["paper", "authors"] and m["timing"]["paper"]["earliest"] == [4.7, 5.2]
    assert measure_episode("x", gold(), 15.0, [], {})["vad_spans"] == []


def test_failed_record_keeps_what_aggregation_reads() -> None:
    g = gold(context=[["system", "hi", 0.0, 1.0]])
    assert failed_record("en-task-d001-e02-user", g, "step raised") == {
        "case_id": "en-task-d001-e02-user", "event_id": "en-task-d001-e02", "dialogue_id": "en-task-d001",
        "event_type": "SHIFT", "language": "en", "domain": "task", "condition": "user", "label": "SHIFT",
        "group": "en_task_user", "failed": True, "reason": "step raised", "event_start_s": 5.0, "event_end_s": 5.3,
        "context": [["system", "hi", 0.0, 1.0]]}
    bare = {k: v for k, v in gold().items() if k not in ("event_start_s", "event_end_s")}
    rec = failed_record("c", bare, "r")
    assert "event_start_s" not in rec and "event_end_s" not in rec and "context" not in rec and rec["failed"] is True
