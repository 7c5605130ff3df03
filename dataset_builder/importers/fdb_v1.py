"""Full-Duplex-Bench v1 interop (docs/interop.md): its per-sample layout, its tasks in our events, and the import of its
sample folders as one of our `m3_*` configs: `duplex-eval import fdb FOLDER --out DIR`.

Their layout (the v1.0 release, `DanielLin94144/Full-Duplex-Bench`, `v1_v1.5/`; one folder per sample)::

    {task folder}/{ID}/input.wav          the user's speech, mono (16 kHz; 48 kHz for Candor pause handling)
    {task folder}/{ID}/pause.json         pause handling: [{"text": "[PAUSE]", "timestamp": [s, e]}], the pause
    {task folder}/{ID}/turn_taking.json   smooth turn-taking: [{"text": "[TURN-TAKING]", "timestamp": [s, e]}]: s
                                          the end of the user's turn (their scorer measures latency from it), e
                                          where the other speaker took over in the source conversation
    {task folder}/{ID}/interrupt.json     user interruption: [{"context", "interrupt", "timestamp": [s, e]}], the
                                          interrupting utterance (their ASR transcribes the output after e)
    {task folder}/{ID}/transcription.json optional: the input's words with their times
    {task folder}/{ID}/context.wav        optional (user interruption): the context utterance alone

A model writes `{ID}/output.wav` beside `input.wav`, time-aligned with it and as long; their `get_transcript/asr.py`
turns it into `output.json` (words with times) and `evaluation/evaluate.py --task TASK` scores a task folder.

Their tasks in our events (one definition, `dataset_builder/rules/fdb_tasks.py`, shared with the run export):

| FDB v1 task (file) | our event | s, t |
|---|---|---|
| smooth_turn_taking (`turn_taking.json`) | SHIFT | s = timestamp[0] (the user's turn end), t = timestamp[1] |
| pause_handling (`pause.json`) | PAUSE | s, t = the pause |
| user_interruption (`interrupt.json`) | BARGE_IN | s, t = the interrupting utterance |

Left out, counted by reason: FDB v1's **backchannel** task (`icc_backchannel`, no annotation file) scores the
model's *own* backchannels while the user holds a long turn, against a reference distribution per sample; our BC
is the *user's* backchannel during the model's turn (FDB v1.5's user_backchannel). v1.5 samples (`metadata.json`)
are not v1.

Each annotated span becomes one row (an event, run under the conditions M3 runs it in) whose audio is the sample's
input on channel 0 and silence on channel 1 (FDB has no system side), at 24 kHz, on the **input's clock**: clip
time 0 is input time 0, so every time in a row is FDB's own time. The regions follow our definitions
(`DESIGN.md`): W = [s, s + 10 s) (the input is cut or zero-padded to s + 10 s, and in W the plan keeps the user
audio only inside [s, t]); b (the start of P) is found from `transcription.json`'s words (IPUs split at silences
> 0.5 s; SHIFT: the user TURN ending at s; PAUSE: walked back through the user's pauses) and is 0 without words;
C = [0, b). Under `user` a model hears the input from 0, as in FDB; `none` starts at b; `full` forces the model
channel to the (silent) system side before s. Words give the utterances and a SHIFT's question; FDB has no
reference reply, so SHIFT rows are `transcribed = False` (no content reference), as are rows without words.

Malformed input is a one-line error naming the file (not JSON, no timestamp, a time outside the audio, input not
mono), found before anything is written.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from dataset_builder.atomic import whole_ms
from dataset_builder.audio import SESSION_SR, resample, wav_bytes
from dataset_builder.errors import UsageError
from dataset_builder.importers import common
from dataset_builder.m3.schema import (
    CONTEXT_S,
    EVENT_CONDITIONS,
    EVENT_TYPES,
    WINDOW_S,
    M3Event,
    Utterance,
    config_name,
)
from dataset_builder.rules.fdb_tasks import EVENT_OF_FILE, LAYOUT, LEFT_OUT_EVENTS, TASKS
from dataset_builder.rules.m3_events import TURN, Event, EventParams, Ipu, Word, _join, ipus_from_words, prompt_start
from dataset_builder.schema import SchemaError

SHARD_ROWS = 32
CARD_TEMPLATE = common.CARDS / "fdb_import.md"
CARD_METADATA = {
    "pretty_name": "Full-Duplex-Bench v1 samples as M3-DuplexBench events (imported)",
    "license": "cc-by-nc-4.0",  # FDB's data licence (their dataset README); the source corpora's terms apply too
    "annotations_creators": ["found"],
    "language_creators": ["found"],
    "source_datasets": ["extended"],
    "tags": ["full-duplex", "spoken-dialogue", "turn-taking", "pause-handling", "interruption", "benchmark"],
}

NO_ANNOTATION = "no annotation file (icc_backchannel: FDB v1 scores the model's own backchannels, no user event)"
V15 = "a v1.5 sample (metadata.json), not v1"
SHIFT_TOO_EARLY = "turn_taking.json timestamp[1] more than 0.4 s before timestamp[0] (not a SHIFT by our rule)"
EMPTY_SPAN = "a pause / interruption that ends where it starts or earlier"
_PARAMS = EventParams()
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _bad(where: Path | str, message: str, fld: str | None = None) -> SchemaError:
    return SchemaError(message, source=str(where), field=fld)


# ------------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Span:
    """One annotated entry of a sample's task file, times in whole milliseconds on the input's clock."""

    event_type: str
    s_ms: int
    t_ms: int
    context: str = ""  # interrupt.json only
    interrupt: str = ""


@dataclass(frozen=True)
class Sample:
    sample_id: str  # our dialogue id: the folder's path under the imported folder, '-' joined
    folder: Path
    sample_rate: int
    frames: int
    task_file: str | None
    spans: tuple[Span, ...]
    words: tuple[Word, ...] | None
    context_wav_s: float | None

    @property
    def duration_ms(self) -> int:
        return common.audio_ms(self.frames, self.sample_rate)


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _bad(path, f"not readable JSON ({type(err).__name__}: {err})") from None


def read_spans(path: Path, duration_ms: int) -> list[Span]:
    """A task file's entries ([{..., "timestamp": [s, e]}, ...]) as spans of its event type."""
    event_type = EVENT_OF_FILE[path.name]
    data = _load_json(path)
    if not isinstance(data, list) or not data:
        raise _bad(path, "expected a non-empty list of {\"timestamp\": [start, end], ...}")
    out = []
    for i, item in enumerate(data):
        ts = item.get("timestamp") if isinstance(item, dict) else None
        if not (isinstance(ts, list) and len(ts) == 2 and all(_number(x) for x in ts)):
            raise _bad(path, f"expected [start, end] in seconds, got {json.dumps(ts)[:80]}", f"[{i}].timestamp")
        s, t = whole_ms(ts[0]), whole_ms(ts[1])
        if min(s, t) < 0 or max(s, t) > duration_ms + common.TIME_SLACK_MS:
            raise _bad(path, f"[{ts[0]:g}, {ts[1]:g}] s is outside input.wav (0 to {duration_ms / 1000:g} s)",
                       f"[{i}].timestamp")
        texts = {k: item.get(k, "") for k in ("context", "interrupt")} if event_type == "BARGE_IN" else {}
        if any(not isinstance(v, str) for v in texts.values()):
            raise _bad(path, "context and interrupt must be text", f"[{i}]")
        out.append(Span(event_type, s, t, **texts))
    return out


def _word_items(data: Any) -> Iterator[tuple[str, Any]]:
    """Every {"text", "timestamp"} record anywhere in a transcription file: the released files nest them in
    lists (per speaker, under "item" or "chunks") or give them flat."""
    if isinstance(data, dict):
        if isinstance(data.get("text"), str) and "timestamp" in data:
            yield data["text"], data["timestamp"]
        for v in data.values():
            if isinstance(v, list | dict):
                yield from _word_items(v)
    elif isinstance(data, list):
        for v in data:
            yield from _word_items(v)


def read_transcription(path: Path) -> tuple[Word, ...]:
    """`transcription.json`'s words on channel 0; bracketed markers ("[PAUSE]") and untimed words are left out."""
    words = []
    for text, ts in _word_items(_load_json(path)):
        text = text.strip()
        if not text or (text.startswith("[") and text.endswith("]")):
            continue
        if not (isinstance(ts, list) and len(ts) == 2 and _number(ts[0])):
            continue
        end = ts[1] if _number(ts[1]) else ts[0]
        if end < ts[0]:
            raise _bad(path, f"the word {text!r} ends at {end:g} s, before it starts ({ts[0]:g} s)")
        words.append(Word(0, float(ts[0]), float(end), text))
    return tuple(sorted(words, key=lambda w: (w.start_s, w.end_s)))


def _sample_id(folder: Path, root: Path) -> str:
    rel = folder.relative_to(root).parts or (folder.name,)
    return "-".join(_SAFE.sub("_", p).strip("_") or "_" for p in rel)


def read_folder(root: Path | str) -> list[Sample]:
    """Every sample folder (one holding `input.wav`) under `root`, or `root` itself, checked without decoding
    audio."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder of Full-Duplex-Bench samples")
    folders = sorted({p.parent for p in root.rglob("input.wav")})
    if not folders:
        raise UsageError(f"no sample under {root}: FDB v1 keeps each sample in {{ID}}/input.wav")
    out, seen = [], {}
    for folder in folders:
        sid = _sample_id(folder, root)
        if sid in seen:
            raise _bad(folder, f"its id {sid!r} is also {seen[sid]}'s")
        seen[sid] = folder
        wav = folder / "input.wav"
        try:
            info = sf.info(str(wav))
        except RuntimeError as err:  # soundfile.LibsndfileError
            raise _bad(wav, f"not a readable audio file ({' '.join(str(err).split())})") from None
        if info.channels != 1:
            raise _bad(wav, f"{info.channels} channels; FDB's input.wav is the user alone, mono")
        duration_ms = common.audio_ms(int(info.frames), int(info.samplerate))
        present = [f for f in EVENT_OF_FILE if (folder / f).is_file()]
        if len(present) > 1:
            raise _bad(folder, f"holds {' and '.join(present)}; an FDB v1 sample has one task file")
        task_file = present[0] if present else None
        spans = tuple(read_spans(folder / task_file, duration_ms)) if task_file else ()
        words = read_transcription(folder / "transcription.json") if (folder / "transcription.json").is_file() \
            else None
        ctx = folder / "context.wav"
        context_s = sf.info(str(ctx)).duration if ctx.is_file() else None
        out.append(Sample(sid, folder, int(info.samplerate), int(info.frames), task_file, spans, words, context_s))
    return out


# ------------------------------------------------------------------------------------------------ rows


def _turn_pauses(turns: Sequence[Ipu]) -> list[Event]:
    """The user's PAUSEs: the gaps between consecutive user TURNs (FDB has no other party whose turn could
    come between)."""
    return [Event("PAUSE", a.end_s, b.start_s, 0, 1, a.start_s) for a, b in zip(turns, turns[1:], strict=False)]


def _utterances(ipus: Sequence[Ipu], w_ms: int) -> tuple[Utterance, ...]:
    return tuple(Utterance(f"u{k:03d}", "user", "turn" if i.kind == TURN else "bc", i.text, i.start_s, i.end_s)
                 for k, i in enumerate(ipus) if whole_ms(i.start_s) < w_ms and i.end_s > i.start_s)


def sample_events(sample: Sample, language: str, domain: str) -> list[tuple[M3Event, int]]:
    """One validated M3Event per annotated span, with the clip start τ (ms, input clock; 0 unless b > L)."""
    ipus = list(ipus_from_words(sample.words, _PARAMS)[0]) if sample.words else []
    turns = [i for i in ipus if i.kind == TURN]
    pauses = _turn_pauses(turns)
    out = []
    for k, span in enumerate(sample.spans):
        s, t = span.s_ms / 1000, span.t_ms / 1000
        if span.event_type in ("SHIFT", "PAUSE"):  # without words the whole input before s is the user's turn
            b = prompt_start(Event(span.event_type, s, t, 0, 1, s), turns, pauses) if turns else 0.0
        else:
            b = s
        tau_ms = 0 if b <= CONTEXT_S else whole_ms(min((i.start_s for i in ipus if i.end_s > b - CONTEXT_S), default=b))
        w_ms = span.s_ms + whole_ms(WINDOW_S)
        if ipus:
            utts = _utterances(ipus, w_ms)
        else:  # no words: what the task file says
            utts = ()
            if span.event_type == "BARGE_IN":
                ctx = (Utterance("u000", "user", "turn", span.context, 0.0, round(sample.context_wav_s, 3)),) \
                    if span.context and sample.context_wav_s and whole_ms(sample.context_wav_s) <= span.s_ms else ()
                utts = (*ctx, Utterance(f"u{len(ctx):03d}", "user", "turn", span.interrupt, s, t))
        question = _join([u.text for u in utts if b - 1e-9 <= u.start_s < s]) if span.event_type == "SHIFT" else ""
        transcribed = span.event_type != "SHIFT" and bool(utts) and all(u.text for u in utts)
        shift = -tau_ms / 1000
        event = M3Event(
            event_id=f"{sample.sample_id}-e{k:02d}", dialogue_id=sample.sample_id, language=language, domain=domain,
            event_type=span.event_type, prompt_start_s=round(b + shift, 3), event_start_s=round(s + shift, 3),
            event_end_s=round(t + shift, 3), window_end_s=round(s + shift + WINDOW_S, 3),
            dialogue_offset_s=tau_ms / 1000, question=question, transcribed=transcribed,
            utterances=tuple(Utterance(u.utt_id, u.speaker, u.kind, u.text, round(max(u.start_s + shift, 0.0), 3),
                                       round(u.end_s + shift, 3)) for u in utts if u.end_s + shift > 0))
        try:
            event.validate()
        except SchemaError as err:
            raise _bad(sample.folder / (sample.task_file or ""), f"cannot make a row of it ({err})") from None
        out.append((event, tau_ms))
    return out


def _skip_reason(span: Span) -> str | None:
    if span.event_type == "SHIFT" and span.t_ms < span.s_ms - whole_ms(_PARAMS.shift_overlap_max_s):
        return SHIFT_TOO_EARLY
    if span.event_type in ("PAUSE", "BARGE_IN") and span.t_ms <= span.s_ms:
        return EMPTY_SPAN
    return None


def input_audio(sample: Sample) -> np.ndarray:
    """input.wav as (n, 2) float32 at 24 kHz: the user on channel 0, channel 1 silent (FDB has no system side)."""
    x, sr = sf.read(str(sample.folder / "input.wav"), dtype="float32", always_2d=False)
    user = resample(np.asarray(x, np.float32), int(sr), SESSION_SR)
    return np.column_stack([user, np.zeros_like(user)])


# ------------------------------------------------------------------------------------------------ import


def import_fdb(folder: Path | str, out: Path | str, *, language: str = "en", domain: str = "chat") -> dict[str, Any]:
    """Import every FDB v1 sample under `folder` (module doc) as the config `m3_{domain}_{language}` of the
    dataset folder `out`; returns the summary also written to `out/import/{config}.json`."""
    from dataset_builder.m3.rows import event_to_row

    folder, out = Path(folder), Path(out)
    common.check_language_domain(language, domain)
    common.check_out(out, LAYOUT)
    samples = read_folder(folder)
    skipped: Counter[str] = Counter()
    plans: list[tuple[Sample, list[tuple[M3Event, int]]]] = []
    for sample in samples:
        if sample.task_file is None:
            skipped[V15 if (sample.folder / "metadata.json").is_file() else NO_ANNOTATION] += 1
            continue
        kept = [sp for sp in sample.spans if _skip_reason(sp) is None]
        skipped.update(r for sp in sample.spans if (r := _skip_reason(sp)))
        if kept:
            plans.append((sample, sample_events(Sample(**{**sample.__dict__, "spans": tuple(kept)}), language,
                                                domain)))
    n_rows = sum(len(events) for _, events in plans)
    if not n_rows:
        raise UsageError(f"{folder}: no sample with a pause.json, turn_taking.json or interrupt.json to import "
                         f"(skipped: {dict(skipped)})")
    config = config_name(language, domain)
    audio_s = 0.0

    def rows() -> Iterator[dict[str, Any]]:
        nonlocal audio_s
        for sample, events in plans:
            audio = input_audio(sample)
            for event, tau in events:
                x = common.window(audio, tau, tau + whole_ms(event.window_end_s))
                audio_s += x.shape[0] / SESSION_SR
                yield event_to_row(event, wav_bytes(x))

    def summary() -> dict[str, Any]:
        events = Counter(e.event_type for _, evs in plans for e, _ in evs)
        return {
            "source": str(folder.resolve()), "layout": LAYOUT, "config": config, "language": language,
            "domain": domain, "samples": len(samples), "sample_rates": sorted({s.sample_rate for s in samples}),
            "with_transcription": sum(s.words is not None for s in samples),
            "task_files": dict(sorted(Counter(s.task_file or "(none)" for s in samples).items())),
            "rows": n_rows, "events": {t: events.get(t, 0) for t in EVENT_TYPES},
            "cases": {t: events.get(t, 0) * len(EVENT_CONDITIONS[t]) for t in EVENT_TYPES},
            "untranscribed_rows": sum(not e.transcribed for _, evs in plans for e, _ in evs),
            "row_audio_s": round(audio_s, 3), "skipped": dict(sorted(skipped.items())),
        }

    return common.write_import(out, config, rows(), SHARD_ROWS, summary=summary, write_card=write_card)


def write_card(out: Path) -> None:
    """`out/README.md` for every config imported into `out` from FDB samples."""
    from dataset_builder.card_tables import md_table

    summaries = common.imported_summaries(out)
    sources = md_table(["config", "source folder", "samples", "task files", "sample rates (Hz)",
                        "with transcription.json"],
                       [[f"`{s['config']}`", f"`{s['source']}`", s["samples"],
                         ", ".join(f"{k}: {v}" for k, v in s["task_files"].items()),
                         ", ".join(str(r) for r in s["sample_rates"]), s["with_transcription"]] for s in summaries])
    counts = md_table(["config", "event", "FDB task", "rows", "cases"],
                      [[f"`{s['config']}`", t, TASKS[t][0], s["events"][t], s["cases"][t]]
                       for s in summaries for t in TASKS])
    left = md_table(["config", "skipped", "samples or entries"],
                    [[f"`{s['config']}`", k, v] for s in summaries for k, v in s["skipped"].items()]
                    or [["-", "nothing", 0]])
    common.write_import_card(out, summaries, CARD_TEMPLATE, CARD_METADATA, {
        "sources_table": sources, "counts_table": counts, "left_out_table": left, "window_s": f"{WINDOW_S:g}",
        "bc_note": LEFT_OUT_EVENTS["BC"]})
