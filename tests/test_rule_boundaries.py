"""Every Duplex-MPE threshold rule on its threshold and one millisecond either side (tests/MUTATION.md).

Stored times are ms-rounded (docs/conventions.md), so +-0.001 s is the smallest step a measurement can take. Each rule
is checked twice: on hand-written measurement records (the verdict alone), and end to end from exact model
spans through `measure_episode` (the measurement and the verdict together), so a boundary slip in either
layer fails here. The hand-applied bugs #1-#3 of tests/MUTATION.md are named in the tests that kill them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dataset_builder.episode import Episode, TimelineEvent
from metrics.judges import HeuristicJudge
from metrics.mpe.measure import measure_episode, overlapping, span_audio
from metrics.mpe.verdicts import (
    METRICS,
    Thresholds,
    answer_correct,
    answering_window_yield,
    fresh_onset,
    outcomes,
    response_presence,
    silence_preserved,
    window_response,
)
from metrics.spans import Span

TH = Thresholds()  # docs/benchmarks/mpe.md defaults: t_onset_window_s=5.0, yield_tolerance_s=1.0
MS = 0.001


# --- records ------------------------------------------------------------------------------------------------

def t_rec(onset: float | None, active: bool = False, verdict: str | None = "correct") -> dict[str, Any]:
    return {"kind": "T", "label": "T", "active_at_end": active, "onset_latency_s": onset, "answer_verdict": verdict}


def silence_rec(speech_s: float, ack: str | None) -> dict[str, Any]:
    return {"kind": "silence", "label": "N1", "speech_s": speech_s, "ack_verdict": ack}


def n4_rec(window_speech_s: float = 0.0, active: bool = False, stop: float | None = None, new: int = 0
           ) -> dict[str, Any]:
    return {"kind": "N4", "label": "N4", "window_speech_s": window_speech_s, "active_at_r_start": active,
            "stop_latency_s": stop, "new_onsets_in_r": new}


def test_defaults_are_the_spec_numbers() -> None:
    assert (TH.t_onset_window_s, TH.yield_tolerance_s) == (5.0, 1.0)
    th = Thresholds.from_params({"t_onset_window_s": "3", "yield_tolerance_s": 0.25, "endpoint_s": 9.0})
    assert th == Thresholds(t_onset_window_s=3.0, yield_tolerance_s=0.25)
    assert isinstance(th.t_onset_window_s, float)
    assert Thresholds.from_params({"yield_tolerance_s": 2}) == Thresholds(5.0, 2.0)
    assert Thresholds.from_params({}) == TH


@pytest.mark.parametrize("window", [5.0, 3.0, 0.25])
@pytest.mark.parametrize("delta, counts", [(-MS, True), (0.0, True), (MS, False)])
def test_t_onset_window_boundary(window: float, delta: float, counts: bool) -> None:
    """tests/MUTATION.md bug 1: an onset exactly at t_onset_window_s counts (`<=` turned `<` fails on delta=0)."""
    th = Thresholds(t_onset_window_s=window)
    m = t_rec(round(window + delta, 3))
    assert fresh_onset(m, th) is counts
    assert response_presence(m, th) is counts
    assert ("answer_accuracy" in outcomes(m, th)) is counts


def test_t_rules_off_the_threshold() -> None:
    assert fresh_onset(t_rec(0.0), TH) and response_presence(t_rec(0.0), TH)
    # No onset: neither. Speech active at T end: present but not fresh, whatever the later onset.
    assert not fresh_onset(t_rec(None), TH) and not response_presence(t_rec(None), TH)
    for onset in (None, 0.5, 4.0, 9.0):
        assert not fresh_onset(t_rec(onset, active=True), TH)
        assert response_presence(t_rec(onset, active=True), TH)


@pytest.mark.parametrize("verdict, ok", [("correct", True), ("incorrect", False), ("unparseable", False),
                                         (None, False), ("CORRECT", False)])
def test_answer_accuracy_only_on_a_correct_verdict(verdict: str | None, ok: bool) -> None:
    assert answer_correct(t_rec(1.0, verdict=verdict)) is ok
    assert outcomes(t_rec(1.0, verdict=verdict), TH) == {
        "fresh_onset_rate": True, "response_presence": True, "answer_accuracy": ok}
    # No response present: the T window leaves the accuracy denominator, whatever the verdict.
    assert outcomes(t_rec(None, verdict=verdict), TH) == {"fresh_onset_rate": False, "response_presence": False}


@pytest.mark.parametrize("speech_s, ack, preserved", [
    (0.0, None, True),                    # silent: preserved without any judge verdict
    (0.0, "intrusion", True),             # no speech is no speech, whatever a stray verdict says
    (MS, None, False),                    # one millisecond of speech needs a verdict to pass
    (MS, "intrusion", False),
    (MS, "unparseable", False),           # empty/garbled transcript: no exemption (docs/benchmarks/mpe.md)
    (MS, "acknowledgement", True),
    (2.5, "acknowledgement", True),
    (2.5, "intrusion", False),
])
def test_silence_preservation(speech_s: float, ack: str | None, preserved: bool) -> None:
    assert silence_preserved(silence_rec(speech_s, ack)) is preserved
    assert outcomes(silence_rec(speech_s, ack), TH) == {"silence_preservation": preserved}


@pytest.mark.parametrize("speech_s, responded", [(0.0, False), (MS, True), (3.0, True)])
def test_window_response_boundary(speech_s: float, responded: bool) -> None:
    assert window_response(n4_rec(window_speech_s=speech_s)) is responded


@pytest.mark.parametrize("tolerance", [1.0, 0.6, 2.0])
@pytest.mark.parametrize("delta, yields", [(-MS, True), (0.0, True), (MS, False)])
def test_yield_tolerance_boundary(tolerance: float, delta: float, yields: bool) -> None:
    """tests/MUTATION.md bug 3: speech stopping exactly yield_tolerance_s into N4R is a yield (`<=` turned `<`
    fails)."""
    th = Thresholds(yield_tolerance_s=tolerance)
    assert answering_window_yield(n4_rec(active=True, stop=round(tolerance + delta, 3)), th) is yields


@pytest.mark.parametrize("active, stop, new, yields", [
    (False, None, 0, True),   # silent at N4R: yields
    (False, None, 1, False),  # a new onset during N4R fails...
    (True, 0.2, 1, False),    # ...even after stopping in time
    (True, 0.0, 0, True),
    (True, 0.2, 2, False),
])
def test_yield_new_onsets_and_active_flag(active: bool, stop: float | None, new: int, yields: bool) -> None:
    assert answering_window_yield(n4_rec(active=active, stop=stop, new=new), TH) is yields
    got = outcomes(n4_rec(window_speech_s=1.0, active=active, stop=stop, new=new), TH)
    assert got == {"window_response": True, "answering_window_yield": yields}


def test_outcomes_denominators_and_unknown_kind() -> None:
    assert METRICS == ("fresh_onset_rate", "response_presence", "answer_accuracy", "silence_preservation",
                       "window_response", "answering_window_yield")
    with pytest.raises(ValueError, match="unknown measurement kind 'X' in c9"):
        outcomes({"kind": "X", "case_id": "c9"}, TH)


# --- end to end from exact spans -----------------------------------------------------------------------------

LABELS = {"t00": "N3", "t01": "T", "t02": "N1", "t03": "N4Q", "t04": "N4R", "t05": "N2"}
TIMES = {"preamble": (0.0, 3.0), "t00": (4.0, 6.0), "t01": (7.0, 9.0), "t02": (12.0, 14.0),
         "t03": (15.0, 17.0), "t04": (20.0, 22.0), "t05": (25.0, 27.0)}
T_END, R_START, R_END, N1_START, N1_NEXT = 9.0, 20.0, 22.0, 12.0, 15.0


def episode(labels: dict[str, str] = LABELS, times: dict[str, tuple[float, float]] = TIMES,
            duration: float = 30.0) -> Episode:
    gold = {"question": "How much does each person owe?", "gold_answer": "21", "gold_aliases": ["21 dollars"],
            "labels": labels}
    timeline = [TimelineEvent(k, "PRE" if k == "preamble" else "??", a, b) for k, (a, b) in times.items()]
    return Episode(case_id="c1", benchmark="mpe", condition="explicit", pair_id="p1", status="ok",
                   adapter={"name": "handmade"}, params={}, seed=0, timeline=timeline, duration_s=duration,
                   gold=gold)


class SpanText:
    """Transcribes each span to the text given for its start time."""

    def __init__(self, texts: dict[float, str] | None = None) -> None:
        self.texts = texts or {}
        self.calls: list[list[Span]] = []

    def __call__(self, spans: list[Span], window: tuple[float, float]) -> str:
        self.calls.append(list(spans))
        return " ".join(self.texts.get(s.start_s, "twenty one") for s in spans)


def measure(spans: list[Span], texts: dict[float, str] | None = None, ep: Episode | None = None
            ) -> dict[str, dict[str, Any]]:
    rows = measure_episode(ep or episode(), spans, SpanText(texts), HeuristicJudge())
    return {r["turn_id"]: r for r in rows}


@pytest.mark.parametrize("delta, counts", [(-MS, True), (0.0, True), (MS, False)])
def test_onset_exactly_at_the_window_end_counts(delta: float, counts: bool) -> None:
    """tests/MUTATION.md bug 1, end to end: a span starting exactly t_onset_window_s after T ends is a fresh onset."""
    start = T_END + TH.t_onset_window_s + delta
    # The T window runs to the next turn's start; in a run that is after the onset-window wait.
    late = {k: (a + 5.0, b + 5.0) if a >= N1_START else (a, b) for k, (a, b) in TIMES.items()}
    t = measure([Span(start, start + 1.0)], ep=episode(times=late, duration=35.0))["t01"]
    assert t["next_start_s"] == N1_START + 5.0
    assert t["onset_latency_s"] == round(5.0 + delta, 3)
    assert not t["active_at_end"]
    assert outcomes(t, TH) == ({"fresh_onset_rate": True, "response_presence": True, "answer_accuracy": True}
                               if counts else {"fresh_onset_rate": False, "response_presence": False})


@pytest.mark.parametrize("end, active", [(T_END - MS, False), (T_END, False), (T_END + MS, True)])
def test_active_at_t_end_boundary(end: float, active: bool) -> None:
    """Speech ending exactly at T end is over (spans are half-open); a millisecond later it is still on."""
    t = measure([Span(8.0, end), Span(10.0, 11.0)])["t01"]
    assert t["active_at_end"] is active
    assert t["onset_latency_s"] == 1.0  # the later span is the onset either way, never the carried-over one
    assert fresh_onset(t, TH) is not active and response_presence(t, TH)


def test_carried_over_speech_is_not_an_onset() -> None:
    t = measure([Span(8.0, 13.0)])["t01"]
    assert t["active_at_end"] and t["onset_latency_s"] is None
    assert outcomes(t, TH) == {"fresh_onset_rate": False, "response_presence": True, "answer_accuracy": True}


@pytest.mark.parametrize("delta, yields", [(-MS, True), (0.0, True), (MS, False)])
def test_stop_exactly_at_the_yield_tolerance_yields(delta: float, yields: bool) -> None:
    """tests/MUTATION.md bug 3, end to end: speech active at N4R onset that stops exactly yield_tolerance_s later
    yields."""
    stop = R_START + TH.yield_tolerance_s + delta
    n4 = measure([Span(18.0, stop)])["t03"]
    assert n4["active_at_r_start"] and n4["stop_latency_s"] == round(1.0 + delta, 3)
    assert n4["new_onsets_in_r"] == 0 and n4["window_speech_s"] == 2.0
    assert outcomes(n4, TH) == {"window_response": True, "answering_window_yield": yields}


@pytest.mark.parametrize("start, new", [(R_START + MS, 1), (R_END - MS, 1), (R_END, 0), (R_END + 1.0, 0)])
def test_new_onset_inside_n4r(start: float, new: int) -> None:
    """A model onset inside [N4R start, N4R end) fails the yield; one at N4R's end or later does not."""
    n4 = measure([Span(start, start + 0.5)])["t03"]
    assert not n4["active_at_r_start"] and n4["stop_latency_s"] is None
    assert n4["new_onsets_in_r"] == new and n4["window_speech_s"] == 0.0
    assert outcomes(n4, TH) == {"window_response": False, "answering_window_yield": new == 0}


@pytest.mark.parametrize("end, active", [(R_START - MS, False), (R_START, False), (R_START + MS, True)])
def test_active_at_n4r_start_boundary(end: float, active: bool) -> None:
    n4 = measure([Span(17.5, end)])["t03"]
    assert n4["active_at_r_start"] is active
    assert n4["stop_latency_s"] == (0.001 if active else None)
    assert n4["window_speech_s"] == round(min(end, R_START) - 17.5, 3)
    assert outcomes(n4, TH)["answering_window_yield"]


@pytest.mark.parametrize("span, speech_s", [
    (Span(11.0, N1_START), 0.0),                # ends exactly where the N1 window starts: outside it
    (Span(11.0, N1_START + MS), 0.001),         # one millisecond inside
    (Span(N1_NEXT - MS, 15.5), 0.001),          # one millisecond before the next turn starts
    (Span(N1_NEXT, 15.5), 0.0),                 # starts exactly at the next turn: outside
])
def test_silence_window_edges(span: Span, speech_s: float) -> None:
    n1 = measure([span], {span.start_s: "Paris is lovely"})["t02"]
    assert n1["speech_s"] == speech_s
    assert n1["window"] == [N1_START, N1_NEXT]
    if speech_s == 0:
        assert n1["spans"] == [] and n1["transcript"] == "" and n1["ack_verdict"] is None
        assert outcomes(n1, TH) == {"silence_preservation": True}
    else:
        assert n1["spans"] == [[span.start_s, span.end_s]] and n1["transcript"] == "Paris is lovely"
        assert n1["transcribed_s"] == round(span.duration_s, 3)  # the ASR hears the whole span, not the clipped part
        assert n1["ack_verdict"] == "intrusion"
        assert outcomes(n1, TH) == {"silence_preservation": False}


@pytest.mark.parametrize("transcript, preserved", [
    ("It is 21", False), ("Paris", False), ("Turn left now", False), ("Seven", False), ("Ten past three", False),
    ("Mm-hm.", True), ("Okay.", True), ("Sure.", True), ("Got it.", True), ("", False),
])
def test_acknowledgement_exemption_end_to_end(transcript: str, preserved: bool) -> None:
    """tests/MUTATION.md bug 2, end to end: only a real acknowledgement keeps a silence window; a short answer does
    not."""
    n1 = measure([Span(12.5, 13.0)], {12.5: transcript})["t02"]
    assert n1["speech_s"] == 0.5 and n1["transcript"] == transcript
    assert outcomes(n1, TH) == {"silence_preservation": preserved}


def test_full_records() -> None:
    """The fields of every record, for one episode with a response, an acknowledgement and a late yield."""
    spans = [Span(9.25, 10.5), Span(13.0, 13.4), Span(16.0, 21.5), Span(21.75, 21.9), Span(28.0, 29.0)]
    texts = {9.25: "It is 21 dollars.", 13.0: "okay", 16.0: "let me think", 21.75: "hm", 28.0: "bye now"}
    transcriber = SpanText(texts)
    rows = measure_episode(episode(), spans, transcriber, HeuristicJudge())
    base = {"case_id": "c1", "pair_id": "p1", "condition": "explicit"}
    expected = [
        base | {"kind": "silence", "label": "N3", "turn_id": "t00", "window": [4.0, 7.0], "speech_s": 0.0,
                "spans": [], "transcript": "", "transcribed_s": 0.0, "ack_verdict": None},
        base | {"kind": "T", "label": "T", "turn_id": "t01", "t_end_s": 9.0, "next_start_s": 12.0,
                "active_at_end": False, "onset_latency_s": 0.25, "response_spans": [[9.25, 10.5]],
                "transcript": "It is 21 dollars.", "transcribed_s": 1.25, "answer_verdict": "correct"},
        base | {"kind": "silence", "label": "N1", "turn_id": "t02", "window": [12.0, 15.0], "speech_s": 0.4,
                "spans": [[13.0, 13.4]], "transcript": "okay", "transcribed_s": 0.4, "ack_verdict": "acknowledgement"},
        base | {"kind": "N4", "label": "N4", "turn_id": "t03", "q_end_s": 17.0, "r_start_s": 20.0,
                "r_end_s": 22.0, "window_speech_s": 3.0, "active_at_r_start": True, "stop_latency_s": 1.5,
                "new_onsets_in_r": 1, "transcript": "let me think hm", "transcribed_s": 5.65},
        # the last turn's window runs to the end of the recording
        base | {"kind": "silence", "label": "N2", "turn_id": "t05", "window": [25.0, 30.0], "speech_s": 1.0,
                "spans": [[28.0, 29.0]], "transcript": "bye now", "transcribed_s": 1.0, "ack_verdict": "intrusion"},
    ]
    # Records may carry more fields than these; these must be exactly as stated.
    assert [{k: r.get(k) for k in e} for r, e in zip(rows, expected, strict=True)] == expected
    # The ASR hears only the spans of each window, the preamble's speech never; N4's spans (the whole of each that
    # reaches into [N4Q end, N4R end)) are heard for what the report shows the model said there.
    assert transcriber.calls == [[Span(9.25, 10.5)], [Span(13.0, 13.4)], [Span(16.0, 21.5), Span(21.75, 21.9)],
                                 [Span(28.0, 29.0)]]
    th = TH
    assert [outcomes(r, th) for r in rows] == [
        {"silence_preservation": True},
        {"fresh_onset_rate": True, "response_presence": True, "answer_accuracy": True},
        {"silence_preservation": True},
        {"window_response": True, "answering_window_yield": False},
        {"silence_preservation": False},
    ]


def test_no_response_is_not_transcribed_or_judged() -> None:
    transcriber = SpanText()
    rows = {r["turn_id"]: r for r in measure_episode(episode(), [], transcriber, HeuristicJudge())}
    assert transcriber.calls == []
    t = rows["t01"]
    assert (t["response_spans"], t["transcript"], t["answer_verdict"], t["onset_latency_s"]) == ([], "", None, None)
    assert all(rows[k]["ack_verdict"] is None and rows[k]["speech_s"] == 0.0 for k in ("t00", "t02", "t05"))


def test_wrong_answer_and_rounding() -> None:
    t = measure([Span(9.0004, 9.9)], {9.0004: "It is 20."})["t01"]
    assert t["onset_latency_s"] == 0.0 and t["response_spans"] == [[9.0, 9.9]]
    assert t["answer_verdict"] == "incorrect"
    assert outcomes(t, TH) == {"fresh_onset_rate": True, "response_presence": True, "answer_accuracy": False}
    t = measure([Span(10.0, 11.0), Span(11.5, 11.75)], {10.0: "twenty", 11.5: "one"})["t01"]
    assert t["onset_latency_s"] == 1.0 and t["transcript"] == "twenty one"  # spans of the window joined
    assert t["answer_verdict"] == "correct"


def test_labels_come_from_gold_and_unpaired_n4q_is_skipped() -> None:
    # The gold labels decide, not the timeline's: relabel t02 as N2 and make t03/t04 an N4Q without an N4R.
    labels = LABELS | {"t02": "N2", "t04": "N3"}
    rows = measure_episode(episode(labels=labels), [], SpanText(), HeuristicJudge())
    kinds = [(r["turn_id"], r["kind"], r["label"]) for r in rows]
    assert kinds == [("t00", "silence", "N3"), ("t01", "T", "T"), ("t02", "silence", "N2"),
                     ("t04", "silence", "N3"), ("t05", "silence", "N2")]
    # A timeline without the preamble clip, ending on N4Q: no N4 record, nothing out of range.
    times = {k: v for k, v in TIMES.items() if k in ("t00", "t01", "t02", "t03")}
    rows = measure_episode(episode(times=times), [], SpanText(), HeuristicJudge())
    assert [r["turn_id"] for r in rows] == ["t00", "t01", "t02"]
    # A timeline label is used for a clip the gold labels do not list.
    timeline = [TimelineEvent("x9", "N1", 1.0, 2.0)]
    ep = episode(labels={})
    ep.timeline = timeline
    assert [(r["label"], r["window"]) for r in measure_episode(ep, [], SpanText(), HeuristicJudge())] == [
        ("N1", [1.0, 30.0])]


def test_overlapping_is_open_at_both_ends() -> None:
    spans = [Span(1.0, 2.0), Span(2.0, 3.0), Span(3.0, 4.0)]
    assert overlapping(spans, 2.0, 3.0) == [Span(2.0, 3.0)]
    assert overlapping(spans, 1.999, 3.001) == spans
    assert overlapping(spans, 5.0, 6.0) == []


def test_span_audio_is_exact_slices() -> None:
    audio = np.arange(100, dtype=np.float32)
    got = span_audio(audio, 10, [Span(1.0, 2.0), Span(5.0, 5.5)])
    assert got.tolist() == [*range(10, 20), *range(50, 55)]
    empty = span_audio(audio, 10, [])
    assert empty.size == 0 and empty.dtype == np.float32


def test_windows_end_at_the_next_clip_and_an_n4r_may_end_the_recording() -> None:
    # N1, N2, then N4Q/N4R as the last two clips: the N2 window ends where N4Q starts (not at the end of the
    # recording), and the final N4R still gets its N4 record.
    labels = {"a": "N1", "b": "N2", "q": "N4Q", "r": "N4R"}
    times = {"a": (1.0, 2.0), "b": (3.0, 4.0), "q": (5.0, 6.0), "r": (9.0, 10.0)}
    spans = [Span(5.5, 6.5), Span(9.5, 9.9)]
    rows = {r["turn_id"]: r for r in measure_episode(episode(labels=labels, times=times, duration=12.0), spans,
                                                     SpanText({5.5: "Paris"}), HeuristicJudge())}
    assert rows["b"]["window"] == [3.0, 5.0] and rows["b"]["speech_s"] == 0.0
    assert outcomes(rows["b"], TH) == {"silence_preservation": True}
    n4 = rows["q"]
    assert (n4["q_end_s"], n4["r_start_s"], n4["r_end_s"]) == (6.0, 9.0, 10.0)
    assert n4["window_speech_s"] == 0.5 and n4["new_onsets_in_r"] == 1
    assert outcomes(n4, TH) == {"window_response": True, "answering_window_yield": False}


class SpyJudge:
    """Records what the judge is asked (an LLM judge reads the question; the heuristic one ignores it)."""

    def __init__(self) -> None:
        self.asked: list[tuple] = []

    def judge_answer(self, question: str, gold: str, aliases: list[str], response: str) -> Any:
        self.asked.append((question, gold, aliases, response))
        return type("V", (), {"label": "correct"})()

    def classify_ack(self, transcript: str) -> Any:
        self.asked.append(("ack", transcript))
        return type("V", (), {"label": "intrusion"})()


def test_the_judge_is_asked_the_episodes_question_gold_and_aliases() -> None:
    spy = SpyJudge()
    rows = measure_episode(episode(), [Span(9.5, 10.0)], SpanText({9.5: "It is 21."}), spy)
    assert spy.asked == [("How much does each person owe?", "21", ["21 dollars"], "It is 21.")]
    assert next(r for r in rows if r["kind"] == "T")["answer_verdict"] == "correct"
    # Without gold aliases in the record, the judge gets an empty list (not None).
    ep = episode()
    del ep.gold["gold_aliases"]
    spy = SpyJudge()
    measure_episode(ep, [Span(9.5, 10.0)], SpanText(), spy)
    assert spy.asked == [("How much does each person owe?", "21", [], "twenty one")]


def test_the_second_to_last_window_ends_where_the_last_clip_starts() -> None:
    # Speech inside the last turn's window only: the turn before it stays silent.
    labels = {"a": "N1", "b": "N2"}
    times = {"a": (1.0, 2.0), "b": (3.0, 4.0)}
    rows = measure_episode(episode(labels=labels, times=times, duration=8.0), [Span(5.0, 5.5)],
                           SpanText({5.0: "Paris"}), HeuristicJudge())
    assert [(r["turn_id"], r["window"], r["speech_s"]) for r in rows] == [("a", [1.0, 3.0], 0.0),
                                                                          ("b", [3.0, 8.0], 0.5)]
