"""The M3-DuplexBench dataset card (`cards/m3.md`): construction, fields, event rules and regions, counts per config x
event type x condition (from the written shards), the timing statistics sampled from, voices, TTS backends and
the text's diversity."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dataset_builder.benchmark_params import M3Protocol
from dataset_builder.build import BuildOptions
from dataset_builder.card_tables import md_table, shared_context
from dataset_builder.m3.diversity import DiversityTargets, text_diversity
from dataset_builder.m3.rows import event_type_counts
from dataset_builder.m3.schema import CONDITIONS, CONFIGS, CONTEXT_S, EVENT_CONDITIONS, EVENT_TYPES, WINDOW_S
from dataset_builder.rules.m3_events import EventParams
from dataset_builder.rules.m3_timing_stats import DISTRIBUTIONS, TimingStats
from dataset_builder.speech_gate import gate_record

if TYPE_CHECKING:
    from dataset_builder.m3.build import ConfigPlan

TEMPLATE = Path(__file__).resolve().parent.parent.parent / "cards" / "m3.md"
METADATA = {
    "pretty_name": "M3-DuplexBench (duplex-eval synthetic reconstruction)",
    "language": ["en", "ja"],
    "tags": ["full-duplex", "spoken-dialogue", "turn-taking", "backchannel", "barge-in", "multilingual",
             "benchmark"],
}


def _median(stats: TimingStats, name: str) -> str:
    q = getattr(stats, name)
    return "-" if q is None else f"{q.ppf(0.5):.2f} ({q.values[0]:.2f}–{q.values[-1]:.2f})"


def _mean(xs: Sequence[float]) -> str:
    return f"{sum(xs) / len(xs):.2f}" if xs else "-"


def _rule(d: Mapping[str, Any], targets: DiversityTargets) -> str:
    """The 1 % rule's verdict; "n/a" where one dialogue is already more than the share (fewer than 100)."""
    if d["dialogues"] * targets.max_sentence_share < 1:
        return f"n/a (< {round(1 / targets.max_sentence_share)} dialogues)"
    return "pass" if d["ok"] else "FAIL"


def card_context(repo_dir: Path, plans: Sequence[ConfigPlan], stats: Mapping[str, Mapping[str, Any]],
                 options: BuildOptions, generator_version: str) -> dict[str, str]:
    count_rows, totals = [], Counter()
    for p in plans:
        counts = event_type_counts(repo_dir, p.config)
        for t in EVENT_TYPES:
            cells = [counts[t] if c in EVENT_CONDITIONS[t] else "–" for c in CONDITIONS]
            count_rows.append([f"`{p.config}`", t, counts[t], *cells])
            totals[t] += counts[t]
    n_events = sum(totals.values())
    n_cases = sum(n * len(EVENT_CONDITIONS[t]) for t, n in totals.items())
    timing_rows = []
    for p in plans:
        timing_rows.append([f"`{p.config}`", *(_median(p.stats, n) for n in DISTRIBUTIONS),
                            "-" if p.stats.bc_per_min is None else f"{p.stats.bc_per_min:g}"])
    draw_names = ("shift_gap_s", "pause_s", "bc_offset_frac", "barge_in_offset_s", "barge_in_overlap_s")
    draw_rows = [[f"`{p.config}`", *(f"{_mean(stats[p.config]['draws'].get(n, []))} "
                                     f"(n={len(stats[p.config]['draws'].get(n, []))})" for n in draw_names)]
                 for p in plans]
    voice_rows = []
    for p in plans:
        users = Counter(v.user for v in p.voices)
        voice_rows.append([f"`{p.config}`", ", ".join(f"`{v}` ({n})" for v, n in sorted(users.items())),
                           f"`{p.voices[0].system}`" if p.voices else "-",
                           f"`{p.voices[0].tts_backend}`" if p.voices else "-"])
    targets = DiversityTargets()
    diversity = text_diversity([d for p in plans for d in p.dialogues], targets)
    div_rows = []
    for name, d in diversity.items():
        top = d["top_sentences"][0] if d["top_sentences"] else ["-", 0]
        div_rows.append([f"`{name}`", d["dialogues"], f"{d['distinct_turn_lines']}/{d['turn_lines']}",
                         f"{d['distinct_sentences']}/{d['sentences']}",
                         f"{d['max_sentence_dialogues']} ({100 * (d['max_sentence_share'] or 0):.1f} %)",
                         _rule(d, targets), f"{top[0][:60]}"])
    quality_rows = [[f"`{p.config}`", stats[p.config]["dialogues"], f"{stats[p.config]['dialogue_s'] / 60:.1f}",
                     stats[p.config]["dropped_bcs"], stats[p.config]["retimed_clips"],
                     stats[p.config]["inner_silences_capped"], stats[p.config]["longest_inner_silence_ms"]]
                    for p in plans]
    sources = sorted({p.stats.source for p in plans})
    params = EventParams()
    return {
        **shared_context(Path(repo_dir), [p.config for p in plans], M3Protocol()),
        "n_events": str(n_events),
        "n_cases": str(n_cases),
        "n_dialogues": str(sum(len(p.dialogues) for p in plans)),
        "hours_dialogue": f"{sum(s['dialogue_s'] for s in stats.values()) / 3600:.2f}",
        "hours_rows": f"{sum(s['row_audio_s'] for s in stats.values()) / 3600:.2f}",
        "configs_list": ", ".join(f"`{p.config}`" for p in plans),
        "counts_table": md_table(["config", "event", "rows", *CONDITIONS], count_rows),
        "timing_table": md_table(["config", *DISTRIBUTIONS, "bc_per_min"], timing_rows),
        "draws_table": md_table(["config", *draw_names], draw_rows),
        "timing_sources": "; ".join(sources),
        "voices_table": md_table(["config", "user voices (dialogues)", "system voice", "TTS backend"], voice_rows),
        "diversity_table": md_table(["config", "dialogues", "distinct TURN lines", "distinct sentences",
                                   "most repeated sentence in", "1 % rule", "most repeated sentence"], div_rows),
        "quality_table": md_table(["config", "dialogues", "minutes", "BCs dropped (did not fit)",
                                 "clips re-spoken slower / faster to fit", "inner silences capped",
                                 "longest inner silence before capping (ms)"], quality_rows),
        "max_share": f"{100 * targets.max_sentence_share:g} %",
        "ipu_gap_s": f"{params.ipu_gap_s:g}",
        "bc_max_s": f"{params.bc_max_s:g}",
        "overlap_max_s": f"{params.shift_overlap_max_s:g}",
        "window_s": f"{WINDOW_S:g}",
        "context_s": f"{CONTEXT_S:g}",
        "build_seed": str(options.seed),
        "generator_version": generator_version,
        "build_params": json.dumps({"preset": options.preset, "n": options.n, "seed": options.seed,
                                    "tts": options.tts, "tts_args": options.tts_args,
                                    "stats": str(options.stats) if options.stats else None,
                                    "configs": [p.config for p in plans],
                                    # the ASR speech gate is MPE's; M3's clips pass the heard gate instead
                                    "speech_gate": gate_record(None),
                                    "heard_gate": options.heard_gate.name if options.heard_gate else None},
                                   indent=2, sort_keys=True),
    }


def write_m3_card(repo_dir: Path, configs: Mapping[str, Mapping[str, Any]], plans: Sequence[ConfigPlan],
                  stats: Mapping[str, Mapping[str, Any]], options: BuildOptions, generator_version: str) -> None:
    from dataset_builder.hf_dataset import write_card

    context = card_context(Path(repo_dir), plans, stats, options, generator_version)
    languages = sorted({CONFIGS[p.config][0] for p in plans})  # the languages of the configs built, not all
    write_card(Path(repo_dir), configs, template=TEMPLATE, context=context,
               metadata={**METADATA, "language": languages})
