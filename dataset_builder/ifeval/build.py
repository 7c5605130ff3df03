"""Build the DSB-IFEval dataset folder (`duplex-eval build ifeval`): texts -> grid -> segment-wise TTS ->
nominal timeline -> parquet (configs `ifeval`, `ifeval_matched`) + card.

A distinct user-audio stream is a conversation, or a matched-audio group (one text, one voice, synthesised once
and shared byte-identically by R1, R2 and R3); every level of a conversation reuses its stream's bytes. Each
speech segment is synthesised on its own and every pause is exact zero samples. The unit of work is one distinct
speech clip (text, voice), each synthesised once however many streams say it: the workers
(`dataset_builder.pool`, output independent of the number of workers) speak the clips in the order the streams
first need them, and this process cuts the streams from them, places them on the timeline and streams the rows
into parquet, one conversation's rows at a time. Clips rather than whole conversations keep both cores busy to
the end (a conversation is up to ~20 clips; the last one would leave a core idle). `--scripts-only` writes
`scripts.jsonl` and `manifest.jsonl` and synthesises nothing.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import atomic_write_text, round_ms
from dataset_builder.audio import SESSION_SR, silence, wav_bytes
from dataset_builder.build import BuildOptions, tts_backend, unit_tts
from dataset_builder.errors import UsageError
from dataset_builder.ifeval.grid import MINI_CELLS, Grid, action_counts, all_cells, compose, level_counts
from dataset_builder.ifeval.schema import (
    ACTIONS,
    BENCHMARK,
    INSTANCES,
    LEVELS,
    NOMINAL_GAP_S,
    NOMINAL_TAIL_S,
    Conversation,
    IFEvalItem,
    SegmentTiming,
    TimedConversation,
)
from dataset_builder.ifeval.texts import load_texts
from dataset_builder.pool import WorkerPool, resolve_workers
from dataset_builder.progress import Progress
from dataset_builder.tts import TTSBackend

log = logging.getLogger("duplex_eval.build")

PRESETS = {"mini": 1, "full": len(INSTANCES)}  # instances per (role, probe) cell; mini hears MINI_CELLS only
GENERATOR_VERSION = "ifeval-texts-4"
CLIPS_IN_FLIGHT = 32  # per worker: ~13 s of synthesis, more than the longest shard write
SHARD_ROWS = 50  # ~25 s of 24 kHz PCM16 per row: ~60 MB of audio per shard in memory
SCRIPTS_FILE = "scripts.jsonl"
MANIFEST_FILE = "manifest.jsonl"
MATCHED_CONFIG = "ifeval_matched"


def instances_for(options: BuildOptions) -> tuple[int, ...]:
    n = options.size(PRESETS)
    if n > len(INSTANCES):
        raise UsageError(f"--n {n}: IFEval has {len(INSTANCES)} instances per cell")
    return INSTANCES[:n]


def cells_for(options: BuildOptions) -> tuple[tuple[str, str], ...]:
    """The cells the build hears: the mini preset's MINI_CELLS; every cell for `--preset full` or a given `--n`."""
    return MINI_CELLS if options.n is None and options.preset == "mini" else all_cells()


# ------------------------------------------------------------------------------------ synthesis (workers)

Clip = tuple[str, str]  # (text, voice): one speech segment's audio
Turns = dict[str, tuple[np.ndarray, list[SegmentTiming]]]  # turn id -> (clip audio, segment timings)


@dataclass(frozen=True)
class _Voice:
    backend: TTSBackend
    cache_dir: Path | None


_VOICE: _Voice | None = None  # set once per worker process by `start_speaking`


def start_speaking(options: BuildOptions) -> None:
    """The worker processes' initializer: the build's backend, made here from its options, so the workers start
    (spawn, imports) while the parent still makes its own and composes the grid."""
    global _VOICE
    _VOICE = _Voice(tts_backend(options), options.cache_dir)


def worker_ready() -> None:
    """A no-op. The pool spawns a worker per submitted item, so submitting one per worker starts them all now."""


def speak_clip(clip: Clip) -> np.ndarray:
    """The unit of work, in a worker."""
    if _VOICE is None:
        raise RuntimeError("start_speaking() was not called in this process")
    text, voice = clip
    return np.asarray(unit_tts(_VOICE.backend, _VOICE.cache_dir).synthesize(text, voice), np.float32)


def conversation_clips(conv: Conversation) -> list[Clip]:
    return [(seg.text, conv.voice) for turn in conv.turns for seg in turn.segments if seg.kind == "speech"]


def speech_clips(units: list[Conversation]) -> list[Clip]:
    """The distinct clips of the streams, in the order the streams first need them."""
    return list(dict.fromkeys(clip for conv in units for clip in conversation_clips(conv)))


def render_segments(conv: Conversation, clips: Mapping[Clip, np.ndarray]) -> Turns:
    """Each turn's audio and its segment timings: speech segments are their clips in the conversation's voice,
    silences exact zero samples (never TTS prosody)."""
    out = {}
    for turn in conv.turns:
        parts, timings, pos = [], [], 0
        for seg in turn.segments:
            audio = clips[(seg.text, conv.voice)] if seg.kind == "speech" else silence(seg.duration_s)
            parts.append(np.asarray(audio, np.float32))
            timings.append(SegmentTiming(seg.kind, seg.mark, round_ms(pos / SESSION_SR),
                                         round_ms((pos + len(audio)) / SESSION_SR)))
            pos += len(audio)
        out[turn.turn_id] = (np.concatenate(parts), timings)
    return out


def spoken_units(units: list[Conversation], clips: list[Clip], audio: Iterator[np.ndarray]
                 ) -> Iterator[tuple[Conversation, Turns]]:
    """Each stream's turns, in order, cut from the clips' audio as it arrives (in `clips` order). A clip is kept
    only until the last stream that says it is cut."""
    uses = Counter(clip for conv in units for clip in set(conversation_clips(conv)))
    arrived = zip(clips, audio, strict=True)
    ready: dict[Clip, np.ndarray] = {}
    for conv in units:
        needed = set(conversation_clips(conv))
        for clip in needed:
            while clip not in ready:
                got, clip_audio = next(arrived)
                ready[got] = clip_audio
        yield conv, render_segments(conv, ready)
        for clip in needed:
            uses[clip] -= 1
            if not uses[clip]:
                del ready[clip]


# ------------------------------------------------------------------------------------ assembly (this process)

def nominal_audio(turns: Turns) -> tuple[np.ndarray, dict[str, tuple[float, float]]]:
    """Turn 1, the inter-turn gap, turn 2, the tail; and where each turn's clip lies in it."""
    t1, t2 = turns["t1"][0], turns["t2"][0]
    gap = silence(NOMINAL_GAP_S)
    start2 = len(t1) + len(gap)
    clips = {"t1": (0.0, round_ms(len(t1) / SESSION_SR)),
             "t2": (round_ms(start2 / SESSION_SR), round_ms((start2 + len(t2)) / SESSION_SR))}
    return np.concatenate([t1, gap, t2, silence(NOMINAL_TAIL_S)]), clips


def audio_units(grid: Grid) -> list[Conversation]:
    """The distinct user-audio streams, in grid order: a matched group is spoken once, by its first member."""
    seen: set[str] = set()
    units = []
    for conv in grid.conversations:
        key = conv.stream_id
        if key not in seen:
            seen.add(key)
            units.append(conv)
    return units


def counts_table(grid: Grid) -> str:
    """The per-action counts table the builder prints: scored action and App. B.1's base-action counting, per
    level."""
    counts = action_counts(grid.cases)
    by_level = {lv: Counter(c.expected_action for c in grid.cases if c.level == lv) for lv in LEVELS}
    head = f"{'action':<15}" + "".join(f"{lv:>6}" for lv in LEVELS) + f"{'scored':>8}{'base':>6}"
    lines = [head, "-" * len(head)]
    for action in ACTIONS:
        lines.append(f"{action:<15}" + "".join(f"{by_level[lv][action]:>6}" for lv in LEVELS)
                     + f"{counts['scored'][action]:>8}{counts['base'][action]:>6}")
    levels = level_counts(grid.cases)
    lines.append(f"{'total':<15}" + "".join(f"{levels[lv]:>6}" for lv in LEVELS)
                 + f"{len(grid.cases):>8}{len(grid.cases):>6}")
    return "\n".join(lines)


def grid_info(grid: Grid, options: BuildOptions, backend_name: str) -> dict[str, Any]:
    counts = action_counts(grid.cases)
    return {
        "preset": options.preset, "seed": options.seed, "tts_backend": backend_name,
        "generator": GENERATOR_VERSION, "n_conversations": len({c.conversation_id for c in grid.conversations}),
        "n_scripts": len(grid.conversations), "n_benign_twins": sum(bool(c.variant) for c in grid.conversations),
        "n_audio_streams": len(audio_units(grid)), "n_cases": len(grid.cases),
        "levels": dict(sorted(level_counts(grid.cases).items())),
        "actions_scored": dict(sorted(counts["scored"].items())),
        "actions_base": dict(sorted(counts["base"].items())),
        "n_matched_cases": sum(c.matched_audio for c in grid.cases),
    }


def write_scripts_only(out_dir: Path, grid: Grid) -> tuple[Path, Path]:
    """`scripts.jsonl` (one script per line: a conversation, or a safety cell's benign twin, with its tags and
    the cases that hear it under "cases") and `manifest.jsonl` (one case per line), written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    scripts = "".join(json.dumps({**conv.to_dict(), "stream_id": conv.stream_id,
                                  "cases": [c.to_dict() for c in grid.cases_of(conv)]},
                                 ensure_ascii=False) + "\n" for conv in grid.conversations)
    manifest = "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in grid.cases)
    atomic_write_text(out_dir / SCRIPTS_FILE, scripts)
    atomic_write_text(out_dir / MANIFEST_FILE, manifest)
    return out_dir / SCRIPTS_FILE, out_dir / MANIFEST_FILE


def composed(options: BuildOptions) -> tuple[TTSBackend, Grid, dict[str, Any]]:
    """The backend, the grid and its statistics; prints the per-action counts table."""
    backend = tts_backend(options)
    grid = compose(options.seed, backend.voices(), instances_for(options), cells=cells_for(options))
    n_conv = len({c.conversation_id for c in grid.conversations})
    print(f"DSB-IFEval cases per action and level ({n_conv} conversations, {len(audio_units(grid))} audio "
          f"streams):\n{counts_table(grid)}")
    return backend, grid, grid_info(grid, options, backend.name)


def build(out_dir: Path, options: BuildOptions | None = None) -> dict[str, Any]:
    """Write `out_dir/data/{ifeval,ifeval_matched}/*.parquet` and `out_dir/README.md` (or, with
    `options.scripts_only`, only `scripts.jsonl` and `manifest.jsonl`); prints the per-action counts table and
    returns build statistics."""
    options = options or BuildOptions()
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    if options.scripts_only:
        backend, grid, info = composed(options)
        scripts, manifest = write_scripts_only(out_dir, grid)
        info.update(scripts=str(scripts), manifest=str(manifest), build_s=round(time.perf_counter() - t0, 1))
        log.info("wrote %d IFEval conversations and %d cases to %s in %.1fs (no audio)", len(grid.conversations),
                 len(grid.cases), out_dir, info["build_s"])
        return info
    # Every conversation has at least two clips, so this many workers never outnumber the items.
    n_conversations = len(cells_for(options)) * len(instances_for(options))
    workers = resolve_workers(options.workers, n_conversations)
    # The workers make their backend from the options. IFEval applies no speech gate: leaving the CLI's out keeps
    # the workers from importing an ASR to unpickle it.
    with WorkerPool(workers, start_speaking, (replace(options, speech_gate=None),)) as pool:
        for _ in range(workers):
            pool.submit(worker_ready)
        return _build_audio(out_dir, options, pool, t0)


def _build_audio(out_dir: Path, options: BuildOptions, pool: WorkerPool, t0: float) -> dict[str, Any]:
    from dataset_builder.hf_dataset import write_config
    from dataset_builder.ifeval.card import write_ifeval_card
    from dataset_builder.ifeval.rows import ifeval_features, item_to_row

    backend, grid, info = composed(options)
    units = audio_units(grid)
    clips = speech_clips(units)
    # Items in flight: enough clips (~0.4 s each) that the workers stay busy while this process writes a shard.
    spoken = spoken_units(units, clips, pool.ordered_map(speak_clip, clips, window=CLIPS_IN_FLIGHT * pool.workers))
    bank = load_texts()
    progress = Progress(f"build ifeval ({pool.workers} worker{'s' * (pool.workers > 1)})", len(units),
                        enabled=options.progress)
    progress.start(f"{len(clips)} speech clips")  # at once: the first stream waits for the workers' start-up
    features = ifeval_features()
    configs = {BENCHMARK: {"features": features}}
    n_matched = sum(c.matched_audio for c in grid.cases)
    matched_rows: list[dict[str, Any]] = []  # small: 102 rows of ~25 s on the full grid
    totals = {"audio_s": 0.0}

    def rows() -> Iterator[dict[str, Any]]:
        streams: dict[str, tuple[bytes, Turns, dict[str, tuple[float, float]]]] = {}
        for conv in grid.conversations:
            key = conv.stream_id
            if key not in streams:
                unit, turns = next(spoken)
                if unit.stream_id != key:
                    raise RuntimeError(f"audio units out of grid order at {key}")
                audio, clips = nominal_audio(turns)
                totals["audio_s"] += len(audio) / SESSION_SR
                streams[key] = (wav_bytes(audio), turns, clips)
                progress.advance(note=key)
            data, turns, clips = streams[key]
            timed = TimedConversation(conv, {tid: timing for tid, (_, timing) in turns.items()})
            for case in grid.cases_of(conv):
                item = IFEvalItem(case, timed, clips, bank.roles[conv.role].persona, backend.name)
                row = item_to_row(item, data, bank.roles[conv.role].directive)
                if case.matched_audio:
                    matched_rows.append(row)
                    if len(matched_rows) == n_matched:
                        # Written as soon as it is complete (R1-R3 come first), while the workers still speak.
                        write_config(out_dir, MATCHED_CONFIG, matched_rows, features, shard_size=SHARD_ROWS)
                        configs[MATCHED_CONFIG] = {"features": features}
                yield row
            if not conv.matched_group:
                del streams[key]  # matched streams stay: the other two roles reuse their bytes

    write_config(out_dir, BENCHMARK, rows(), features, shard_size=SHARD_ROWS)
    write_ifeval_card(out_dir, configs, grid, bank, options, backend.name, GENERATOR_VERSION)
    info.update(audio_hours=round(totals["audio_s"] / 3600, 3), n_speech_clips=len(clips), workers=pool.workers,
                configs=sorted(configs), build_s=round(time.perf_counter() - t0, 1))
    log.info("built %d IFEval cases from %d audio streams (%d distinct clips, %.2f h) in %.1fs with %d worker(s)",
             len(grid.cases), len(units), len(clips), totals["audio_s"] / 3600, info["build_s"], pool.workers)
    return info
