"""Known answers for M3 event extraction (dataset_builder/rules/m3_events.py) at every boundary, on both sides of it.

The three thresholds (IPU split > 0.5 s, BC <= 0.8 s, SHIFT overlap <= 0.4 s) are tested through the default
`EventParams()`, an explicit parameter object, and `EventParams.from_dict` (a stats file's `params`), each with
float noise a nanosecond either side. Every event is compared whole (all fields), so a field taken from the
wrong turn fails. Also: the floor rule's tie, a BC's host turn at its edges, which events a benchmark evaluates
for either user channel, b and τ(L) at their edges, and every error of the word-timestamp reader.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dataset_builder.rules.m3_events import (
    BC,
    TURN,
    Event,
    EventParams,
    Ipu,
    _cjk,
    _join,
    channel_names,
    context_start,
    evaluated_events,
    extract_events,
    ipus_from_spans,
    ipus_from_words,
    is_evaluated,
    parse_words,
    prompt_start,
    read_words,
)
from dataset_builder.schema import SchemaError

P = EventParams()
NS = 1e-9  # the tolerance: float noise below it counts as the boundary itself


def events(ch0: list[tuple[float, float]], ch1: list[tuple[float, float]],
           params: EventParams | None = None) -> list[Event]:
    return extract_events(ipus_from_spans(ch0, 0, params), ipus_from_spans(ch1, 1, params), params)


# ------------------------------------------------------------------------------------------ the parameters


def test_the_paper_thresholds_and_their_sides() -> None:
    assert P.to_dict() == {"ipu_gap_s": 0.5, "bc_max_s": 0.8, "shift_overlap_max_s": 0.4}
    assert not P.splits_ipu(0.5) and not P.splits_ipu(0.5 + 0.5 * NS) and P.splits_ipu(0.5 + 2 * NS)
    assert P.splits_ipu(1.2) and not P.splits_ipu(0.0)
    assert P.is_bc(0.8) and P.is_bc(0.8 + 0.5 * NS) and not P.is_bc(0.8 + 2 * NS) and not P.is_bc(1.9)
    assert not P.is_barge_in(0.4) and not P.is_barge_in(0.4 + 0.5 * NS) and P.is_barge_in(0.4 + 2 * NS)
    assert P.is_barge_in(1.4) and not P.is_barge_in(-0.3)
    # exactly one nanosecond past the boundary is still the boundary
    assert not P.splits_ipu(0.5 + NS) and P.is_bc(0.8 + NS) and not P.is_barge_in(0.4 + NS)


def test_thresholds_through_every_path() -> None:
    for p in (EventParams(ipu_gap_s=0.3, bc_max_s=1.2, shift_overlap_max_s=0.6),
              EventParams.from_dict({"ipu_gap_s": 0.3, "bc_max_s": 1.2, "shift_overlap_max_s": 0.6})):
        assert not p.splits_ipu(0.3) and p.splits_ipu(0.301)
        assert p.is_bc(1.2) and not p.is_bc(1.201)
        assert not p.is_barge_in(0.6) and p.is_barge_in(0.601)
        # through the extractor: a 0.4 s gap splits, a 1.0 s IPU is a BC, a 0.5 s overlap is a SHIFT
        assert [i.kind for i in ipus_from_spans([(0.0, 1.0), (1.4, 2.4)], 0, p)] == [BC, BC]
        assert [(e.type, e.start_s, e.end_s) for e in events([(0.0, 3.0)], [(2.5, 5.0)], p)] == [
            ("SHIFT", 3.0, 2.5)]
    assert [(e.type, e.start_s) for e in events([(0.0, 3.0)], [(2.5, 5.0)])] == [("BARGE_IN", 2.5)]
    assert EventParams.from_dict({"bc_max_s": 1.0}) == EventParams(bc_max_s=1.0)


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), float("inf"), "0.5", None])
def test_params_must_be_positive_numbers(bad: object) -> None:
    for name in ("ipu_gap_s", "bc_max_s", "shift_overlap_max_s"):
        with pytest.raises(ValueError, match=rf"^EventParams\.{name} must be a positive number, got "):
            EventParams(**{name: bad})


def test_params_from_dict_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match=r"^unknown EventParams fields: \['gap', 'zz'\]$"):
        EventParams.from_dict({"zz": 1, "gap": 0.5, "bc_max_s": 0.8})


# ------------------------------------------------------------------------------------------------- IPUs


@pytest.mark.parametrize(("second", "kinds"), [
    ((1.5, 2.0), [TURN]),  # a silence of exactly 0.5 s joins: [0, 2] is one 2 s TURN
    ((1.5 + 0.5 * NS, 2.0), [TURN]),
    ((1.5 + 2 * NS, 2.0), [TURN, BC]),  # longer: [0, 1] TURN and a 0.5 s BC
    ((1.7, 2.0), [TURN, BC]),
])
def test_ipu_split_both_sides(second: tuple[float, float], kinds: list[str]) -> None:
    assert [i.kind for i in ipus_from_spans([(0.0, 1.0), second], 0)] == kinds


@pytest.mark.parametrize(("end", "kind"), [(0.8, BC), (0.8 + 0.5 * NS, BC), (0.8 + 2 * NS, TURN), (0.801, TURN)])
def test_bc_at_most_0_8_s(end: float, kind: str) -> None:
    (ipu,) = ipus_from_spans([(0.0, end)], 1)
    assert (ipu.channel, ipu.start_s, ipu.end_s, ipu.kind, ipu.text) == (1, 0.0, end, kind, "")
    assert ipu.is_turn is (kind == TURN) and ipu.duration_s == end


def test_merge_keeps_the_latest_end_and_sorts() -> None:
    ipus = ipus_from_spans([(3.0, 3.5), (0.0, 2.0), (0.5, 1.0), (2.2, 2.4)], 0)
    assert ipus == [Ipu(0, 0.0, 2.4, TURN), Ipu(0, 3.0, 3.5, BC)]  # [0.5, 1] inside [0, 2] keeps the end 2
    assert ipus_from_spans([(1.0, 2.0), (1.0, 1.5)], 0) == [Ipu(0, 1.0, 2.0, TURN)]  # same start: end 2 wins
    assert ipus_from_spans([], 1) == []
    assert ipus_from_spans([(1.0, 1.0)], 0) == [Ipu(0, 1.0, 1.0, BC)]  # a zero-length span is valid


def test_words_at_the_same_time_keep_their_order() -> None:
    # identical times: the file's order; same start: the shorter first, whatever the words say
    same = parse_words("0\t0\t1\tzeta\n0\t0\t1\talpha\n")
    assert ipus_from_words(same)[0][0].text == "zeta alpha"
    nested = parse_words("0\t0\t1\talpha\n0\t0\t0.5\tzeta\n")
    assert ipus_from_words(nested)[0][0].text == "zeta alpha"


@pytest.mark.parametrize("span", [(2.0, 1.0), (float("nan"), 1.0), (0.0, float("inf"))])
def test_bad_spans_are_errors(span: tuple[float, float]) -> None:
    with pytest.raises(ValueError, match=r"^channel 1: bad span \["):
        ipus_from_spans([(0.0, 0.5), span], 1)


def test_channel_must_be_0_or_1() -> None:
    with pytest.raises(ValueError, match=r"^channel must be 0 or 1, got 2$"):
        ipus_from_spans([(0.0, 1.0)], 2)
    assert ipus_from_spans([(0.0, 1.0)], 0)[0].channel == 0 and ipus_from_spans([(0.0, 1.0)], 1)[0].channel == 1


def test_extract_checks_its_ipus() -> None:
    with pytest.raises(ValueError, match=r"^an IPU of channel 1 was given as channel 0$"):
        extract_events([Ipu(1, 0.0, 1.0, TURN)], [])
    with pytest.raises(ValueError, match=r"^an IPU of channel 0 was given as channel 1$"):
        extract_events([], [Ipu(0, 0.0, 1.0, TURN)])
    joined = (r"^channel 0: IPUs \[0.0, 1.0\] and \[1.5, 2.5\] are not split by the IPU rule; build them with "
              r"ipus_from_spans$")
    with pytest.raises(ValueError, match=joined):
        extract_events([Ipu(0, 1.5, 2.5, TURN), Ipu(0, 0.0, 1.0, TURN)], [])
    # 0.501 s apart is split: accepted, a PAUSE
    got = extract_events([Ipu(0, 1.501, 2.5, TURN), Ipu(0, 0.0, 1.0, TURN)], [])
    assert got == [Event("PAUSE", 1.0, 1.501, 0, 1, 0.0)]


# ---------------------------------------------------------------------------------------------- events


def test_shift_overlap_exactly_0_4_s_both_directions() -> None:
    assert events([(0.0, 3.0)], [(2.6, 5.0)]) == [Event("SHIFT", 3.0, 2.6, 0, 1, 0.0, 2.6, 5.0)]
    assert events([(2.6, 5.0)], [(0.0, 3.0)]) == [Event("SHIFT", 3.0, 2.6, 1, 0, 0.0, 2.6, 5.0)]
    assert events([(0.0, 3.0)], [(2.599, 5.0)]) == [Event("BARGE_IN", 2.599, 5.0, 1, 0, 2.599, 0.0, 3.0)]
    assert events([(0.0, 3.0)], [(3.7, 5.0)]) == [Event("SHIFT", 3.0, 3.7, 0, 1, 0.0, 3.7, 5.0)]  # a gap
    assert events([(0.0, 3.0)], [(3.0, 5.0)]) == [Event("SHIFT", 3.0, 3.0, 0, 1, 0.0, 3.0, 5.0)]  # touching


def test_event_durations_and_overlaps() -> None:
    shift = Event("SHIFT", 3.0, 2.75, 0, 1, 0.0, 2.75, 5.0)
    assert (shift.duration_s, shift.overlap_s) == (-0.25, 0.25)
    gap = Event("SHIFT", 3.0, 3.5, 0, 1, 0.0, 3.5, 5.0)
    assert (gap.duration_s, gap.overlap_s) == (0.5, 0.0)
    barge = Event("BARGE_IN", 2.0, 5.0, 1, 0, 2.0, 0.0, 3.5)
    assert (barge.duration_s, barge.overlap_s) == (3.0, 1.5)
    assert Event("BARGE_IN", 2.0, 5.0, 1, 0, 2.0).overlap_s == 0.0
    assert Event("PAUSE", 3.0, 3.75, 0, 1, 0.0).overlap_s == 0.0
    assert Event("BC", 3.0, 3.5, 0, 1, 3.0, 1.0, 9.0).overlap_s == 0.0


def test_pause_and_barge_in_fields() -> None:
    assert events([(0.0, 2.0), (2.75, 4.0)], []) == [Event("PAUSE", 2.0, 2.75, 0, 1, 0.0)]
    assert events([], [(0.0, 2.0), (2.75, 4.0)]) == [Event("PAUSE", 2.0, 2.75, 1, 0, 0.0)]
    # a barge-in by ch0 into ch1's TURN, then ch1's turn goes on: the floor stays with ch1 -> ch1's own PAUSE
    got = events([(3.0, 5.0)], [(0.0, 10.0), (11.0, 12.0)])
    assert got == [Event("BARGE_IN", 3.0, 5.0, 0, 1, 3.0, 0.0, 10.0), Event("PAUSE", 10.0, 11.0, 1, 0, 0.0)]


def test_floor_tie_goes_to_the_later_starting_turn() -> None:
    # ch1 barges in [1, 5] and ends with ch0's TURN [0, 5]: the floor is ch1's, so ch0 at 6 takes it over (SHIFT)
    assert events([(0.0, 5.0), (6.0, 8.0)], [(1.0, 5.0)]) == [
        Event("BARGE_IN", 1.0, 5.0, 1, 0, 1.0, 0.0, 5.0), Event("SHIFT", 5.0, 6.0, 1, 0, 1.0, 6.0, 8.0)]
    # float noise in the tie still counts as a tie
    assert [e.type for e in events([(0.0, 5.0), (6.0, 8.0)], [(1.0, 5.0 - 0.5 * NS)])] == ["BARGE_IN", "SHIFT"]
    assert [e.type for e in events([(0.0, 5.0), (6.0, 8.0)], [(1.0, 5.0 - NS)])] == ["BARGE_IN", "SHIFT"]
    # the barge-in ends first: the floor stays with ch0, whose next TURN is a PAUSE
    assert events([(0.0, 5.0), (6.0, 8.0)], [(1.0, 4.9)]) == [
        Event("BARGE_IN", 1.0, 4.9, 1, 0, 1.0, 0.0, 5.0), Event("PAUSE", 5.0, 6.0, 0, 1, 0.0)]


def test_bc_host_turn_edges() -> None:
    # ch1 TURN [1, 4]; ch0 BCs starting at its start, inside, at its end, and in silence
    got = events([(1.0, 1.5), (2.5, 3.0), (4.0, 4.5), (6.0, 6.5)], [(1.0, 4.0)])
    assert got == [Event("BC", 1.0, 1.5, 0, 1, 1.0, 1.0, 4.0), Event("BC", 2.5, 3.0, 0, 1, 2.5, 1.0, 4.0),
                   Event("BC", 4.0, 4.5, 0, 1, 4.0, None, None), Event("BC", 6.0, 6.5, 0, 1, 6.0, None, None)]
    # a BC of the other channel is no host: only TURNs host a BC
    assert events([(1.0, 1.5)], [(0.9, 1.6)]) == [Event("BC", 0.9, 1.6, 1, 0, 0.9, None, None),
                                                 Event("BC", 1.0, 1.5, 0, 1, 1.0, None, None)]
    # a BC just before the TURN starts is not in it
    assert events([(0.999, 1.5)], [(1.0, 4.0)])[0] == Event("BC", 0.999, 1.5, 0, 1, 0.999, None, None)


def test_events_sorted_by_start_then_channel() -> None:
    # ch0 TURN [0, 2] yields to ch1 TURN [7, 9] (a SHIFT at 2); BCs at 2 (ch1) and 5 (both channels), none hosted
    got = events([(0.0, 2.0), (5.0, 5.5)], [(2.0, 2.5), (5.0, 5.5), (7.0, 9.0)])
    assert got == [Event("SHIFT", 2.0, 7.0, 0, 1, 0.0, 7.0, 9.0), Event("BC", 2.0, 2.5, 1, 0, 2.0, None, None),
                   Event("BC", 5.0, 5.5, 0, 1, 5.0, None, None), Event("BC", 5.0, 5.5, 1, 0, 5.0, None, None)]
    # a PAUSE of ch0 and a BC of ch1 at the same instant: ch0's first
    got = events([(0.0, 4.0), (6.0, 7.0)], [(4.0, 4.5)])
    assert [(e.type, e.start_s, e.channel) for e in got] == [("PAUSE", 4.0, 0), ("BC", 4.0, 1)]
    got = events([(4.0, 4.5)], [(0.0, 4.0), (6.0, 7.0)])
    assert [(e.type, e.start_s, e.channel) for e in got] == [("BC", 4.0, 0), ("PAUSE", 4.0, 1)]


# --------------------------------------------------------------------------------------- evaluated events


def test_which_events_each_user_channel_evaluates() -> None:
    host = Event("BC", 2.0, 2.5, 0, 1, 2.0, 1.0, 4.0)
    stray = Event("BC", 6.0, 6.5, 0, 1, 6.0, None, None)
    for e, user0 in [(Event("SHIFT", 3.0, 3.2, 0, 1, 0.0, 3.2, 5.0), True),
                     (Event("PAUSE", 3.0, 3.7, 0, 1, 0.0), True),
                     (Event("BARGE_IN", 3.0, 5.0, 0, 1, 3.0, 0.0, 4.0), True), (host, True), (stray, False)]:
        assert is_evaluated(e) is user0 and is_evaluated(e, 0) is user0
        assert is_evaluated(e, 1) is False
    assert is_evaluated(Event("BC", 2.0, 2.5, 1, 0, 2.0, 1.0, 4.0), 1) is True
    assert is_evaluated(Event("HOLD", 2.0, 2.5, 0, 1, 2.0), 0) is False


def test_prompt_start_per_event_type() -> None:
    turns = [Ipu(0, 0.0, 2.0, TURN), Ipu(0, 3.0, 4.0, TURN), Ipu(0, 6.0, 8.0, TURN)]
    pauses = [Event("PAUSE", 2.0, 3.0, 0, 1, 0.0)]
    assert prompt_start(Event("BC", 5.0, 5.5, 0, 1, 5.0), turns, pauses) == 5.0
    assert prompt_start(Event("BARGE_IN", 5.0, 7.0, 0, 1, 5.0), turns, pauses) == 5.0
    # SHIFT at 8: the user TURN that ends there starts at 6 (no walk back through PAUSEs)
    assert prompt_start(Event("SHIFT", 8.0, 8.5, 0, 1, 6.0), turns, pauses) == 6.0
    assert prompt_start(Event("SHIFT", 4.0, 4.5, 0, 1, 3.0), turns, pauses) == 3.0
    # PAUSE at 4 -> turn [3, 4] -> the PAUSE ending at 3 -> turn [0, 2]
    assert prompt_start(Event("PAUSE", 4.0, 6.0, 0, 1, 3.0), turns, pauses + [
        Event("PAUSE", 4.0, 6.0, 0, 1, 3.0)]) == 0.0
    # the link tolerance: a PAUSE ending 1 ms off the turn's start still links; 2 ms does not
    assert prompt_start(Event("PAUSE", 4.0, 6.0, 0, 1, 3.0), turns, [Event("PAUSE", 2.0, 3.001, 0, 1, 0.0)]) == 0.0
    assert prompt_start(Event("PAUSE", 4.0, 6.0, 0, 1, 3.0), turns, [Event("PAUSE", 2.0, 3.002, 0, 1, 0.0)]) == 3.0
    assert prompt_start(Event("PAUSE", 4.0, 6.0, 0, 1, 3.0), turns, [Event("PAUSE", 2.0, 3.002, 0, 1, 0.0)],
                        tol_s=0.002) == 0.0
    # exactly the tolerance links (binary-exact times: 3.25 - 3.0 == 0.25)
    assert prompt_start(Event("PAUSE", 4.0, 6.0, 0, 1, 3.0), turns, [Event("PAUSE", 2.0, 3.25, 0, 1, 0.0)],
                        tol_s=0.25) == 0.0
    # no user turn before s: b = s; a turn starting exactly at s is not before it
    assert prompt_start(Event("SHIFT", 0.0, 0.5, 0, 1, 0.0), turns, pauses) == 0.0
    assert prompt_start(Event("SHIFT", 3.0, 3.5, 0, 1, 0.0), turns, pauses) == 0.0  # [3, 4] starts at s
    assert prompt_start(Event("SHIFT", 3.0 + 0.5 * NS, 3.5, 0, 1, 0.0), turns, pauses) == 0.0
    assert prompt_start(Event("SHIFT", 3.0 + NS, 3.5, 0, 1, 0.0), turns, pauses) == 0.0  # (3 + 1 ns) - 1 ns == 3
    assert prompt_start(Event("SHIFT", 3.0 + 2 * NS, 3.5, 0, 1, 0.0), turns, pauses) == 3.0


def test_prompt_start_walk_stops_at_a_loop_and_at_the_first_turn() -> None:
    turns = [Ipu(0, 0.0, 2.0, TURN), Ipu(0, 3.0, 4.0, TURN)]
    # a PAUSE whose start lies before every turn: the walk has nowhere to go
    assert prompt_start(Event("PAUSE", 4.0, 5.0, 0, 1, 3.0), turns, [Event("PAUSE", -1.0, 3.0, 0, 1, 0.0)]) == 3.0
    # a PAUSE that leads back to the same turn: no endless loop
    assert prompt_start(Event("PAUSE", 4.0, 5.0, 0, 1, 3.0), turns, [Event("PAUSE", 3.5, 3.0, 0, 1, 0.0)]) == 3.0
    # a loop met one step back: from [5, 6] to [3, 4], which links to itself; the walk stops at [3, 4]
    three = [*turns, Ipu(0, 5.0, 6.0, TURN)]
    links = [Event("PAUSE", 4.0, 5.0, 0, 1, 3.0), Event("PAUSE", 3.5, 3.0, 0, 1, 0.0)]
    assert prompt_start(Event("PAUSE", 6.0, 7.0, 0, 1, 5.0), three, links) == 3.0


def test_only_the_users_own_pauses_link_its_turns() -> None:
    # a system PAUSE ending where the user's TURN [3, 4] starts must not walk b back to [0, 2]
    ipus = [Ipu(0, 0.0, 2.0, TURN), Ipu(0, 3.0, 4.0, TURN)]
    evs = [Event("PAUSE", 2.5, 3.0, 1, 0, 1.0), Event("PAUSE", 4.0, 5.0, 0, 1, 3.0)]
    assert [r.prompt_start_s for r in evaluated_events(evs, ipus)] == [3.0]
    # ... nor a user event that is not a PAUSE
    evs = [Event("SHIFT", 2.5, 3.0, 0, 1, 0.0, 3.0, 9.0), Event("PAUSE", 4.0, 5.0, 0, 1, 3.0)]
    assert [r.prompt_start_s for r in evaluated_events(evs, ipus)][-1] == 3.0


def test_context_start_edges() -> None:
    ipus = [Ipu(0, 0.0, 2.0, TURN), Ipu(1, 2.5, 2.9, BC), Ipu(1, 3.0, 6.0, TURN), Ipu(0, 6.5, 9.0, TURN)]
    assert context_start(ipus, 6.5, 4.5) == 2.5  # [2.0, 6.5]: [0, 2] only touches b - L
    assert context_start(ipus, 6.5, 4.5 + 2 * NS) == 0.0
    assert context_start(ipus, 6.5, 4.5 + 0.5 * NS) == 2.5
    # exactly one nanosecond: b - L + 1 ns == 2.0 + 1 ns and (3 + 1 ns) - 1 ns == 3 in binary
    assert context_start([Ipu(0, 0.0, 2.0 + NS, TURN)], 6.5, 4.5) == 6.5  # ends at b - L (+ 1 ns): touching
    assert context_start([Ipu(0, 3.0, 4.0, TURN)], 3.0 + NS, 120.0) == 3.0 + NS  # starts at b (- 1 ns)
    assert context_start(ipus, 3.0, 120.0) == 0.0
    assert context_start(ipus, 0.0, 120.0) == 0.0  # nothing starts before b
    assert context_start(ipus, 2.5, 120.0) == 0.0 and context_start(ipus, 2.5, 0.4) == 2.5
    assert context_start([Ipu(1, 2.5, 2.9, BC)], 2.5 + 0.5 * NS, 120.0) == 2.5 + 0.5 * NS  # starts at b
    assert context_start(ipus, 6.5) == 0.0  # L = 120 s by default


def test_evaluated_events_regions_and_errors() -> None:
    ipus0 = ipus_from_spans([(2.0, 4.0), (5.0, 7.0)], 0)
    ipus1 = ipus_from_spans([(7.2, 9.0)], 1)
    evs = extract_events(ipus0, ipus1)
    regions = evaluated_events(evs, ipus0 + ipus1)
    got = [(r.event.type, r.event_start_s, r.event_end_s, r.prompt_start_s, r.context_start_s, r.window_end_s)
           for r in regions]
    # PAUSE: b walks to the run's first TURN [2, 4]; SHIFT: b is the TURN [5, 7] that ends at s, τ(L) reaches [2, 4]
    assert got == [("PAUSE", 4.0, 5.0, 2.0, 2.0, 14.0), ("SHIFT", 7.0, 7.2, 5.0, 2.0, 17.0)]
    short = evaluated_events(evs, ipus0 + ipus1, 0, context_s=1.0)
    assert [r.context_start_s for r in short] == [2.0, 5.0]  # [4, 5] touches [2, 4] only at its end: b itself
    assert evaluated_events(evs, ipus0 + ipus1, user_channel=1) == []
    for bad in (2, -1):
        with pytest.raises(ValueError, match=rf"^user_channel must be 0 or 1, got {bad}$"):
            evaluated_events(evs, ipus0, bad)
        with pytest.raises(ValueError, match=rf"^user_channel must be 0 or 1, got {bad}$"):
            channel_names(bad)
    assert channel_names() == {0: "user", 1: "system"} and channel_names(1) == {1: "user", 0: "system"}


def test_evaluated_events_come_in_order_of_s() -> None:
    e1 = Event("BC", 6.0, 6.5, 0, 1, 6.0, 5.0, 9.0)
    e0 = Event("BARGE_IN", 3.0, 4.5, 0, 1, 3.0, 1.0, 5.0)
    ipus = [Ipu(1, 1.0, 5.0, TURN), Ipu(0, 3.0, 4.5, TURN), Ipu(1, 5.0, 9.0, TURN), Ipu(0, 6.0, 6.5, BC)]
    assert [r.event for r in evaluated_events([e1, e0], ipus)] == [e0, e1]
    assert [r.context_start_s for r in evaluated_events([e1, e0], ipus)] == [1.0, 1.0]


# ------------------------------------------------------------------------------------- word timestamps


def test_words_join_into_ipus_with_their_text() -> None:
    words = parse_words("0\t0.0\t0.3\tso\n0\t0.8\t1.2\twhere\n0\t1.71\t1.9\tnow\n1\t0.1\t0.3\tそう\n"
                        "1\t0.3\t0.5\tです\n1\t0.5\t0.6\tok\n1\t0.6\t0.7\tね\n")
    ch0, ch1 = ipus_from_words(words)
    assert ch0 == [Ipu(0, 0.0, 1.2, TURN, "so where"), Ipu(0, 1.71, 1.9, BC, "now")]
    assert ch1 == [Ipu(1, 0.1, 0.7, BC, "そうです ok ね")]
    assert ipus_from_words(words, EventParams(ipu_gap_s=0.4))[0] == [Ipu(0, 0.0, 0.3, BC, "so"),
                                                                      Ipu(0, 0.8, 1.2, BC, "where"),
                                                                      Ipu(0, 1.71, 1.9, BC, "now")]


@pytest.mark.parametrize(("code", "cjk"), [
    (0x3000, True), (0x30FF, True), (0x4E00, True), (0x9FFF, True), (0xFF00, True), (0xFFEF, True),  # range ends
    (0x2FFF, False), (0x3100, False), (0x4DFF, False), (0xA000, False), (0xFEFF, False), (0xFFF0, False),
])
def test_cjk_ranges_at_their_ends(code: int, cjk: bool) -> None:
    assert _cjk(chr(code)) is cjk
    assert _join(["\u3042", chr(code), "\u3042"]) == ("\u3042" + chr(code) + "\u3042" if cjk else
                                                     "\u3042 " + chr(code) + " \u3042")
    assert _join(["a", chr(code)]) == "a " + chr(code) and _join([]) == "" and _join(["x"]) == "x"


def test_word_lines_skipped_and_fields() -> None:
    text = "# header\n\n   \n  # indented comment\n1\t0.5\t0.5\tmm\t\n0\t1\t2\ttwo\twords\n 1 \t3\t4\t  hi  \r\n"
    assert [(w.channel, w.start_s, w.end_s, w.text) for w in parse_words(text)] == [
        (1, 0.5, 0.5, "mm"), (0, 1.0, 2.0, "two\twords"), (1, 3.0, 4.0, "hi")]


@pytest.mark.parametrize(("line", "message"), [
    ("0\t0.1\t0.2", "f.txt:2: 3 tab-separated fields"),
    ("0 0.1 0.2 so", "f.txt:2: 1 tab-separated fields"),
    ("2\t0.1\t0.2\tso", "f.txt:2: channel '2' is not 0 or 1"),
    ("x\t0.1\t0.2\tso", "f.txt:2: channel 'x' is not 0 or 1"),
    ("0\ta\t0.2\tso", "f.txt:2: start 'a' / end '0.2' not numbers"),
    ("0\t0.1\tb\tso", "f.txt:2: start '0.1' / end 'b' not numbers"),
    ("0\t-0.1\t0.2\tso", "f.txt:2: times [-0.1, 0.2] need 0 <= start <= end"),
    ("0\t0.3\t0.2\tso", "f.txt:2: times [0.3, 0.2] need 0 <= start <= end"),
    ("0\tnan\t0.2\tso", "f.txt:2: times [nan, 0.2] need 0 <= start <= end"),
    ("0\t0.1\tinf\tso", "f.txt:2: times [0.1, inf] need 0 <= start <= end"),
    ("0\t0.1\t0.2\t  ", "f.txt:2: empty word"),
])
def test_word_line_errors_name_file_and_line(line: str, message: str) -> None:
    with pytest.raises(SchemaError) as err:
        parse_words(f"0\t0.0\t0.1\tok\n{line}\n", "f.txt")
    assert str(err.value) == message + " (expected channel<TAB>start<TAB>end<TAB>word)"


def test_word_text_kept_whole_and_default_source() -> None:
    assert [w.text for w in parse_words("0\t0\t1\tMAX\n0\t1\t2\tX\n")] == ["MAX", "X"]
    with pytest.raises(SchemaError) as err:
        parse_words("0\t0\t1\n")
    assert str(err.value) == "<words>:1: 3 tab-separated fields (expected channel<TAB>start<TAB>end<TAB>word)"


def test_word_times_at_zero_and_equal_are_valid() -> None:
    assert [(w.start_s, w.end_s) for w in parse_words("0\t0\t0\tuh\n")] == [(0.0, 0.0)]
    assert parse_words("") == []


def test_word_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"nope\.txt: cannot read word timestamps \(FileNotFoundError: "):
        read_words(tmp_path / "nope.txt")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("0\t0\t1\tcaf\xe9\n".encode("latin-1"))
    with pytest.raises(SchemaError, match=r"latin1\.txt: cannot read word timestamps \(UnicodeDecodeError: "):
        read_words(bad)
    good = tmp_path / "w.txt"
    good.write_text("0\t0\t1\tx\n0\tq\t1\ty\n", encoding="utf-8")
    with pytest.raises(SchemaError, match=rf"^{str(good)}:2: start 'q'"):
        read_words(good)
