"""Known-answer tests for M3 event extraction (dataset_builder/rules/m3_events.py) and timing statistics
(dataset_builder/rules/m3_timing_stats.py).

Hand-built span lists with exact times: every event type, both sides of each boundary (0.5 s split, 0.8 s BC,
0.4 s overlap), including times whose float difference lands a hair off the boundary (1.1 - 0.6 is
0.5000000000000001), the regions b / τ(L), the word-timestamp reader, and the stats round trip and samplers.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from dataset_builder.rules.m3_events import (
    BC,
    TURN,
    Event,
    EventParams,
    Ipu,
    context_start,
    evaluated_events,
    extract_events,
    ipus_from_spans,
    ipus_from_words,
    parse_words,
    read_words,
)
from dataset_builder.rules.m3_timing_stats import (
    DEFAULTS_FILE,
    Quantiles,
    default_stats,
    load_stats,
    save_stats,
    stats_from_dialogues,
    stats_from_events,
)
from dataset_builder.schema import SchemaError

P = EventParams()
EPS = 0.001  # one millisecond past a boundary: the smallest step a corpus's timestamps make


def dialogue(ch0: list[tuple[float, float]], ch1: list[tuple[float, float]]) -> list[tuple[str, float, float, int]]:
    """(type, s, t, channel) of every event of a dialogue given as spans per channel."""
    events = extract_events(ipus_from_spans(ch0, 0), ipus_from_spans(ch1, 1))
    return [(e.type, e.start_s, e.end_s, e.channel) for e in events]


# ------------------------------------------------------------------------------------------------- IPUs


@pytest.mark.parametrize(("gap_end", "n_ipus"), [
    (1.5, 1),  # a silence of exactly 0.5 s does not split
    (1.5 + EPS, 2),  # 0.501 s splits
    (1.2, 1),  # a short silence inside a TURN
])
def test_ipu_split_at_half_a_second(gap_end: float, n_ipus: int) -> None:
    ipus = ipus_from_spans([(0.0, 1.0), (gap_end, gap_end + 1.0)], 0)
    assert len(ipus) == n_ipus
    assert ipus[0].start_s == 0.0 and ipus[-1].end_s == gap_end + 1.0


def test_ipu_split_float_noise_counts_as_the_boundary() -> None:
    assert 1.1 - 0.6 > 0.5  # binary float: the gap below is "just over" 0.5 ...
    assert len(ipus_from_spans([(0.0, 0.6), (1.1, 2.0)], 0)) == 1  # ... and still means exactly 0.5: no split


def test_ipu_merges_unsorted_and_overlapping_spans_and_objects() -> None:
    class S:
        def __init__(self, a: float, b: float) -> None:
            self.start_s, self.end_s = a, b

    ipus = ipus_from_spans([S(3.0, 4.0), S(0.0, 1.0), S(0.5, 1.2), S(1.6, 2.0)], 1)
    assert [(i.start_s, i.end_s, i.kind, i.channel) for i in ipus] == [(0.0, 2.0, TURN, 1), (3.0, 4.0, TURN, 1)]
    with pytest.raises(ValueError, match="bad span"):
        ipus_from_spans([(2.0, 1.0)], 0)
    with pytest.raises(ValueError, match="channel"):
        ipus_from_spans([(0.0, 1.0)], 2)


@pytest.mark.parametrize(("end", "kind"), [
    (1.8, BC),  # exactly 0.8 s is a BC
    (1.8 + EPS, TURN),  # 0.801 s is a TURN
    (2.2, BC),  # 2.2 - 1.4 = 0.8000000000000003 in binary: still exactly 0.8, a BC
])
def test_bc_at_most_0_8_seconds(end: float, kind: str) -> None:
    start = 1.4 if end == 2.2 else 1.0
    (ipu,) = ipus_from_spans([(start, end)], 0)
    assert ipu.kind == kind


# ------------------------------------------------------------------------------------------------ events


@pytest.mark.parametrize(("sys_start", "expected"), [
    (1.6, ("SHIFT", 2.0, 1.6, 0)),  # overlap exactly 0.4 s: still a SHIFT, t < s
    (1.6 - EPS, ("BARGE_IN", 1.6 - EPS, 4.0, 1)),  # overlap 0.401 s: a BARGE_IN by the system
    (2.3, ("SHIFT", 2.0, 2.3, 0)),  # a plain gap
    (2.0, ("SHIFT", 2.0, 2.0, 0)),  # no gap at all
])
def test_overlap_boundary_0_4_seconds(sys_start: float, expected: tuple) -> None:
    assert dialogue([(0.0, 2.0)], [(sys_start, 4.0)]) == [expected]


def test_overlap_float_noise_counts_as_the_boundary() -> None:
    assert 1.1 - 0.7 > 0.4  # 0.40000000000000013
    assert dialogue([(0.0, 1.1)], [(0.7, 3.0)]) == [("SHIFT", 1.1, 0.7, 0)]


def test_shift_both_directions_and_event_fields() -> None:
    ipus0, ipus1 = ipus_from_spans([(0.0, 2.0), (4.0, 6.0)], 0), ipus_from_spans([(2.5, 3.7)], 1)
    events = extract_events(ipus0, ipus1)
    assert events == [
        Event("SHIFT", 2.0, 2.5, 0, 1, turn_start_s=0.0, other_start_s=2.5, other_end_s=3.7),
        Event("SHIFT", 3.7, 4.0, 1, 0, turn_start_s=2.5, other_start_s=4.0, other_end_s=6.0),
    ]
    assert events[0].duration_s == pytest.approx(0.5) and events[0].overlap_s == 0.0


@pytest.mark.parametrize(("second", "expected"), [
    (2.5, [("SHIFT", 4.0, 4.0, 0)]),  # a 0.5 s silence: one user IPU [0, 4], so no PAUSE
    (2.5 + EPS, [("PAUSE", 2.0, 2.5 + EPS, 0), ("SHIFT", 4.0, 4.0, 0)]),  # 0.501 s: two TURNs, a PAUSE
])
def test_pause_needs_a_split(second: float, expected: list) -> None:
    assert dialogue([(0.0, 2.0), (second, 4.0)], [(4.0, 6.0)]) == expected


def test_bc_between_turns_does_not_break_a_pause_or_a_shift() -> None:
    # user TURN, system BC in the user's pause, user TURN, user BC in the gap, system TURN
    got = dialogue([(0.0, 2.0), (3.0, 5.0), (5.6, 6.0)], [(2.2, 2.6), (6.8, 9.0)])
    assert got == [
        ("PAUSE", 2.0, 3.0, 0),
        ("BC", 2.2, 2.6, 1),
        ("SHIFT", 5.0, 6.8, 0),  # the user's BC at 5.6 is no TURN: the SHIFT runs from the user TURN's end
        ("BC", 5.6, 6.0, 0),
    ]


def test_bc_inside_the_other_turn_names_it() -> None:
    events = extract_events(ipus_from_spans([(2.0, 2.4), (10.5, 10.9)], 0), ipus_from_spans([(0.0, 5.0),
                                                                                            (9.0, 10.5)], 1))
    bcs = [e for e in events if e.type == "BC"]
    assert (bcs[0].other_start_s, bcs[0].other_end_s) == (0.0, 5.0)
    assert bcs[1].other_start_s is None  # starts exactly where the system TURN ends: not inside it


def test_turn_inside_the_other_turn_is_a_barge_in_and_the_floor_stays() -> None:
    # user TURN [0, 10] with a system TURN [3, 5] inside it, then the user goes on after a pause
    assert dialogue([(0.0, 10.0), (11.0, 15.0)], [(3.0, 5.0)]) == [
        ("BARGE_IN", 3.0, 5.0, 1),
        ("PAUSE", 10.0, 11.0, 0),
    ]


def test_barge_in_then_shift_back() -> None:
    # the system barges in at 8 (2 s overlap) and keeps the floor; the user answers after it
    events = extract_events(ipus_from_spans([(0.0, 10.0), (13.0, 16.0)], 0), ipus_from_spans([(8.0, 12.0)], 1))
    assert [(e.type, e.start_s, e.end_s, e.channel) for e in events] == [
        ("BARGE_IN", 8.0, 12.0, 1), ("SHIFT", 12.0, 13.0, 1)]
    assert events[0].overlap_s == 2.0 and (events[0].other_start_s, events[0].other_end_s) == (0.0, 10.0)


def test_a_bc_never_barges_in_and_a_turn_during_a_bc_is_no_barge_in() -> None:
    assert dialogue([(0.0, 5.0)], [(1.0, 1.8)]) == [("BC", 1.0, 1.8, 1)]
    # system BC [4.8, 5.3]; user TURN starts inside it at 5.0 after the system TURN ended at 4.0
    assert dialogue([(5.0, 7.0)], [(0.0, 4.0), (4.8, 5.3)]) == [("SHIFT", 4.0, 5.0, 1), ("BC", 4.8, 5.3, 1)]


def test_extract_rejects_ipus_not_split_by_the_rule_or_on_the_wrong_channel() -> None:
    with pytest.raises(ValueError, match="not split"):
        extract_events([Ipu(0, 0.0, 1.0, TURN), Ipu(0, 1.2, 3.0, TURN)], [])
    with pytest.raises(ValueError, match="channel 1 was given as channel 0"):
        extract_events([Ipu(1, 0.0, 1.0, TURN)], [])


def test_params_validate_and_round_trip() -> None:
    assert EventParams.from_dict(P.to_dict()) == P
    with pytest.raises(ValueError):
        EventParams(ipu_gap_s=0.0)
    with pytest.raises(ValueError, match="unknown"):
        EventParams.from_dict({"ipu_gap": 0.5})
    wide = EventParams(ipu_gap_s=1.0)
    assert len(ipus_from_spans([(0.0, 1.0), (1.8, 3.0)], 0, wide)) == 1


# --------------------------------------------------------------------------------------------- regions


def test_evaluated_events_and_regions() -> None:
    # user (ch0): TURN [2, 4], PAUSE, TURN [5, 7], PAUSE, TURN [8, 9]; the system (ch1) takes over at 9.2 and
    # speaks to 15; a user BC at 11 inside it; the user barges in at 13 (2 s overlap) and speaks to 18; a system BC
    # [17, 17.5] inside that; the system takes over at 20; a system BC [0, 0.5] opens the dialogue.
    ch0 = [(2.0, 4.0), (5.0, 7.0), (8.0, 9.0), (11.0, 11.5), (13.0, 18.0)]
    ch1 = [(0.0, 0.5), (9.2, 15.0), (17.0, 17.5), (20.0, 22.0)]
    ipus0, ipus1 = ipus_from_spans(ch0, 0), ipus_from_spans(ch1, 1)
    events = extract_events(ipus0, ipus1)
    regions = evaluated_events(events, ipus0 + ipus1, user_channel=0)
    got = [(r.event.type, r.event_start_s, r.event_end_s, r.prompt_start_s, r.context_start_s) for r in regions]
    assert got == [
        ("PAUSE", 4.0, 5.0, 2.0, 0.0),
        ("PAUSE", 7.0, 8.0, 2.0, 0.0),  # b walks back through the first PAUSE to the run's first TURN
        ("SHIFT", 9.0, 9.2, 8.0, 0.0),  # b = start of the user TURN that ends at s
        ("BC", 11.0, 11.5, 11.0, 0.0),  # b = s
        ("BARGE_IN", 13.0, 18.0, 13.0, 0.0),
        ("SHIFT", 18.0, 20.0, 13.0, 0.0),  # after a barge-in the user's TURN is the barge-in itself
    ]
    assert regions[2].window_end_s == 19.0
    # With channel 1 as the user: only its BC inside the other's TURN counts; the opening BC backs nothing.
    other = evaluated_events(events, ipus0 + ipus1, user_channel=1)
    assert [(r.event.type, r.event_start_s, r.prompt_start_s) for r in other] == [("BC", 17.0, 17.0)]
    # A shorter L: b = 13 for the barge-in, [13 - 5, 13] = [8, 13] overlaps the user TURN [8, 9] first.
    short = evaluated_events(events, ipus0 + ipus1, user_channel=0, context_s=5.0)
    assert [r.context_start_s for r in short][4] == 8.0


def test_context_start_tau() -> None:
    ipus = [Ipu(0, 0.0, 2.0, TURN), Ipu(1, 2.5, 2.9, BC), Ipu(1, 3.0, 6.0, TURN), Ipu(0, 6.5, 9.0, TURN)]
    assert context_start(ipus, 6.5, 120.0) == 0.0
    assert context_start(ipus, 6.5, 4.0) == 2.5  # [2.5, 6.5]: the BC at 2.5 is the earliest utterance in it
    assert context_start(ipus, 6.5, 4.5) == 2.5  # [2.0, 6.5]: [0, 2] only touches it, which is no overlap
    assert context_start(ipus, 6.5, 4.5 + EPS) == 0.0  # [1.999, 6.5] overlaps [0, 2]: C starts at 0 (C > L)
    assert context_start(ipus, 0.0, 120.0) == 0.0  # nothing before b: empty context


def test_pause_b_survives_a_system_barge_in_inside_the_run() -> None:
    ipus0 = ipus_from_spans([(0.0, 10.0), (11.0, 15.0)], 0)
    ipus1 = ipus_from_spans([(3.0, 5.0)], 1)
    (r,) = evaluated_events(extract_events(ipus0, ipus1), ipus0 + ipus1)
    assert (r.event.type, r.prompt_start_s) == ("PAUSE", 0.0)


# --------------------------------------------------------------------------------------- word timestamps


WORDS = """# channel\tstart\tend\tword
0\t0.10\t0.40\tso
0\t0.45\t0.90\twhere
0\t1.40\t1.90\tis
0\t1.95\t2.30\tit

1\t2.50\t2.80\tmm
1\t3.40\t3.70\tit's
1\t3.75\t4.20\tdowntown
"""


def test_words_to_ipus(tmp_path: Path) -> None:
    path = tmp_path / "d.txt"
    path.write_text(WORDS)
    words = read_words(path)
    assert len(words) == 7 and words[0].channel == 0 and words[-1].text == "downtown"
    ch0, ch1 = ipus_from_words(words)
    assert [(i.start_s, i.end_s, i.kind, i.text) for i in ch0] == [(0.1, 2.3, TURN, "so where is it")]
    # 2.8 -> 3.4 is 0.6 s of silence: "mm" is its own IPU, a BC; "it's downtown" is 0.8 s: also a BC
    assert [(i.start_s, i.end_s, i.kind, i.text) for i in ch1] == [(2.5, 2.8, BC, "mm"),
                                                                  (3.4, 4.2, BC, "it's downtown")]
    assert [e.type for e in extract_events(ch0, ch1)] == ["BC", "BC"]


def test_japanese_words_join_without_spaces() -> None:
    words = parse_words("1\t0.0\t0.2\tそう\n1\t0.2\t0.5\tです\n1\t0.5\t0.7\tね\n1\t0.8\t1.2\tOK\n")
    (ipu,) = ipus_from_words(words)[1]
    assert ipu.text == "そうですね OK" and ipu.kind == TURN


@pytest.mark.parametrize(("line", "message"), [
    ("0\t0.1\t0.4", "3 tab-separated fields"),
    ("2\t0.1\t0.4\tx", "channel '2' is not 0 or 1"),
    ("0\tabc\t0.4\tx", "not numbers"),
    ("0\t0.5\t0.4\tx", "need 0 <= start <= end"),
    ("0\t0.1\t0.4\t ", "empty word"),
])
def test_word_reader_errors_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(f"0\t0.0\t0.1\tok\n{line}\n")
    with pytest.raises(SchemaError) as err:
        read_words(path)
    text = str(err.value)
    assert text.startswith(f"{path}:2: ") and message in text and "\n" not in text


def test_word_reader_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="cannot read word timestamps"):
        read_words(tmp_path / "nope.txt")
    assert parse_words("") == []


# --------------------------------------------------------------------------------------------- statistics


def _corpus() -> list[tuple[list[Event], list[Ipu]]]:
    """Six hand-made dialogues with known pauses, shifts, BCs and barge-ins."""
    out = []
    for k in range(6):
        d = 0.1 * k
        ch0 = [(0.0, 3.0), (3.6 + d, 6.0), (12.0, 15.0), (16.0, 16.5)]
        ch1 = [(6.2 + d, 11.8), (8.0, 8.4), (13.0 + d, 16.0)]  # [8.0, 8.4] merges into the system TURN
        ch0_bc = [(7.0 + d, 7.4 + d)]
        ipus0 = ipus_from_spans(ch0 + ch0_bc, 0)
        ipus1 = ipus_from_spans(ch1, 1)
        out.append((extract_events(ipus0, ipus1), ipus0 + ipus1))
    return out


def test_stats_from_known_events() -> None:
    corpus = _corpus()
    types = [e.type for e in corpus[0][0]]
    assert types == ["PAUSE", "SHIFT", "BC", "SHIFT", "BARGE_IN", "BC"]
    stats = stats_from_dialogues(corpus, source="hand-made")
    assert stats.counts["pause_s"] == 6 and stats.counts["shift_gap_s"] == 12 and stats.counts["dialogues"] == 6
    assert stats.pause_s is not None and stats.pause_s.values[0] == pytest.approx(0.605)  # trimmed 1st pct
    assert stats.pause_s.values[10] == pytest.approx(0.85)  # median of 0.6 .. 1.1
    assert stats.shift_gap_s is not None and stats.shift_gap_s.values[10] == pytest.approx(0.2)
    # the system barges in at 13 + d into the user TURN [12, 15]: 1 + d s into it, 2 - d s of overlap
    assert stats.barge_in_overlap_s is not None and stats.barge_in_overlap_s.mean == pytest.approx(1.75, abs=0.01)
    assert stats.barge_in_offset_s is not None and stats.barge_in_offset_s.values[10] == pytest.approx(1.25)
    # BCs inside the other's TURNs: the user's (7.0 + d) per dialogue; the user's [16, 16.5] falls after the
    # system's TURN end (16.0) -> not inside. Other-TURN speech: all TURN seconds of both sides.
    turn_s = sum(i.duration_s for _, ipus in corpus for i in ipus if i.is_turn)
    assert stats.counts["bc_in_turn"] == 6 and stats.bc_per_min == pytest.approx(round(6 / (turn_s / 60), 4))
    # floor turns per dialogue: 5 TURNs - 1 PAUSE = 4, one of them paused
    assert stats.pause_turn_share == pytest.approx(0.25)
    assert stats.bc_offset_frac is not None and 0.0 < stats.bc_offset_frac.values[0] < 0.2


def test_stats_unmeasured_fields_and_fill(tmp_path: Path) -> None:
    events, ipus = _corpus()[0]
    one = stats_from_events(events, ipus, source="one dialogue")
    assert set(one.missing()) == {"pause_s", "shift_gap_s", "bc_duration_s", "bc_offset_frac",
                                  "barge_in_offset_s", "barge_in_overlap_s"}
    with pytest.raises(ValueError, match="pause_s was not measured"):
        one.sample_pause_s(random.Random(0))
    filled = one.filled_from(default_stats("en", "chat"))
    assert filled.missing() == [] and filled.bc_per_min == one.bc_per_min
    assert "not measured in one dialogue" in filled.notes["pause_s"]
    save_stats(filled, tmp_path / "s.json")
    assert load_stats(tmp_path / "s.json") == filled


def test_stats_round_trip_and_validation(tmp_path: Path) -> None:
    stats = stats_from_dialogues(_corpus(), source="hand-made")
    path = tmp_path / "stats.json"
    save_stats(stats, path)
    assert load_stats(path) == stats
    d = json.loads(path.read_text())
    for mutate, message in [
        (lambda x: x.update(extra=1), "unknown keys"),
        (lambda x: x.pop("pause_s"), "missing keys"),
        (lambda x: x.update(format="v0"), "format"),
        (lambda x: x["pause_s"]["values"].__setitem__(0, 0.4), "field 'pause_s': values must be > ipu_gap_s"),
        (lambda x: x["shift_gap_s"]["values"].__setitem__(0, -0.5), "field 'shift_gap_s'"),
        (lambda x: x["shift_gap_s"]["values"].reverse(), "non-decreasing"),
        (lambda x: x["bc_offset_frac"]["probs"].__setitem__(-1, 0.9), "rise strictly from 0 to 1"),
        (lambda x: x.update(bc_per_min="many"), "field 'bc_per_min'"),
        (lambda x: x.update(pause_turn_share=1.5), "field 'pause_turn_share'"),
        (lambda x: x.update(params={"ipu_gap_s": -1}), "field 'params'"),
    ]:
        bad = json.loads(json.dumps(d))
        mutate(bad)
        path.write_text(json.dumps(bad))
        with pytest.raises(SchemaError) as err:
            load_stats(path)
        assert message in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)
    path.write_text("{not json")
    with pytest.raises(SchemaError, match="not JSON"):
        load_stats(path)


def test_defaults_cover_every_config_and_keep_the_paper_means() -> None:
    data = json.loads(DEFAULTS_FILE.read_text())
    assert "NOT measurements" in data["note"]
    for (lang, dom), mean in {("en", "chat"): 0.88, ("ja", "chat"): 0.72, ("en", "task"): 0.45,
                              ("ja", "task"): 0.35}.items():
        s = default_stats(lang, dom)
        assert s.missing() == [] and s.shift_gap_s is not None
        assert s.shift_gap_s.mean == pytest.approx(mean, abs=0.005)
        assert set(s.notes) == {"pause_s", "shift_gap_s", "bc_duration_s", "bc_offset_frac", "barge_in_offset_s",
                                "barge_in_overlap_s", "bc_per_min", "pause_turn_share"}
    with pytest.raises(SchemaError, match="no defaults for 'fr_chat'"):
        default_stats("fr", "chat")


def test_sampling_is_seeded_and_respects_the_rules() -> None:
    s = default_stats("ja", "task")
    a = [s.sample_shift_gap_s(random.Random(7)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    rng = random.Random(1)
    draws = {
        "pause": [s.sample_pause_s(rng) for _ in range(2000)],
        "shift": [s.sample_shift_gap_s(rng) for _ in range(2000)],
        "overlap": [s.sample_barge_in_overlap_s(rng) for _ in range(2000)],
        "frac": [s.sample_bc_offset_frac(rng) for _ in range(2000)],
        "offset": [s.sample_barge_in_offset_s(rng) for _ in range(2000)],
    }
    assert min(draws["pause"]) >= 0.6 and min(draws["shift"]) >= -0.3 and min(draws["overlap"]) >= 0.5
    assert 0.15 <= min(draws["frac"]) and max(draws["frac"]) <= 0.85 and min(draws["offset"]) >= 0.8
    assert sum(x < 0 for x in draws["shift"]) > 200  # Japanese task SHIFTs do overlap (~20 %)
    assert abs(sum(draws["shift"]) / 2000 - 0.35) < 0.05
    counts = [s.sample_bc_count(rng, 60.0) for _ in range(2000)]
    assert abs(sum(counts) / 2000 - 4.0) < 0.2  # ja task: 4 BCs per minute of the other's TURN speech
    share = sum(s.sample_turn_has_pause(rng) for _ in range(4000)) / 4000
    assert abs(share - 0.15) < 0.03


def test_quantile_truncation_is_exact() -> None:
    q = Quantiles((0.0, 0.5, 1.0), (0.0, 1.0, 3.0))
    assert q.ppf(0.25) == 0.5 and q.cdf(2.0) == 0.75 and q.mean == pytest.approx(1.25)
    rng = random.Random(3)
    xs = [q.sample(rng, lo=1.0) for _ in range(4000)]
    assert min(xs) >= 1.0 and abs(sum(xs) / len(xs) - 2.0) < 0.05  # uniform on [1, 3] above the median
    assert q.sample(rng, lo=5.0) == 5.0  # no mass there: the nearest allowed value
