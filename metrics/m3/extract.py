"""Two-channel dialogue audio -> M3 events: Silero VAD spans per channel -> IPUs -> SHIFT / PAUSE / BC / BARGE_IN.

The rules live in `dataset_builder/rules/m3_events.py`; this module is only the audio front end and what
`duplex-eval events` prints. It also takes a word-timestamp transcript instead of the VAD (a corpus's alignment
has no VAD edge error), and writes the `TimingStats` the synthetic pipeline samples from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from dataset_builder.audio import read_wav
from dataset_builder.errors import UsageError
from dataset_builder.rules.m3_events import (
    Event,
    EventParams,
    EventRegions,
    Ipu,
    channel_names,
    evaluated_events,
    extract_events,
    ipus_from_spans,
    ipus_from_words,
    read_words,
)
from dataset_builder.rules.m3_timing_stats import TimingStats, save_stats, stats_from_dialogues, stats_from_events
from metrics.vad import SileroVAD, VADParams

# The VAD only finds speech; the IPU rule decides every split. So its own merging (gaps < 100 ms) and minimum
# length (100 ms, short enough for a "mm" BC) sit far below the 0.5 s and 0.8 s boundaries, and it leaves speech
# at the first chunk below neg_threshold (no hang-over that would shorten silences). Measured on piper speech
# placed at known times (tests/test_m3_extract.py): span edges within +-0.06 s of the clip edges (32 ms chunks).
EVENTS_VAD = VADParams(threshold=0.5, neg_threshold=0.35, min_speech_ms=100, merge_gap_ms=100, min_silence_ms=0)
VAD_EDGE_TOLERANCE_S = 0.1  # what tests allow between a placed clip's edges and the extracted ones


@dataclass(frozen=True)
class DialogueEvents:
    """One dialogue's IPUs and events, and where they came from."""

    source: str
    duration_s: float
    ipus_ch0: tuple[Ipu, ...]
    ipus_ch1: tuple[Ipu, ...]
    events: tuple[Event, ...]
    params: EventParams
    front_end: str  # "silero-vad ..." or "words FILE"

    @property
    def ipus(self) -> list[Ipu]:
        return [*self.ipus_ch0, *self.ipus_ch1]

    def evaluated(self, user_channel: int = 0) -> list[EventRegions]:
        return evaluated_events(self.events, self.ipus, user_channel)

    def stats(self) -> TimingStats:
        return stats_from_events(self.events, self.ipus, source=self.source, params=self.params)


def _dialogue(source: str, duration_s: float, ipus0: list[Ipu], ipus1: list[Ipu], params: EventParams,
              front_end: str) -> DialogueEvents:
    return DialogueEvents(source, duration_s, tuple(ipus0), tuple(ipus1), tuple(extract_events(ipus0, ipus1, params)),
                          params, front_end)


def events_from_audio(audio: np.ndarray, sr: int, params: EventParams | None = None, vad: VADParams | None = None,
                      source: str = "<audio>") -> DialogueEvents:
    """(n, 2) audio at any rate -> events; the VAD resamples to 16 kHz itself."""
    p, v = params or EventParams(), vad or EVENTS_VAD
    if audio.ndim != 2 or audio.shape[1] != 2:
        shape = "1 channel" if audio.ndim == 1 else f"{audio.shape[1]} channels"
        raise UsageError(f"{source}: {shape}; M3 events need a 2-channel dialogue (one party per channel)")
    detector = SileroVAD(v)
    ipus = [ipus_from_spans(detector.spans(np.ascontiguousarray(audio[:, ch]), sr), ch, p) for ch in (0, 1)]
    front_end = (f"silero-vad (threshold {v.threshold}, min speech {v.min_speech_ms} ms, merge < {v.merge_gap_ms} "
                 "ms)")
    return _dialogue(source, audio.shape[0] / sr, ipus[0], ipus[1], p, front_end)


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise UsageError(f"{path}: no such {what} file")


def events_from_wav(path: str | Path, params: EventParams | None = None,
                    vad: VADParams | None = None) -> DialogueEvents:
    path = Path(path)
    _require_file(path, "audio")
    try:
        audio, sr = read_wav(path)
    except RuntimeError as err:  # soundfile.LibsndfileError
        raise UsageError(f"{path}: not a readable audio file ({err})") from None
    return events_from_audio(audio, sr, params, vad, source=str(path))


def events_from_words(words_path: str | Path, wav_path: str | Path | None = None,
                      params: EventParams | None = None) -> DialogueEvents:
    """IPUs from a `txt_align` word-timestamp file; the WAV, when given, is only checked (2 channels, long enough)."""
    p, wp = params or EventParams(), Path(words_path)
    _require_file(wp, "word-timestamp")
    words = read_words(wp)
    duration = max((w.end_s for w in words), default=0.0)
    source = str(wp)
    if wav_path is not None:
        wav = Path(wav_path)
        _require_file(wav, "audio")
        try:
            info = sf.info(str(wav))
        except RuntimeError as err:  # soundfile.LibsndfileError
            raise UsageError(f"{wav}: not a readable audio file ({err})") from None
        if info.channels != 2:
            raise UsageError(f"{wav}: {info.channels} channel(s); M3 events need a 2-channel dialogue")
        if duration > info.duration + 0.5:
            raise UsageError(f"{wp}: words run to {duration:.3f} s but {wav} lasts {info.duration:.3f} s; "
                             "wrong transcript for this audio?")
        duration, source = info.duration, str(wav)
    ch0, ch1 = ipus_from_words(words, p)
    return _dialogue(source, duration, ch0, ch1, p, f"words {wp}")


# ------------------------------------------------------------------------------------------------ report


def _t(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _note(e: Event, names: dict[int, str]) -> str:
    me, other = names[e.channel], names[e.other_channel]
    if e.type == "SHIFT":
        return f"{me} -> {other}" + (f", overlap {e.overlap_s:.3f} s" if e.overlap_s > 0 else "")
    if e.type == "PAUSE":
        return f"{me} keeps the turn"
    if e.type == "BARGE_IN":
        return f"into {other} TURN [{_t(e.other_start_s)}, {_t(e.other_end_s)}], overlap {e.overlap_s:.3f} s"
    if e.other_start_s is None:
        return f"not inside a {other} TURN"
    return f"inside {other} TURN [{_t(e.other_start_s)}, {_t(e.other_end_s)}]"


def format_events(d: DialogueEvents, user_channel: int = 0) -> str:
    """A table a person reads: every event of both parties; the evaluated ones with their b and τ(L)."""
    names = channel_names(user_channel)
    regions = {id(r.event): r for r in d.evaluated(user_channel)}
    p = d.params
    lines = [
        f"{d.source}: {d.duration_s:.2f} s; IPUs from {d.front_end}, split at silences > {p.ipu_gap_s} s; "
        f"BC <= {p.bc_max_s} s; SHIFT overlap <= {p.shift_overlap_max_s} s, longer is BARGE_IN",
    ]
    for ch, ipus in ((0, d.ipus_ch0), (1, d.ipus_ch1)):
        n_turn = sum(i.is_turn for i in ipus)
        lines.append(f"ch{ch} = {names[ch]}: {n_turn} TURN, {len(ipus) - n_turn} BC IPUs")
    lines.append(f"{'#':>3}  {'type':<8}  {'by':<6}  {'s':>8}  {'t':>8}  {'t-s':>7}  {'eval':<4}  {'b':>8}  "
                 f"{'tau(L)':>8}  note")
    for k, e in enumerate(d.events, start=1):
        r = regions.get(id(e))
        lines.append(f"{k:>3}  {e.type:<8}  {names[e.channel]:<6}  {e.start_s:>8.3f}  {e.end_s:>8.3f}  "
                     f"{e.duration_s:>+7.3f}  {'yes' if r else '':<4}  {_t(r.prompt_start_s) if r else '':>8}  "
                     f"{_t(r.context_start_s) if r else '':>8}  {_note(e, names)}")
    counts = {t: sum(r.event.type == t for r in regions.values()) for t in ("SHIFT", "PAUSE", "BC", "BARGE_IN")}
    lines.append(f"evaluated (caused by the {names[user_channel]} on ch{user_channel}): "
                 + ", ".join(f"{n} {t}" for t, n in counts.items()))
    return "\n".join(lines)


def events_command(dialogues: Sequence[str | Path], user_channel: int = 0, words: Sequence[str | Path] = (),
                   stats_out: str | Path | None = None) -> str:
    """What `duplex-eval events` prints: a table per dialogue; with `stats_out`, the TimingStats pooled over all
    of them (a corpus is many dialogues; one rarely holds enough PAUSEs or barge-ins for a distribution)."""
    if user_channel not in (0, 1):
        raise UsageError(f"--user-channel must be 0 or 1, got {user_channel}")
    if words and len(words) != len(dialogues):
        raise UsageError(f"--words given {len(words)} times for {len(dialogues)} dialogues: one per dialogue, "
                         "in the same order")
    found = [events_from_words(w, d) for d, w in zip(dialogues, words, strict=True)] if words else [
        events_from_wav(d) for d in dialogues]
    text = "\n\n".join(format_events(d, user_channel) for d in found)
    if stats_out is not None:
        first, last = found[0].source, found[-1].source
        source = first if len(found) == 1 else f"{len(found)} dialogues: {first} .. {last}"
        stats = stats_from_dialogues(((d.events, d.ipus) for d in found), source=source, params=found[0].params)
        save_stats(stats, stats_out)
        missing = stats.missing()
        text += f"\ntiming stats of {len(found)} dialogue(s) written to {stats_out}" + (
            f" (too few events to measure {', '.join(missing)}: null there; fill them from the shipped defaults "
            "with TimingStats.filled_from)" if missing else "")
    return text
