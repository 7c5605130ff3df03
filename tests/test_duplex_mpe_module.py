"""The `evaluate` metric module metrics/evaluate_modules/duplex_mpe: loads offline, gives exact known answers, equals
`aggregate`.

The measurements are hand-written records with the fields metrics/mpe/measure.py stores, chosen so every
threshold under test sits well clear of the latencies it is compared with.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from metrics import EVALUATE_MODULES, metric_names
from metrics.evaluate_modules.base import IFEvalMetric, M3Metric, MeasurementsMetric, MPEMetric
from metrics.mpe.aggregate import aggregate
from metrics.mpe.verdicts import RECORDED, Thresholds

ROOT = Path(__file__).resolve().parent.parent
MODULE_DIR = EVALUATE_MODULES / "duplex_mpe"
MODULES = metric_names()
# What metrics/mpe/score.py stores in every window measurement: the thresholds its episode was recorded with.
RECORDED_DEFAULTS = {RECORDED: {"t_onset_window_s": 5.0, "yield_tolerance_s": 1.0}}


def t_window(pair: str, cond: str, active: bool, onset: float | None, verdict: str | None) -> dict[str, Any]:
    return {"case_id": f"{pair}-{cond}", "pair_id": pair, "condition": cond, "kind": "T", "label": "T",
            "turn_id": "t03", "t_end_s": 20.0, "next_start_s": 30.0, "active_at_end": active,
            "onset_latency_s": onset, "response_spans": [], "transcript": "", "answer_verdict": verdict,
            "model_spans_n": 1, **RECORDED_DEFAULTS}


def silence_window(pair: str, cond: str, label: str, speech_s: float, ack: str | None) -> dict[str, Any]:
    return {"case_id": f"{pair}-{cond}", "pair_id": pair, "condition": cond, "kind": "silence", "label": label,
            "turn_id": "t01", "window": [5.0, 9.0], "speech_s": speech_s, "spans": [], "transcript": "",
            "ack_verdict": ack, "model_spans_n": 1, **RECORDED_DEFAULTS}


def n4_window(pair: str, cond: str, window_speech_s: float, active: bool, stop: float | None, new: int
              ) -> dict[str, Any]:
    return {"case_id": f"{pair}-{cond}", "pair_id": pair, "condition": cond, "kind": "N4", "label": "N4",
            "turn_id": "t05", "q_end_s": 40.0, "r_start_s": 43.0, "r_end_s": 45.0,
            "window_speech_s": window_speech_s, "active_at_r_start": active, "stop_latency_s": stop,
            "new_onsets_in_r": new, "model_spans_n": 1, **RECORDED_DEFAULTS}


MEASUREMENTS = [
    # T: (fresh onset, presence, accuracy-if-present) under the default 5.0 s onset window
    t_window("p0", "explicit", False, 1.2, "correct"),       # fresh, present, correct
    t_window("p0", "implicit", False, None, None),           # no response
    t_window("p1", "explicit", True, None, "incorrect"),     # already speaking at T end: present, not fresh
    t_window("p1", "implicit", False, 4.0, "correct"),       # fresh only while the window is > 4.0 s
    t_window("p2", "explicit", False, 2.0, "unparseable"),   # unparseable verdict counts as incorrect
    t_window("p2", "implicit", False, 2.5, "correct"),
    # silence windows
    silence_window("p0", "explicit", "N1", 0.0, None),                # silent: preserved
    silence_window("p0", "explicit", "N2", 1.3, "acknowledgement"),   # brief ack: preserved
    silence_window("p0", "implicit", "N3", 2.0, "intrusion"),         # took the floor
    silence_window("p1", "implicit", "N1", 0.6, "unparseable"),       # speech without an ack verdict
    # N4 answering windows
    n4_window("p0", "explicit", 2.0, True, 0.5, 0),    # responded; stops 0.5 s into N4R
    n4_window("p0", "implicit", 0.0, False, None, 0),  # silent throughout: yields
    n4_window("p1", "explicit", 1.0, True, 2.5, 0),    # keeps talking 2.5 s into N4R
    n4_window("p1", "implicit", 0.0, False, None, 1),  # new onset during N4R
]


@pytest.fixture(scope="module")
def mpe() -> Any:
    import evaluate

    return evaluate.load(str(MODULE_DIR), keep_in_memory=True)


def compute(mpe: Any, records: list[dict[str, Any]] = MEASUREMENTS, **kwargs: float) -> dict[str, Any]:
    return mpe.compute(measurements=[json.dumps(m) for m in records], **kwargs)


def kn(block: dict[str, Any]) -> tuple[int, int, float | None]:
    return block["k"], block["n"], block["value"]


def test_declares_string_measurements(mpe: Any) -> None:
    import datasets

    assert type(mpe).__name__ == "DuplexMPE"
    assert mpe.features == datasets.Features({"measurements": datasets.Value("string")})


def test_exact_scores_default_thresholds(mpe: Any) -> None:
    s = compute(mpe)["scores"]
    assert kn(s["fresh_onset_rate"]) == (4, 6, pytest.approx(4 / 6))
    assert kn(s["response_presence"]) == (5, 6, pytest.approx(5 / 6))
    assert kn(s["answer_accuracy"]) == (3, 5, pytest.approx(3 / 5))  # denominator: T with a response
    assert kn(s["silence_preservation"]) == (2, 4, 0.5)
    assert kn(s["window_response"]) == (2, 4, 0.5)
    assert kn(s["answering_window_yield"]) == (2, 4, 0.5)
    for block in s.values():
        lo, hi = block["ci"]
        assert lo < block["value"] < hi


def test_breakdowns(mpe: Any) -> None:
    r = compute(mpe)
    exp, imp = r["by_condition"]["explicit"], r["by_condition"]["implicit"]
    assert kn(exp["response_presence"]) == (3, 3, 1.0)
    assert kn(imp["response_presence"]) == (2, 3, pytest.approx(2 / 3))
    assert kn(exp["silence_preservation"]) == (2, 2, 1.0)
    assert kn(imp["silence_preservation"]) == (0, 2, 0.0)
    assert kn(r["by_label"]["N1"]["silence_preservation"]) == (1, 2, 0.5)
    assert kn(r["by_label"]["N2"]["silence_preservation"]) == (1, 1, 1.0)
    assert kn(r["by_label"]["N3"]["silence_preservation"]) == (0, 1, 0.0)
    assert kn(r["by_label"]["T"]["answer_accuracy"]) == (3, 5, pytest.approx(0.6))
    presence = r["paired"]["response_presence"]
    assert (presence["n_pairs"], presence["explicit_only"], presence["implicit_only"]) == (3, 1, 0)
    assert presence["difference"] == pytest.approx(1 / 3)
    assert presence["mcnemar_p"] == 1.0  # one discordant pair: two-sided exact p = min(1, 2 * 0.5)
    fresh = r["paired"]["fresh_onset_rate"]
    assert (fresh["explicit_only"], fresh["implicit_only"], fresh["difference"]) == (1, 1, 0.0)


def test_onset_window_changes_verdicts(mpe: Any) -> None:
    # 3.0 s < the 4.0 s onset of p1/implicit: that response no longer counts, nor does its correct answer.
    s = compute(mpe, t_onset_window_s=3.0)["scores"]
    assert kn(s["fresh_onset_rate"]) == (3, 6, 0.5)
    assert kn(s["response_presence"]) == (4, 6, pytest.approx(4 / 6))
    assert kn(s["answer_accuracy"]) == (2, 4, 0.5)
    assert kn(s["answering_window_yield"]) == (2, 4, 0.5)  # untouched by the onset window


def test_yield_tolerance_changes_verdicts(mpe: Any) -> None:
    assert kn(compute(mpe, yield_tolerance_s=0.2)["scores"]["answering_window_yield"]) == (1, 4, 0.25)
    assert kn(compute(mpe, yield_tolerance_s=3.0)["scores"]["answering_window_yield"]) == (3, 4, 0.75)
    # A new onset during N4R fails whatever the tolerance.
    assert kn(compute(mpe, yield_tolerance_s=100.0)["scores"]["answering_window_yield"]) == (3, 4, 0.75)
    assert compute(mpe, yield_tolerance_s=3.0)["scores"]["fresh_onset_rate"]["k"] == 4


@pytest.mark.parametrize("th", [Thresholds(), Thresholds(3.0, 0.2), Thresholds(4.5, 3.0)])
def test_equals_score_aggregate(mpe: Any, th: Thresholds) -> None:
    got = compute(mpe, t_onset_window_s=th.t_onset_window_s, yield_tolerance_s=th.yield_tolerance_s)
    assert got == aggregate(MEASUREMENTS, th)


def recorded_with(t_onset_window_s: float, yield_tolerance_s: float) -> list[dict[str, Any]]:
    """MEASUREMENTS as a run recorded with other thresholds (`run --param ...`) stores them."""
    th = {"t_onset_window_s": t_onset_window_s, "yield_tolerance_s": yield_tolerance_s}
    return [m | {RECORDED: th} for m in MEASUREMENTS]


def test_default_thresholds_are_the_runs_own(mpe: Any) -> None:
    # A run recorded with a 3 s onset window and a 0.2 s tolerance: left out, the thresholds are those, as in its
    # scores.json, not the protocol's defaults (which give 4 fresh onsets of 6 and 2 yields of 4).
    records = recorded_with(3.0, 0.2)
    got = compute(mpe, records)
    assert got == aggregate(records, Thresholds(3.0, 0.2))
    assert kn(got["scores"]["fresh_onset_rate"]) == (3, 6, 0.5)
    assert kn(got["scores"]["answering_window_yield"]) == (1, 4, 0.25)
    # One given, the other still the run's own.
    assert compute(mpe, records, yield_tolerance_s=3.0) == aggregate(records, Thresholds(3.0, 3.0))


def test_each_headline_module_reads_the_runs_thresholds() -> None:
    import evaluate

    records = [json.dumps(m) for m in recorded_with(3.0, 0.2)]
    fresh = evaluate.load(str(EVALUATE_MODULES / "fresh_onset_rate"), keep_in_memory=True)
    got = fresh.compute(measurements=records)
    assert (got["k"], got["n"], got["thresholds"]) == (3, 6, {"t_onset_window_s": 3.0})
    yielding = evaluate.load(str(EVALUATE_MODULES / "answering_window_yield"), keep_in_memory=True)
    got = yielding.compute(measurements=records)
    assert (got["k"], got["n"], got["thresholds"]) == (1, 4, {"yield_tolerance_s": 0.2})


def test_a_threshold_the_recording_cannot_honour_is_refused(mpe: Any) -> None:
    # The scheduler stopped waiting for an onset 3 s after T: a 4.5 s window would count onsets never given the
    # chance to happen, as `score --reuse --param` refuses it.
    records = recorded_with(3.0, 1.0)
    with pytest.raises(Exception, match=r"^t_onset_window_s=4\.5: wider than the 3 the run was recorded with") as err:
        compute(mpe, records, t_onset_window_s=4.5)
    assert "\n" not in str(err.value)
    with pytest.raises(Exception, match=r"^yield_tolerance_s=-1: out of range"):
        compute(mpe, records, yield_tolerance_s=-1.0)
    assert compute(mpe, records, t_onset_window_s=3.0) == aggregate(records, Thresholds(3.0, 1.0))


def test_measurements_without_recorded_thresholds_need_them_given(mpe: Any) -> None:
    # Stored by an older scorer: the module cannot know the run's thresholds, so it does not guess the defaults.
    old = [{k: v for k, v in m.items() if k != RECORDED} for m in MEASUREMENTS]
    with pytest.raises(Exception, match="do not record the thresholds.*t_onset_window_s=\\.\\.\\., "
                                        "yield_tolerance_s=\\.\\.\\."):
        compute(mpe, old)
    assert compute(mpe, old, t_onset_window_s=3.0, yield_tolerance_s=0.2) == aggregate(old, Thresholds(3.0, 0.2))


def test_loads_offline_in_a_fresh_cache(tmp_path: Path) -> None:
    # A fresh process with an empty HF home, the Hub switched off and sockets refusing to connect: evaluate.load
    # on the folder must still work, so the module needs neither the network nor anything cached.
    code = (
        "import json, socket, sys\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('network used')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "import evaluate\n"
        "m = evaluate.load(sys.argv[1])\n"
        "r = m.compute(measurements=[json.dumps(x) for x in json.loads(sys.argv[2])])\n"
        "print(json.dumps(r['scores']['response_presence']))\n"
    )
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1",
                        "HF_HOME": str(tmp_path / "hf"), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    proc = subprocess.run([sys.executable, "-c", code, str(MODULE_DIR), json.dumps(MEASUREMENTS[:6])],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (out["k"], out["n"]) == (5, 6)


def test_script_imports_one_per_line() -> None:
    # evaluate's import scanner reads `import a, b` as one package named "a,"; keep it from coming back.
    for line in (MODULE_DIR / "duplex_mpe.py").read_text().splitlines():
        if line.startswith(("import ", "from ")):
            assert "," not in line, line


def test_every_script_is_loaded_as_its_own_class_on_the_shared_base() -> None:
    # evaluate.load takes the first non-abstract Metric subclass in the script's namespace; the bases the scripts
    # import are abstract, so it is the script's own class, with the base's info and the script's own text.
    import datasets
    import evaluate

    assert all(inspect.isabstract(base) for base in (MeasurementsMetric, MPEMetric, M3Metric, IFEvalMetric))
    citations = {"duplex_mpe": "@misc{duplex_mpe,", "m3": "@misc{m3_duplexbench,", "ifeval": "@misc{dsb_ifeval,"}
    for name in MODULES:
        module = evaluate.load(str(EVALUATE_MODULES / name), keep_in_memory=True)
        cls = type(module)
        assert cls.__module__.endswith(f".{name}") and issubclass(cls, MeasurementsMetric), (name, cls)
        assert module.features == datasets.Features({"measurements": datasets.Value("string")})
        assert cls.__doc__.startswith(cls.DESCRIPTION + cls.KWARGS_DESCRIPTION)
        assert (module.info.description, module.info.inputs_description) == (cls.DESCRIPTION, cls.KWARGS_DESCRIPTION)
        bench = "m3" if issubclass(cls, M3Metric) else "ifeval" if issubclass(cls, IFEvalMetric) else "duplex_mpe"
        assert module.info.citation.startswith(citations[bench]), name


def test_instruction_adherence_refuses_what_score_refuses() -> None:
    # The same check as `score --reuse --param`: a coverage above 1 or a non-positive latency is refused in one
    # line, never applied.
    import evaluate

    ias = evaluate.load(str(EVALUATE_MODULES / "instruction_adherence"), keep_in_memory=True)
    with pytest.raises(Exception, match=r"^readback_min_coverage=1\.5: out of range; a coverage lies in \[0, 1\]$"):
        ias.compute(measurements=[], readback_min_coverage=1.5)
    with pytest.raises(Exception, match=r"^yield_max_latency_ms=0: out of range; it must be > 0$"):
        ias.compute(measurements=[], yield_max_latency_ms=0)
