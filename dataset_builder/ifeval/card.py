"""The DSB-IFEval dataset card (`cards/ifeval.md`): roles, probes, levels, actions, counts, gates and defaults,
counted from the written shards where the numbers describe the data."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataset_builder.benchmark_params import IFEvalProtocol
from dataset_builder.build import BuildOptions
from dataset_builder.card_tables import md_table, shared_context, voices_table
from dataset_builder.ifeval.gates import IMPERATIVE_BLOCKLIST, JACCARD_MAX, PERSONA_WORDS, role_diagnostics
from dataset_builder.ifeval.grid import PAUSE_FLOOR_S, PAUSE_SPREAD, Grid
from dataset_builder.ifeval.schema import (
    ACTIONS,
    BARGE_WINDOW_S,
    BENCHMARK,
    INTERRUPT_WINDOW_S,
    LABEL_RULES,
    LEVELS,
    NOMINAL_GAP_S,
    NOMINAL_TAIL_S,
    PROBE_TITLES,
    ROLE_OVERRIDES,
    ROLES,
    SAFETY_CELLS,
    VERIFIER_DEFAULTS,
    role_probes,
)
from dataset_builder.ifeval.texts import TextBank
from dataset_builder.speech_gate import gate_record

TEMPLATE = Path(__file__).resolve().parent.parent.parent / "cards" / "ifeval.md"
METADATA = {
    "pretty_name": "DSB-IFEval (duplex-eval reconstruction)",
    "tags": ["full-duplex", "spoken-dialogue", "instruction-following", "persona", "benchmark"],
}


_CARD_COLUMNS = ["case_id", "conversation_id", "level", "expected_action", "base_action", "role", "probe",
                 "matched_audio", "matched_group", "turns", "voice", "label_rule", "audio_variant",
                 "safety_relevant_audio"]


def _shard_rows(repo_dir: Path, config: str) -> list[dict[str, Any]]:
    from dataset_builder.hf_dataset import config_shards, rows_without_audio

    return [row for shard in config_shards(repo_dir, config) for row in rows_without_audio(shard, _CARD_COLUMNS)]


def card_context(repo_dir: Path, grid: Grid, bank: TextBank, options: BuildOptions, backend: str,
                 generator_version: str) -> dict[str, str]:
    rows = _shard_rows(repo_dir, BENCHMARK)
    matched = _shard_rows(repo_dir, "ifeval_matched") if (repo_dir / "data" / "ifeval_matched").is_dir() else []
    by_level = {lv: Counter(r["expected_action"] for r in rows if r["level"] == lv) for lv in LEVELS}
    scored, base = Counter(r["expected_action"] for r in rows), Counter(r["base_action"] for r in rows)
    levels = Counter(r["level"] for r in rows)
    action_rows = [[a, *(by_level[lv][a] for lv in LEVELS), scored[a], base[a]] for a in ACTIONS]
    action_rows.append(["total", *(levels[lv] for lv in LEVELS), len(rows), len(rows)])
    table = bank.table
    cell_rows = []
    for role in ROLES:
        cells = []
        for probe in role_probes(role):
            c = table[(role, probe)]
            l4b = f" / **{c.l4b_action}**" if c.l4b_action else ""
            cells.append(f"{c.action} / {c.l4a}{l4b}")
        cell_rows.append([f"{role} {ROLES[role]}", *cells])
    speech_s = conv_s = case_s = 0.0
    seen: set[str] = set()
    for r in rows:
        user_s = sum(t["end_s"] - t["start_s"] for t in r["turns"])
        case_s += user_s
        key = r["matched_group"] or r["conversation_id"] + (f"-{r['audio_variant']}" if r["audio_variant"] else "")
        if key in seen:
            continue
        seen.add(key)
        conv_s += user_s
        for t in r["turns"]:
            speech_s += sum(g["end_s"] - g["start_s"] for g in t["segments"] if g["kind"] == "speech")
    rules = {rule: Counter(r["level"] for r in rows if r["label_rule"] == rule) for rule in LABEL_RULES}
    rule_rows = [[rule, *(by[lv] for lv in LEVELS), sum(by.values()),
                  sum(r["safety_relevant_audio"] for r in rows if r["label_rule"] == rule)]
                 for rule, by in rules.items()]
    diags = [role_diagnostics(r, t.persona, t.directive) for r, t in bank.roles.items()]
    gate_rows = [[d.role, f"{d.jaccard:.3f}", d.persona_words, ", ".join(d.shared) or "(none)",
                  "pass" if not d.problems else "FAIL"] for d in diags]
    thresholds = []
    for action in ACTIONS:
        params = ", ".join(f"{k}={v:g}" for k, v in VERIFIER_DEFAULTS[action].items()) or "(none)"
        overrides = "; ".join(f"{role}: " + ", ".join(f"{k}={v:g}" for k, v in p.items())
                              for role, p in ROLE_OVERRIDES.get(action, {}).items()) or "-"
        thresholds.append([action, params, overrides])
    probe_rows = [[p, t] for p, t in PROBE_TITLES.items()]
    voices: dict[str, Counter[str]] = {}
    for r in rows:
        voices.setdefault(r["voice"], Counter())[r["conversation_id"]] += 1
    configs = [BENCHMARK, *(["ifeval_matched"] if matched else [])]
    return {
        **shared_context(repo_dir, configs, IFEvalProtocol()),
        "voices_table": voices_table(("voice", "conversations", "cases"), voices),
        "nominal_gap_s": f"{NOMINAL_GAP_S:g}",
        "nominal_tail_s": f"{NOMINAL_TAIL_S:g}",
        "n_cases": str(len(rows)),
        "n_conversations": str(len({r["conversation_id"] for r in rows})),
        "n_streams": str(len(seen)),
        "n_matched": str(len(matched)),
        "hours_user_audio": f"{conv_s / 3600:.2f}",
        "hours_speech": f"{speech_s / 3600:.2f}",
        "mean_conversation_s": f"{conv_s / max(len(seen), 1):.1f}",
        "mean_case_s": f"{case_s / max(len(rows), 1):.1f}",
        "rule_table": md_table(["rule", *LEVELS, "cases", "hearing safety-relevant audio"], rule_rows),
        "pause_spread": f"[{PAUSE_SPREAD[0]:g}x, {PAUSE_SPREAD[1]:g}x]",
        "pause_floors": ", ".join(f"{v:g} s for a {k.replace('_', ' ')}" for k, v in PAUSE_FLOOR_S.items()),
        "tts_backend": f"`{backend}`",
        "build_seed": str(options.seed),
        "generator_version": generator_version,
        "build_params": json.dumps({"preset": options.preset,
                                    "instances_per_cell": len({c.instance for c in grid.conversations}),
                                    "cells": len({(c.role, c.probe) for c in grid.conversations}),
                                    "tts": backend, "nominal_gap_s": NOMINAL_GAP_S,
                                    "nominal_tail_s": NOMINAL_TAIL_S,
                                    "speech_gate": gate_record(None)},  # the ASR speech gate is MPE's alone
                                   indent=2, sort_keys=True),
        "action_table": md_table(["role", *("C1", "C2", "C3", "C4", "_A", "_B")], cell_rows),
        "probe_table": md_table(["probe", "what happens in turn 2"], probe_rows),
        "counts_table": md_table(["action", *LEVELS, "scored", "base (App. B.1)"], action_rows),
        "gates_table": md_table(["role", "Jaccard", "persona words", "shared content words", "gates"], gate_rows),
        "threshold_table": md_table(["action", "default", "per-role overrides"], thresholds),
        "safety_cells": ", ".join(f"{r}/{p}" for r, p in SAFETY_CELLS),
        "blocklist": ", ".join(IMPERATIVE_BLOCKLIST),
        "jaccard_max": f"{JACCARD_MAX}",
        "persona_words": f"{PERSONA_WORDS[0]}–{PERSONA_WORDS[1]}",
        "barge_window_s": f"{BARGE_WINDOW_S:g}",
        "interrupt_window_s": f"{INTERRUPT_WINDOW_S:g}",
    }


def write_ifeval_card(repo_dir: Path, configs: Mapping[str, Mapping[str, Any]], grid: Grid, bank: TextBank,
                      options: BuildOptions, backend: str, generator_version: str) -> None:
    from dataset_builder.hf_dataset import write_card

    context = card_context(Path(repo_dir), grid, bank, options, backend, generator_version)
    write_card(Path(repo_dir), configs, template=TEMPLATE, context=context, metadata=METADATA)
