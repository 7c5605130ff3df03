"""DSB-IFEval aggregation and the threshold sweep on hand-made measurement lists with known answers (its paper's
metrics and App. E): IAS
blocks, Newcombe intervals, level differences with their paired view, the matched-audio table, Kendall's tau-b and
the 180-configuration sweep. Pure functions, no audio: `make mutate` runs these (tests/MUTATION.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dataset_builder.errors import UsageError
from dataset_builder.ifeval.schema import ACTIONS, LEVELS, ROLES, verifier_params
from metrics.ifeval.aggregate import aggregate, newcombe_interval
from metrics.ifeval.sweep import GRID, configurations, kendall_tau, sweep, sweep_text
from metrics.ifeval.verdicts import Thresholds

# --- hand-made measurements ---------------------------------------------------------------------------------


def meas(level: str, ok: bool | None = True, *, action: str = "LISTEN", role: str = "R2", conv: str = "c1",
         **extra: Any) -> dict[str, Any]:
    """A measurement that passes (ok=True) or fails (False) its verifier at default thresholds; ok=None: failed
    episode."""
    m = {"case_id": f"{role}-{conv}-{level}-{action}", "conversation_id": f"{role}-{conv}", "role": role,
         "probe": "C1", "level": level, "expected_action": action, "label": action, "matched_audio": False,
         "matched_group": "", "verifier": verifier_params(action, role)}
    if ok is None:
        return m | {"failed": True, "reason": "step raised"} | extra
    if action == "LISTEN":
        m["n_onsets"] = 0 if ok else 1
    elif action == "TAKE_TURN":
        m["genuine_onset_s"] = 0.5 if ok else None
    return m | extra


def kn(block: dict[str, Any]) -> tuple[int, int]:
    return block["k"], block["n"]


def test_ias_blocks_count_every_case_once() -> None:
    ms = [meas("L1", True), meas("L1", False, conv="c2"), meas("L2", True), meas("L2", None, conv="c2"),
          meas("L3", True, action="TAKE_TURN", role="R3"), meas("L4b", False, action="TAKE_TURN", role="R1")]
    res = aggregate(ms, Thresholds())
    assert kn(res["scores"]["ias"]) == (3, 6)
    assert {lv: kn(res["by_level"][lv]) for lv in LEVELS} == {"L0": (0, 0), "L1": (1, 2), "L2": (1, 2),
                                                                "L3": (1, 1), "L4a": (0, 0), "L4b": (0, 1)}
    assert res["by_level"]["L0"] == {"value": None, "n": 0, "k": 0, "ci": None}  # no denominator, no silent 0
    assert set(res["by_action"]) == set(ACTIONS) and kn(res["by_action"]["LISTEN"]) == (2, 4)
    assert kn(res["by_action"]["TAKE_TURN"]) == (1, 2)
    assert set(res["by_role"]) == set(ROLES) and kn(res["by_role"]["R2"]) == (2, 4)
    lo, hi = res["scores"]["ias"]["ci"]
    assert lo < 0.5 < hi  # Wilson 95 %


def test_failed_episode_never_helps() -> None:
    """A crashed episode counts as a failure: the same run with that case passing scores higher."""
    ok = aggregate([meas("L1", True), meas("L1", True, conv="c2")], Thresholds())
    crashed = aggregate([meas("L1", True), meas("L1", None, conv="c2")], Thresholds())
    assert kn(ok["by_level"]["L1"]) == (2, 2) and kn(crashed["by_level"]["L1"]) == (1, 2)


def test_newcombe_known_values() -> None:
    """Newcombe (1998), Stat. Med. 17:873, Table II, method 10."""
    for (ka, na, kb, nb), (lo, hi) in (((56, 70, 48, 80), (0.0524, 0.3339)), ((9, 10, 3, 10), (0.1705, 0.8090)),
                                       ((5, 56, 0, 29), (-0.0381, 0.1926))):
        got = newcombe_interval(ka, na, kb, nb)
        assert got is not None and got == pytest.approx((lo, hi), abs=1e-4)
    assert newcombe_interval(1, 2, 0, 0) is None


def test_level_differences_and_pairs() -> None:
    # 4 conversations at L1, L2, L3: L1 passes 3, L2 passes 1, L3 passes 4
    ms = []
    for i, (l1, l2, l3) in enumerate([(1, 1, 1), (1, 0, 1), (1, 0, 1), (0, 0, 1)]):
        ms += [meas("L1", bool(l1), conv=f"c{i}"), meas("L2", bool(l2), conv=f"c{i}"),
               meas("L3", bool(l3), conv=f"c{i}")]
    res = aggregate(ms, Thresholds())
    eg, rg, rt = res["entailment_gap"], res["redundancy_gain"], res["role_tax"]
    assert (eg["a"], eg["b"], eg["value"], eg["n_a"], eg["n_b"]) == ("L1", "L2", 0.5, 4, 4)
    lo, hi = newcombe_interval(3, 4, 1, 4)  # type: ignore[misc]
    assert eg["ci"] == [round(lo, 4), round(hi, 4)] == [-0.1355, 0.7891]
    assert eg["paired"] == {"n_pairs": 4, "a_only": 2, "b_only": 0, "mcnemar_p": 0.5}
    assert rg["value"] == 0.75 and rt["value"] == 0.25
    assert aggregate([meas("L1")], Thresholds())["entailment_gap"]["value"] is None  # no L2: no gap
    # the other direction counts too (role tax: L3 passes where L1 failed, once); no shared conversation: no pairs
    assert rt["paired"] == {"n_pairs": 4, "a_only": 1, "b_only": 0, "mcnemar_p": 1.0}
    back = aggregate([m | {"level": {"L1": "L2", "L2": "L1"}.get(m["level"], m["level"])} for m in ms], Thresholds())
    assert back["entailment_gap"]["paired"] == {"n_pairs": 4, "a_only": 0, "b_only": 2, "mcnemar_p": 0.5}
    apart = aggregate([meas("L1", conv="x"), meas("L2", conv="y")], Thresholds())["entailment_gap"]
    assert apart["paired"] == {"n_pairs": 0, "a_only": 0, "b_only": 0, "mcnemar_p": None} and apart["value"] == 0.0


def test_aggregate_applies_the_run_wide_thresholds() -> None:
    """TAKE_TURN onsets at 1.8 s pass at R1's 2.0 s and fail at a run-wide 1.5 s, in every block."""
    ms = [_tt("L1", 1.8, "c1"), _tt("L2", 1.0, "c1"), _tt("L2", 1.8, "c2")]
    by_default, tight = aggregate(ms, Thresholds()), aggregate(ms, Thresholds(take_turn_max_wait_s=1.5))
    assert kn(by_default["scores"]["ias"]) == (3, 3) and kn(tight["scores"]["ias"]) == (1, 3)
    assert kn(tight["by_level"]["L1"]) == (0, 1) and kn(tight["by_action"]["TAKE_TURN"]) == (1, 3)
    assert by_default["entailment_gap"]["value"] == 0.0 and tight["entailment_gap"]["value"] == -0.5


def test_matched_audio_table() -> None:
    ms = []
    for lv in ("L1", "L2"):
        for role, ok in (("R1", True), ("R2", True), ("R3", lv == "L1")):
            ms.append(meas(lv, ok, role=role, conv="C1-i1", matched_audio=True, matched_group="M-C1-i1"))
    ms.append(meas("L1", False, role="R4"))  # not matched
    mat = aggregate(ms, Thresholds())["matched_audio"]
    assert kn(mat["ias"]) == (5, 6) and kn(mat["by_role"]["R3"]) == (1, 2)
    assert kn(mat["by_role_probe"]["R1 C1"]) == (2, 2) and kn(mat["by_role_probe"]["R1 C4"]) == (0, 0)
    assert kn(mat["all_roles_pass"]) == (1, 2)  # L1: all three; L2: R3 failed
    assert kn(mat["by_level"]["L1"]) == (3, 3) and kn(mat["by_level"]["L2"]) == (2, 3)
    assert kn(mat["by_level"]["L3"]) == (0, 0)
    # a second matched group at L1 in which R2 failed: triples are kept apart by their group
    ms += [meas("L1", ok, role=role, conv="C1-i2", matched_audio=True, matched_group="M-C1-i2")
           for role, ok in (("R1", True), ("R2", False), ("R3", True))]
    assert kn(aggregate(ms, Thresholds())["matched_audio"]["all_roles_pass"]) == (1, 3)


# --- the sweep ----------------------------------------------------------------------------------------------


def test_180_configurations() -> None:
    cfgs = configurations()
    assert len(cfgs) == 180 == len(set(cfgs))
    assert {getattr(c, k) for c in cfgs for k in ("take_turn_max_wait_s",)} == set(GRID["take_turn_max_wait_s"])
    assert {c.yield_max_latency_ms for c in cfgs} == {200, 400, 600, 1000, 1500}
    assert {c.interrupt_max_latency_ms for c in cfgs} == {1000, 1500, 2000}
    assert {c.bc_ceiling_s for c in cfgs} == {0.6, 0.8, 1.0, 1.2}
    assert all(c.readback_min_coverage is None for c in cfgs)


def test_kendall_tau_b() -> None:
    from scipy.stats import kendalltau

    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0 and kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert kendall_tau([1.0, 1.0], [1.0, 2.0]) is None and kendall_tau([1.0], [1.0]) is None
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, y = rng.integers(0, 4, 7).astype(float), rng.integers(0, 4, 7).astype(float)
        want = kendalltau(x, y).statistic
        got = kendall_tau(list(x), list(y))
        assert (got is None and np.isnan(want)) or got == pytest.approx(want)


def _tt(level: str, genuine: float | None, conv: str) -> dict[str, Any]:
    return meas(level, action="TAKE_TURN", role="R1", conv=conv) | {"genuine_onset_s": genuine}


def _three_runs() -> dict[str, list[dict[str, Any]]]:
    """A: EG 1.0 by default, 0 once the take-turn wait is 2.5 s; B: EG 0.5 always; C: EG 0.25 always."""
    a = [_tt("L1", 1.0, "a1"), _tt("L1", 1.0, "a2"), _tt("L2", 2.2, "a1"), _tt("L2", 2.2, "a2")]
    b = [meas("L1", True, conv="b1"), meas("L1", True, conv="b2"), meas("L2", True, conv="b1"),
         meas("L2", False, conv="b2")]
    c = [meas("L1", i == 0, conv=f"c{i}") for i in range(4)] + [meas("L2", False, conv=f"c{i}") for i in range(4)]
    return {"A": a, "B": b, "C": c}


def test_sweep_tau_known_answer() -> None:
    res = sweep(_three_runs())
    assert res["default_entailment_gap"] == {"A": 1.0, "B": 0.5, "C": 0.25}
    assert res["default_order"] == ["A", "B", "C"]
    taus = {(r["thresholds"]["take_turn_max_wait_s"], round(r["tau"], 6)) for r in res["configs"]}
    # at 2.5 s A's gap vanishes: order B, C, A -> one concordant pair of three: tau = -1/3
    assert taus == {(1.5, 1.0), (2.0, 1.0), (2.5, round(-1 / 3, 6))}
    s = res["summary"]
    assert s["n_configs"] == 180 and s["n_tau"] == 180
    assert s["mean"] == pytest.approx((120 - 60 / 3) / 180) and s["min"] == pytest.approx(-1 / 3)
    assert s["top1_kept"] == pytest.approx(2 / 3) and s["order_kept"] == pytest.approx(2 / 3)
    text = sweep_text(res)
    assert "180 configurations x 3 runs" in text and "min -0.333" in text


def test_sweep_identical_rankings_give_tau_one() -> None:
    runs = _three_runs()
    runs["A"] = [m | {"genuine_onset_s": 1.0 if m["level"] == "L1" else None} for m in runs["A"]]  # EG 1.0 always
    res = sweep(runs)
    assert {r["tau"] for r in res["configs"]} == {1.0} and res["summary"]["order_kept"] == 1.0
    # one run: tau is undefined, and says so
    one = sweep({"A": runs["A"]})
    assert one["summary"]["n_tau"] == 0 and "undefined" in sweep_text(one)
    with pytest.raises(UsageError, match="no Entailment Gap"):
        sweep({"A": [meas("L1")]})


def _listen_run(tag: str, k1: int, k2: int, n: int) -> list[dict[str, Any]]:
    """k1 of n L1 and k2 of n L2 LISTEN cases pass (LISTEN has no threshold, so no configuration moves it)."""
    return ([meas("L1", i < k1, conv=f"{tag}{i}") for i in range(n)]
            + [meas("L2", i < k2, conv=f"{tag}{i}") for i in range(n)])


def test_equal_gaps_over_different_denominators_tie() -> None:
    """X's gap 10/48 - 5/48 and Y's 20/48 - 15/48 are both 5/48, though as floats they differ in the last bit
    (0.10416666666666669 vs 0.10416666666666667). Z's gap is 0 by default and 1 at a 1.5 s take-turn wait. Ranked
    exactly, X and Y tie in both rankings (that pair is skipped) and both of Z's pairs swap: tau-b = -2/2 = -1.
    Ranked as floats, X > Y would count as one concordant pair: tau = (1 - 2)/3."""
    assert 10 / 48 - 5 / 48 != 20 / 48 - 15 / 48  # the float trap this guards against
    z = [_tt("L1", 1.0, "z1"), _tt("L2", 1.8, "z1")]  # R1 waits 2.0 s by default: both pass; at 1.5 s L2 fails
    runs = {"X": _listen_run("x", 10, 5, 48), "Y": _listen_run("y", 20, 15, 48), "Z": z}
    assert aggregate(runs["X"], Thresholds())["entailment_gap"]["value"] == 5 / 48
    assert aggregate(runs["Y"], Thresholds())["entailment_gap"]["value"] == 5 / 48  # stored values agree too
    res = sweep(runs)
    assert res["default_entailment_gap"] == {"X": 5 / 48, "Y": 5 / 48, "Z": 0.0}
    assert res["default_order"] == ["X", "Y", "Z"]  # a tie is ordered by name
    taus = {(r["thresholds"]["take_turn_max_wait_s"], r["tau"], r["top1_kept"], r["order_kept"])
            for r in res["configs"]}
    assert taus == {(1.5, -1.0, False, False), (2.0, 1.0, True, True), (2.5, 1.0, True, True)}
    assert [r["order"] for r in res["configs"]][:1] == [["Z", "X", "Y"]]
    s = res["summary"]
    assert s["mean"] == pytest.approx(1 / 3) and s["min"] == -1.0 and s["max"] == 1.0 and s["n_tau"] == 180
    assert s["top1_kept"] == pytest.approx(2 / 3) and s["order_kept"] == pytest.approx(2 / 3)
    # two runs whose gaps are equal only exactly: tau is undefined (both rankings constant), not 1.0
    two = sweep({"X": runs["X"], "Y": runs["Y"]})
    assert two["summary"]["n_tau"] == 0 and {r["tau"] for r in two["configs"]} == {None}


def test_kendall_tau_ties_of_fractions() -> None:
    from fractions import Fraction as F

    gap = [F(10, 48) - F(5, 48), F(20, 48) - F(15, 48), F(0)]
    assert kendall_tau(gap, [F(0), F(0), F(1)]) == -1.0  # (X, Y) tied in both: skipped
    assert kendall_tau(gap, [F(1), F(0), F(0)]) == 0.5  # tied in x only, in y only, one concordant: 1/2
    floats = [10 / 48 - 5 / 48, 20 / 48 - 15 / 48, 0.0]
    assert kendall_tau(floats, [0.0, 0.0, 1.0]) == pytest.approx(-2 / 6 ** 0.5)  # as floats: -0.816


def test_exact_differences_and_level_counts() -> None:
    from fractions import Fraction

    from metrics.ifeval.aggregate import entailment_gap, exact_difference, passes_of_level

    assert exact_difference(10, 48, 5, 48) == exact_difference(20, 48, 15, 48) == Fraction(5, 48)
    assert exact_difference(1, 3, 0, 0) is None and exact_difference(0, 0, 1, 3) is None
    assert exact_difference(0, 2, 1, 3) == Fraction(-1, 3)
    ms = [meas("L1", True), meas("L1", False, conv="c2"), meas("L1", None, conv="c3"), meas("L2", True),
          _tt("L2", 1.8, "c2")]
    assert passes_of_level(ms, Thresholds(), "L1") == (1, 3) and passes_of_level(ms, Thresholds(), "L2") == (2, 2)
    assert passes_of_level(ms, Thresholds(take_turn_max_wait_s=1.5), "L2") == (1, 2)
    assert passes_of_level(ms, Thresholds(), "L3") == (0, 0)
    assert entailment_gap(ms, Thresholds()) == Fraction(1, 3) - 1
    assert entailment_gap(ms, Thresholds(take_turn_max_wait_s=1.5)) == Fraction(1, 3) - Fraction(1, 2)
    l1 = [_tt("L1", 1.8, "c1"), meas("L2", True, conv="c1")]  # the run-wide wait reaches the L1 side too
    assert entailment_gap(l1, Thresholds()) == 0 and entailment_gap(l1, Thresholds(take_turn_max_wait_s=1.5)) == -1
    assert entailment_gap([meas("L1")], Thresholds()) is None


def test_kendall_tau_needs_equal_lengths() -> None:
    with pytest.raises(ValueError, match="need sequences of one length, got 2 and 3"):
        kendall_tau([1.0, 2.0], [1.0, 2.0, 3.0])
    assert kendall_tau([1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]) == pytest.approx(4 / 6)  # 5 - 1 over 6


def test_sweep_summary_and_ias() -> None:
    res = sweep(_three_runs())
    s = res["summary"]
    assert s["median"] == 1.0 and s["max"] == 1.0 and s["n_runs"] == 3
    first = res["configs"][0]
    assert first["thresholds"] == {"take_turn_max_wait_s": 1.5, "yield_max_latency_ms": 200.0,
                                   "interrupt_max_latency_ms": 1000.0, "bc_ceiling_s": 0.6}
    assert first["ias"] == {"A": 0.5, "B": 0.75, "C": 0.125} and first["entailment_gap"] == {"A": 1.0, "B": 0.5,
                                                                                            "C": 0.25}
    last = res["configs"][-1]
    assert last["ias"]["A"] == 1.0 and last["entailment_gap"]["A"] == 0.0 and last["order"] == ["B", "C", "A"]
    with pytest.raises(UsageError, match=r"--sweep: A, C scored no L1 or no L2 case, so it has no Entailment Gap"):
        sweep({"A": [meas("L1")], "B": _three_runs()["B"], "C": [meas("L2")]})
