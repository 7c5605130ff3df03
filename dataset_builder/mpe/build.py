"""Build the Duplex-MPE dataset folder: scripts -> TTS per turn -> nominal timeline -> parquet + card.

Deterministic: the same seed and TTS backend give identical scripts, timings and audio bytes, whatever the number
of workers. Synthesis runs in a process pool (`options.workers`, default one per core; see dataset_builder.pool):
the unit of work is one scenario pair, whose turns a worker speaks and returns as arrays (`speak_pair`); this
process takes the pairs back in script order, places them on the timeline and streams them into parquet shards. With
`options.scripts_only` only `scripts.jsonl` is written, from the same scripts, and nothing is synthesised.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import round_ms
from dataset_builder.audio import SESSION_SR, silence, wav_bytes
from dataset_builder.build import (
    START_S,
    BuildOptions,
    build_estimate_s,
    tts_backend,
    uncached_clips,
    unit_tts,
    write_scripts,
)
from dataset_builder.pool import WorkerPool, resolve_workers
from dataset_builder.progress import Progress
from dataset_builder.schema import Case, Clip, Script, Turn
from dataset_builder.segments import render_turn
from dataset_builder.speech_gate import GateReport, SpeechGate, TurnCheck, gate_record, render_turn_checked
from dataset_builder.tts import TTSBackend

log = logging.getLogger("duplex_eval.build")

PRESETS = {"mini": 6, "full": 2000}  # scenario pairs; each gives an explicit and an implicit conversation
GAP_RANGE_S = (0.4, 1.2)  # seeded inter-turn gap on the nominal timeline (docs/benchmarks/mpe.md)
NOMINAL_POST_PREAMBLE_S = 1.0
NOMINAL_TAIL_S = 1.0
GENERATOR_VERSION = "mpe-templates-1"
SHARD_ROWS = 100  # ~60 s of 24 kHz PCM16 per row: ~300 MB of audio per shard in memory


def turn_gaps(seed: int, pair_id: str, n_turns: int) -> list[float]:
    """Gaps shared by both conditions of a pair, so the pair differs only where the scripts differ."""
    digest = hashlib.sha256(f"{seed}:{pair_id}:gaps".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return [round_ms(g) for g in rng.uniform(*GAP_RANGE_S, size=n_turns)]


# ------------------------------------------------------------------------------------ synthesis (workers)

@dataclass(frozen=True)
class _Voice:
    """What a worker synthesises with: the backend (sent to the worker as is) and the shared clip cache."""

    backend: TTSBackend
    cache_dir: Path | None
    gate: SpeechGate | None = None  # the build's speech gate (`options.speech_gate`), one copy per worker


_VOICE: _Voice | None = None  # set once per worker process by `start_speaking`


def start_speaking(backend: TTSBackend, cache_dir: Path | None, gate: SpeechGate | None = None) -> None:
    """The worker processes' initializer."""
    global _VOICE
    _VOICE = _Voice(backend, cache_dir, gate)


def _voice() -> _Voice:
    if _VOICE is None:
        raise RuntimeError("start_speaking() was not called in this process")
    return _VOICE


def speak_turn(turn: Turn, voice: str, tts: TTSBackend, gate: SpeechGate | None = None, names: list[str] | None = None,
               where: str = "") -> tuple[np.ndarray, TurnCheck | None]:
    """One turn's audio, as the dataset will hold it. With a speech gate, a turn whose addressed name, "Aria" or
    numbers the gate's ASR cannot recover is re-spoken slower or called out (dataset_builder.speech_gate); it runs
    inside the worker, and the build stays deterministic because the gate is."""
    if gate is None:
        return render_turn(turn, tts, voice), None
    return render_turn_checked(turn, tts, voice, gate, names=names or [], where=where)


def speak_script(script: Script, tts: TTSBackend, gate: SpeechGate | None = None
                 ) -> tuple[list[np.ndarray], list[TurnCheck]]:
    """Each turn's audio, in turn order, and the gate's record of each turn (none without a gate)."""
    voices = {s.name: s.voice for s in script.speakers}
    names = [s.name for s in script.speakers]
    spoken = [speak_turn(turn, voices[turn.speaker], tts, gate, names, f"{script.script_id} {turn.turn_id}")
              for turn in script.turns]
    return [audio for audio, _ in spoken], [check for _, check in spoken if check is not None]


def speak_pair(scripts: list[Script]) -> tuple[list[list[np.ndarray]], list[TurnCheck]]:
    """The unit of work: every turn of one pair's scripts, and the speech gate's records. Both conditions share
    most turns; one unit's cache memo synthesises those once (and the gate's cache checks them once)."""
    voice = _voice()
    tts = unit_tts(voice.backend, voice.cache_dir)
    audio, checks = [], []
    for script in scripts:
        script_audio, script_checks = speak_script(script, tts, voice.gate)
        audio.append(script_audio)
        checks += script_checks
    return audio, checks


def speak_preamble(text: str) -> np.ndarray:
    voice = _voice()
    return unit_tts(voice.backend, voice.cache_dir).synthesize(text, voice.backend.assistant_voice)  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------ assembly (this process)

def assemble_case(script: Script, turn_audio: list[np.ndarray], tts_name: str, preamble_text: str,
                  preamble: np.ndarray, seed: int) -> tuple[Case, np.ndarray]:
    """Place the preamble and each synthesized turn on the nominal 24 kHz timeline."""
    parts = [preamble, silence(NOMINAL_POST_PREAMBLE_S)]
    pos = len(preamble) + len(parts[1])
    clips: list[Clip] = []
    gaps = turn_gaps(seed, script.pair_id, len(script.turns))
    for turn, audio, gap in zip(script.turns, turn_audio, gaps, strict=True):
        gap_audio = silence(gap)
        pos += len(gap_audio)
        clips.append(Clip(turn.turn_id, round_ms(pos / SESSION_SR), round_ms((pos + len(audio)) / SESSION_SR), gap))
        parts += [gap_audio, audio]
        pos += len(audio)
    parts.append(silence(NOMINAL_TAIL_S))
    case = Case(case_id=script.script_id, benchmark="mpe", script=script, preamble_text=preamble_text,
                preamble_end_s=round_ms(len(preamble) / SESSION_SR), clips=clips, tts_backend=tts_name)
    case.validate()
    return case, np.concatenate(parts)


def warm_parquet_writer() -> None:
    """`datasets` imports torch and torchcodec at the first audio value it encodes (seconds of CPU). Called while
    the workers speak the first pairs, that happens alongside them rather than after the last pair of a small
    build (the first shard is written after SHARD_ROWS cases)."""
    from datasets import Audio

    Audio().encode_example(b"")


def script_clips(script: Script) -> set[tuple[str, str]]:
    """The (text, voice) clips speaking `script` synthesises at first attempt (`render_turn`)."""
    voices = {s.name: s.voice for s in script.speakers}
    return {(seg.text, voices[turn.speaker]) for turn in script.turns for seg in turn.speech_segments()
            if seg.kind == "speech"}


def pairs_of(scripts: list[Script]) -> list[list[Script]]:
    """Consecutive scripts of one pair, in script order: the units of work."""
    return [list(group) for _, group in itertools.groupby(scripts, key=lambda s: s.pair_id)]


def script_counts(script: Script) -> list[str]:
    """What the build statistics count for one script: its condition, T position, task and each turn's label."""
    return [f"condition:{script.condition}", f"t_position:{script.t_position}", f"task:{script.task_type}",
            *(f"label:{t.label}" for t in script.turns)]


def build_scripts_only(out_dir: Path, options: BuildOptions) -> dict[str, Any]:
    """Write `out_dir/scripts.jsonl`: the scripts a full build with these options would speak, no audio."""
    from dataset_builder.mpe.writer import compose_scripts

    t0 = time.perf_counter()
    n_pairs = options.size(PRESETS)
    backend = tts_backend(options)
    scripts, writer = compose_scripts(n_pairs, options, backend.voices())
    path = write_scripts(Path(out_dir), scripts)
    stats = Counter(c for script in scripts for c in script_counts(script))
    info = {"preset": options.preset, "seed": options.seed, "n_pairs": n_pairs, "n_scripts": len(scripts),
            "tts_backend": backend.name, "generator": GENERATOR_VERSION, "writer": writer.summary(),
            "scripts": str(path), "counts": dict(sorted(stats.items())),
            "build_s": round(time.perf_counter() - t0, 1)}
    log.info("wrote %d MPE scripts to %s in %.1fs (no audio)", len(scripts), path, info["build_s"])
    return info


def build(out_dir: Path, options: BuildOptions | None = None) -> dict[str, Any]:
    """Write `out_dir/data/mpe/*.parquet` and `out_dir/README.md` (or only `out_dir/scripts.jsonl` with
    `options.scripts_only`); returns build statistics."""
    options = options or BuildOptions()
    if options.scripts_only:
        return build_scripts_only(Path(out_dir), options)
    from dataset_builder.hf_dataset import MPE_FEATURES, mpe_card_context, write_card, write_config
    from dataset_builder.mpe.preamble import duty_preamble
    from dataset_builder.mpe.writer import card_record, compose_scripts
    from dataset_builder.rows import case_to_row

    t0 = time.perf_counter()
    n_pairs = options.size(PRESETS)
    backend = tts_backend(options)
    workers = resolve_workers(options.workers, n_pairs)
    preamble_text = duty_preamble()
    stats: Counter[str] = Counter()
    totals = {"cases": 0, "audio_s": 0.0}

    gate = GateReport(options.speech_gate.name) if options.speech_gate is not None else None

    def rows(pairs: list[list[Script]], progress: Progress, preamble_job: Future[np.ndarray],
             spoken: Iterator[tuple[list[list[np.ndarray]], list[TurnCheck]]]) -> Iterator[dict[str, Any]]:
        # A generator: write_config holds one shard of rows in memory at a time, and the pool at most a few
        # pairs' audio beyond it.
        for pair, (pair_audio, checks) in zip(pairs, spoken, strict=True):
            if gate is not None:
                gate.add(checks)
            preamble = preamble_job.result()
            for script, turn_audio in zip(pair, pair_audio, strict=True):
                case, audio = assemble_case(script, turn_audio, backend.name, preamble_text, preamble, options.seed)
                totals["cases"] += 1
                totals["audio_s"] += len(audio) / SESSION_SR
                stats.update(script_counts(script))
                progress.advance(note=case.case_id)
                yield case_to_row(case, wav_bytes(audio))

    out_dir = Path(out_dir)
    # Two scripts (explicit, implicit) per pair: the line shows from the first second, before the scripts exist.
    progress = Progress(f"build mpe ({workers} worker{'s' * (workers > 1)})", 2 * n_pairs, enabled=options.progress)
    progress.start(f"starting {workers} worker{'s' * (workers > 1)}, composing scripts")
    with WorkerPool(workers, start_speaking, (backend, options.cache_dir, options.speech_gate)) as pool:
        # The preamble goes first, so the workers start (spawn, imports, model load) while the scripts are
        # composed; then the first pairs, so they are busy while this process loads the parquet writer.
        preamble_job = pool.submit(speak_preamble, preamble_text)
        scripts, writer = compose_scripts(n_pairs, options, backend.voices())
        pairs = pairs_of(scripts)
        progress.total = len(scripts)
        clips = {clip for script in scripts for clip in script_clips(script)}
        clips.add((preamble_text, backend.assistant_voice))  # type: ignore[attr-defined]
        missing = uncached_clips(backend, options.cache_dir, clips)
        progress.start(f"{missing} of {len(clips)} clips to synthesise"
                       + (", each checked by the speech gate" if options.speech_gate is not None else ""),
                       estimate_s=build_estimate_s(missing, len(scripts), workers, options.speech_gate is not None),
                       startup_s=START_S)
        spoken = pool.ordered_map(speak_pair, pairs)
        warm_parquet_writer()
        write_config(out_dir, "mpe", rows(pairs, progress, preamble_job, spoken), MPE_FEATURES,
                     shard_size=SHARD_ROWS)
    audio_s = totals["audio_s"]
    info = {"preset": options.preset, "seed": options.seed, "n_pairs": n_pairs, "n_cases": totals["cases"],
            "tts_backend": backend.name, "generator": GENERATOR_VERSION, "writer": writer.summary(),
            "audio_hours": round(audio_s / 3600, 3), "counts": dict(sorted(stats.items()))}
    # No wall time in the card: the folder stays byte-identical for a given seed and backend.
    context = mpe_card_context(out_dir, "mpe", build_seed=options.seed, generator_version=GENERATOR_VERSION,
                               build_params={"preset": options.preset, "n_pairs": n_pairs,
                                             "tts": backend.name, "gap_range_s": list(GAP_RANGE_S),
                                             "writer": card_record(writer),
                                             "speech_gate": gate_record(options.speech_gate)})
    write_card(out_dir, {"mpe": {"features": MPE_FEATURES}}, context=context)
    info["build_s"] = round(time.perf_counter() - t0, 1)
    info["workers"] = workers
    if gate is not None:
        for line in gate.lines():
            log.info("%s", line)
        info["speech_gate"] = gate.to_dict()
    log.info("built %d MPE cases (%.2f h audio) in %.1fs with %d worker(s)", totals["cases"], audio_s / 3600,
             info["build_s"], workers)
    return info
