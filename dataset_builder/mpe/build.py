"""Build the Duplex-MPE dataset folder: scripts -> TTS per turn -> nominal timeline -> parquet + card.

Deterministic: the same seed and TTS backend give identical scripts, timings and audio bytes. With
`options.scripts_only` only `scripts.jsonl` is written, from the same scripts, and nothing is synthesised.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import round_ms
from dataset_builder.audio import SESSION_SR, silence, wav_bytes
from dataset_builder.build import BuildOptions, open_tts, tts_backend, write_scripts
from dataset_builder.progress import Progress
from dataset_builder.schema import Case, Clip, Script
from dataset_builder.segments import render_turn
from dataset_builder.tts import TTSBackend

log = logging.getLogger("duplex_eval.build")

PRESETS = {"mini": 20, "full": 2000}  # scenario pairs; each gives an explicit and an implicit conversation
GAP_RANGE_S = (0.4, 1.2)  # seeded inter-turn gap on the nominal timeline (SPEC §5)
NOMINAL_POST_PREAMBLE_S = 1.0
NOMINAL_TAIL_S = 1.0
GENERATOR_VERSION = "mpe-templates-1"
SHARD_ROWS = 100  # ~60 s of 24 kHz PCM16 per row: ~300 MB of audio per shard in memory


def turn_gaps(seed: int, pair_id: str, n_turns: int) -> list[float]:
    """Gaps shared by both conditions of a pair, so the pair differs only where the scripts differ."""
    digest = hashlib.sha256(f"{seed}:{pair_id}:gaps".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return [round_ms(g) for g in rng.uniform(*GAP_RANGE_S, size=n_turns)]


def assemble_case(script: Script, tts: TTSBackend, preamble_text: str, preamble: np.ndarray, seed: int
                  ) -> tuple[Case, np.ndarray]:
    """Place the preamble and each synthesized turn on the nominal 24 kHz timeline."""
    voices = {s.name: s.voice for s in script.speakers}
    parts = [preamble, silence(NOMINAL_POST_PREAMBLE_S)]
    pos = len(preamble) + len(parts[1])
    clips: list[Clip] = []
    for turn, gap in zip(script.turns, turn_gaps(seed, script.pair_id, len(script.turns)), strict=True):
        audio = render_turn(turn, tts, voices[turn.speaker])
        gap_audio = silence(gap)
        pos += len(gap_audio)
        clips.append(Clip(turn.turn_id, round_ms(pos / SESSION_SR), round_ms((pos + len(audio)) / SESSION_SR), gap))
        parts += [gap_audio, audio]
        pos += len(audio)
    parts.append(silence(NOMINAL_TAIL_S))
    case = Case(case_id=script.script_id, benchmark="mpe", script=script, preamble_text=preamble_text,
                preamble_end_s=round_ms(len(preamble) / SESSION_SR), clips=clips, tts_backend=tts.name)
    case.validate()
    return case, np.concatenate(parts)


def script_counts(script: Script) -> list[str]:
    """What the build statistics count for one script: its condition, T position, task and each turn's label."""
    return [f"condition:{script.condition}", f"t_position:{script.t_position}", f"task:{script.task_type}",
            *(f"label:{t.label}" for t in script.turns)]


def build_scripts_only(out_dir: Path, options: BuildOptions) -> dict[str, Any]:
    """Write `out_dir/scripts.jsonl`: the scripts a full build with these options would speak, no audio."""
    from dataset_builder.mpe.generator import generate_scripts

    t0 = time.perf_counter()
    n_pairs = options.size(PRESETS)
    backend = tts_backend(options)
    scripts = generate_scripts(n_pairs, options.seed, backend.voices())
    path = write_scripts(Path(out_dir), scripts)
    stats = Counter(c for script in scripts for c in script_counts(script))
    info = {"preset": options.preset, "seed": options.seed, "n_pairs": n_pairs, "n_scripts": len(scripts),
            "tts_backend": backend.name, "generator": GENERATOR_VERSION, "scripts": str(path),
            "counts": dict(sorted(stats.items())), "build_s": round(time.perf_counter() - t0, 1)}
    log.info("wrote %d MPE scripts to %s in %.1fs (no audio)", len(scripts), path, info["build_s"])
    return info


def build(out_dir: Path, options: BuildOptions | None = None) -> dict[str, Any]:
    """Write `out_dir/data/mpe/*.parquet` and `out_dir/README.md` (or only `out_dir/scripts.jsonl` with
    `options.scripts_only`); returns build statistics."""
    options = options or BuildOptions()
    if options.scripts_only:
        return build_scripts_only(Path(out_dir), options)
    from dataset_builder.hf_dataset import MPE_FEATURES, mpe_card_context, write_card, write_config
    from dataset_builder.mpe.generator import generate_scripts
    from dataset_builder.mpe.preamble import duty_preamble
    from dataset_builder.rows import case_to_row

    t0 = time.perf_counter()
    n_pairs = options.size(PRESETS)
    backend, tts = open_tts(options)
    scripts = generate_scripts(n_pairs, options.seed, backend.voices())
    preamble_text = duty_preamble()
    preamble = tts.synthesize(preamble_text, backend.assistant_voice)  # type: ignore[attr-defined]
    stats: Counter[str] = Counter()
    progress = Progress("build mpe", len(scripts), enabled=options.progress)
    totals = {"cases": 0, "audio_s": 0.0}

    def rows() -> Iterator[dict[str, Any]]:
        # A generator: write_config holds one shard of rows (audio included) in memory at a time.
        for script in scripts:
            case, audio = assemble_case(script, tts, preamble_text, preamble, options.seed)
            totals["cases"] += 1
            totals["audio_s"] += len(audio) / SESSION_SR
            stats.update(script_counts(script))
            progress.advance(note=case.case_id)
            yield case_to_row(case, wav_bytes(audio))

    out_dir = Path(out_dir)
    write_config(out_dir, "mpe", rows(), MPE_FEATURES, shard_size=SHARD_ROWS)
    audio_s = totals["audio_s"]
    info = {"preset": options.preset, "seed": options.seed, "n_pairs": n_pairs, "n_cases": totals["cases"],
            "tts_backend": backend.name, "generator": GENERATOR_VERSION, "audio_hours": round(audio_s / 3600, 3),
            "counts": dict(sorted(stats.items()))}
    # No wall time in the card: the folder stays byte-identical for a given seed and backend.
    context = mpe_card_context(out_dir, "mpe", build_seed=options.seed, generator_version=GENERATOR_VERSION,
                               build_params={"preset": options.preset, "n_pairs": n_pairs,
                                             "tts": backend.name, "gap_range_s": list(GAP_RANGE_S)})
    write_card(out_dir, {"mpe": {"features": MPE_FEATURES}}, context=context)
    info["build_s"] = round(time.perf_counter() - t0, 1)
    log.info("built %d MPE cases (%.2f h audio) in %.1fs", totals["cases"], audio_s / 3600, info["build_s"])
    return info
