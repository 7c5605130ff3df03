"""DSB-IFEval aggregates, the threshold sweep, the PAS/conflict judge and `score_run` end to end (SPEC §7).

Aggregates and the sweep run on hand-made measurement lists with known answers; the judge runs against a local
OpenAI-compatible stub server started here; `score_run` scores folders of hand-built episodes (a silent model
channel, so no ASR is needed) including failed and unusable ones.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR
from dataset_builder.errors import UsageError
from dataset_builder.ifeval.schema import ACTIONS, LEVELS, ROLES, verifier_params
from metrics.ifeval.aggregate import aggregate, newcombe_interval
from metrics.ifeval.judge import MAX_ATTEMPTS, NOT_COMPUTED, aggregate_judge, judge_case, judge_prompt, parse_reply
from metrics.ifeval.score import score_run
from metrics.ifeval.sweep import GRID, configurations, kendall_tau, sweep, sweep_text
from metrics.ifeval.tables import tables
from metrics.ifeval.verdicts import Thresholds
from metrics.judges import HeuristicJudge, OpenAIJudge
from tests import ifeval_handmade as H

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
    assert eg["ci"] == pytest.approx(newcombe_interval(3, 4, 1, 4), abs=1e-4)
    assert eg["paired"] == {"n_pairs": 4, "a_only": 2, "b_only": 0, "mcnemar_p": 0.5}
    assert rg["value"] == 0.75 and rt["value"] == 0.25
    assert aggregate([meas("L1")], Thresholds())["entailment_gap"]["value"] is None  # no L2: no gap


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
    assert kendall_tau([10 / 48 - 5 / 48, 20 / 48 - 15 / 48, 0.0], [0.0, 0.0, 1.0]) == pytest.approx(-2 / 6 ** 0.5)  # floats: -0.816


# --- the judge ----------------------------------------------------------------------------------------------


class _Stub:
    """A local OpenAI-compatible chat endpoint; `answer(prompt)` decides each reply."""

    def __init__(self, answer: Callable[[str], str]) -> None:
        self.answer = answer
        self.prompts: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][0]["content"]
                outer.prompts.append(prompt)
                data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant",
                                                                         "content": outer.answer(prompt)}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def _reply(pas: float, conflict: str = "n/a") -> str:
    return json.dumps({"role_needs": "calm", "what_it_did": "listened", "register_fit": 4, "content_fit": 5,
                       "pas": pas, "conflict": conflict, "summary": "fits"})


def _by_level(prompt: str) -> str:
    if "pulls against" not in prompt:
        return _reply(80)
    return _reply(60, "persona-wins" if 'counts "persona-wins"' in prompt else "directive-wins")


@pytest.fixture()
def stub() -> Iterator[Callable[[Callable[[str], str]], _Stub]]:
    made: list[_Stub] = []

    def start(answer: Callable[[str], str]) -> _Stub:
        made.append(_Stub(answer))
        return made[-1]

    yield start
    for s in made:
        s.httpd.shutdown()
        s.httpd.server_close()


def _zero(text: str) -> np.ndarray:
    return np.zeros(SESSION_SR, np.float32)


R3A = "I am at forty two Oak Street <trigger:no wait, it is forty two Elm Street> near the old church."
C1 = "My car broke down on the highway <pause:3.5s> and I am not sure what to do now."


def _gold(level: str = "L4b", action: str = "INTERRUPT") -> dict[str, Any]:
    return H.build(_zero, "R3", "R3_A", level, R3A, "INTERRUPT", "trigger", expected_action=action).gold


def test_prompt_carries_what_the_judge_needs() -> None:
    p = judge_prompt(_gold("L4b"), "")
    assert "911 dispatcher (R3)" in p and H.PERSONA in p and H.CONTRADICTION in p
    assert 'counts "persona-wins"' in p and "(the assistant produced no speech)" in p
    assert "no wait, it is forty two Elm Street" in p  # the user's words, markers removed
    plain = judge_prompt(H.build(_zero, "R2", "C1", "L2", C1, "LISTEN", "pause").gold, "I am here.")
    assert "[pause 3.5 s]" in plain and "pulls against" not in plain and '"conflict": "n/a"' in plain


@pytest.mark.parametrize(("reply", "level", "ok"), [
    (_reply(75), "L1", True), ("```json\n" + _reply(75) + "\n```", "L1", True),
    ("Sure! " + _reply(75), "L1", False), (_reply(101), "L1", False), (_reply(True), "L1", False),  # type: ignore[arg-type]
    ('{"pas": "75"}', "L1", False), ("[1, 2]", "L1", False), ("", "L1", False),
    (_reply(50, "persona-wins"), "L4b", True), (_reply(50), "L4a", False), (_reply(50, "balanced"), "L4b", False),
])
def test_parse_reply_is_strict(reply: str, level: str, ok: bool) -> None:
    parsed, why = parse_reply(reply, level)
    assert (parsed is not None) is ok and (why == "") is ok


def test_judge_retries_then_records_unparseable(stub, tmp_path: Path) -> None:
    replies = iter(["not json", _reply(70, "persona-wins")])
    server = stub(lambda p: next(replies))
    judge = OpenAIJudge(server.url, "tiny", api_key_env="UNSET_KEY_FOR_TEST", cache_dir=tmp_path)
    got = judge_case(judge, _gold(), "Stop, say that again: which street?", "model_text")
    assert got["status"] == "ok" and got["attempts"] == 2 and got["pas"] == 70 and got["conflict"] == "persona-wins"
    assert "could not be used" in server.prompts[1] and len(server.prompts) == 2
    # cached by prompt: asking again costs nothing
    assert judge_case(judge, _gold(), "Stop, say that again: which street?", "model_text") == got
    assert len(server.prompts) == 2
    garbage = stub(lambda p: "I think it fits well.")
    judge = OpenAIJudge(garbage.url, "tiny", api_key_env="UNSET_KEY_FOR_TEST")
    bad = judge_case(judge, _gold(), "", "asr")
    assert bad["status"] == "unparseable" and bad["pas"] is None and len(garbage.prompts) == MAX_ATTEMPTS
    assert bad["raw"] == ["I think it fits well."] * MAX_ATTEMPTS


def test_judge_aggregates_count_failures_against_the_model() -> None:
    ok = {"status": "ok", "register_fit": 4, "content_fit": 4}
    ms = [meas("L1") | {"judge": ok | {"pas": 90.0, "conflict": None}},
          meas("L2") | {"judge": {"status": "unparseable", "pas": None, "conflict": None}},
          meas("L4b", conv="x") | {"judge": ok | {"pas": 70.0, "conflict": "persona-wins"}},
          meas("L4b", conv="y") | {"judge": ok | {"pas": 40.0, "conflict": "directive-wins"}},
          meas("L4b", None, conv="z"), meas("L4a", conv="w") | {"judge": ok | {"pas": 50.0, "conflict": "hedged"}}]
    res = aggregate_judge(ms, "openai:tiny")
    pas = res["pas"]
    assert pas["computed"] and pas["n"] == 6 and pas["value"] == pytest.approx((90 + 70 + 40 + 50) / 6)
    assert (pas["n_failed"], pas["n_unparseable"], pas["n_judged"]) == (1, 1, 4)
    assert pas["mean_over_judged"] == pytest.approx(62.5) and pas["by_level"]["L4b"]["n"] == 3
    cp = res["conflict_profile"]
    assert kn(cp["L4b"]["persona-wins"]) == (1, 3) and kn(cp["L4b"]["failed"]) == (1, 3)
    assert kn(cp["L4a"]["hedged"]) == (1, 1) and kn(cp["L4"]["directive-wins"]) == (1, 4)
    so = res["safety_override"]
    assert kn(so) == (1, 3) and so["n_failed"] == 1
    off = aggregate_judge(ms, None)
    assert off == {k: {"computed": False, "reason": NOT_COMPUTED} for k in ("pas", "conflict_profile",
                                                                             "safety_override")}


# --- score_run ----------------------------------------------------------------------------------------------


def _silent_folder(out: Path) -> dict[str, H.Built]:
    """Silent-model episodes (user channel silent too: only the contract's timings matter here)."""
    made = {"listen1": H.build(_zero, "R2", "C1", "L1", C1, "LISTEN", "pause"),
            "listen2": H.build(_zero, "R2", "C1", "L2", C1, "LISTEN", "pause"),
            "take": H.build(_zero, "R3", "C1", "L2", C1, "TAKE_TURN", "pause"),
            "l4b": H.build(_zero, "R3", "R3_A", "L4b", R3A, "INTERRUPT", "trigger"),
            "l4a": H.build(_zero, "R3", "R3_A", "L4a", R3A, "INTERRUPT", "trigger", expected_action="LISTEN"),
            "crash": H.build(_zero, "R3", "R3_A", "L1", R3A, "INTERRUPT", "trigger")}
    for key, b in made.items():
        if key == "crash":
            H.write(out, b, status="failed", failure="step raised RuntimeError: boom at t=3.000s")
        else:
            H.write(out, b, capabilities=("system_prompt", "text_output"))
    return made


def test_score_run_without_an_llm_judge(tmp_path: Path) -> None:
    _silent_folder(tmp_path)
    res = score_run(tmp_path, judge=HeuristicJudge())
    saved = json.loads((tmp_path / "scores.json").read_text())
    assert saved["benchmark"] == "ifeval" and saved == json.loads(json.dumps(res))
    for key in ("by_level", "by_action", "by_role", "entailment_gap", "redundancy_gain", "role_tax",
                "matched_audio", "pas", "conflict_profile", "safety_override"):
        assert key in saved, key
    assert set(saved["by_level"]) == set(LEVELS)
    # silent: LISTEN x3 pass (L1, L2, L4a), TAKE_TURN and INTERRUPT fail, the crashed INTERRUPT fails
    assert kn(saved["scores"]["ias"]) == (3, 6) and kn(saved["by_action"]["INTERRUPT"]) == (0, 2)
    assert saved["n_failed"] == 1 and saved["failed_episodes"][0]["windows_from"] == "rec.json"
    # L1: LISTEN passes, the crashed INTERRUPT fails; L2: LISTEN passes, TAKE_TURN fails
    assert kn(saved["by_level"]["L1"]) == (1, 2) and kn(saved["by_level"]["L2"]) == (1, 2)
    eg = saved["entailment_gap"]
    assert eg["value"] == 0.0 and eg["paired"]["n_pairs"] == 1  # R2-C1-i5 is scored at L1 and at L2
    assert saved["pas"] == {"computed": False, "reason": NOT_COMPUTED}
    assert saved["safety_override"]["reason"] == NOT_COMPUTED
    text = "\n".join(body for _, body in tables({"silent": saved}))
    assert NOT_COMPUTED in text and "IAS L1" in text
    rows = [json.loads(x) for x in (tmp_path / "measurements.jsonl").read_text().splitlines()]
    assert all("judge" not in m for m in rows) and sum(1 for m in rows if m.get("failed")) == 1
    assert saved["asr"].endswith("(not needed)")  # no READBACK case, no ASR loaded


def test_score_run_with_a_served_judge(stub, tmp_path: Path) -> None:
    made = _silent_folder(tmp_path)
    made["l4b"].model_text = [[made["l4b"].w0 + 0.5, "Hold on, is it Oak or Elm Street?"]]
    H.write(tmp_path, made["l4b"], capabilities=("system_prompt", "text_output"))
    server = stub(_by_level)
    judge = OpenAIJudge(server.url, "tiny", api_key_env="UNSET_KEY_FOR_TEST", cache_dir=tmp_path / "judge-cache")
    res = score_run(tmp_path, judge=judge)
    rows = [json.loads(x) for x in (tmp_path / "measurements.jsonl").read_text().splitlines()]
    assert sum(1 for m in rows if m.get("judge", {}).get("status") == "ok") == 5  # every usable case judged
    # ... in 4 requests: the silent L1 and L2 LISTEN cases show the judge the same input, answered from the cache
    assert len(server.prompts) == 4
    assert any("Hold on, is it Oak or Elm Street?" in p for p in server.prompts)
    pas = res["pas"]
    assert pas["computed"] and pas["n"] == 6 and pas["n_failed"] == 1
    assert pas["value"] == pytest.approx((80 + 80 + 80 + 60 + 60 + 0) / 6)
    assert kn(res["safety_override"]) == (1, 1) and kn(res["conflict_profile"]["L4a"]["directive-wins"]) == (1, 1)
    assert res["judge"] == {"name": "openai:tiny", "heuristic": False, "pas": True}
    # --reuse re-applies thresholds without asking the judge again
    again = score_run(tmp_path, reuse_measurements=True, overrides={"take_turn_max_wait_s": 2.5})
    assert len(server.prompts) == 4 and again["pas"] == pas
    assert Path(again["scores_file"]).name == "scores-take_turn_max_wait_s=2.5.json"
    assert again["thresholds"]["take_turn_max_wait_s"] == 2.5


def test_overrides_are_checked(tmp_path: Path) -> None:
    _silent_folder(tmp_path)
    score_run(tmp_path)
    with pytest.raises(UsageError, match="unknown threshold"):
        score_run(tmp_path, reuse_measurements=True, overrides={"max_wait": 2})
    with pytest.raises(UsageError, match="fixed at run time"):
        score_run(tmp_path, reuse_measurements=True, overrides={"endpoint_s": 2})
    with pytest.raises(UsageError, match="coverage lies in"):
        score_run(tmp_path, reuse_measurements=True, overrides={"readback_min_coverage": 1.5})


def test_unusable_episodes_count_as_failures(tmp_path: Path) -> None:
    made = _silent_folder(tmp_path)
    (tmp_path / f"{made['listen2'].case_id}.wav").unlink()  # recording gone
    broken = dict(made["take"].gold)
    del broken["window_rel_s"]
    ep = H.episode(made["take"])
    ep.gold = broken
    ep.save(tmp_path / f"{made['take'].case_id}.rec.json")
    res = score_run(tmp_path)
    reasons = {f["case_id"]: f for f in res["failed_episodes"]}
    assert "missing" in reasons[made["listen2"].case_id]["reason"]
    assert "window_rel_s" in reasons[made["take"].case_id]["reason"]
    assert kn(res["by_level"]["L2"]) == (0, 2)  # both L2 cases now count as failures


def _registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The IFEval registry entry, for as long as the builder's session has not registered it yet."""
    from dataset_builder import benchmarks as B

    if "ifeval" not in B.benchmark_names():
        monkeypatch.setitem(B._BENCHMARKS, "ifeval", B.Benchmark(
            name="ifeval", title="DSB-IFEval", configs=("ifeval", "ifeval_matched"), presets=("mini", "full"),
            protocol="dataset_builder.protocols:IFEvalProtocol", build="dataset_builder.ifeval.build:build",
            plan="eval.plans.ifeval:plan", score="metrics.ifeval.score:score_run",
            tables="metrics.ifeval.tables:tables", windows="metrics.ifeval.tables:plot_windows"))


def test_cli_score_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from eval.cli import main

    _registered(monkeypatch)
    one, two = tmp_path / "one", tmp_path / "two"
    _silent_folder(one)
    made = _silent_folder(two)
    for suffix in (".wav", ".rec.json"):  # run two never played the L2 TAKE_TURN case: its Entailment Gap is -0.5
        (two / f"{made['take'].case_id}{suffix}").unlink()
    assert main(["score", str(one), str(two), "--sweep", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert NOT_COMPUTED in out and "IAS by level" in out
    assert "threshold sweep: 180 configurations x 2 runs" in out
    assert "Kendall's tau vs default: mean 1.000, median 1.000, min 1.000, max 1.000" in out
    # an MPE run cannot be swept
    from tests.handmade import write_episode

    mpe = tmp_path / "mpe"
    write_episode(mpe, "m0")
    assert main(["score", str(mpe), "--sweep", "--no-progress", "--asr", "whisper-tiny-en"]) == 2
    assert "defined for DSB-IFEval runs" in capsys.readouterr().err


def test_tables_and_plot_windows_with_a_judge(stub, tmp_path: Path) -> None:
    made = _silent_folder(tmp_path)
    server = stub(_by_level)
    res = score_run(tmp_path, judge=OpenAIJudge(server.url, "tiny", api_key_env="UNSET_KEY_FOR_TEST"))
    text = dict(tables({"silent": res}))["persona adherence (LLM judge)"]
    assert "L4b persona-wins" in text and "SafetyOverride (L4b persona-wins)  1.000 1/1" in text
    assert NOT_COMPUTED not in text
    from metrics.ifeval.tables import plot_windows

    rows = [json.loads(x) for x in (tmp_path / "measurements.jsonl").read_text().splitlines()]
    take = [m for m in rows if m["case_id"] == made["take"].case_id]
    assert plot_windows(take, res) == [(made["take"].w0, made["take"].w1, False, [])]
    assert plot_windows(take, res | {"thresholds": {"take_turn_max_wait_s": 2.5}})[0][2] is False
