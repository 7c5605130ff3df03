"""Every `evaluate` module under metrics/evaluate_modules/<name>/ gives the numbers `duplex-eval score` gives
(docs/scoring.md).

Real runs, once per module: each benchmark's mini set, `silent` and `oracle` through the one episode runner, scored
by the CLI (`duplex-eval score`, the real VAD and ASR). Then one fresh Python process, started in an empty folder
with an empty Hugging Face cache, the Hub switched off and sockets refusing to connect, loads every module with
`evaluate.load(<absolute folder>)` and computes from each run's measurements.jsonl, at the run's thresholds and at
others (compared with `score --reuse --param`). The Duplex-MPE oracle run is recorded with a 3 s onset window
(`run --param t_onset_window_s=3`), so the modules must take the run's thresholds, not the protocol's defaults.
What each module must return is written out below from the scores file's own keys, not from the module's helpers,
so a module that picked the wrong block would fail here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from dataset_builder.errors import UsageError
from eval.cli import main as cli
from eval.run import RunConfig, run
from metrics import EVALUATE_MODULES, metric_names
from metrics.scoring import score_run_dir

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "tts"
MODULES = metric_names()
AGENTS = ("silent", "oracle")
# `run --param` of each (benchmark, agent): the thresholds a module must read from the run, not assume.
RECORDED_PARAMS = {("mpe", "oracle"): ["t_onset_window_s=3"]}

# benchmark -> (config run, cases run: None = all of the mini config). Enough of each to fill every block a module
# shows: MPE three scenario pairs (T, N1-N3 and N4 windows, the paired test); IFEval three roles' matched-audio
# conversation at four levels (the gaps and the matched table); M3 the whole English chat config (every event type
# under every context condition).
RUNS: dict[str, tuple[str, list[str] | None]] = {
    "mpe": ("mpe", [f"mpe-0000{i}-{c}" for i in range(3) for c in ("explicit", "implicit")]),
    "ifeval": ("ifeval", [f"R{r}-C1-i1-L{lv}" for r in (1, 2, 3) for lv in range(4)]),
    "m3": ("m3_chat_en", None),
}

Scores = dict[str, Any]


def mpe_score(name: str, thresholds: tuple[str, ...]) -> Callable[[Scores], dict[str, Any]]:
    def expected(s: Scores) -> dict[str, Any]:
        overall = s["scores"][name]
        out = {name: overall["value"], "n": overall["n"], "k": overall["k"], "ci": overall["ci"],
               "by_condition": {c: block[name] for c, block in s["by_condition"].items()},
               "by_label": {lab: block[name] for lab, block in s["by_label"].items() if name in block}}
        if name in s["paired"]:
            out["paired"] = s["paired"][name]
        return out | {"thresholds": {t: s["thresholds"][t] for t in thresholds}}
    return expected


def ias(s: Scores) -> dict[str, Any]:
    block = s["scores"]["ias"]
    return {"instruction_adherence": block["value"], "n": block["n"], "k": block["k"], "ci": block["ci"],
            **{key: s[key] for key in ("by_level", "by_action", "by_role", "entailment_gap", "redundancy_gain",
                                       "role_tax", "matched_audio")},
            "thresholds": s["thresholds"]}


def m3_keys(name: str, keys: tuple[str, ...]) -> Callable[[Scores], dict[str, Any]]:
    def expected(s: Scores) -> dict[str, Any]:
        return {name: {g: {k: block[k] for k in keys} for g, block in s["scores"].items()},
                "representative": {ld: {k: block[k] for k in keys} for ld, block in s["representative"].items()},
                "dropped_events": s["dropped_events"], "rules": s["rules"]}
    return expected


# module -> (benchmark, the scores file -> what the module must return, other thresholds as `score --param` takes
# them and as the module takes them: tight enough that the oracle, which answers ~0.4 s after a turn and stops
# ~0.05 s into N4R, fails some windows under them)
EXPECTED: dict[str, tuple[str, Callable[[Scores], dict[str, Any]], dict[str, Any]]] = {
    "duplex_mpe": ("mpe", lambda s: {k: s[k] for k in ("scores", "by_condition", "by_label", "paired")},
                   {"t_onset_window_s": 0.2, "yield_tolerance_s": 0.01}),
    "fresh_onset_rate": ("mpe", mpe_score("fresh_onset_rate", ("t_onset_window_s",)), {"t_onset_window_s": 0.2}),
    "silence_preservation": ("mpe", mpe_score("silence_preservation", ()), {}),
    "answering_window_yield": ("mpe", mpe_score("answering_window_yield", ("yield_tolerance_s",)),
                               {"yield_tolerance_s": 0.01}),
    "instruction_adherence": ("ifeval", ias, {"take_turn_max_wait_s": 0.2, "interrupt_max_latency_ms": 300}),
    "takeover_rate": ("m3", m3_keys("takeover_rate", ("shift_tor", "pause_tor")), {"rules": "authors"}),
    "stop_latency": ("m3", m3_keys("stop_latency", ("bc_stop_latency", "barge_in_stop_latency")),
                     {"rules": "authors"}),
}


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory: pytest.TempPathFactory, mini_sets: Mapping[str, Path]) -> dict[tuple[str, str], Path]:
    """(benchmark, agent) -> a run folder scored by `duplex-eval score` (scores.json, measurements.jsonl)."""
    out: dict[tuple[str, str], Path] = {}
    for bench, (config, cases) in RUNS.items():
        dataset = mini_sets[bench]  # the session's set: a config's rows do not depend on which others are built
        for agent in AGENTS:
            run_dir = tmp_path_factory.mktemp(f"{bench}-{agent}")
            args = {"cache_dir": str(CACHE)} if agent == "oracle" else {}
            counts = run(RunConfig(dataset=str(dataset), config=config, adapter=agent, out=str(run_dir),
                                   adapter_args=args, cases=cases, params=RECORDED_PARAMS.get((bench, agent), [])))
            assert counts["failed"] == 0 and counts["ok"] >= 6, counts
            assert cli(["score", str(run_dir), "--no-progress"]) == 0
            out[(bench, agent)] = run_dir
    return out


def overridden_scores(run_dir: Path, params: dict[str, Any]) -> Scores:
    """`duplex-eval score RUN --reuse --param ...`: the stored measurements under other thresholds."""
    return score_run_dir(run_dir, overrides=params, reuse_measurements=True)


# Run in a fresh process from an empty folder: evaluate copies each script into its (empty) module cache and
# imports it there, so `metrics` must come from the installed package, not from the working directory.
LOADER = """
import json, socket, sys
def refuse(*a, **k):
    raise OSError("network used")
socket.socket.connect = refuse
socket.create_connection = refuse
import evaluate
jobs = json.loads(open(sys.argv[1]).read())
out = {}
for name, folder in jobs["modules"].items():
    module = evaluate.load(folder)
    out[name] = {"citation": module.info.citation, "results": []}
    for job in jobs["computes"][name]:
        lines = open(job["measurements"]).read().splitlines()
        out[name]["results"].append(module.compute(measurements=lines, **job["kwargs"]))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def computed(run_dirs: dict[tuple[str, str], Path], tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, dict[str, Any]]:
    """module -> {"citation", "results": [one per (agent, kwargs) in `jobs` order]} from the fresh process."""
    work = tmp_path_factory.mktemp("elsewhere")
    jobs = {"modules": {name: str(EVALUATE_MODULES / name) for name in MODULES},
            "computes": {name: [{"measurements": str(run_dirs[(EXPECTED[name][0], agent)] / "measurements.jsonl"),
                                 "kwargs": kwargs}
                                for agent in AGENTS for kwargs in ({}, EXPECTED[name][2])]
                         for name in MODULES if name in EXPECTED}}
    (work / "jobs.json").write_text(json.dumps(jobs))
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1",
                        "HF_HOME": str(work / "hf"), "HF_MODULES_CACHE": str(work / "modules")}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", LOADER, str(work / "jobs.json")], capture_output=True, text=True,
                          env=env, cwd=work, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_module_folder_has_a_comparison_and_a_card() -> None:
    assert set(MODULES) == set(EXPECTED), "add the new module to EXPECTED, with what it must return"
    for name in MODULES:
        card = (EVALUATE_MODULES / name / "README.md").read_text()
        assert card.startswith("---\n") and "\ntitle: " in card.split("\n---\n", 1)[0], name
        for section in ("## How to Use", "### Inputs", "### Output Values", "## Limitations", "## Citation"):
            assert section in card, (name, section)
        # evaluate's import scanner reads `import a, b` as one package named "a,"
        for line in (EVALUATE_MODULES / name / f"{name}.py").read_text().splitlines():
            if line.startswith(("import ", "from ")):
                assert "," not in line, (name, line)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_module_equals_score_on_real_runs(name: str, run_dirs: dict[tuple[str, str], Path],
                                          computed: dict[str, dict[str, Any]]) -> None:
    bench, expected, params = EXPECTED[name]
    results = iter(computed[name]["results"])
    for agent in AGENTS:
        run_dir = run_dirs[(bench, agent)]
        recorded = json.loads((run_dir / "scores.json").read_text())
        assert recorded["benchmark"] == bench and recorded["n_failed"] == 0
        assert next(results) == expected(recorded), (name, agent)
        # Other thresholds: the module and `score --reuse --param` apply them to the same measurements.
        other = json.loads(json.dumps(overridden_scores(run_dir, params)))  # as a scores file holds it
        assert next(results) == expected(other), (name, agent, params)


def test_the_runs_fill_every_block(computed: dict[str, dict[str, Any]]) -> None:
    """A comparison over empty denominators would prove nothing: the oracle's runs enter each module's numbers."""
    def oracle(name: str, kwargs_index: int = 0) -> dict[str, Any]:
        return computed[name]["results"][2 + kwargs_index]  # silent's two computes come first

    for name in ("fresh_onset_rate", "silence_preservation", "answering_window_yield"):
        assert oracle(name)["n"] > 0 and set(oracle(name)["by_condition"]) == {"explicit", "implicit"}, name
    assert oracle("fresh_onset_rate")["paired"]["n_pairs"] == 3
    ifeval = oracle("instruction_adherence")
    assert ifeval["n"] == 12 and ifeval["entailment_gap"]["paired"]["n_pairs"] == 3
    # The other thresholds change the numbers, so the comparison under them compares something.
    for name in ("fresh_onset_rate", "answering_window_yield", "instruction_adherence"):
        assert oracle(name, 1)[name] < oracle(name)[name], name
    assert ifeval["matched_audio"]["all_roles_pass"]["n"] > 0
    tor = oracle("takeover_rate")["takeover_rate"]
    assert {g: tor[g]["shift_tor"]["n"] > 0 for g in tor} == dict.fromkeys(tor, True)
    stop = oracle("stop_latency")["stop_latency"]
    assert stop["en_chat_full"]["barge_in_stop_latency"]["value"] is not None
    # The authors' rules were applied, not silently ignored.
    assert oracle("stop_latency", 1)["rules"]["name"] == "authors" and oracle("stop_latency", 1)["stop_latency"][
        "en_chat_full"]["barge_in_stop_latency"]["ci"] is None


def test_modules_follow_a_run_recorded_and_rescored_at_other_thresholds(
        run_dirs: dict[tuple[str, str], Path]) -> None:
    """The oracle's MPE run was recorded with a 3 s onset window: its scores.json and the modules say 3 s; after
    `score --reuse --param t_onset_window_s=0.8` the module given 0.8 gives that file's numbers; a window wider
    than the recording's is refused by both, in one line."""
    import evaluate

    run_dir = run_dirs[("mpe", "oracle")]
    lines = (run_dir / "measurements.jsonl").read_text().splitlines()
    recorded = json.loads((run_dir / "scores.json").read_text())
    assert recorded["thresholds"]["t_onset_window_s"] == 3.0
    fresh = evaluate.load(str(EVALUATE_MODULES / "fresh_onset_rate"), keep_in_memory=True)
    mpe = evaluate.load(str(EVALUATE_MODULES / "duplex_mpe"), keep_in_memory=True)
    assert fresh.compute(measurements=lines)["thresholds"] == {"t_onset_window_s": 3.0}
    assert cli(["score", str(run_dir), "--reuse", "--param", "t_onset_window_s=0.8", "--no-progress"]) == 0
    rescored = json.loads((run_dir / "scores-t_onset_window_s=0.8.json").read_text())
    assert fresh.compute(measurements=lines, t_onset_window_s=0.8) == mpe_score(
        "fresh_onset_rate", ("t_onset_window_s",))(rescored)
    assert mpe.compute(measurements=lines, t_onset_window_s=0.8)["scores"] == rescored["scores"]
    # scores.json keeps the recorded thresholds, and so does the module called without them.
    assert fresh.compute(measurements=lines) == mpe_score("fresh_onset_rate", ("t_onset_window_s",))(
        json.loads((run_dir / "scores.json").read_text()))
    with pytest.raises(Exception, match="wider than the 3 the run was recorded with") as err:
        fresh.compute(measurements=lines, t_onset_window_s=4.0)
    assert "\n" not in str(err.value)
    with pytest.raises(UsageError, match="wider than the 3 the run was recorded with"):
        overridden_scores(run_dir, {"t_onset_window_s": 4.0})


def test_each_card_cites_what_its_module_cites(computed: dict[str, dict[str, Any]]) -> None:
    for name in MODULES:
        card = (EVALUATE_MODULES / name / "README.md").read_text()
        assert computed[name]["citation"].strip() in card, name
