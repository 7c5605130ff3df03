"""Runs you can trust, on the score side (docs/scoring.md): each test plants one fault in a hand-built run folder and
checks the message, the outcome, and that nothing else was lost.

#1 a failed episode counts against the model in every window it would have entered (from its rec.json gold,
   else from the run's dataset; never silently dropped);
#2 one bad episode (truncated rec.json, missing / one-channel / mislabelled-rate / wrong-length WAV) fails alone;
#3 `score --param` takes only thresholds, numbers, in range, and no wider than the recording supports;
#6 scores record what they describe; overrides get their own file; stale scores are refused or flagged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.errors import UsageError
from dataset_builder.schema import SchemaError
from metrics import EVALUATE_MODULES
from metrics.mpe.aggregate import aggregate
from metrics.mpe.measure import failed_windows
from metrics.mpe.score import score_run
from metrics.mpe.verdicts import Thresholds
from metrics.tables import side_by_side
from tests.handmade import N_N4, N_SILENCE, N_T, NoASR, kn, silence, write_episode, write_run_json

# ------------------------------------------------------------------------------------------------ #1 failures


def test_a_failed_episode_fails_every_window_it_would_have_entered(tmp_path: Path) -> None:
    """Old behaviour: failed episodes were left out of every denominator (n = 2 T, answer_accuracy n = 0)."""
    run = tmp_path / "run"
    write_episode(run, "A", "p0", "explicit")
    write_episode(run, "B", "p0", "implicit")
    write_episode(run, "C", "p1", "explicit", status="failed", failure="step raised RuntimeError: boom")
    res = score_run(run, asr=NoASR())
    s = res["scores"]
    assert kn(s["fresh_onset_rate"]) == (0, 3 * N_T) and kn(s["response_presence"]) == (0, 3 * N_T)
    assert kn(s["answer_accuracy"]) == (0, 1)  # the failed T counts as an incorrect answer
    assert kn(s["silence_preservation"]) == (2 * N_SILENCE, 3 * N_SILENCE)  # A and B keep theirs
    assert kn(s["window_response"]) == (0, 3 * N_N4)
    assert kn(s["answering_window_yield"]) == (2 * N_N4, 3 * N_N4)
    assert kn(res["by_condition"]["explicit"]["silence_preservation"]) == (N_SILENCE, 2 * N_SILENCE)
    assert kn(res["by_label"]["N1"]["silence_preservation"]) == (2, 3)
    assert res["n_failed"] == 1 and res["failed_episodes"] == [
        {"case_id": "C", "status": "failed", "reason": "step raised RuntimeError: boom", "windows": 5,
         "windows_from": "rec.json"}]
    assert res["failed_windows"]["fresh_onset_rate"] == 1 and res["failed_windows"]["silence_preservation"] == 3
    # The measurements file carries the failed windows too, so the evaluate module gives the same numbers.
    rows = [json.loads(x) for x in (run / "measurements.jsonl").read_text().splitlines()]
    failed_rows = [r for r in rows if r.get("failed")]
    assert len(failed_rows) == 5 and {r["case_id"] for r in failed_rows} == {"C"}
    assert aggregate(rows, Thresholds())["scores"] == s
    # The tables say how many failed and where they count.
    table = side_by_side({"handmade": res}, ["fresh_onset_rate"])
    assert re.search(r"failed episodes +1 \(5 windows counted as failed\)$", table)


def test_failed_windows_follow_the_gold_labels_in_order() -> None:
    labels = {"a": "N1", "b": "N4Q", "c": "N4R", "d": "T", "e": "N4Q", "f": "N2", "g": "N4R", "h": "N3"}
    rows = failed_windows("X", "p", "implicit", labels, "why")
    # Every T, every N1-N3, and an N4Q only when N4R follows it directly (as measure_episode pairs them).
    assert [(r["kind"], r["turn_id"]) for r in rows] == [
        ("silence", "a"), ("N4", "b"), ("T", "d"), ("silence", "f"), ("silence", "h")]
    assert all(r["failed"] and r["condition"] == "implicit" and r["pair_id"] == "p" for r in rows)


def _t(pair: str, cond: str, responded: bool) -> dict:
    return {"case_id": f"{pair}-{cond}", "pair_id": pair, "condition": cond, "kind": "T", "label": "T",
            "turn_id": "t01", "t_end_s": 9.0, "next_start_s": 12.0, "active_at_end": False,
            "onset_latency_s": 1.0 if responded else None, "response_spans": [], "transcript": "",
            "answer_verdict": "correct" if responded else None}


def test_a_failed_side_of_a_pair_counts_as_not_responding() -> None:
    labels = {"t01": "T"}
    rows = [_t("p0", "explicit", True), *failed_windows("p0-implicit", "p0", "implicit", labels, "crash"),
            *failed_windows("p1-explicit", "p1", "explicit", labels, "crash"), _t("p1", "implicit", True)]
    paired = aggregate(rows, Thresholds())["paired"]["response_presence"]
    assert (paired["n_pairs"], paired["explicit_only"], paired["implicit_only"]) == (2, 1, 1)


class _Agent:
    name, version, sample_rate, frame_size, realtime = "handmade", "1", 24000, 1920, False
    capabilities: frozenset[str] = frozenset()


def test_failed_episode_without_gold_counts_from_the_dataset(mini_dataset: Path, tmp_path: Path) -> None:
    """A case whose plan failed (rec.json gold = {}) and a truncated rec.json: their windows come from the
    dataset run.json names. Old behaviour: the first was dropped silently, the second aborted the score."""
    from dataset_builder.hf_dataset import list_cases
    from eval.orchestrator import record_failed_episode

    cases = list_cases(mini_dataset)
    run = tmp_path / "run"
    run.mkdir()
    write_run_json(run, mini_dataset, len(cases))
    plan_failed, torn = cases[0], cases[3]
    record_failed_episode(_Agent(), plan_failed, run, "plan failed: ValueError: no clip")
    write_episode(run, torn.case_id, torn.script.pair_id, torn.script.condition)
    text = (run / f"{torn.case_id}.rec.json").read_text()
    (run / f"{torn.case_id}.rec.json").write_text(text[: len(text) // 2])  # a torn write
    res = score_run(run, asr=NoASR())

    def windows(case) -> int:
        return len(failed_windows(case.case_id, "", "", {t.turn_id: t.label for t in case.script.turns}, ""))

    assert res["n_failed"] == 2
    by_id = {f["case_id"]: f for f in res["failed_episodes"]}
    assert by_id[plan_failed.case_id]["windows"] == windows(plan_failed)
    assert by_id[plan_failed.case_id]["windows_from"] == "dataset"
    assert by_id[torn.case_id]["windows_from"] == "dataset" and "not valid JSON" in by_id[torn.case_id]["reason"]
    assert f"{torn.case_id}.rec.json" in by_id[torn.case_id]["reason"]
    assert res["scores"]["fresh_onset_rate"]["n"] == 2 and res["scores"]["fresh_onset_rate"]["k"] == 0
    n_silent = sum(t.label in ("N1", "N2", "N3") for c in (plan_failed, torn) for t in c.script.turns)
    assert kn(res["scores"]["silence_preservation"]) == (0, n_silent)
    assert set(res["by_condition"]) == {plan_failed.script.condition, torn.script.condition}
    assert res["failed_uncounted"]["case_ids"] == []
    assert any(f.startswith("partial run: 2 of 12 dataset cases") for f in res["health"]["flags"])


def test_failed_episode_with_unknown_windows_is_said_loudly(tmp_path: Path) -> None:
    """No gold and no run.json: it cannot enter a denominator, and the result says so before any table."""
    run = tmp_path / "run"
    write_episode(run, "A")
    write_episode(run, "Z", status="failed", failure="plan failed: boom", gold={})
    res = score_run(run, asr=NoASR())
    assert res["n_failed"] == 1 and res["failed_episodes"][0]["windows"] is None
    assert res["failed_uncounted"] == {"case_ids": ["Z"],
                                       "why": "the folder has no readable run.json naming its dataset"}
    assert res["health"]["flags"][0] == ("1 failed episode(s) with unknown windows (Z): NOT counted in any "
                                         "denominator, because the folder has no readable run.json naming its "
                                         "dataset")
    assert res["scores"]["fresh_onset_rate"]["n"] == 1  # A alone
    assert side_by_side({"h": res}, ["fresh_onset_rate"]).endswith("1 (0 windows counted as failed; 1 NOT counted)")


# --------------------------------------------------------------------------------------------- #2 bad files


def test_each_bad_episode_fails_alone_with_its_reason(tmp_path: Path) -> None:
    """Old behaviour: the first bad file aborted the whole score (JSONDecodeError, libsndfile's 'System error',
    a raw IndexError), and a 16 kHz header was scored with every time stretched 1.5x."""
    run = tmp_path / "run"
    write_episode(run, "good", "p0", "explicit")
    for cid in ("torn", "nowav", "mono", "rate16", "short"):
        write_episode(run, cid, "p1", "explicit")
    text = (run / "torn.rec.json").read_text()
    (run / "torn.rec.json").write_text(text[:-40])
    (run / "nowav.wav").unlink()
    sf.write(run / "mono.wav", np.zeros(int(40 * 24000), np.int16), 24000, subtype="PCM_16")
    audio, _ = sf.read(run / "rate16.wav", dtype="int16")
    sf.write(run / "rate16.wav", audio, 16000, subtype="PCM_16")  # the same samples, a wrong header
    sf.write(run / "short.wav", audio[: 38 * 24000], 24000, subtype="PCM_16")
    res = score_run(run, asr=NoASR())
    reasons = {f["case_id"]: f["reason"] for f in res["failed_episodes"]}
    assert set(reasons) == {"torn", "nowav", "mono", "rate16", "short"}
    assert "torn.rec.json is not valid JSON" in reasons["torn"]
    assert reasons["nowav"].startswith("recording nowav.wav is missing")
    assert reasons["mono"] == "recording mono.wav has 1 channel(s); an episode has 2 (ch0 user, ch1 model)"
    assert reasons["rate16"].startswith("recording rate16.wav has a 16000 Hz header; episodes are recorded at 24000")
    assert reasons["short"] == ("recording short.wav holds 38.000 s but short.rec.json says the episode lasted "
                                "40.000 s")
    assert all(f["status"] == "unusable" for f in res["failed_episodes"])
    # The good episode is scored; the four whose rec.json still names their windows count as failures there;
    # the torn one (no run.json to look it up in) is named as not counted.
    assert kn(res["scores"]["silence_preservation"]) == (N_SILENCE, 5 * N_SILENCE)
    assert kn(res["scores"]["fresh_onset_rate"]) == (0, 5)
    assert res["failed_uncounted"]["case_ids"] == ["torn"]
    assert res["n_episodes"] == 6 and res["n_failed"] == 5


def test_a_wav_within_a_millisecond_of_its_record_is_accepted(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "A", model=silence(40.0 - 0.0009))  # 21.6 samples short: rounding, not a fault
    assert score_run(run, asr=NoASR())["n_failed"] == 0


# ------------------------------------------------------------------------------------------- #3 --param


@pytest.fixture
def scored(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    write_episode(run, "A", "p0", "explicit", protocol=MPEProtocol(t_onset_window_s=4.0))
    write_episode(run, "B", "p0", "implicit", protocol=MPEProtocol(t_onset_window_s=4.0))
    score_run(run, asr=NoASR())
    return run


@pytest.mark.parametrize(("overrides", "message"), [
    ({"t_onset_windw_s": 3}, "--param t_onset_windw_s: unknown threshold; the thresholds are t_onset_window_s, "
                             "yield_tolerance_s"),
    ({"endpoint_s": 2}, "--param endpoint_s: a protocol parameter fixed at run time (this run used "
                        "endpoint_s=1.5); `score` can change only the thresholds t_onset_window_s, "
                        "yield_tolerance_s"),
    ({"vad_min_speech_ms": 100}, "fixed at run time"),
    ({"yield_tolerance_s": -0.5}, "--param yield_tolerance_s=-0.5: out of range; it must be >= 0"),
    ({"t_onset_window_s": 0}, "--param t_onset_window_s=0: out of range; it must be > 0"),
    ({"t_onset_window_s": "soon"}, "--param t_onset_window_s='soon': expected a number of seconds"),
    ({"t_onset_window_s": True}, "expected a number"),
    ({"yield_tolerance_s": float("nan")}, "expected a finite number"),
    ({"t_onset_window_s": 4.5}, "--param t_onset_window_s=4.5: wider than the 4 the run was recorded with "
                                "(the scheduler stopped waiting for an onset there"),
])
def test_bad_score_params_are_refused_and_change_nothing(scored: Path, overrides: dict, message: str) -> None:
    before = {p.name: p.read_bytes() for p in scored.iterdir()}
    for reuse in (True, False):
        with pytest.raises(UsageError) as err:
            score_run(scored, asr=NoASR(), overrides=overrides, reuse_measurements=reuse)
        assert message in str(err.value)
        assert {p.name: p.read_bytes() for p in scored.iterdir()} == before


def test_cli_score_param_typo_is_one_line(scored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eval.cli import main

    assert main(["score", str(scored), "--reuse", "--param", "t_onset_windw_s=3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --param t_onset_windw_s: unknown threshold; the thresholds are t_onset_window_s, "
                   "yield_tolerance_s"]


def test_a_threshold_equal_to_the_recorded_one_is_no_override(scored: Path) -> None:
    res = score_run(scored, overrides={"t_onset_window_s": 4, "yield_tolerance_s": 1}, reuse_measurements=True)
    assert res["overrides"] == {} and res["scores_file"] == str(scored / "scores.json")
    assert res["thresholds"] == {"t_onset_window_s": 4.0, "yield_tolerance_s": 1.0}


@pytest.mark.parametrize(("item", "message"), [
    ("t_onset_window_s=-1", "t_onset_window_s=-1 is out of range: it must be > 0"),
    ("endpoint_s=0", "endpoint_s=0 is out of range: it must be > 0"),
    ("response_cap_s=-20", "must be > 0"),
    ("n4_answer_window_s=0", "must be > 0"),
    ("post_preamble_s=-0.1", "must be >= 0"),
    ("yield_tolerance_s=-1", "must be >= 0"),
    ("vad_min_speech_ms=0", "vad_min_speech_ms=0 is out of range: it must be > 0"),
    ("vad_min_speech_ms=2.5", "vad_min_speech_ms='2.5': expected a whole number"),
    ("vad_merge_gap_ms=-1", "must be >= 0"),
    ("endpoint_s=nan", "expected a finite number"),
    ("tail_s=inf", "expected a finite number"),
])
def test_run_params_are_range_checked(item: str, message: str) -> None:
    """`run --param` (MPEProtocol.override): old behaviour accepted negative waits and truncated 2.5 ms to 2."""
    with pytest.raises(SchemaError, match="--param") as err:
        MPEProtocol().override([item])
    assert message in str(err.value)


def test_run_params_in_range_are_kept() -> None:
    p = MPEProtocol().override(["tail_s=0", "post_preamble_s=0", "vad_merge_gap_ms=0", "vad_min_speech_ms=300"])
    assert (p.tail_s, p.post_preamble_s, p.vad_merge_gap_ms, p.vad_min_speech_ms) == (0.0, 0.0, 0, 300)
    assert MPEProtocol.from_dict(p.to_dict()) == p
    with pytest.raises(SchemaError, match="endpoint_s=-1"):
        MPEProtocol(endpoint_s=-1)


# ------------------------------------------------------------------------------------------- #6 staleness


def test_scores_record_what_they_describe(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_episode(run, "A", "p0", "explicit")
    write_episode(run, "B", "p0", "implicit")
    write_run_json(run, tmp_path / "dataset", 40, fingerprint="ab" * 32)
    res = score_run(run, asr=NoASR())
    on_disk = json.loads((run / "scores.json").read_text())
    for key in ("case_ids", "n_dataset_cases", "dataset_fingerprint", "episodes_digest", "measurements_digest",
                "health_digest", "thresholds", "recorded_thresholds", "overrides", "format"):
        assert on_disk[key] == res[key], key
    assert on_disk["case_ids"] == ["A", "B"] and on_disk["n_dataset_cases"] == 40
    assert on_disk["dataset_fingerprint"] == "ab" * 32 and len(on_disk["episodes_digest"]) == 64
    assert on_disk["thresholds"] == on_disk["recorded_thresholds"] == {"t_onset_window_s": 5.0,
                                                                        "yield_tolerance_s": 1.0}


def test_reuse_with_a_param_writes_its_own_file(scored: Path) -> None:
    """Old behaviour: `score --reuse --param ...` overwrote the recorded-threshold scores.json."""
    before = (scored / "scores.json").read_bytes()
    res = score_run(scored, overrides={"t_onset_window_s": 3, "yield_tolerance_s": 0.25}, reuse_measurements=True)
    path = scored / "scores-t_onset_window_s=3,yield_tolerance_s=0.25.json"
    assert res["scores_file"] == str(path) and path.exists()
    assert json.loads(path.read_text())["thresholds"] == {"t_onset_window_s": 3.0, "yield_tolerance_s": 0.25}
    assert (scored / "scores.json").read_bytes() == before


def test_a_full_rescore_with_a_param_also_refreshes_scores_json(scored: Path) -> None:
    res = score_run(scored, asr=NoASR(), overrides={"yield_tolerance_s": 0.5})
    assert res["scores_file"].endswith("scores-yield_tolerance_s=0.5.json")
    assert json.loads((scored / "scores.json").read_text())["thresholds"]["yield_tolerance_s"] == 1.0


def test_a_rescore_that_fails_leaves_no_old_scores(scored: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Old behaviour: a crash mid-rescore left the previous scores.json and measurements looking current."""
    import metrics.mpe.score as score_mod

    score_run(scored, overrides={"t_onset_window_s": 3}, reuse_measurements=True)

    def broken_vad(params):
        raise RuntimeError("VAD crashed")

    monkeypatch.setattr(score_mod, "vad_from_params", broken_vad)
    with pytest.raises(RuntimeError, match="VAD crashed"):
        score_run(scored, asr=NoASR())
    assert sorted(p.name for p in scored.iterdir() if not p.name.endswith((".wav", ".rec.json"))) == []
    with pytest.raises(UsageError, match="measurements.jsonl is missing"):
        score_run(scored, reuse_measurements=True)


def test_reuse_refuses_missing_measurements(tmp_path: Path) -> None:
    """Old behaviour: --reuse without measurements silently measured again (with whatever ASR it could load)."""
    run = tmp_path / "run"
    write_episode(run, "A")
    with pytest.raises(UsageError, match="measurements.jsonl is missing .*without --reuse"):
        score_run(run, reuse_measurements=True)


def test_reuse_and_report_refuse_scores_of_an_extended_run(scored: Path, tmp_path: Path) -> None:
    """Old behaviour: after the run was extended, --reuse and the report showed old scores beside new episodes."""
    from eval.report import write_report

    write_episode(scored, "C", "p1", "explicit")
    with pytest.raises(UsageError, match=r"1 episode\(s\) have no scores \(the run was extended after scoring: C\)"):
        score_run(scored, reuse_measurements=True)
    with pytest.raises(UsageError) as err:
        write_report([scored], tmp_path / "report", max_plots=0)
    assert "scores.json does not match its run folder" in str(err.value)
    assert f"run `duplex-eval score {scored}`" in str(err.value)
    page = write_report([scored], tmp_path / "report", max_plots=0, allow_stale=True).read_text()
    assert "<b>STALE:</b> 1 episode(s) have no scores" in page and "handmade (run) STALE" in page
    # Scoring again makes it current: all three episodes, no complaint.
    assert score_run(scored, asr=NoASR())["case_ids"] == ["A", "B", "C"]
    assert "STALE" not in write_report([scored], tmp_path / "report", max_plots=0).read_text()


def test_report_refuses_rewritten_episodes_measurements_and_old_formats(scored: Path, tmp_path: Path) -> None:
    from eval.report import write_report

    def refused(match: str) -> None:
        with pytest.raises(UsageError, match=match):
            write_report([scored], tmp_path / "report", max_plots=0)

    saved = {p.name: p.read_bytes() for p in scored.iterdir()}
    rec = json.loads(saved["A.rec.json"])
    (scored / "A.rec.json").write_text(json.dumps(rec | {"wall_s": 9.9}))  # re-run: same case, new record
    refused("episodes were re-run or rewritten after scoring")
    (scored / "A.rec.json").write_bytes(saved["A.rec.json"])
    (scored / "measurements.jsonl").write_text("")
    refused("measurements.jsonl is missing or changed")
    (scored / "measurements.jsonl").write_bytes(saved["measurements.jsonl"])
    old = {k: v for k, v in json.loads(saved["scores.json"]).items() if k not in ("format", "episodes_digest")}
    (scored / "scores.json").write_text(json.dumps(old))
    refused("written by an older version")
    (scored / "scores.json").write_bytes(saved["scores.json"])
    write_report([scored], tmp_path / "report", max_plots=0)  # all restored: current again


def test_report_flags_a_rebuilt_dataset(tmp_path: Path) -> None:
    from eval.report import write_report

    run = tmp_path / "run"
    write_episode(run, "A")
    write_run_json(run, tmp_path / "ds", 1, fingerprint="aa" * 32)
    score_run(run, asr=NoASR())
    write_run_json(run, tmp_path / "ds", 1, fingerprint="bb" * 32)
    with pytest.raises(UsageError, match="run.json now names another dataset state"):
        write_report([run], tmp_path / "report", max_plots=0)


def test_report_lists_failed_and_unusable_episodes_with_reasons(tmp_path: Path) -> None:
    from eval.report import write_report

    run = tmp_path / "run"
    write_episode(run, "A")
    write_episode(run, "B", status="failed", failure="step stalled")
    write_episode(run, "C")
    sf.write(run / "C.wav", np.zeros(10, np.int16), 24000)
    score_run(run, asr=NoASR())
    page = write_report([run], tmp_path / "report", max_plots=5).read_text()
    assert "<b>failed:</b> step stalled (counted as failed in 5 windows)" in page
    assert "<b>unusable:</b> recording C.wav has 1 channel(s)" in page
    assert re.search(r"failed episodes +2 \(10 windows counted as failed\)", page)


def test_the_evaluate_module_counts_failed_windows_too(tmp_path: Path) -> None:
    import evaluate

    run = tmp_path / "run"
    write_episode(run, "A", "p0", "explicit")
    write_episode(run, "B", "p0", "implicit", status="failed", failure="boom")
    res = score_run(run, asr=NoASR())
    lines = (run / "measurements.jsonl").read_text().splitlines()
    got = evaluate.load(str(EVALUATE_MODULES / "duplex_mpe"),
                        keep_in_memory=True).compute(measurements=lines)
    assert got["scores"] == res["scores"] and got["paired"] == res["paired"]
    assert kn(got["scores"]["silence_preservation"]) == (N_SILENCE, 2 * N_SILENCE)
