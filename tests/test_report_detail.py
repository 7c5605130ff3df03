"""The report's window rows say why a window failed (docs/report.md, `episodes.html`): the `detail` column reads
the measurement's reason in words, beside one verdict per metric, and an N4 row shows what the model said.

Duplex-MPE from hand-written measurements (every failing metric's reason, under the thresholds the scores were
computed with); M3-DuplexBench from a hand-built run scored end to end with planted model speech."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dataset_builder.benchmarks import get_benchmark
from eval.report_site.collect import WindowRow, window_rows
from metrics.m3.score import score_run as score_m3
from tests import m3_handmade as H
from tests.handmade import DeafASR

MPE_RESULT = {"thresholds": {"t_onset_window_s": 5.0, "yield_tolerance_s": 1.0}}
BASE = {"case_id": "c", "pair_id": "p", "condition": "explicit"}


def t_window(**over: Any) -> dict[str, Any]:
    return BASE | {"kind": "T", "label": "T", "turn_id": "t01", "t_end_s": 9.0, "next_start_s": 20.0,
                   "active_at_end": False, "onset_latency_s": 0.5, "response_spans": [[9.5, 11.0]],
                   "transcript": "It is 21.", "transcribed_s": 1.5, "answer_verdict": "correct"} | over


def n4_window(**over: Any) -> dict[str, Any]:
    return BASE | {"kind": "N4", "label": "N4", "turn_id": "t03", "q_end_s": 17.0, "r_start_s": 20.0,
                   "r_end_s": 22.0, "window_speech_s": 1.12, "active_at_r_start": False, "stop_latency_s": None,
                   "new_onsets_in_r": 0, "transcript": "The kitchen light is on.", "transcribed_s": 1.12} | over


def mpe_row(m: dict[str, Any]) -> WindowRow:
    (row,) = window_rows(get_benchmark("mpe"), [m], MPE_RESULT)
    return row


def test_a_failed_mpe_window_says_why() -> None:
    speaking = mpe_row(t_window(active_at_end=True, onset_latency_s=None))
    assert speaking.outcomes == {"fresh_onset_rate": False, "response_presence": True, "answer_accuracy": True}
    assert speaking.detail == "already speaking when the turn ended (active_at_end): no fresh onset"
    late = mpe_row(t_window(onset_latency_s=6.25, answer_verdict="incorrect"))
    assert late.detail == "onset 6.25 s after the turn, past the 5 s onset window"
    assert late.verdicts == ["fail"]
    wrong = mpe_row(t_window(answer_verdict="incorrect"))
    assert wrong.detail == "answer judged incorrect" and wrong.verdicts == ["fail", "pass"]
    silent = mpe_row(t_window(onset_latency_s=None, response_spans=[], transcript="", answer_verdict=None))
    assert silent.detail == "no onset before the next turn"
    spoke = mpe_row(BASE | {"kind": "silence", "label": "N2", "turn_id": "t05", "window": [25.0, 30.0],
                            "speech_s": 2.4, "spans": [[25.5, 27.9]], "transcript": "I think it will rain.",
                            "transcribed_s": 2.4, "ack_verdict": "intrusion"})
    assert spoke.detail == ("spoke 2.40 s in a window for silence, judged intrusion (only a brief acknowledgement "
                            "passes)")
    assert mpe_row(t_window()).detail == ""  # passed: nothing to explain


def test_an_n4_row_says_what_the_model_said_and_why_it_failed() -> None:
    answered = mpe_row(n4_window())
    assert answered.talked and answered.speech_s == 1.12 and answered.transcript == "The kitchen light is on."
    assert answered.detail == "" and answered.verdicts == ["pass"]
    ran_on = mpe_row(n4_window(active_at_r_start=True, stop_latency_s=1.75, new_onsets_in_r=1))
    assert ran_on.detail == ("still speaking 1.75 s into the redirect, past the 1 s yield tolerance; 1 new onset(s) "
                             "during the redirect")
    quiet = mpe_row(n4_window(window_speech_s=0.0, transcript="", transcribed_s=0.0))
    assert quiet.detail == "silent between the question's end and the redirect"
    assert quiet.outcomes == {"window_response": False, "answering_window_yield": True}


def test_a_failed_m3_window_says_why(tmp_path: Path) -> None:
    s, d = 4.0, 14.0
    long_turn = [["system", "a long system turn", 0.5, s + 1.0]]
    planted = {"shift silent": ("SHIFT", [], None), "pause taken": ("PAUSE", [(s + 0.5, s + 2.0)], None),
               "barge-in run on": ("BARGE_IN", [(s - 3.0, d)], long_turn),
               "bc stopped": ("BC", [(s - 3.0, s + 0.2)], long_turn), "bc silent": ("BC", [], long_turn)}
    events = {}
    for n, (name, (kind, spans, ctx)) in enumerate(planted.items(), start=1):
        g = H.gold(kind, s=s, t=s + (0.3 if kind in ("SHIFT", "BC") else 2.0), event_n=n, context=ctx)
        H.write(tmp_path, f"{g['event_id']}-user", g, H.bursts(d, spans))
        events[g["event_id"]] = name
    result = score_m3(tmp_path, asr=DeafASR(), vad_factory=H.planted)
    ms = [json.loads(x) for x in (tmp_path / "measurements.jsonl").read_text().splitlines()]
    rows = {events[m["event_id"]]: r for m, r in zip(ms, window_rows(get_benchmark("m3"), ms, result), strict=True)}
    assert {r.verdict for r in rows.values()} == {"fail"} and len(rows) == 5
    assert rows["shift silent"].detail.startswith("did not take the turn in the window; takeover False")
    assert rows["pause taken"].detail.startswith("took the turn 0.50 s into the user's pause; takeover True")
    assert rows["barge-in run on"].detail.startswith("never stopped before the window's end; ")
    assert rows["bc stopped"].detail.startswith("stopped 0.20 s into the user's 0.30 s backchannel (it should talk "
                                                "through it); stop_latency_s 0.2")
    assert rows["bc silent"].detail.startswith("not speaking when the user's backchannel began (nothing to talk "
                                               "through)")
