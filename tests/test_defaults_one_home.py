"""Each default has one definition and everything that states it agrees with it: the Duplex-MPE thresholds are
the protocol's (dataset_builder/benchmark_params.py), the M3 default rule set is metrics/m3/rules.py's, the per-step
timeout is `eval.orchestrator.RunOptions`'s and the harness version is pyproject.toml's.

Checked against the definitions, read here from where they live: the `evaluate` modules' `_compute` defaults (the
Duplex-MPE ones None: the thresholds the run was recorded with, which every measurement stores, whose own default
is the protocol's) and what they compute without arguments, `verdicts.Thresholds`, the dataset card cards/mpe.md
as it renders, the metric cards metrics/evaluate_modules/<name>/README.md, and the run CLI.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import string
import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.card_tables import protocol_placeholders
from eval.orchestrator import HARNESS_VERSION, RunOptions
from eval.run import RunConfig, add_run_arguments, config_from_args
from metrics import EVALUATE_MODULES, metric_names
from metrics.m3.rules import DEFAULT_RULES, RULE_SETS
from metrics.mpe.aggregate import aggregate
from metrics.mpe.verdicts import RECORDED, Thresholds

ROOT = Path(__file__).resolve().parent.parent
MPE = MPEProtocol()
MODULES = metric_names()

# module -> the defaults of its `_compute` keywords, as their one definition gives them.
DEFAULTS: dict[str, dict[str, Any]] = {
    # None: the thresholds each measurement says its run was recorded with (RECORDED), the protocol's by default.
    "duplex_mpe": {"t_onset_window_s": None, "yield_tolerance_s": None},
    "fresh_onset_rate": {"t_onset_window_s": None},
    "answering_window_yield": {"yield_tolerance_s": None},
    "silence_preservation": {},
    # None: each case keeps the verifier thresholds stored in its own gold (the dataset is their one home).
    "instruction_adherence": dict.fromkeys(("take_turn_max_wait_s", "yield_max_latency_ms",
                                            "interrupt_max_latency_ms", "bc_ceiling_s", "readback_min_coverage")),
    "stop_latency": {"rules": DEFAULT_RULES},
    "takeover_rate": {"rules": DEFAULT_RULES},
}


@pytest.fixture(scope="module")
def loaded() -> dict[str, Any]:
    import evaluate

    return {name: evaluate.load(str(EVALUATE_MODULES / name), keep_in_memory=True) for name in MODULES}


def test_every_module_is_listed() -> None:
    assert set(MODULES) == set(DEFAULTS)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_compute_signature_defaults_are_the_definitions(name: str, loaded: dict[str, Any]) -> None:
    params = inspect.signature(type(loaded[name])._compute).parameters
    keywords = {k: p.default for k, p in params.items()
                if k not in ("self", "measurements") and p.kind is not inspect.Parameter.VAR_KEYWORD}
    assert keywords == DEFAULTS[name]


# What metrics/mpe/score.py stores in a measurement of a run recorded with the protocol's defaults.
RECORDED_AT_DEFAULTS = {RECORDED: asdict(Thresholds.from_params(MPE.to_dict()))}


def t_window(cond: str, onset: float) -> dict[str, Any]:
    return {"case_id": f"p0-{cond}", "pair_id": "p0", "condition": cond, "kind": "T", "label": "T",
            "active_at_end": False, "onset_latency_s": onset, "answer_verdict": "correct", **RECORDED_AT_DEFAULTS}


def n4_window(cond: str, stop: float) -> dict[str, Any]:
    return {"case_id": f"p0-{cond}", "pair_id": "p0", "condition": cond, "kind": "N4", "label": "N4",
            "window_speech_s": 1.0, "active_at_r_start": True, "stop_latency_s": stop, "new_onsets_in_r": 0,
            **RECORDED_AT_DEFAULTS}


# Onsets and stops either side of the protocol's thresholds: a module applying any other default gets other numbers.
RECORDS = [t_window("explicit", MPE.t_onset_window_s - 0.25), t_window("implicit", MPE.t_onset_window_s + 0.25),
           n4_window("explicit", MPE.yield_tolerance_s - 0.25), n4_window("implicit", MPE.yield_tolerance_s + 0.25)]


def test_mpe_modules_apply_the_protocols_thresholds_by_default(loaded: dict[str, Any]) -> None:
    lines = [json.dumps(r) for r in RECORDS]
    fresh = loaded["fresh_onset_rate"].compute(measurements=lines)
    assert (fresh["k"], fresh["n"]) == (1, 2)
    assert fresh["thresholds"] == {"t_onset_window_s": MPE.t_onset_window_s}
    yielding = loaded["answering_window_yield"].compute(measurements=lines)
    assert (yielding["k"], yielding["n"]) == (1, 2)
    assert yielding["thresholds"] == {"yield_tolerance_s": MPE.yield_tolerance_s}
    scores = loaded["duplex_mpe"].compute(measurements=lines)
    assert scores == aggregate(RECORDS, Thresholds(MPE.t_onset_window_s, MPE.yield_tolerance_s))
    assert scores != aggregate(RECORDS, Thresholds(MPE.t_onset_window_s + 0.5, MPE.yield_tolerance_s + 0.5))


def test_verdict_thresholds_default_to_the_protocol() -> None:
    assert Thresholds() == Thresholds.from_params(MPE.to_dict())


def test_m3_modules_describe_the_default_rule_set(loaded: dict[str, Any]) -> None:
    rules = RULE_SETS[DEFAULT_RULES]
    assert f'rules: "{DEFAULT_RULES}" (default)' in loaded["stop_latency"].info.inputs_description
    assert f"cut at the {rules.window_s:g} s window end" in loaded["stop_latency"].info.description
    assert (f"at or after s - {rules.max_overlap_s:g} s that reaches into the {rules.window_s:g} s window"
            in loaded["takeover_rate"].info.description)


@pytest.mark.parametrize("field", ["t_onset_window_s", "yield_tolerance_s"])
def test_dataset_card_states_the_protocols_thresholds(field: str) -> None:
    template = (ROOT / "cards" / "mpe.md").read_text()
    assert f"`{field} = $p_{field}` s" in template  # through its placeholder, never a number typed in
    text = string.Template(template).safe_substitute(protocol_placeholders(MPE))
    stated = re.findall(rf"`{field} = ([0-9.]+)` s", text)
    assert stated and all(float(v) == getattr(MPE, field) for v in stated), stated


# "**name** (`float`, default `5.0`)" in Inputs, "`name` (default 5.0 s)" in prose.
CARD_DEFAULT = re.compile(r"\*\*(\w+)\*\* \(`[^`]+`(?: or `None`)?, default `([^`]+)`\)")
PROSE_DEFAULT = re.compile(r"`(\w+)` \(default ([0-9.]+) s\)")


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_metric_card_states_the_modules_defaults(name: str) -> None:
    card = (EVALUATE_MODULES / name / "README.md").read_text()
    stated = [(k, json.loads(v.replace("None", "null"))) for k, v in CARD_DEFAULT.findall(card)]
    stated += [(k, float(v)) for k, v in PROSE_DEFAULT.findall(card)]
    assert bool(stated) == bool(DEFAULTS[name])  # every card with keywords states their defaults
    assert all(k in DEFAULTS[name] and v == DEFAULTS[name][k] for k, v in stated), stated


def test_step_timeout_is_run_options() -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    # With --config named, the dataset folder is not read (without it, the config is inferred from the folder).
    args = parser.parse_args(["--dataset", "d", "--config", "mpe", "--adapter", "a", "--out", "o"])
    assert config_from_args(args).step_timeout_s == RunOptions().step_timeout_s
    assert RunConfig(dataset="d", adapter="a", out="o").step_timeout_s == RunOptions().step_timeout_s


def test_harness_version_is_the_package_version() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        assert HARNESS_VERSION == tomllib.load(f)["project"]["version"]
