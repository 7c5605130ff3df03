"""DSB-IFEval's scoring rules as pure functions, with exact known answers (App. E.3-E.4): each verifier at its
threshold boundaries, every threshold through each path that can set it, each condition of a compound rule failing
alone, and the measurement record of hand-placed spans. No audio, no VAD, no TTS: these are the tests `make mutate`
runs against metrics/ifeval/ (tests/MUTATION.md).

The paths that set a threshold: the contract default (VERIFIER_DEFAULTS), the role override (ROLE_OVERRIDES), the
case's own gold `verifier` (what rec.json carries and the scorer reads), and a run-wide replacement (`Thresholds`,
`score --param` and the sweep), which beats the other three.
"""

from __future__ import annotations

from typing import Any

import pytest

from dataset_builder.ifeval.schema import ACTIONS, VERIFIER_DEFAULTS, verifier_params
from metrics.ifeval.measure import (
    IDENTITY,
    OPEN_END_S,
    failed_record,
    first_offset,
    gold_problem,
    identity,
    measure_case,
    overlap_s,
    user_resumes_at,
    window_abs,
)
from metrics.ifeval.verdicts import (
    PER_CASE,
    REPLACES,
    Thresholds,
    case_params,
    effective_params,
    passes,
    vad_label,
    yielded,
)
from metrics.spans import Span

# --- verdicts on hand-made measurement records -------------------------------------------------------------


def rec(action: str, role: str = "R2", verifier: dict[str, float] | None = None, **fields: Any) -> dict[str, Any]:
    """A measurement record of `action`; `verifier` replaces the case's gold thresholds (else the contract's)."""
    base = {"case_id": f"{role}-{action}", "expected_action": action, "role": role, "level": "L1",
            "verifier": case_params(action, role, verifier), "n_onsets": 0, "onset_durations_s": [],
            "genuine_onset_s": None, "first_offset_s": None, "carried_in": None, "overlap_s": 0.0,
            "user_resumes": False, "readback": None}
    return base | fields


def test_thresholds_round_trip_and_reject_typos() -> None:
    th = Thresholds(take_turn_max_wait_s=2.5, bc_ceiling_s=0.8)
    assert th.applied() == {"take_turn_max_wait_s": 2.5, "bc_ceiling_s": 0.8}
    assert th.to_dict() == {"take_turn_max_wait_s": 2.5, "yield_max_latency_ms": PER_CASE,
                            "interrupt_max_latency_ms": PER_CASE, "bc_ceiling_s": 0.8,
                            "readback_min_coverage": PER_CASE}
    assert Thresholds.from_dict(th.to_dict()) == th
    back = Thresholds.from_dict({"yield_max_latency_ms": "400", "bc_ceiling_s": None})
    assert back == Thresholds(yield_max_latency_ms=400.0) and isinstance(back.yield_max_latency_ms, float)
    assert Thresholds().applied() == {} and set(Thresholds().to_dict().values()) == {PER_CASE}
    with pytest.raises(ValueError, match=r"unknown IFEval thresholds \['take_turn_wait_s'\]; known: \["):
        Thresholds.from_dict({"take_turn_wait_s": 2.0})


def test_case_params_layer_gold_over_role_over_default() -> None:
    assert case_params("TAKE_TURN", "R2", None) == {"max_wait_s": 2.0}  # the contract default
    assert case_params("TAKE_TURN", "R3", None) == {"max_wait_s": 1.5}  # the role override
    assert case_params("TAKE_TURN", "R3", {"max_wait_s": "1.7"}) == {"max_wait_s": 1.7}  # the case's gold
    # a gold verifier lacking a key keeps the contract's value for it
    assert case_params("BACKCHANNEL", "R1", {"bc_ceiling_s": 0.9}) == {"bc_ceiling_s": 0.9, "bc_window_min": 1.0,
                                                                       "bc_window_max": 1.0}


# Each run-wide threshold, the actions whose verifier key it replaces, and a record of each action that passes at
# the contract's value and fails once that threshold is set to `tight`.
REPLACED = {
    "take_turn_max_wait_s": ("TAKE_TURN", "max_wait_s", 1.0),
    "yield_max_latency_ms": ("YIELD", "max_latency_ms", 100.0),
    "interrupt_max_latency_ms": ("INTERRUPT", "max_latency_ms", 100.0),
    "bc_ceiling_s": ("BACKCHANNEL", "bc_ceiling_s", 0.3),
    "readback_min_coverage": ("READBACK", "min_coverage", 1.0),
}
PASSING = {
    "LISTEN": rec("LISTEN"),
    "NO_BACKCHANNEL": rec("NO_BACKCHANNEL"),
    "TAKE_TURN": rec("TAKE_TURN", n_onsets=1, genuine_onset_s=1.2),
    "INTERRUPT": rec("INTERRUPT", n_onsets=1, genuine_onset_s=0.9),
    "BACKCHANNEL": rec("BACKCHANNEL", "R1", n_onsets=1, onset_durations_s=[0.5], user_resumes=True),
    "READBACK": rec("READBACK", readback={"coverage": 0.95}),
    "YIELD": rec("YIELD", first_offset_s=0.3),
    "CONTINUE": rec("CONTINUE", carried_in=[1.0, 9.0], first_offset_s=2.0),
    "ACCEPT_OVERLAP": rec("ACCEPT_OVERLAP", overlap_s=0.5),
}


def test_replaces_names_each_action_once() -> None:
    assert REPLACES == {name: (("YIELD", "CONTINUE") if name == "yield_max_latency_ms" else (a,), key)
                        for name, (a, key, _) in REPLACED.items()}


@pytest.mark.parametrize("name", sorted(REPLACED))
def test_a_run_wide_threshold_moves_only_its_actions(name: str) -> None:
    """Every action passes its record at the contract's values; a tight run-wide value of one threshold fails
    exactly the actions that threshold replaces (CONTINUE's record stops counting as held when YIELD's latency
    grows, so it is checked with a loose value)."""
    assert all(passes(m) for m in PASSING.values())
    assert all(passes(m, Thresholds()) for m in PASSING.values())
    tight = Thresholds(**{name: REPLACED[name][2]})
    failing = {a for a, m in PASSING.items() if not passes(m, tight)}
    assert failing == {REPLACED[name][0]}
    for a, m in PASSING.items():
        p = effective_params(m, tight)
        moved = {k for k in p if p[k] != m["verifier"][k]}
        assert moved == ({REPLACED[name][1]} if a in REPLACES[name][0] else set()), a
    if name == "yield_max_latency_ms":
        assert not passes(PASSING["CONTINUE"], Thresholds(yield_max_latency_ms=2000.0))


def test_effective_params_do_not_touch_the_record() -> None:
    m = PASSING["TAKE_TURN"]
    before = dict(m["verifier"])
    assert effective_params(m, Thresholds(take_turn_max_wait_s=2.5)) == {"max_wait_s": 2.5}
    assert m["verifier"] == before


# TAKE_TURN through every path: (role, gold verifier, run-wide value) -> the wait that applies
TT_PATHS = [("R2", None, None, 2.0), ("R1", None, None, 2.0), ("R3", None, None, 1.5), ("R6", None, None, 1.2),
            ("R8", None, None, 0.8), ("R3", {"max_wait_s": 1.7}, None, 1.7), ("R3", None, 2.5, 2.5),
            ("R8", {"max_wait_s": 1.7}, 1.5, 1.5)]


@pytest.mark.parametrize(("role", "gold", "run_wide", "wait"), TT_PATHS)
def test_take_turn_wait_boundary_through_each_path(role: str, gold: dict | None, run_wide: float | None,
                                                   wait: float) -> None:
    th = Thresholds(take_turn_max_wait_s=run_wide)
    assert passes(rec("TAKE_TURN", role, gold, n_onsets=1, genuine_onset_s=wait), th)
    assert not passes(rec("TAKE_TURN", role, gold, n_onsets=1, genuine_onset_s=round(wait + 0.001, 3)), th)
    assert passes(rec("TAKE_TURN", role, gold, n_onsets=1, genuine_onset_s=0.0), th)
    assert not passes(rec("TAKE_TURN", role, gold, genuine_onset_s=None), th)  # no genuine onset


IN_PATHS = [("R2", None, None, 1500.0), ("R3", None, None, 1200.0), ("R6", None, None, 1200.0),
            ("R5", None, None, 1500.0), ("R3", {"max_latency_ms": 900.0}, None, 900.0),
            ("R3", None, 2000.0, 2000.0), ("R3", {"max_latency_ms": 900.0}, 1000.0, 1000.0)]


@pytest.mark.parametrize(("role", "gold", "run_wide", "limit_ms"), IN_PATHS)
def test_interrupt_latency_boundary_through_each_path(role: str, gold: dict | None, run_wide: float | None,
                                                      limit_ms: float) -> None:
    th = Thresholds(interrupt_max_latency_ms=run_wide)
    at = limit_ms / 1000
    assert passes(rec("INTERRUPT", role, gold, n_onsets=1, genuine_onset_s=at), th)
    assert not passes(rec("INTERRUPT", role, gold, n_onsets=1, genuine_onset_s=round(at + 0.001, 3)), th)
    assert not passes(rec("INTERRUPT", role, gold, genuine_onset_s=None), th)


@pytest.mark.parametrize(("gold", "run_wide", "limit_ms"), [
    (None, None, 600.0), ({"max_latency_ms": 400.0}, None, 400.0), (None, 1500.0, 1500.0),
    ({"max_latency_ms": 400.0}, 200.0, 200.0)])
def test_yield_and_continue_latency_through_each_path(gold: dict | None, run_wide: float | None,
                                                      limit_ms: float) -> None:
    th = Thresholds(yield_max_latency_ms=run_wide)
    at, over = limit_ms / 1000, round(limit_ms / 1000 + 0.001, 3)
    assert passes(rec("YIELD", verifier=gold, first_offset_s=at), th)
    assert not passes(rec("YIELD", verifier=gold, first_offset_s=over), th)
    held = [1.0, 9.0]
    assert not passes(rec("CONTINUE", verifier=gold, carried_in=held, first_offset_s=at), th)
    assert passes(rec("CONTINUE", verifier=gold, carried_in=held, first_offset_s=over), th)


def test_yield_offset_rounding() -> None:
    """Offsets are stored to the millisecond; 0.6 s is 600 ms exactly even where 0.6 * 1000 is 600.0000000000001."""
    assert yielded({"first_offset_s": 0.6}, 600.0) and yielded({"first_offset_s": 0.0}, 0.0)
    assert not yielded({"first_offset_s": 0.601}, 600.0) and not yielded({"first_offset_s": None}, 600.0)
    assert yielded({"first_offset_s": 1.2}, 1200.0) and not yielded({"first_offset_s": 1.2}, 1199.99)


def test_continue_each_condition_failing_alone() -> None:
    ok = {"carried_in": [1.0, 9.0], "first_offset_s": 2.0}
    assert passes(rec("CONTINUE", **ok))
    assert not passes(rec("CONTINUE", **(ok | {"carried_in": None})))  # never held the floor
    assert not passes(rec("CONTINUE", **(ok | {"first_offset_s": 0.5})))  # stopped within the latency
    assert passes(rec("CONTINUE", **(ok | {"first_offset_s": None})))  # still speaking at the end: kept it


BC_OK = {"n_onsets": 1, "onset_durations_s": [0.5], "user_resumes": True}


def test_backchannel_each_condition_failing_alone() -> None:
    assert passes(rec("BACKCHANNEL", "R1", **BC_OK))
    assert not passes(rec("BACKCHANNEL", "R1", **(BC_OK | {"onset_durations_s": [1.0]})))  # at the ceiling
    assert not passes(rec("BACKCHANNEL", "R1", **(BC_OK | {"user_resumes": False})))  # the floor changed hands
    assert not passes(rec("BACKCHANNEL", "R1", **(BC_OK | {"n_onsets": 2, "onset_durations_s": [0.4, 0.4]})))
    assert not passes(rec("BACKCHANNEL", "R1", **(BC_OK | {"n_onsets": 0, "onset_durations_s": []})))
    # the window counts come from the case's gold too
    wide = {"bc_window_min": 1.0, "bc_window_max": 2.0}
    assert passes(rec("BACKCHANNEL", "R1", wide, **(BC_OK | {"n_onsets": 2, "onset_durations_s": [0.4, 0.4]})))
    two = {"bc_window_min": 2.0, "bc_window_max": 2.0}
    assert not passes(rec("BACKCHANNEL", "R1", two, **BC_OK))


@pytest.mark.parametrize(("gold", "run_wide", "ceiling"), [(None, None, 1.0), ({"bc_ceiling_s": 0.7}, None, 0.7),
                                                           (None, 1.2, 1.2), ({"bc_ceiling_s": 0.7}, 0.6, 0.6)])
def test_backchannel_ceiling_through_each_path(gold: dict | None, run_wide: float | None, ceiling: float) -> None:
    th = Thresholds(bc_ceiling_s=run_wide)
    below = round(ceiling - 0.001, 3)
    assert passes(rec("BACKCHANNEL", "R1", gold, **(BC_OK | {"onset_durations_s": [below]})), th)
    assert not passes(rec("BACKCHANNEL", "R1", gold, **(BC_OK | {"onset_durations_s": [ceiling]})), th)


def test_vad_label() -> None:
    m = {"n_onsets": 0, "onset_durations_s": [], "user_resumes": True}
    assert vad_label(m, 1.0) == "silent"
    m = {"n_onsets": 2, "onset_durations_s": [0.4, 0.999], "user_resumes": True}
    assert vad_label(m, 1.0) == "backchannel"
    assert vad_label(m | {"onset_durations_s": [0.4, 1.0]}, 1.0) == "floor_take"  # every span must be short
    assert vad_label(m | {"onset_durations_s": [1.0, 0.4]}, 1.0) == "floor_take"
    assert vad_label(m | {"user_resumes": False}, 1.0) == "floor_take"
    assert vad_label(m, 0.999) == "floor_take"


def test_no_backchannel_listen_and_overlap_boundaries() -> None:
    assert passes(rec("NO_BACKCHANNEL")) and not passes(rec("NO_BACKCHANNEL", n_onsets=1))
    assert passes(rec("NO_BACKCHANNEL", verifier={"bc_window_max": 1.0}, n_onsets=1))
    assert not passes(rec("NO_BACKCHANNEL", verifier={"bc_window_max": 1.0}, n_onsets=2))
    assert passes(rec("LISTEN")) and not passes(rec("LISTEN", n_onsets=1))
    assert not passes(rec("ACCEPT_OVERLAP", overlap_s=0.0))  # strictly greater than the minimum
    assert passes(rec("ACCEPT_OVERLAP", overlap_s=0.001))
    assert not passes(rec("ACCEPT_OVERLAP", verifier={"min_overlap_s": 0.5}, overlap_s=0.5))
    assert passes(rec("ACCEPT_OVERLAP", verifier={"min_overlap_s": 0.5}, overlap_s=0.501))


@pytest.mark.parametrize(("gold", "run_wide", "need"), [(None, None, 0.9), ({"min_coverage": 0.75}, None, 0.75),
                                                        ({"min_coverage": 0.75}, 0.5, 0.5), (None, 1.0, 1.0)])
def test_readback_coverage_through_each_path(gold: dict | None, run_wide: float | None, need: float) -> None:
    th = Thresholds(readback_min_coverage=run_wide)
    assert passes(rec("READBACK", verifier=gold, readback={"coverage": need}), th)
    assert not passes(rec("READBACK", verifier=gold, readback={"coverage": need - 0.01}), th)
    assert not passes(rec("READBACK", verifier=gold, readback=None), th)
    assert not passes(rec("READBACK", verifier=gold, readback={"coverage": None}), th)


def test_failed_and_unknown() -> None:
    assert not passes(PASSING["LISTEN"] | {"failed": True})
    assert passes(PASSING["LISTEN"] | {"failed": False})
    bad = PASSING["LISTEN"] | {"expected_action": "SING", "verifier": {}}
    with pytest.raises(ValueError, match=r"R2-LISTEN: unknown action 'SING'; known: \('LISTEN'"):
        passes(bad)


def test_every_action_has_a_passing_and_a_failing_record() -> None:
    """Which fields each action is scored on: the passing record above, with the one field that fails it."""
    fails = {"LISTEN": {"n_onsets": 1}, "NO_BACKCHANNEL": {"n_onsets": 1}, "TAKE_TURN": {"genuine_onset_s": None},
             "INTERRUPT": {"genuine_onset_s": 2.0}, "BACKCHANNEL": {"user_resumes": False},
             "READBACK": {"readback": {"coverage": 0.5}}, "YIELD": {"first_offset_s": 0.9},
             "CONTINUE": {"carried_in": None}, "ACCEPT_OVERLAP": {"overlap_s": 0.0}}
    assert set(fails) == set(ACTIONS) == set(PASSING) == set(VERIFIER_DEFAULTS)
    for action, change in fails.items():
        assert passes(PASSING[action]) and not passes(PASSING[action] | change), action


# --- measurements of hand-placed spans ----------------------------------------------------------------------


def gold(action: str = "TAKE_TURN", window: list[float | None] | None = None, **extra: Any) -> dict[str, Any]:
    g = {"conversation_id": "R3-C1-i1", "role": "R3", "probe": "C1", "instance": 1, "level": "L1",
         "expected_action": action, "base_action": action, "event": "pause", "resolution_target": None,
         "matched_audio": 1, "matched_group": "M-C1-i1", "window_rel_s": window or [2.0, 6.0],
         "turn2_segments": [{"kind": "speech", "start_s": 0.0, "end_s": 2.0},
                            {"kind": "silence", "start_s": 2.0, "end_s": 6.0},
                            {"kind": "speech", "start_s": 6.0, "end_s": 7.5}]}
    return g | extra


def test_gold_problems_name_the_field() -> None:
    t2 = (10.0, 17.5)
    assert gold_problem(gold(), t2) is None
    assert gold_problem(None, t2) == "rec.json has no gold"
    g = gold()
    del g["event"], g["level"]
    assert gold_problem(g, t2) == "gold lacks ['level', 'event']"
    assert gold_problem(gold("SING"), t2) == ("gold expected_action 'SING' is not one of ('LISTEN', 'BACKCHANNEL', "
                                              "'NO_BACKCHANNEL', 'INTERRUPT', 'TAKE_TURN', 'READBACK', 'YIELD', "
                                              "'CONTINUE', 'ACCEPT_OVERLAP')")
    assert gold_problem(gold(level="L9"), t2) == ("gold level 'L9' is not one of ('L0', 'L1', 'L2', 'L3', 'L4a', "
                                                  "'L4b')")
    for bad in ([1.0], "1,2", [None, 2.0], ["1", 2.0], [1.0, "2"], (1.0, 2.0, 3.0)):
        assert gold_problem(gold(window_rel_s=bad), t2) == f"gold window_rel_s {bad!r} is not [w0, w1 or null]"
    assert gold_problem(gold(window_rel_s=[1, None]), t2) is None
    assert gold_problem(gold(window_rel_s=(1.0, 2)), t2) is None
    assert gold_problem(gold("READBACK"), t2) == "a READBACK case without a readback_target"
    assert gold_problem(gold("READBACK", readback_target=""), t2) == "a READBACK case without a readback_target"
    assert gold_problem(gold("READBACK", readback_target="555"), t2) is None
    assert gold_problem(gold(), None) == ("turn t2 was never played, so its trigger window has no place in the "
                                          "recording")


def test_identity_and_failed_record() -> None:
    g = gold(verifier={"max_wait_s": 1.7})
    out = identity(g, "case-1")
    assert set(out) == {"case_id", *IDENTITY, "label", "verifier"}
    assert out["case_id"] == "case-1" and out["label"] == "TAKE_TURN" and out["matched_audio"] is True
    assert out["verifier"] == {"max_wait_s": 1.7} and out["conversation_id"] == "R3-C1-i1"
    assert identity(gold(matched_audio=0), "c")["matched_audio"] is False
    assert identity(gold(), "c")["verifier"] == {"max_wait_s": 1.5}  # no gold verifier: R3's override
    f = failed_record("case-1", g, "step raised")
    assert f == out | {"failed": True, "reason": "step raised"}


def test_window_in_recording_time() -> None:
    assert window_abs(gold(), 10.0, 30.0) == (12.0, 16.0)
    assert window_abs(gold(window_rel_s=[2.0, None]), 10.0, 30.0) == (12.0, 30.0)  # open: to the end
    assert window_abs(gold(), 10.0, 15.0) == (12.0, 15.0)  # cut by the recording's end
    assert window_abs(gold(), 10.0, 11.0) == (12.0, 12.0)  # never shorter than empty
    assert window_abs(gold(window_rel_s=[0.0004, 1.0006]), 10.0, 30.0) == (10.0, 11.001)


def test_overlap_and_first_offset() -> None:
    model = [Span(1.0, 3.0), Span(4.0, 6.0)]
    user = [Span(2.0, 4.5), Span(5.5, 9.0)]
    assert overlap_s(model, user, 0.0, 10.0) == pytest.approx(2.0)  # [2,3] + [4,4.5] + [5.5,6]
    assert overlap_s(model, user, 2.5, 5.8) == pytest.approx(1.3)  # [2.5,3] + [4,4.5] + [5.5,5.8]
    assert overlap_s(model, user, 3.0, 4.0) == 0.0 and overlap_s([], user, 0.0, 10.0) == 0.0
    assert overlap_s(model, [Span(0.0, 1.0)], 0.0, 10.0) == 0.0  # touching is not overlapping
    # offsets: the first span end at or after w0, spans taken by their ends
    assert first_offset([Span(4.0, 6.0), Span(1.0, 3.0)], 2.0, 20.0) == (1.0, False)
    assert first_offset([Span(1.0, 3.0)], 3.0, 20.0) == (0.0, False)  # an end exactly at w0 counts
    assert first_offset([Span(1.0, 3.0)], 3.001, 20.0) == (None, False)
    assert first_offset([], 0.0, 20.0) == (None, False)
    end = 20.0
    assert first_offset([Span(1.0, end - OPEN_END_S)], 2.0, end) == (None, True)  # cut by the recording's end
    assert first_offset([Span(1.0, end - OPEN_END_S - 0.001)], 2.0, end) == (17.949, False)


def test_user_resumes_after_the_window() -> None:
    g = gold()
    assert user_resumes_at(g, (10.0, 17.5), 16.0) == 16.0  # the speech at 6.0 s into turn 2, exactly at w1
    assert user_resumes_at(g, (10.0, 17.5), 16.0000005) == 16.0  # within a microsecond of w1
    assert user_resumes_at(g, (10.0, 17.5), 16.001) is None  # after w1 no speech starts
    assert user_resumes_at(g, (10.0, 16.0), 16.0) is None  # the realised clip ended before it
    assert user_resumes_at(g, (10.0, 17.5), 11.0) == 16.0  # silence segments are not resumption
    assert user_resumes_at(gold(turn2_segments=None), (10.0, 17.5), 11.0) is None
    assert user_resumes_at({"turn2_segments": [{"kind": "speech", "start_s": 6.0004}]}, (10.0, 17.5), 11.0) == 16.0


def test_measure_case_known_record() -> None:
    """t2 at 10 s, window [12, 16): one span carried in, two genuine onsets, the user speaking in the window."""
    model = [Span(11.0, 12.5), Span(12.8, 13.4), Span(15.2, 17.0), Span(19.0, 20.0)]
    user = [Span(10.0, 12.0), Span(13.0, 13.2), Span(16.0, 17.5)]
    m = measure_case("case-1", gold(t2_start={"cause": "endpoint"}), (10.0, 17.5), 30.0, model, user)
    assert m["case_id"] == "case-1" and m["conversation_id"] == "R3-C1-i1"
    assert m["window"] == [12.0, 16.0] and m["t2_start_s"] == 10.0 and m["t2_end_s"] == 17.5
    assert m["carried_in"] == [11.0, 12.5]
    assert m["onsets"] == [[12.8, 13.4], [15.2, 17.0]] and m["n_onsets"] == 2
    assert m["onset_durations_s"] == [0.6, 1.8] and m["genuine_onset_s"] == 0.8
    assert m["first_offset_s"] == 0.5 and m["speaking_at_end"] is False
    assert m["overlap_s"] == 0.2  # [13.0, 13.2]
    assert m["model_speech_s"] == 1.9 and m["user_speech_s"] == 0.2  # [12,12.5]+[12.8,13.4]+[15.2,16]; [13,13.2]
    assert m["user_resumes"] is True and m["user_resumes_at_s"] == 16.0
    assert m["spans"] == [[11.0, 12.5], [12.8, 13.4], [15.2, 17.0]] and m["model_spans_n"] == 4
    assert m["t2_cause"] == "endpoint" and m["readback"] is None
    assert m["vad_label"] == "floor_take"  # the 1.8 s span is over R3's 1.0 s ceiling
    assert m["label"] == "TAKE_TURN" and m["verifier"] == {"max_wait_s": 1.5} and passes(m)
    assert measure_case("c", gold(t2_start="gap"), (10.0, 17.5), 30.0, model, user)["t2_cause"] is None
    assert measure_case("c", gold(), (10.0, 17.5), 30.0, model, user)["t2_cause"] is None


def test_measure_case_silent_and_backchannel() -> None:
    m = measure_case("c", gold(), (10.0, 17.5), 30.0, [], [])
    assert (m["n_onsets"], m["genuine_onset_s"], m["carried_in"], m["first_offset_s"]) == (0, None, None, None)
    assert m["vad_label"] == "silent" and m["model_speech_s"] == 0.0 and m["spans"] == []
    g = gold("BACKCHANNEL", role="R1", verifier={"bc_ceiling_s": 0.7})
    bc = measure_case("c", g, (10.0, 17.5), 30.0, [Span(13.0, 13.6)], [])
    assert bc["vad_label"] == "backchannel" and passes(bc)  # 0.6 s under the case's own 0.7 s ceiling
    long = measure_case("c", g, (10.0, 17.5), 30.0, [Span(13.0, 13.7)], [])
    assert long["vad_label"] == "floor_take" and not passes(long)
    # a span starting exactly at w0 is genuine; one ending exactly at w0 is neither carried in nor in the window
    edge = measure_case("c", gold(), (10.0, 17.5), 30.0, [Span(11.0, 12.0), Span(12.0, 12.5), Span(16.0, 17.0)], [])
    assert edge["carried_in"] is None and edge["onsets"] == [[12.0, 12.5]] and edge["first_offset_s"] == 0.0
    assert edge["spans"] == [[12.0, 12.5]]


def test_measure_case_readback() -> None:
    g = gold("READBACK", readback_target="five five five two")
    m = measure_case("c", g, (10.0, 17.5), 30.0, [Span(12.5, 14.0)], [], ("asr", "five five five"))
    assert m["readback"] == {"source": "asr", "target": "five five five two", "text": "five five five",
                             "coverage": 0.75}
    none = measure_case("c", g, (10.0, 17.5), 30.0, [], [])
    assert none["readback"] == {"source": "none", "target": "five five five two", "text": "", "coverage": 0.0}
    assert measure_case("c", g, (10.0, 17.5), 30.0, [], [], ("model_text", "x"))["readback"]["source"] == "model_text"


def test_verifier_params_follow_the_contract() -> None:
    assert verifier_params("TAKE_TURN", "R3") == {"max_wait_s": 1.5}
    assert verifier_params("LISTEN", "R3") == {}
