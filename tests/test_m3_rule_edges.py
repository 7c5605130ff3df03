"""Known answers for the M3 timing rules (metrics/m3/rules.py) at every boundary, on both sides of it.

Each threshold is set through every path that can set it: the default (`Rules()`, the paper's), the named set
(`rules=authors`), a single `--param` override on either set (`rules_from`), and the parameter object itself.
Every compound rule is tested with each of its conditions failing alone: a takeover needs start >= s - 0.4, start
< W end and end > s; the authors' backchannel needs length < 1.0 s and fewer than 4 words; the authors' event
filter reads a system TURN (longer than 0.8 s) covering s with inclusive bounds. Times are hand-picked
milliseconds around s = 5 s (W = [5, 15)), so every expected number is exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from dataset_builder.errors import UsageError
from metrics.m3.rules import (
    RULE_SETS,
    EventTimes,
    Rules,
    describe,
    ms,
    reference_fits,
    rules_from,
    sec,
    segment_key,
    segments,
    verdict,
    visible,
    window_end,
)

PAPER, AUTHORS = RULE_SETS["paper"], RULE_SETS["authors"]
S = 5.0
T = {"SHIFT": 5.3, "PAUSE": 6.5, "BC": 5.5, "BARGE_IN": 7.0}


def meas(kind: str, spans: list[list[float]], *, t: float | None = None, b: float | None = None,
         end: float = 15.0, **extra: Any) -> dict[str, Any]:
    """One stored measurement: s = 5 s, the recording ends at `end` (s + Δ by default)."""
    if b is None:
        b = S if kind in ("BC", "BARGE_IN") else 2.0
    return {"case_id": "en-task-d001-e01-user", "event_type": kind, "prompt_start_s": b, "event_start_s": S,
            "event_end_s": T[kind] if t is None else t, "duration_s": end, "vad_spans": spans} | extra


def latency(kind: str, spans: list[list[float]], rules: Rules = PAPER, **kw: Any) -> float | None:
    return verdict(meas(kind, spans, **kw), rules)["latency_s"]


def stop(kind: str, spans: list[list[float]], rules: Rules = PAPER, **kw: Any) -> float | None:
    return verdict(meas(kind, spans, **kw), rules)["stop_latency_s"]


# ------------------------------------------------------------------------------------------ milliseconds


def test_times_round_to_the_nearest_millisecond() -> None:
    assert ms(4.6) == 4600  # 4.6 * 1000 is 4599.999999999999: truncating would lose a millisecond
    assert ms(0.0014) == 1 and ms(0.0016) == 2 and ms(-0.4) == -400 and ms("1.5") == 1500
    assert sec(1500) == 1.5 and sec(-400) == -0.4


# -------------------------------------------------------------------------- (8) the IPU split of model speech


@pytest.mark.parametrize(("gap", "paper", "authors"), [
    (0.499, 1, 1),  # shorter than 0.5 s: joined by both
    (0.5, 1, 2),  # exactly 0.5 s: the paper joins (> 0.5 s splits), the code splits (>= 0.5 s)
    (0.501, 2, 2),  # longer: split by both
])
def test_segment_split_at_half_a_second(gap: float, paper: int, authors: int) -> None:
    spans = [[1.0, 2.0], [2.0 + gap, 3.0 + gap]]
    assert len(segments(spans, PAPER)) == paper and len(segments(spans, AUTHORS)) == authors
    assert len(segments(spans, Rules(split_at_gap=True))) == authors  # (8) alone
    assert len(segments(spans, rules_from({"split_at_gap": "true"})[0])) == authors
    assert len(segments(spans, rules_from({"rules": "authors", "split_at_gap": False})[0])) == paper


def test_segments_sort_join_and_keep_the_longer_end() -> None:
    spans = [[6.0, 7.0], [1.0, 5.0], [2.0, 3.0], [5.2, 5.4]]
    assert segments(spans, PAPER) == [(1000, 5400), (6000, 7000)]  # [2, 3] inside [1, 5] keeps the end 5
    assert segments(spans, Rules(ipu_gap_s=0.1)) == [(1000, 5000), (5200, 5400), (6000, 7000)]
    assert segments(spans, rules_from({"ipu_gap_s": 0.2})[0]) == [(1000, 5400), (6000, 7000)]  # 0.2 joins
    assert segments(spans, Rules(ipu_gap_s=0.2, split_at_gap=True)) == [(1000, 5000), (5200, 5400), (6000, 7000)]
    assert segments([], PAPER) == []


# ---------------------------------------------------------------------------------------- W and the view


def test_window_end_under_each_rule() -> None:
    def w(kind: str, rules: Rules, t: float, end: float = 30.0) -> int:
        return window_end(EventTimes(kind, 5000, 5000, ms(t), ms(end)), rules)

    assert w("SHIFT", PAPER, 5.3) == 15000
    assert w("BARGE_IN", PAPER, 17.0) == 15000  # (5) off: Δ whatever the event's length
    assert w("BARGE_IN", AUTHORS, 17.0) == 17000  # (5) the code: max(Δ, t - s)
    assert w("BC", Rules(extend_window=True), 17.0) == 17000
    assert w("BC", Rules(extend_window=True), 7.0) == 15000  # a short event keeps Δ
    assert w("PAUSE", AUTHORS, 17.0) == 15000  # SHIFT / PAUSE never extend
    assert w("SHIFT", AUTHORS, 17.0) == 15000
    assert w("BARGE_IN", AUTHORS, 17.0, end=16.0) == 16000  # never past the recording
    assert w("SHIFT", PAPER, 5.3, end=12.0) == 12000
    assert w("SHIFT", Rules(window_s=4.0), 5.3) == 9000
    assert w("SHIFT", rules_from({"rules": "authors", "window_s": 4})[0], 5.3) == 9000


def test_visible_cuts_to_the_code_input() -> None:
    ev = EventTimes("SHIFT", 2000, 5000, 5300, 15000)
    segs = [(500, 2000), (1500, 2500), (3000, 4000), (14000, 16000), (15000, 15500)]
    assert visible(segs, ev, PAPER) == segs  # the whole recording
    # [b, W end): one ending at b and one starting at W end are gone; the others are cut to the edges
    assert visible(segs, ev, AUTHORS) == [(2000, 2500), (3000, 4000), (14000, 15000)]
    assert visible(segs, ev, Rules(view="input")) == [(2000, 2500), (3000, 4000), (14000, 15000)]
    assert visible([(1999, 2001)], ev, AUTHORS) == [(2000, 2001)]


# ----------------------------------------------------------------------------------- SHIFT / PAUSE takeover


@pytest.mark.parametrize(("span", "expected"), [
    ([4.6, 6.0], -0.4),  # begins exactly 0.4 s before s: a takeover
    ([4.599, 6.0], None),  # start >= s - 0.4 fails alone
    ([4.7, 5.0], None),  # end > s fails alone: it ended at s, before W
    ([4.7, 5.001], -0.3),
    ([14.999, 16.0], 9.999),  # starts 1 ms before W ends
    ([15.0, 16.0], None),  # start < W end fails alone
    ([5.0, 5.2], 0.0),
])
def test_takeover_conditions_each_failing_alone(span: list[float], expected: float | None) -> None:
    for kind in ("SHIFT", "PAUSE"):
        v = verdict(meas(kind, [span], end=20.0), PAPER)
        assert v["takeover"] is (expected is not None) and v["latency_s"] == expected
        assert v["onset_s"] == (None if expected is None else span[0])
        assert v["segment"] == (None if expected is None else span)


def test_no_takeover_says_why() -> None:
    assert verdict(meas("SHIFT", []), PAPER) == {"scored": True, "dropped": None, "window": [5.0, 15.0],
                                                 "takeover": False, "segment": None, "onset_s": None,
                                                 "latency_s": None, "why": "no takeover"}
    assert verdict(meas("PAUSE", []), PAPER) == {"scored": True, "dropped": None, "window": [5.0, 15.0],
                                                 "takeover": False, "segment": None, "onset_s": None,
                                                 "latency_s": None, "why": "no takeover"}


def test_max_overlap_through_every_path() -> None:
    early = [[4.7, 6.0]]  # 0.3 s before s
    assert latency("SHIFT", early) == -0.3 and latency("SHIFT", early, AUTHORS) == -0.3
    for rules in (Rules(max_overlap_s=0.2), rules_from({"max_overlap_s": 0.2})[0],
                  rules_from({"rules": "authors", "max_overlap_s": 0.2})[0]):
        assert latency("SHIFT", early, rules) is None
        assert latency("SHIFT", [[4.8, 6.0]], rules) == -0.2  # exactly the overridden allowance
    assert latency("SHIFT", [[5.0, 6.0]], Rules(max_overlap_s=0)) == 0.0
    assert latency("SHIFT", [[4.999, 6.0]], Rules(max_overlap_s=0)) is None


def test_window_length_through_every_path() -> None:
    for rules in (Rules(window_s=4.0), rules_from({"window_s": 4.0})[0], rules_from({"rules": "authors",
                                                                                    "window_s": 4})[0]):
        assert latency("SHIFT", [[8.999, 9.5]], rules) == 3.999
        assert latency("SHIFT", [[9.0, 9.5]], rules) is None
        assert verdict(meas("SHIFT", []), rules)["window"] == [5.0, 9.0]


def test_a_recording_shorter_than_the_window_cuts_it() -> None:
    assert latency("SHIFT", [[11.999, 13.0]], end=12.0) == 6.999
    assert latency("SHIFT", [[12.0, 13.0]], end=12.0) is None


def test_shift_pick_earliest_or_closest() -> None:
    # Under a 0.2 s split two candidates exist: [4.65, 5.05] (0.35 s before s) and [5.3, 6.0] (0.3 s after).
    spans = [[4.65, 5.05], [5.3, 6.0]]
    fine = Rules(ipu_gap_s=0.2)
    assert latency("SHIFT", spans, fine) == -0.35
    for rules in (Rules(ipu_gap_s=0.2, shift_pick="closest"), rules_from({"ipu_gap_s": 0.2,
                                                                          "shift_pick": "closest"})[0]):
        v = verdict(meas("SHIFT", spans), rules)
        assert (v["latency_s"], v["onset_s"], v["segment"]) == (0.3, 5.3, [5.3, 6.0])
    # a tie in distance goes to the earlier start
    assert latency("SHIFT", [[4.7, 5.1], [5.3, 6.0]], Rules(ipu_gap_s=0.1, shift_pick="closest")) == -0.3


def test_earliest_takeover_is_the_first_candidate() -> None:
    assert latency("SHIFT", [[7.0, 8.0], [5.6, 6.0]]) == 0.6
    assert latency("PAUSE", [[3.0, 4.0], [6.0, 6.2], [8.0, 9.0]]) == 1.0  # [3, 4] ends before s


# ---------------------------------------------------------------------------- (2) PAUSE under the code's rule


def test_pause_overlap_bounds() -> None:
    rules = Rules(pause_takeover="pause_overlap")
    assert latency("PAUSE", [[3.0, 5.001]], rules) == -2.0  # begun 2 s before s, running into the pause
    assert latency("PAUSE", [[3.0, 5.0]], rules) is None  # ends at s: does not overlap (s, t)
    assert latency("PAUSE", [[6.499, 7.0]], rules) == 1.499
    assert latency("PAUSE", [[6.5, 7.0]], rules) is None  # starts at t: after the pause
    assert latency("PAUSE", [[3.0, 5.001]]) is None  # the paper: begun more than 0.4 s before s
    v = verdict(meas("PAUSE", [[6.1, 6.3], [3.0, 5.5]]), rules)
    assert v == {"scored": True, "dropped": None, "window": [5.0, 15.0], "bc_filter": "off", "takeover": True,
                 "onset_s": 3.0, "latency_s": -2.0, "segment": [3.0, 5.5]}
    assert verdict(meas("PAUSE", [[3.0, 5.001]]), rules_from({"pause_takeover": "pause_overlap"})[0])[
        "latency_s"] == -2.0
    assert verdict(meas("SHIFT", [[3.0, 5.5]]), rules)["takeover"] is False  # (2) is for PAUSE only
    assert verdict(meas("PAUSE", [[3.0, 5.0]]), rules) == {
        "scored": True, "dropped": None, "window": [5.0, 15.0], "bc_filter": "off", "takeover": False,
        "segment": None, "onset_s": None, "latency_s": None, "why": "no takeover"}


BC_RULES = Rules(pause_takeover="pause_overlap", ignore_backchannels=True)


def words_of(seg: tuple[float, float], n: int, rules: Rules = BC_RULES) -> dict[str, dict[str, int]]:
    return {"words": {segment_key((ms(seg[0]), ms(seg[1])), rules, EventTimes("PAUSE", 2000, 5000, 6500, 15000)):
                      n}}


@pytest.mark.parametrize(("seg", "n_words", "ignored"), [
    ((5.5, 6.4), 3, True),  # short and brief: a backchannel, not a takeover
    ((5.5, 6.4), 4, False),  # short but wordy
    ((5.5, 6.5), 1, False),  # long (exactly 1.0 s) but brief
    ((5.5, 6.499), 3, True),  # 0.999 s
    ((5.5, 6.499), 0, True),
])
def test_backchannel_filter_each_condition_failing_alone(seg: tuple[float, float], n_words: int,
                                                         ignored: bool) -> None:
    for rules in (BC_RULES, rules_from({"pause_takeover": "pause_overlap", "ignore_backchannels": True})[0]):
        v = verdict(meas("PAUSE", [list(seg)], **words_of(seg, n_words, rules)), rules)
        assert v["bc_filter"] == "applied"
        assert v["takeover"] is not ignored and v["latency_s"] == (None if ignored else 0.5)
    # the filter off: always a takeover
    v = verdict(meas("PAUSE", [list(seg)], **words_of(seg, n_words)), Rules(pause_takeover="pause_overlap"))
    assert (v["takeover"], v["bc_filter"]) == (True, "off")


def test_backchannel_thresholds_through_every_path() -> None:
    seg = (5.5, 6.0)  # 0.5 s, 2 words
    assert verdict(meas("PAUSE", [list(seg)], **words_of(seg, 2, AUTHORS)), AUTHORS)["takeover"] is False
    for over in ({"bc_max_s": 0.5}, {"bc_max_words": 2}):
        rules = rules_from({"rules": "authors"} | over)[0]
        assert verdict(meas("PAUSE", [list(seg)], **words_of(seg, 2, rules)), rules)["takeover"] is True
        rules = replace_bc(over)
        assert verdict(meas("PAUSE", [list(seg)], **words_of(seg, 2, rules)), rules)["takeover"] is True
    rules = rules_from({"rules": "authors", "bc_max_s": 0.501, "bc_max_words": 3})[0]
    assert verdict(meas("PAUSE", [list(seg)], **words_of(seg, 2, rules)), rules)["takeover"] is False


def replace_bc(over: dict[str, Any]) -> Rules:
    return Rules(pause_takeover="pause_overlap", ignore_backchannels=True, **over)


def test_backchannel_without_word_counts_is_kept_and_reported() -> None:
    v = verdict(meas("PAUSE", [[5.5, 6.0]]), BC_RULES)
    assert v["bc_filter"] == "not applied (no word counts)" and v["takeover"] is True and v["latency_s"] == 0.5
    # a long segment needs no word count: still "applied"
    v = verdict(meas("PAUSE", [[5.5, 7.0]]), BC_RULES)
    assert v["bc_filter"] == "applied" and v["takeover"] is True
    # an unknown short one first, a known backchannel later: the report still says not applied
    both = meas("PAUSE", [[5.2, 5.4], [6.0, 6.3]], **words_of((6.0, 6.3), 1, Rules(
        pause_takeover="pause_overlap", ignore_backchannels=True, ipu_gap_s=0.1)))
    v = verdict(both, Rules(pause_takeover="pause_overlap", ignore_backchannels=True, ipu_gap_s=0.1))
    assert v["bc_filter"] == "not applied (no word counts)" and v["latency_s"] == 0.2


def test_segment_key_names_the_segmentation() -> None:
    ev = EventTimes("PAUSE", 2000, 5000, 6500, 15000)
    assert segment_key((5500, 6400), PAPER, ev) == "gt:5500-6400"
    assert segment_key((5500, 6400), AUTHORS, ev) == "ge:5500-6400"
    # a count stored under the other segmentation is not read
    seg = (5.5, 6.4)
    v = verdict(meas("PAUSE", [list(seg)], **words_of(seg, 1, PAPER)), AUTHORS)
    assert v["bc_filter"] == "not applied (no word counts)" and v["takeover"] is True


# ----------------------------------------------------------------------------- (3) PAUSE latency fallback


def test_pause_fallback_next_onset_or_window_end() -> None:
    fb = Rules(pause_latency_fallback="next_onset_or_window_end")
    v = verdict(meas("PAUSE", [[15.5, 16.0]], end=20.0), fb)  # after W: no takeover, but the next onset
    assert (v["takeover"], v["onset_s"], v["latency_s"], v["why"]) == (False, 15.5, 10.5, "next onset after the pause")
    v = verdict(meas("PAUSE", []), fb)
    assert (v["takeover"], v["onset_s"], v["latency_s"], v["why"]) == (False, None, 10.0, "no onset: window end")
    v = verdict(meas("PAUSE", [[1.0, 2.0]], end=12.0), fb)  # only speech before the pause; W cut at 12
    assert (v["onset_s"], v["latency_s"]) == (None, 7.0)
    assert verdict(meas("PAUSE", []), PAPER)["latency_s"] is None  # the paper leaves it undefined
    # the code's own combination: overlap rule, then the fallback; an onset exactly at t counts
    code = Rules(pause_takeover="pause_overlap", pause_latency_fallback="next_onset_or_window_end")
    v = verdict(meas("PAUSE", [[16.0, 17.0], [6.5, 7.0]], end=20.0), code)
    assert (v["takeover"], v["onset_s"], v["latency_s"]) == (False, 6.5, 1.5)
    v = verdict(meas("PAUSE", [[6.4, 6.45]], end=20.0), rules_from({"pause_takeover": "pause_overlap",
                                                                    "pause_latency_fallback":
                                                                        "next_onset_or_window_end"})[0])
    assert v["takeover"] is True and v["latency_s"] == 1.4
    # with the authors' view W is [s, s + Δ): an onset after it is not seen, so the window end stands
    assert verdict(meas("PAUSE", [[15.5, 16.0]], end=20.0), AUTHORS)["latency_s"] == 10.0
    # the fallback is for PAUSE: a SHIFT without takeover stays undefined
    assert verdict(meas("SHIFT", [[15.5, 16.0]], end=20.0), fb)["latency_s"] is None


# ------------------------------------------------------------------------------------ BC / BARGE_IN stop


@pytest.mark.parametrize(("span", "expected", "censored"), [
    ([5.0, 7.0], 2.0, False),  # begins exactly at s: speaking at s
    ([4.0, 5.0], None, False),  # ends exactly at s: not speaking at s
    ([5.001, 7.0], None, False),
    ([4.0, 5.001], 0.001, False),
    ([4.0, 14.999], 9.999, False),
    ([4.0, 15.0], 10.0, True),  # runs to the window end: censored
    ([4.0, 18.0], 10.0, True),  # past it: cut at the window end
])
def test_stop_latency_speaking_at_s(span: list[float], expected: float | None, censored: bool) -> None:
    for kind in ("BC", "BARGE_IN"):
        v = verdict(meas(kind, [span], end=20.0), PAPER)
        assert v["stop_latency_s"] == expected and v["censored"] is censored
        assert v["speaking"] is (expected is not None)
        assert v["segment"] == (span if expected is not None else None)
        if expected is None:
            assert v["why"] == "model not speaking at s"


def test_stop_latency_earliest_before_grace() -> None:
    rules = Rules(stop_rule="earliest_before")
    assert stop("BC", [[5.499, 6.0]], rules) == 1.0
    v = verdict(meas("BC", [[5.5, 6.0]]), rules)
    assert (v["speaking"], v["stop_latency_s"], v["segment"]) == (False, None, None)
    assert v["why"] == "no model segment starting before s + 0.5 s"
    assert stop("BC", [[4.0, 6.0], [1.0, 2.0]], rules) == -3.0  # the earliest, even one that ended before s
    assert stop("BC", [[4.0, 6.0], [1.0, 2.0]], AUTHORS) == 1.0  # the code's input starts at s: [5, 6]
    assert stop("BC", [[4.0, 15.0]], rules) == 10.0 and verdict(meas("BC", [[4.0, 15.0]]), rules)["censored"]
    for grace in (Rules(stop_rule="earliest_before", stop_grace_s=0.2),
                  rules_from({"stop_rule": "earliest_before", "stop_grace_s": 0.2})[0],
                  rules_from({"rules": "authors", "stop_grace_s": 0.2})[0]):
        assert stop("BARGE_IN", [[5.199, 6.0]], grace) == 1.0
        v = verdict(meas("BARGE_IN", [[5.2, 6.0]]), grace)
        assert v["stop_latency_s"] is None and v["why"] == "no model segment starting before s + 0.2 s"
    assert stop("BC", [[5.0, 6.0]], Rules(stop_rule="earliest_before", stop_grace_s=0)) is None
    assert stop("BC", [[4.999, 6.0]], Rules(stop_rule="earliest_before", stop_grace_s=0)) == 1.0


def test_extended_window_lets_a_long_barge_in_run() -> None:
    spans = [[4.0, 19.0]]
    v = verdict(meas("BARGE_IN", spans, t=17.0, end=20.0), PAPER)
    assert (v["stop_latency_s"], v["censored"], v["window"]) == (10.0, True, [5.0, 15.0])
    for rules in (Rules(extend_window=True), rules_from({"extend_window": "TRUE"})[0]):
        v = verdict(meas("BARGE_IN", spans, t=17.0, end=20.0), rules)
        assert (v["stop_latency_s"], v["censored"], v["window"]) == (12.0, True, [5.0, 17.0])
    v = verdict(meas("BARGE_IN", [[4.0, 16.0]], t=17.0, end=20.0), Rules(extend_window=True))
    assert (v["stop_latency_s"], v["censored"]) == (11.0, False)


# ------------------------------------------------------------------------------ (6) the authors' event filter


def ctx(*turns: tuple[str, float, float]) -> list[list[Any]]:
    return [[who, "words", a, b] for who, a, b in turns]


@pytest.mark.parametrize(("kind", "context", "t", "fits"), [
    ("SHIFT", ctx(("user", 2.0, 5.0)), 5.3, True),
    ("SHIFT", ctx(("system", 3.0, 5.0)), 5.3, False),  # a system TURN ending exactly at s covers it
    ("SHIFT", ctx(("system", 5.0, 6.0)), 5.3, False),  # ... and one starting exactly at s
    ("SHIFT", ctx(("system", 3.0, 4.999)), 5.3, True),
    ("SHIFT", ctx(("system", 5.001, 6.0)), 5.3, True),
    ("SHIFT", ctx(("system", 4.5, 5.3)), 5.3, True),  # exactly 0.8 s: a BC, not a TURN
    ("SHIFT", ctx(("system", 4.5, 5.301)), 5.3, False),  # 0.801 s: a TURN
    ("SHIFT", ctx(("user", 2.0, 5.0)), 5.0, False),  # the reply starts at s (t == s): overlapping
    ("SHIFT", ctx(("user", 2.0, 5.0)), 4.8, False),  # t < s
    ("SHIFT", ctx(("user", 2.0, 5.0)), 5.001, True),
    ("PAUSE", ctx(("system", 3.0, 5.0)), 6.5, False),
    ("PAUSE", ctx(("user", 3.0, 5.0)), 6.5, True),
    ("PAUSE", ctx(("user", 3.0, 5.0)), 5.0, True),  # the t <= s rule is the SHIFT's own
    ("BC", ctx(("system", 3.0, 8.0)), 5.5, True),
    ("BC", ctx(("system", 5.0, 8.0)), 5.5, True),
    ("BC", ctx(("system", 3.0, 5.0)), 5.5, True),
    ("BC", ctx(("system", 3.0, 4.999)), 5.5, False),
    ("BC", ctx(("user", 3.0, 8.0)), 5.5, False),  # the user's own turn is no system TURN
    ("BARGE_IN", ctx(("system", 3.0, 8.0)), 7.0, True),
    ("BARGE_IN", ctx(("system", 4.5, 5.3)), 7.0, False),  # 0.8 s is no TURN
    ("BARGE_IN", [], 7.0, False),
])
def test_reference_fits_each_condition(kind: str, context: list[list[Any]], t: float, fits: bool) -> None:
    m = meas(kind, [[5.0, 6.0]], t=t, context=context)
    assert reference_fits(m) is fits
    v = verdict(m, AUTHORS)
    assert v["scored"] is fits
    if not fits:
        needs = "silent" if kind in ("SHIFT", "PAUSE") else "speaking"
        reason = (f"the reference system is in a turn at s, where a {kind} needs it silent (rule 6)"
                  if needs == "silent" else
                  f"the reference system is not in a turn at s, where a {kind} needs it speaking (rule 6)")
        if kind == "SHIFT" and t <= 5.0:
            reason = (f"overlapping SHIFT: the reply starts {5.0 - t:g} s before the user's turn ends, so the "
                      "reference system is speaking at s (rule 6)")
        assert v == {"scored": False, "dropped": reason}
    assert verdict(m, PAPER)["scored"] is True
    assert verdict(m, rules_from({"drop_unfit_events": True})[0])["scored"] is fits


def test_reference_fits_reads_only_whole_context_entries() -> None:
    assert reference_fits(meas("SHIFT", [])) is None  # no context: cannot tell, never dropped
    assert reference_fits(meas("SHIFT", [], context="x")) is None
    assert verdict(meas("SHIFT", [[5.3, 6.0]]), AUTHORS)["scored"] is True
    # short entries and non-list entries are skipped; a tuple entry counts
    assert reference_fits(meas("SHIFT", [], context=[["system", "x", 3.0], "system"])) is True
    assert reference_fits(meas("SHIFT", [], context=[("system", "x", 3.0, 6.0)])) is False
    assert reference_fits(meas("BC", [], context=[("system", "x", 3.0, 6.0)])) is True


# ------------------------------------------------------------------------------- describe: what is stored


def test_describe_records_what_the_verdicts_read() -> None:
    spans = [[1.0, 2.0], [4.7, 5.2], [5.9, 6.1], [7.0, 8.0]]
    d = describe(spans, meas("PAUSE", spans), PAPER)
    assert d == {"segments": [[1.0, 2.0], [4.7, 5.2], [5.9, 6.1], [7.0, 8.0]], "window": [5.0, 15.0],
                 "candidates": [[4.7, 5.2], [5.9, 6.1], [7.0, 8.0]], "earliest": [4.7, 5.2],
                 "closest": [4.7, 5.2], "speaking_at_s": True, "segment_at_s": [4.7, 5.2],
                 "next_onset_s": 5.9, "pause_overlap": [[4.7, 5.2], [5.9, 6.1]], "onset_after_pause_s": 7.0}
    d = describe(spans, meas("SHIFT", spans), AUTHORS)  # the code's input [b, W end), segments split at >= 0.5 s
    assert d["segments"] == [[4.7, 5.2], [5.9, 6.1], [7.0, 8.0]] and "pause_overlap" not in d
    d = describe([[3.0, 4.0], [5.1, 5.3], [4.9, 5.0]], meas("BC", []), Rules(ipu_gap_s=0.05))
    assert d["candidates"] == [[5.1, 5.3]]  # [4.9, 5.0] ends at s: not in W
    assert (d["earliest"], d["closest"], d["speaking_at_s"], d["segment_at_s"], d["next_onset_s"]) == (
        [5.1, 5.3], [5.1, 5.3], False, None, 5.1)
    d = describe([[5.6, 5.8], [6.1, 7.0], [4.6, 5.05]], meas("SHIFT", []), Rules(ipu_gap_s=0.2))
    assert (d["earliest"], d["closest"]) == ([4.6, 5.05], [4.6, 5.05])
    d = describe([[5.3, 5.4], [4.6, 5.05]], meas("SHIFT", []), Rules(ipu_gap_s=0.2))
    assert (d["earliest"], d["closest"]) == ([4.6, 5.05], [5.3, 5.4])
    d = describe([[15.0, 16.0]], meas("PAUSE", [], end=20.0), PAPER)
    assert (d["candidates"], d["earliest"], d["closest"], d["next_onset_s"], d["pause_overlap"],
            d["onset_after_pause_s"]) == ([], None, None, 15.0, [], 15.0)
    d = describe([[4.0, 5.0]], meas("BC", []), PAPER)
    assert (d["speaking_at_s"], d["segment_at_s"], d["next_onset_s"], d["candidates"]) == (False, None, None, [])


def test_unknown_event_type_is_an_error_naming_the_case() -> None:
    with pytest.raises(ValueError, match=r"^en-task-d001-e01-user: unknown event type 'HOLD'; known: "
                                         r"\('SHIFT', 'PAUSE', 'BC', 'BARGE_IN'\)$"):
        verdict(meas("SHIFT", []) | {"event_type": "HOLD"}, PAPER)


# ----------------------------------------------------------------------------- rule sets and --param values


def test_named_rule_sets_hold_the_eleven_differences() -> None:
    assert PAPER == Rules() and PAPER.to_dict() == {
        "name": "paper", "window_s": 10.0, "max_overlap_s": 0.4, "ipu_gap_s": 0.5, "split_at_gap": False,
        "view": "recording", "shift_pick": "earliest", "pause_takeover": "window", "ignore_backchannels": False,
        "bc_max_s": 1.0, "bc_max_words": 4, "pause_latency_fallback": "undefined", "stop_rule": "speaking_at_s",
        "stop_grace_s": 0.5, "extend_window": False, "drop_unfit_events": False, "content_scale": "unit",
        "ci": True}
    diff = {k: v for k, v in AUTHORS.to_dict().items() if PAPER.to_dict()[k] != v}
    assert diff == {"name": "authors", "split_at_gap": True, "view": "input", "shift_pick": "closest",
                    "pause_takeover": "pause_overlap", "ignore_backchannels": True,
                    "pause_latency_fallback": "next_onset_or_window_end", "stop_rule": "earliest_before",
                    "extend_window": True, "drop_unfit_events": True, "content_scale": "0-2", "ci": False}


def test_rules_from_names_and_types() -> None:
    assert rules_from(None) == (PAPER, {}) and rules_from({}) == (PAPER, {})
    assert rules_from({"rules": "paper"}) == (PAPER, {})
    assert rules_from({"rules": "authors"}) == (AUTHORS, {"rules": "authors"})
    rules, applied = rules_from({"ci": "False", "bc_max_s": 1, "bc_max_words": 3.0, "rules": "paper"})
    assert rules.name == "paper+bc_max_s=1.0,bc_max_words=3,ci=False"
    assert applied == {"ci": False, "bc_max_s": 1.0, "bc_max_words": 3}
    assert type(rules.bc_max_s) is float and type(rules.bc_max_words) is int and rules.ci is False
    rules, applied = rules_from({"rules": "authors", "ci": True})
    assert rules.name == "authors+ci=True" and rules.ci is True and rules.view == "input"
    assert applied == {"rules": "authors", "ci": True}
    assert rules_from({"extend_window": "true"})[0].extend_window is True


@pytest.mark.parametrize(("over", "message"), [
    ({"rules": "mine"}, "--param rules='mine': known rule sets are paper, authors"),
    ({"shift_pik": "closest"}, "--param shift_pik: unknown M3 rule parameter; known: rules, bc_max_s, "
                               "bc_max_words, ci, content_scale, drop_unfit_events, extend_window, "
                               "ignore_backchannels, ipu_gap_s, max_overlap_s, pause_latency_fallback, "
                               "pause_takeover, shift_pick, split_at_gap, stop_grace_s, stop_rule, view, "
                               "window_s"),
    ({"name": "x"}, "--param name: unknown M3 rule parameter"),
    ({"ci": "yes"}, "--param ci='yes': expected true or false"),
    ({"ci": 1}, "--param ci=1: expected true or false"),
    ({"window_s": "10"}, "--param window_s='10': expected a number"),
    ({"window_s": True}, "--param window_s=True: expected a number"),
    ({"bc_max_words": 2.5}, "--param bc_max_words=2.5: expected a whole number"),
    ({"bc_max_words": False}, "--param bc_max_words=False: expected a number"),
    ({"shift_pick": 1}, "--param shift_pick=1: expected one of earliest, closest"),
    ({"shift_pick": "latest"}, "--param shift_pick='latest': expected one of earliest, closest"),
    ({"view": "all"}, "--param view='all': expected one of recording, input"),
    ({"pause_takeover": "x"}, "--param pause_takeover='x': expected one of window, pause_overlap"),
    ({"pause_latency_fallback": "x"}, "--param pause_latency_fallback='x': expected one of undefined, "
                                      "next_onset_or_window_end"),
    ({"stop_rule": "x"}, "--param stop_rule='x': expected one of speaking_at_s, earliest_before"),
    ({"content_scale": "x"}, "--param content_scale='x': expected one of unit, 0-2"),
    ({"window_s": 0}, "--param window_s=0.0: must be > 0"),
    ({"ipu_gap_s": -0.5}, "--param ipu_gap_s=-0.5: must be > 0"),
    ({"bc_max_s": 0.0}, "--param bc_max_s=0.0: must be > 0"),
    ({"max_overlap_s": -0.001}, "--param max_overlap_s=-0.001: must be >= 0"),
    ({"stop_grace_s": -1}, "--param stop_grace_s=-1.0: must be >= 0"),
])
def test_bad_params_are_one_line_errors(over: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as err:
        rules_from(over)
    assert str(err.value).startswith(message)


def test_zero_allowances_are_valid() -> None:
    rules = rules_from({"max_overlap_s": 0, "stop_grace_s": 0.0})[0]
    assert (rules.max_overlap_s, rules.stop_grace_s) == (0.0, 0.0)


def test_describe_at_each_edge() -> None:
    """Each stored quantity on both sides of its own boundary (s = 5, t = 6.5, W = [5, 15), recording to 20 s)."""
    pause = meas("PAUSE", [], end=20.0)
    # a candidate needs its start (not its end) at or after s - 0.4 and its start (not its end) before W's end
    d = describe([[4.0, 6.0], [14.0, 16.0]], pause, PAPER)
    assert d["candidates"] == [[14.0, 16.0]] and d["earliest"] == [14.0, 16.0]
    # speaking at s includes a segment starting exactly at s; the next onset may be at s itself
    d = describe([[5.0, 6.0]], pause, PAPER)
    assert (d["speaking_at_s"], d["segment_at_s"], d["next_onset_s"]) == (True, [5.0, 6.0], 5.0)
    # the pause (s, t): a segment ending at s or starting at t does not overlap it; one spanning t does
    d = describe([[3.0, 5.0], [6.5, 7.0]], pause, PAPER)
    assert (d["pause_overlap"], d["onset_after_pause_s"]) == ([], 6.5)
    d = describe([[6.0, 7.0]], pause, PAPER)
    assert (d["pause_overlap"], d["onset_after_pause_s"]) == ([[6.0, 7.0]], None)  # begun before t: not after it
    d = describe([[6.6, 7.0]], pause, PAPER)
    assert d["onset_after_pause_s"] == 6.6


def test_fallback_reads_onsets_not_ends() -> None:
    # a model turn from before the pause running past t is no onset after it: the window end stands
    v = verdict(meas("PAUSE", [[3.0, 7.0]]), Rules(pause_latency_fallback="next_onset_or_window_end"))
    assert (v["takeover"], v["onset_s"], v["latency_s"]) == (False, None, 10.0)


def test_fallback_skips_an_ignored_backchannel_inside_the_pause() -> None:
    # the code's rules: a brief model backchannel inside the pause is no takeover, and the latency is the first
    # onset at or after t (8.0 - 5.0), not the backchannel's onset
    spans = [[5.5, 6.0], [8.0, 9.0]]
    v = verdict(meas("PAUSE", spans, **words_of((5.5, 6.0), 2, AUTHORS)), AUTHORS)
    assert (v["takeover"], v["onset_s"], v["latency_s"], v["bc_filter"]) == (False, 8.0, 3.0, "applied")
    v = verdict(meas("PAUSE", [[5.5, 6.0]], **words_of((5.5, 6.0), 2, AUTHORS)), AUTHORS)
    assert (v["takeover"], v["onset_s"], v["latency_s"]) == (False, None, 10.0)
