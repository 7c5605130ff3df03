"""DSB-IFEval aggregates, the threshold sweep, the PAS/conflict judge and `score_run` end to end
(docs/benchmarks/ifeval.md).

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
from dataset_builder.ifeval.schema import LEVELS
from metrics.ifeval.judge import MAX_ATTEMPTS, NOT_COMPUTED, aggregate_judge, judge_case, judge_prompt, parse_reply
from metrics.ifeval.score import score_run
from metrics.ifeval.tables import tables
from metrics.judges import HeuristicJudge, OpenAIJudge
from tests import ifeval_handmade as H
from tests.test_ifeval_aggregate import kn, meas

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
            protocol="dataset_builder.benchmark_params:IFEvalProtocol", build="dataset_builder.ifeval.build:build",
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


def test_matched_audio_rows_are_the_ones_a_run_heard() -> None:
    """The mini set holds C1's matched trio only: its C4 rows would be empty in every column, so they are left
    out; a row that any run heard is shown for every run (an empty cell beside a full one is a result)."""
    from metrics.ifeval.tables import matched_keys

    def result(heard: set[str]) -> dict[str, Any]:
        keys = [f"{r} {p}" for r in ("R1", "R2", "R3") for p in ("C1", "C4")]
        return {"matched_audio": {"by_role_probe": {k: {"k": 1, "n": 5 if k in heard else 0} for k in keys}}}

    c1 = {"R1 C1", "R2 C1", "R3 C1"}
    assert matched_keys([result(c1)]) == ["R1 C1", "R2 C1", "R3 C1"]
    assert matched_keys([result(c1), result(c1 | {"R2 C4"})]) == ["R1 C1", "R2 C1", "R2 C4", "R3 C1"]
    assert matched_keys([{"error": "no scores"}]) == ["R1 C1", "R1 C4", "R2 C1", "R2 C4", "R3 C1", "R3 C4"]
