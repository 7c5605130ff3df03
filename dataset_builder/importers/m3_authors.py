"""Import the M3-DuplexBench authors' released data (docs/benchmarks/m3.md, "The authors' layout") as one of our `m3_*`
configs, so any adapter runs on their corpus: `duplex-eval import m3 DATA_DIR --out DIR`.

Their layout (`data/{lang}/{domain}/{dataset}/` in their repository; `nttcslab-sp/m3-duplexbench`)::

    DATA_DIR/{split}.jsonl        one dialogue a line: {"id", "events": {"0": [{"event": LABEL, "time": [a, b]}, ...],
                                  "1": [...]}}, LABEL one of TURN, TURN_SHIFT, TURN_HOLD, SHORTPAUSE, BC, BARGE_IN
    DATA_DIR/audio/{id}.wav       the dialogue, 2 channels (one party each), any sample rate
    DATA_DIR/txt_align/{id}.txt   optional: its words, `channel<TAB>start<TAB>end<TAB>word` a line

Their labels become ours as their own reader (`inference/events.py`) takes them:
- TURN [a, b] / BC [a, b] on channel X: an IPU of X, of that kind (the kind is theirs, not re-decided from the
  length); these are a row's utterances. A BC is also a BC event of X.
- TURN_SHIFT on X [a, b]: the other party's TURN ends at a and X's starts at b (b < a when they overlap): our SHIFT
  by the party that yields, 1 - X, with s = a, t = b.
- TURN_HOLD on X [a, b]: X's TURN ends at a, X's next starts at b: our PAUSE by X.
- BARGE_IN on X [a, b]: X's TURN starting at a cuts into the other's (which ends at b): our BARGE_IN by X, t = the
  end of X's TURN (their reader sets `event_end` the same way).
- SHORTPAUSE (a silence of at most 0.5 s inside a TURN) is ignored: the paper has no such event (its IPUs split
  only at silences > 0.5 s), and their code drops it with `--ignore-short-pause`. Counted in the summary.
The regions (b, τ(L), W) come from `events.evaluated_events`, so only events the user causes are rows, exactly as
for built data (DESIGN.md table); `user_channel` names the user (default 0; their `task` toy data has the asking
party on channel 1). Row audio is ch0 user, ch1 system, 24 kHz, cut to [τ(L), s + Δ) and zero-padded past the end;
times are whole milliseconds on the clip clock.

Their code keeps only events whose system state fits (a SHIFT or PAUSE while the system is in a TURN is dropped);
the paper and we keep overlapping SHIFTs (docs/benchmarks/m3.md, difference 6). Labels our definitions cannot evaluate
are skipped and counted by reason, never silently: a TURN_SHIFT / TURN_HOLD without the TURNs it joins, a TURN_SHIFT
overlapping by more than 0.4 s (a BARGE_IN by the paper's rule), a BARGE_IN without its TURN or with no TURN of the
other party under way, a BC outside the system's TURNs.

Texts come from `txt_align` (each word given to the IPU holding its midpoint); a row with an utterance, question or
reply the words do not cover is written with `transcribed = False` (schema.py), the only rows allowed empty texts.
Their data has no gold answers (QA accuracy is then not computed), voices or TTS backend: those stay empty.

Malformed input is a one-line error naming the file, line and field (bad JSON, unknown label, a time out of range,
a missing WAV, a WAV without 2 channels), found before anything is written; the config's shards are swapped in only
when all are complete (`hf_dataset.write_config`), then `OUT/import/{config}.json` (what was imported, counts) and
the card `OUT/README.md` (every imported config of OUT) are written atomically.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from dataset_builder.atomic import whole_ms
from dataset_builder.audio import SESSION_SR, resample, wav_bytes
from dataset_builder.errors import UsageError
from dataset_builder.importers import common
from dataset_builder.m3.language import LANGUAGES as LANGUAGE_RULES
from dataset_builder.m3.schema import (
    CONTEXT_S,
    DOMAINS,
    EVENT_CONDITIONS,
    EVENT_TYPES,
    LANGUAGES,
    WINDOW_S,
    M3Event,
    Utterance,
    config_name,
)
from dataset_builder.rules.m3_events import (
    BC,
    TURN,
    Event,
    EventParams,
    EventRegions,
    Ipu,
    Word,
    _join,
    evaluated_events,
    extract_events,
    prompt_start,
    read_words,
)
from dataset_builder.schema import SchemaError

LABELS = ("TURN", "TURN_SHIFT", "TURN_HOLD", "SHORTPAUSE", "BC", "BARGE_IN")
EVENT_OF = {"TURN_SHIFT": "SHIFT", "TURN_HOLD": "PAUSE", "BC": "BC", "BARGE_IN": "BARGE_IN"}
LAYOUT = "M3-DuplexBench authors' release"
SHARD_ROWS = 16  # rows hold up to ~130 s of 2-channel PCM16 (~12 MB)
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # ids become file names ({case_id}.wav)
CARD_TEMPLATE = common.CARDS / "m3_import.md"
CARD_METADATA = {
    "pretty_name": "M3-DuplexBench (imported from the authors' released data)",
    "license": "other",  # the source corpus's terms apply, not ours (see the card)
    "annotations_creators": ["found"],  # their event labels and word alignments, as released
    "language_creators": ["found"],  # their recordings
    "source_datasets": ["extended"],
    "tags": ["full-duplex", "spoken-dialogue", "turn-taking", "backchannel", "barge-in", "benchmark"],
}
_PARAMS = EventParams()
_OVERLAP_MAX_MS = whole_ms(_PARAMS.shift_overlap_max_s)

# Skip reasons (summary keys); each is a label our definitions cannot evaluate.
NO_TURNS = "TURN_SHIFT / TURN_HOLD without a TURN ending at its start and one starting at its end"
OVERLAP = f"TURN_SHIFT overlapping by more than {_PARAMS.shift_overlap_max_s:g} s (a BARGE_IN by the paper's rule)"
NO_BARGE_TURN = "BARGE_IN without a TURN of its channel starting at it"
NO_HOST = "BARGE_IN with no TURN of the other party under way"
BC_OUTSIDE = "user BC outside the system's TURNs (not evaluated, DESIGN.md)"


# ------------------------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class Label:
    """One of their annotated events, times in whole milliseconds."""

    channel: int
    label: str
    a_ms: int
    b_ms: int


@dataclass(frozen=True)
class Dialogue:
    """One line of `{split}.jsonl`, checked against its WAV and (when there is one) its words."""

    dialogue_id: str
    where: str  # "{jsonl}:{line}"
    labels: tuple[Label, ...]
    wav: Path
    sample_rate: int
    frames: int
    words: tuple[Word, ...] | None  # None: no txt_align file for it

    @property
    def duration_ms(self) -> int:
        return common.audio_ms(self.frames, self.sample_rate)


def _bad(where: str, fld: str | None, message: str) -> SchemaError:
    return SchemaError(message, source=where, field=fld)


def _time(value: Any, where: str, fld: str) -> tuple[int, int]:
    ok = isinstance(value, list) and len(value) == 2 and all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value)
    if not ok:
        raise _bad(where, fld, f"expected [start, end] in seconds, got {json.dumps(value)[:80]}")
    return whole_ms(value[0]), whole_ms(value[1])


def _labels(events: Any, where: str, duration_ms: int) -> list[Label]:
    if not isinstance(events, dict):
        raise _bad(where, "events", "expected an object {\"0\": [...], \"1\": [...]}")
    out: list[Label] = []
    for key, items in events.items():
        if key not in ("0", "1"):
            raise _bad(where, f"events.{key}", "channel keys are \"0\" and \"1\"")
        if not isinstance(items, list):
            raise _bad(where, f"events.{key}", "expected a list of events")
        for i, item in enumerate(items):
            fld = f"events.{key}[{i}]"
            if not isinstance(item, dict):
                raise _bad(where, fld, "expected an object {\"event\", \"time\"}")
            label = item.get("event")
            if label not in LABELS:
                raise _bad(where, f"{fld}.event", f"unknown event {label!r}; their labels are {', '.join(LABELS)}")
            a, b = _time(item.get("time"), where, f"{fld}.time")
            if min(a, b) < 0 or max(a, b) > duration_ms + common.TIME_SLACK_MS:
                raise _bad(where, f"{fld}.time", f"[{a / 1000:g}, {b / 1000:g}] s is outside the audio "
                                                 f"(0 to {duration_ms / 1000:g} s)")
            # A TURN_SHIFT's end is the taker's start, before its start when they overlap; a SHORTPAUSE may be 0.
            if (label != "TURN_SHIFT" and b < a) or (label not in ("TURN_SHIFT", "SHORTPAUSE") and b == a):
                raise _bad(where, f"{fld}.time", f"{label} [{a / 1000:g}, {b / 1000:g}] s ends before it starts")
            out.append(Label(int(key), label, a, b))
    return out


def _wav_info(wav: Path, where: str) -> tuple[int, int]:
    if not wav.is_file():
        raise _bad(where, "id", f"no audio file {wav}")
    try:
        info = sf.info(str(wav))
    except RuntimeError as err:  # soundfile.LibsndfileError
        raise _bad(str(wav), None, f"not a readable audio file ({' '.join(str(err).split())})") from None
    if info.channels != 2:
        raise _bad(str(wav), None, f"{info.channels} channel(s); an M3 dialogue has 2 (one party each)")
    return int(info.samplerate), int(info.frames)


def _words(path: Path, duration_ms: int) -> tuple[Word, ...]:
    words = read_words(path)
    late = next((w for w in words if whole_ms(w.end_s) > duration_ms + common.TIME_SLACK_MS), None)
    if late is not None:
        raise _bad(str(path), "end", f"the word {late.text!r} ends at {late.end_s:g} s, after the audio's end "
                                     f"({duration_ms / 1000:g} s)")
    return tuple(words)


def read_split(data_dir: Path, split: str = "test") -> list[Dialogue]:
    """Every dialogue of `DATA_DIR/{split}.jsonl`, checked (labels, times, WAV, words) without decoding audio."""
    data_dir = Path(data_dir)
    jsonl = data_dir / f"{split}.jsonl"
    if not jsonl.is_file():
        found = sorted(p.name for p in data_dir.glob("*.jsonl")) if data_dir.is_dir() else []
        raise UsageError(f"{jsonl} does not exist (the authors' layout has DATA_DIR/{{split}}.jsonl; found "
                         f"{', '.join(found) or 'no .jsonl'} in {data_dir})")
    out: list[Dialogue] = []
    seen: dict[str, str] = {}
    for n, line in enumerate(jsonl.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{jsonl}:{n}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise _bad(where, None, f"not JSON ({err})") from None
        if not isinstance(record, dict):
            raise _bad(where, None, "expected an object {\"id\", \"events\"}")
        did = record.get("id")
        if not isinstance(did, str) or not SAFE_ID.fullmatch(did):
            raise _bad(where, "id", f"{did!r} is not an id (letters, digits, '.', '_', '-'; it names audio/{{id}}.wav)")
        if did in seen:
            raise _bad(where, "id", f"{did!r} is also on {seen[did]}")
        seen[did] = where
        if "events" not in record:
            raise _bad(where, "events", "missing")
        wav = data_dir / "audio" / f"{did}.wav"
        sr, frames = _wav_info(wav, where)
        labels = _labels(record["events"], where, common.audio_ms(frames, sr))
        align = data_dir / "txt_align" / f"{did}.txt"
        words = _words(align, common.audio_ms(frames, sr)) if align.is_file() else None
        out.append(Dialogue(did, where, tuple(labels), wav, sr, frames, words))
    if not out:
        raise UsageError(f"{jsonl} holds no dialogue")
    return out


# ------------------------------------------------------------------------------------------------ mapping


@dataclass(frozen=True)
class Mapped:
    """One dialogue in our terms: its IPUs and events (both parties), the user-caused ones with their regions, and
    what was skipped or ignored."""

    dialogue: Dialogue
    user_channel: int
    ipus: tuple[Ipu, ...]
    events: tuple[Event, ...]
    evaluated: tuple[EventRegions, ...]
    skipped: Counter[str]
    ignored: Counter[str]  # SHORTPAUSE labels; events of the system party (the model plays it)


def _texts(d: Dialogue, spans: Sequence[Label]) -> dict[Label, str]:
    """Each span's words (those whose midpoint lies in it, on its channel), joined; {} without words."""
    if d.words is None:
        return {}
    out: dict[Label, list[str]] = {s: [] for s in spans}
    by_channel = {ch: sorted((s for s in spans if s.channel == ch), key=lambda s: s.a_ms) for ch in (0, 1)}
    for w in sorted(d.words, key=lambda w: w.start_s):
        mid = (w.start_s + w.end_s) * 500  # ms
        host = next((s for s in by_channel[w.channel] if s.a_ms <= mid <= s.b_ms), None)
        if host is not None:
            out[host].append(w.text)
    return {s: _join(ws) for s, ws in out.items()}


def map_dialogue(d: Dialogue, user_channel: int = 0) -> Mapped:
    """Their labels -> our IPUs and events (module doc), then the evaluated events with b and τ(L)."""
    spans = [x for x in d.labels if x.label in ("TURN", "BC")]
    texts = _texts(d, spans)
    ipus = tuple(sorted((Ipu(x.channel, x.a_ms / 1000, x.b_ms / 1000, TURN if x.label == "TURN" else BC,
                             texts.get(x, "")) for x in spans), key=lambda i: (i.start_s, i.channel)))
    turns = [x for x in spans if x.label == "TURN"]

    def ending(ch: int, at: int) -> Label | None:
        return next((x for x in turns if x.channel == ch and x.b_ms == at), None)

    def starting(ch: int, at: int) -> Label | None:
        return next((x for x in turns if x.channel == ch and x.a_ms == at), None)

    def under_way(ch: int, at: int) -> Label | None:
        return next((x for x in turns if x.channel == ch and x.a_ms <= at < x.b_ms), None)

    events: list[Event] = []
    skipped: Counter[str] = Counter()
    ignored: Counter[str] = Counter()
    for x in d.labels:
        a, b, ch, other = x.a_ms / 1000, x.b_ms / 1000, x.channel, 1 - x.channel
        if x.label == "SHORTPAUSE":
            ignored["SHORTPAUSE"] += 1
        elif x.label == "TURN_SHIFT":
            yielded, taken = ending(other, x.a_ms), starting(ch, x.b_ms)
            if yielded is None or taken is None:
                skipped[NO_TURNS] += 1
            elif x.a_ms - x.b_ms > _OVERLAP_MAX_MS:
                skipped[OVERLAP] += 1
            else:
                events.append(Event("SHIFT", a, b, other, ch, yielded.a_ms / 1000, b, taken.b_ms / 1000))
        elif x.label == "TURN_HOLD":
            before, after = ending(ch, x.a_ms), starting(ch, x.b_ms)
            if before is None or after is None:
                skipped[NO_TURNS] += 1
            else:
                events.append(Event("PAUSE", a, b, ch, other, before.a_ms / 1000))
        elif x.label == "BARGE_IN":
            own, host = starting(ch, x.a_ms), under_way(other, x.a_ms)
            if own is None:
                skipped[NO_BARGE_TURN] += 1
            elif host is None:
                skipped[NO_HOST] += 1
            else:
                events.append(Event("BARGE_IN", a, own.b_ms / 1000, ch, other, a, host.a_ms / 1000,
                                    host.b_ms / 1000))
        elif x.label == "BC":
            host = under_way(other, x.a_ms)
            events.append(Event("BC", a, b, ch, other, a, host.a_ms / 1000 if host else None,
                                host.b_ms / 1000 if host else None))
    events.sort(key=lambda e: (e.start_s, e.channel, EVENT_TYPES.index(e.type)))
    evaluated = evaluated_events(events, ipus, user_channel, CONTEXT_S)
    kept = {id(r.event) for r in evaluated}
    for e in events:
        if id(e) in kept:
            continue
        if e.channel == user_channel and e.type == "BC":
            skipped[BC_OUTSIDE] += 1
        else:
            ignored[f"system {e.type} (the model plays the system)"] += 1
    return Mapped(d, user_channel, ipus, tuple(events), tuple(evaluated), skipped, ignored)


def extractor_check(m: Mapped) -> str:
    """How their labels compare with our extractor's events from the same IPUs (the paper's rules):
    "same", "differ" (the evaluated events are not the same), or "not comparable" (IPUs of one party closer than
    the paper's 0.5 s split)."""
    try:
        ours = extract_events([i for i in m.ipus if i.channel == 0], [i for i in m.ipus if i.channel == 1], _PARAMS)
    except ValueError:
        return "not comparable"
    key = [(r.event.type, whole_ms(r.event_start_s), whole_ms(r.event_end_s), whole_ms(r.prompt_start_s))
           for r in evaluated_events(ours, m.ipus, m.user_channel, CONTEXT_S)]
    theirs = [(r.event.type, whole_ms(r.event_start_s), whole_ms(r.event_end_s), whole_ms(r.prompt_start_s))
              for r in m.evaluated]
    return "same" if sorted(key) == sorted(theirs) else "differ"


# ------------------------------------------------------------------------------------------------ rows


def _speaker(ipu: Ipu, user_channel: int) -> str:
    return "user" if ipu.channel == user_channel else "system"


def _question(m: Mapped, r: EventRegions, joiner: str) -> str:
    """A SHIFT's question: the user's whole turn ending at s, its TURNs linked by the user's PAUSEs (walked back as
    a PAUSE's b is), joined; as the builder's rows have it."""
    user_turns = [i for i in m.ipus if i.channel == m.user_channel and i.is_turn]
    pauses = [e for e in m.events if e.type == "PAUSE" and e.channel == m.user_channel]
    first = prompt_start(replace(r.event, type="PAUSE"), user_turns, pauses)
    parts = [i.text for i in user_turns if first - 1e-9 <= i.start_s < r.event_start_s]
    return joiner.join(parts) if all(parts) else ""


def event_rows(m: Mapped, language: str, domain: str) -> Iterator[tuple[M3Event, tuple[int, int]]]:
    """One validated M3Event per evaluated event, in order of s, with the [τ(L), s + Δ) span (ms, dialogue clock)
    its audio is cut to."""
    d, uc = m.dialogue, m.user_channel
    joiner = LANGUAGE_RULES[language].joiner
    names = {id(i): f"{'u' if i.channel == uc else 's'}{k:03d}" for k, i in enumerate(m.ipus)}
    for k, r in enumerate(m.evaluated):
        tau, b, s, t = (whole_ms(x) for x in (r.context_start_s, r.prompt_start_s, r.event_start_s, r.event_end_s))
        w = s + whole_ms(WINDOW_S)
        utts = tuple(Utterance(names[id(i)], _speaker(i, uc), i.kind, i.text, max(whole_ms(i.start_s) - tau, 0) / 1000,
                               (whole_ms(i.end_s) - tau) / 1000) for i in m.ipus
                     if whole_ms(i.end_s) > tau and whole_ms(i.start_s) < w)
        question = reply = ""
        if r.event.type == "SHIFT":
            question = _question(m, r, joiner)
            taker = next((i for i in m.ipus if i.channel != uc and i.is_turn and whole_ms(i.start_s) == t), None)
            reply = taker.text if taker is not None else ""
        transcribed = all(u.text for u in utts) and (r.event.type != "SHIFT" or bool(question and reply))
        event = M3Event(
            event_id=f"{d.dialogue_id}-e{k:02d}", dialogue_id=d.dialogue_id, language=language, domain=domain,
            event_type=r.event.type, prompt_start_s=(b - tau) / 1000, event_start_s=(s - tau) / 1000,
            event_end_s=(t - tau) / 1000, window_end_s=(w - tau) / 1000, dialogue_offset_s=tau / 1000,
            utterances=utts, question=question, reply=reply, transcribed=transcribed)
        try:
            event.validate()
        except SchemaError as err:
            raise SchemaError(f"cannot make a row of it ({err})", source=d.where) from None
        yield event, (tau, w)


def dialogue_audio(d: Dialogue, user_channel: int) -> np.ndarray:
    """The dialogue as (n, 2) float32 at 24 kHz, ch0 the user, ch1 the system."""
    try:
        audio, sr = sf.read(str(d.wav), dtype="float32", always_2d=True)
    except RuntimeError as err:
        raise _bad(str(d.wav), None, f"not a readable audio file ({' '.join(str(err).split())})") from None
    if audio.shape[1] != 2:
        raise _bad(str(d.wav), None, f"{audio.shape[1]} channel(s); an M3 dialogue has 2 (one party each)")
    if user_channel == 1:
        audio = audio[:, ::-1]
    return resample(np.ascontiguousarray(audio), int(sr), SESSION_SR)


# ------------------------------------------------------------------------------------------------ import


def infer_language_domain(data_dir: Path, language: str | None, domain: str | None) -> tuple[str, str]:
    """--language / --domain, else read from a path `.../data/{lang}/{domain}/...` (their repository's layout)."""
    parts = Path(data_dir).resolve().parts
    found = [(parts[i + 1], parts[i + 2]) for i in range(len(parts) - 2)
             if parts[i] == "data" and parts[i + 1] in LANGUAGES and parts[i + 2] in DOMAINS]
    lang = language or (found[-1][0] if found else None)
    dom = domain or (found[-1][1] if found else None)
    if lang is None or dom is None:
        raise UsageError(f"cannot tell the {'language' if lang is None else 'domain'} of {data_dir} from its path "
                         "(their layout: .../data/{lang}/{domain}/{dataset}); give --language "
                         f"({'/'.join(LANGUAGES)}) and --domain ({'/'.join(DOMAINS)})")
    common.check_language_domain(lang, dom)
    return lang, dom


def import_m3(data_dir: Path | str, out: Path | str, *, user_channel: int = 0, split: str = "test",
              language: str | None = None, domain: str | None = None) -> dict[str, Any]:
    """Import `DATA_DIR/{split}.jsonl` (module doc) as the config `m3_{domain}_{language}` of the dataset folder
    `out`; returns the summary also written to `out/import/{config}.json`."""
    from dataset_builder.m3.rows import event_to_row

    data_dir, out = Path(data_dir), Path(out)
    if user_channel not in (0, 1):
        raise UsageError(f"--user-channel must be 0 or 1, got {user_channel}")
    lang, dom = infer_language_domain(data_dir, language, domain)
    common.check_out(out, LAYOUT)
    mapped = [map_dialogue(d, user_channel) for d in read_split(data_dir, split)]
    # Every row's record is made (and validated) before any audio is read or anything written.
    plans = [(m, list(event_rows(m, lang, dom))) for m in mapped]
    n_rows = sum(len(rows) for _, rows in plans)
    if not n_rows:
        raise UsageError(f"{data_dir / (split + '.jsonl')}: no event the user (channel {user_channel}) causes; "
                         "is the user on the other channel (--user-channel)?")
    config = config_name(lang, dom)
    events: Counter[str] = Counter()
    audio_s = 0.0

    def rows() -> Iterator[dict[str, Any]]:
        nonlocal audio_s
        for m, items in plans:
            if not items:
                continue
            audio = dialogue_audio(m.dialogue, user_channel)
            for event, (tau, w) in items:
                clip = common.window(audio, tau, w)
                events[event.event_type] += 1
                audio_s += clip.shape[0] / SESSION_SR
                yield event_to_row(event, wav_bytes(clip))

    return common.write_import(out, config, rows(), SHARD_ROWS, write_card=write_card, summary=lambda: _summary(
        data_dir, split, config, lang, dom, user_channel, plans, events, audio_s))


def _summary(data_dir: Path, split: str, config: str, lang: str, dom: str, user_channel: int,
             plans: Sequence[tuple[Mapped, list[tuple[M3Event, tuple[int, int]]]]], events: Mapping[str, int],
             audio_s: float) -> dict[str, Any]:
    mapped = [m for m, _ in plans]
    skipped: Counter[str] = Counter()
    ignored: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    for m in mapped:
        skipped.update(m.skipped)
        ignored.update(m.ignored)
        labels.update(x.label for x in m.dialogue.labels)
    rows = [e for _, items in plans for e, _ in items]
    return {
        "source": str(data_dir.resolve()), "split": split, "layout": LAYOUT,
        "config": config, "language": lang, "domain": dom, "user_channel": user_channel,
        "dialogues": len(mapped), "dialogue_s": round(sum(m.dialogue.frames / m.dialogue.sample_rate
                                                           for m in mapped), 3),
        "sample_rates": sorted({m.dialogue.sample_rate for m in mapped}),
        "with_txt_align": sum(m.dialogue.words is not None for m in mapped),
        "labels": {k: labels[k] for k in LABELS},
        "rows": len(rows), "events": {t: events.get(t, 0) for t in EVENT_TYPES},
        "cases": {t: events.get(t, 0) * len(EVENT_CONDITIONS[t]) for t in EVENT_TYPES},
        "untranscribed_rows": sum(not e.transcribed for e in rows),
        "untranscribed_events": {t: sum(not e.transcribed for e in rows if e.event_type == t) for t in EVENT_TYPES},
        "row_audio_s": round(audio_s, 3),
        "skipped": dict(sorted(skipped.items())), "ignored": dict(sorted(ignored.items())),
        "extractor_check": dict(Counter(extractor_check(m) for m in mapped)),
    }


# ------------------------------------------------------------------------------------------------ card


def write_card(out: Path) -> None:
    """`out/README.md` for every config imported into `out` (from the `import/*.json` summaries)."""
    from dataset_builder.card_tables import md_table

    summaries = common.imported_summaries(out)
    sources = md_table(["config", "source folder", "split", "user channel", "dialogues", "hours", "with txt_align"],
                       [[f"`{s['config']}`", f"`{s['source']}`", s["split"], s["user_channel"], s["dialogues"],
                         f"{s['dialogue_s'] / 3600:.2f}", s["with_txt_align"]] for s in summaries])
    counts = md_table(["config", "event", "rows", "cases", "rows without a full transcript"],
                      [[f"`{s['config']}`", t, s["events"][t], s["cases"][t], s["untranscribed_events"][t]]
                       for s in summaries for t in EVENT_TYPES])
    left = md_table(["config", "what", "labels"],
                    [[f"`{s['config']}`", f"skipped: {k}", v] for s in summaries for k, v in s["skipped"].items()]
                    + [[f"`{s['config']}`", f"ignored: {k}", v] for s in summaries for k, v in s["ignored"].items()])
    check = md_table(["config", "dialogues: same / differ / not comparable"],
                     [[f"`{s['config']}`", " / ".join(str(s["extractor_check"].get(k, 0))
                                                      for k in ("same", "differ", "not comparable"))]
                      for s in summaries])
    common.write_import_card(out, summaries, CARD_TEMPLATE, CARD_METADATA, {
        "sources_table": sources, "counts_table": counts, "left_out_table": left, "check_table": check,
        "window_s": f"{WINDOW_S:g}", "context_s": f"{CONTEXT_S:g}"})
