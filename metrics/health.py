"""Run health (docs/scoring.md): a broken set-up must not pass for a model that chooses silence.

A muted output, a wrong sample rate, a stuck buffer or a tone all look like "no speech" to a VAD, and every
silence-preservation window then passes. So besides the VAD, the scorer looks at the model channel itself:

- per episode (`episode_stats`): peak, share of clipped samples, DC offset, RMS level, the longest stretch of
  one held non-zero value (constant output), seconds of sound above `SOUND_FLOOR_DBFS`, seconds of VAD speech,
  and seconds of sound outside any speech span;
- per scored window (`window_sound`, stored in each measurement as `"sound"`): seconds of sound, seconds of
  speech and the RMS level over the window, so a window with sound but no speech is visible after the fact;
- per run (`run_health`): human-readable flags, printed by `score` before any table and shown in the report.

Generic across benchmarks: a measurement may carry `"sound"` (from `window_sound`) and, where it was
transcribed, `"transcript"` with `"transcribed_s"` (seconds of speech given to the ASR). From a model that also
streams its text, it carries `"model_text"` (what that text says over the same stretch) and, for a judged answer,
`"text_verdict"` (the judge's verdict on that text), so an ASR that mishears the model shows up here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataset_builder.atomic import round_ms
from metrics.intelligibility import word_errors
from metrics.spans import Span

# --- thresholds of the health checks (named once; none of them changes a score) ------------------------------
FRAME_S = 0.02  # sound is measured on 20 ms frames
SOUND_FLOOR_DBFS = -50.0  # a frame louder than this holds sound (speech, tone, noise); quieter is silence
DBFS_FLOOR = -120.0  # the level reported for digital silence (JSON has no -inf)
CLIP_LEVEL = 0.999  # |x| at or above this is a clipped sample (PCM16 full scale is 32767/32768)
CLIPPED_SHARE_LIMIT = 0.001  # flag an episode when >= 0.1 % of its sound samples are clipped
DC_OFFSET_LIMIT = 0.01  # flag |mean| of the model channel >= 0.01 (-40 dBFS): a biased or broken output stage
CONSTANT_RUN_S = 0.05  # flag one non-zero value held this long (1,200 samples at 24 kHz); real audio never does
FLAT_BLOCK_S = 0.05  # blocks checked for a near-constant non-zero level ...
FLAT_STD = 1e-3  # ... whose samples vary less than this around a mean of |.| >= DC_OFFSET_LIMIT
NO_SPEECH_SHARE = 0.5  # flag when at least half of the usable episodes have no model speech at all
SOUND_WITHOUT_SPEECH_S = 1.0  # flag a scored window holding this much sound and no VAD speech
UNEXPLAINED_SOUND_S = 2.0  # flag an episode with this much sound outside every VAD speech span
LONG_SPEECH_S = 2.0  # flag transcribed speech at least this long in which the ASR found no words
TEXT_ASR_WER = 0.5  # flag a transcript whose word error rate against the model's own text reaches this
MAX_EXAMPLES = 3  # case ids named in a flag

_WORD = re.compile(r"[^\W_]", re.UNICODE)


def dbfs(ms: float) -> float:
    """A mean square as dBFS (full-scale sine = -3 dBFS), floored at DBFS_FLOOR."""
    return round(max(DBFS_FLOOR, 10 * math.log10(ms)) if ms > 0 else DBFS_FLOOR, 1)


class SoundProfile:
    """Frame levels of one channel, computed once and shared by the episode and its windows."""

    def __init__(self, x: np.ndarray, sr: int) -> None:
        self.x = np.asarray(x, dtype=np.float32)
        self.sr = sr
        self.hop = max(1, int(round(FRAME_S * sr)))
        n = self.x.size // self.hop
        frames = self.x[: n * self.hop].astype(np.float64).reshape(n, self.hop)
        self.frame_ms = np.einsum("ij,ij->i", frames, frames) / self.hop
        self.loud = self.frame_ms >= 10 ** (SOUND_FLOOR_DBFS / 10)

    def frames_in(self, a: float, b: float) -> slice:
        """Frames whose start lies in [a, b)."""
        lo = max(0, math.ceil(a / FRAME_S - 1e-9))
        hi = max(lo, min(self.loud.size, math.ceil(b / FRAME_S - 1e-9)))
        return slice(lo, hi)


def _speech_mask(profile: SoundProfile, spans: Sequence[Span]) -> np.ndarray:
    mask = np.zeros(profile.loud.size, bool)
    for s in spans:
        mask[profile.frames_in(s.start_s, s.end_s)] = True
    return mask


def _longest_run(flags: np.ndarray) -> int:
    """Length of the longest run of True."""
    if not flags.any():
        return 0
    padded = np.concatenate([[False], flags, [False]])
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return int((edges[1::2] - edges[0::2]).max())


def constant_run_s(x: np.ndarray, sr: int) -> float:
    """Seconds of the longest stretch of one identical non-zero sample value."""
    if x.size < 2:
        return 0.0
    same = (x[1:] == x[:-1]) & (x[1:] != 0)
    run = _longest_run(same)
    return round_ms((run + 1) / sr) if run else 0.0


def flat_offset_s(x: np.ndarray, sr: int) -> float:
    """Seconds of blocks holding a near-constant non-zero level (a DC step with a little noise on it)."""
    hop = max(1, int(round(FLAT_BLOCK_S * sr)))
    n = x.size // hop
    if not n:
        return 0.0
    blocks = x[: n * hop].astype(np.float64).reshape(n, hop)
    flat = (blocks.std(axis=1) < FLAT_STD) & (np.abs(blocks.mean(axis=1)) >= DC_OFFSET_LIMIT)
    return round_ms(_longest_run(flat) * hop / sr)


def episode_stats(x: np.ndarray, sr: int, spans: Sequence[Span], profile: SoundProfile | None = None
                  ) -> dict[str, float]:
    """Health numbers of one episode's model channel (mono float32 at `sr`), with its VAD speech spans."""
    x = np.asarray(x, dtype=np.float32)
    profile = profile or SoundProfile(x, sr)
    loud_samples = int(profile.loud.sum()) * profile.hop
    clipped = 0
    if loud_samples:
        loud_frames = x[: profile.loud.size * profile.hop].reshape(-1, profile.hop)[profile.loud]
        clipped = int((np.abs(loud_frames) >= CLIP_LEVEL).sum())
    speech = _speech_mask(profile, spans)
    return {
        "duration_s": round_ms(x.size / sr),
        "peak": round(float(np.abs(x).max()) if x.size else 0.0, 4),
        "clipped_share": round(clipped / loud_samples, 5) if loud_samples else 0.0,
        "dc_offset": round(float(x.mean(dtype=np.float64)) if x.size else 0.0, 5),
        "rms_dbfs": dbfs(float(np.mean(np.square(x, dtype=np.float64)))) if x.size else DBFS_FLOOR,
        "constant_run_s": constant_run_s(x, sr),
        "flat_offset_s": flat_offset_s(x, sr),
        "sound_s": round_ms(float(profile.loud.sum()) * FRAME_S),
        "speech_s": round_ms(sum(s.duration_s for s in spans)),
        "sound_outside_speech_s": round_ms(float((profile.loud & ~speech).sum()) * FRAME_S),
    }


def window_sound(profile: SoundProfile, spans: Sequence[Span], a: float, b: float) -> dict[str, Any]:
    """Sound, speech and level of the window [a, b) of the channel behind `profile`."""
    sl = profile.frames_in(a, b)
    ms = profile.frame_ms[sl]
    speech = sum(max(0.0, min(s.end_s, b) - max(s.start_s, a)) for s in spans)
    return {"window": [round_ms(a), round_ms(b)], "sound_s": round_ms(float(profile.loud[sl].sum()) * FRAME_S),
            "speech_s": round_ms(speech), "energy_dbfs": dbfs(float(ms.mean())) if ms.size else DBFS_FLOOR}


def text_from(spans: Sequence[Span], start_s: float, floor_s: float) -> float:
    """Where the model's own text of the speech heard from `start_s` on begins, for comparing it with the ASR.

    A text stream stamps each piece at the start of the frame that produced it: a frame or more before its audio,
    and before the VAD finds that audio (an 80 ms frame stamped at 4.40 s, speech found at 4.51 s). Text stamped in
    the silence before the speech is that speech's, so it is read from the end of the model's last speech before
    `start_s`, never before `floor_s` (the window's start); from `start_s` itself when speech was already running
    there, since the ASR heard none of what came before."""
    if any(s.start_s < start_s < s.end_s for s in spans):
        return start_s
    return max([floor_s, *(s.end_s for s in spans if s.end_s <= start_s)])


def has_words(text: str) -> bool:
    return bool(_WORD.search(text or ""))


def _examples(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_EXAMPLES])
    return shown + (f" and {len(ids) - MAX_EXAMPLES} more" if len(ids) > MAX_EXAMPLES else "")


def run_health(stats: dict[str, dict[str, float]], measurements: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Flags (one readable line each) and counts over the usable episodes of a run and their windows."""
    n = len(stats)
    ids = sorted(stats)
    silent = [c for c in ids if stats[c]["speech_s"] == 0]
    clipping = [c for c in ids if stats[c]["clipped_share"] >= CLIPPED_SHARE_LIMIT]
    dc = [c for c in ids if abs(stats[c]["dc_offset"]) >= DC_OFFSET_LIMIT]
    constant = [c for c in ids if max(stats[c]["constant_run_s"], stats[c]["flat_offset_s"]) >= CONSTANT_RUN_S]
    unexplained = [c for c in ids if stats[c]["sound_outside_speech_s"] >= UNEXPLAINED_SOUND_S]
    quiet_windows = [m for m in measurements if not m.get("failed") and m.get("sound")
                     and m["sound"]["sound_s"] >= SOUND_WITHOUT_SPEECH_S and m["sound"]["speech_s"] == 0]
    wordless = [m for m in measurements if not m.get("failed") and "transcript" in m
                and m.get("transcribed_s", 0) >= LONG_SPEECH_S and not has_words(m["transcript"])]
    heard_otherwise = text_disagreements(measurements)
    flags: list[str] = []
    if n and len(silent) / n >= NO_SPEECH_SHARE:
        flags.append(f"no model speech in {len(silent)}/{n} episodes (muted output, the wrong output channel, or "
                     "a model that never speaks?)")
    if clipping:
        worst = max(clipping, key=lambda c: stats[c]["clipped_share"])
        flags.append(f"clipping in {len(clipping)}/{n} episodes ({_examples(clipping)}; worst {worst}: "
                     f"{stats[worst]['clipped_share']:.2%} of its sound samples at |x| >= {CLIP_LEVEL}): "
                     "output gain too high?")
    if dc:
        flags.append(f"DC offset in {len(dc)}/{n} episodes ({_examples(dc)}; mean "
                     f"{stats[dc[0]]['dc_offset']:+.3f} in {dc[0]}, limit +/-{DC_OFFSET_LIMIT}): a biased output?")
    if constant:
        c = constant[0]
        held = max(stats[c]["constant_run_s"], stats[c]["flat_offset_s"])
        flags.append(f"constant output in {len(constant)}/{n} episodes ({_examples(constant)}; {held:.2f} s of "
                     f"one held non-zero level in {c}): a stuck or padded output buffer?")
    if quiet_windows:
        m = max(quiet_windows, key=lambda w: w["sound"]["sound_s"])
        cases = sorted({w["case_id"] for w in quiet_windows})
        a, b = m["sound"]["window"]
        flags.append(f"sound but no detected speech in {len(quiet_windows)} scored windows of {len(cases)} "
                     f"episodes ({_examples(cases)}; e.g. {m['case_id']} {m['label']} window {a:.1f}-{b:.1f} s: "
                     f"{m['sound']['sound_s']:.1f} s of sound at {m['sound']['energy_dbfs']:.0f} dBFS): tones, "
                     "noise or a wrong sample rate score as silence")
    if unexplained:
        c = max(unexplained, key=lambda k: stats[k]["sound_outside_speech_s"])
        flags.append(f"sound outside any detected speech in {len(unexplained)}/{n} episodes "
                     f"({_examples(unexplained)}; {stats[c]['sound_outside_speech_s']:.1f} s in {c})")
    if wordless:
        m = max(wordless, key=lambda w: w["transcribed_s"])
        flags.append(f"ASR found no words in {len(wordless)} scored windows holding >= {LONG_SPEECH_S:g} s of "
                     f"model speech (e.g. {m['case_id']} {m['label']}: {m['transcribed_s']:.1f} s): garbled audio, "
                     "another language or a wrong sample rate?")
    if heard_otherwise:
        m, wer = heard_otherwise[0]
        flags.append(f"the ASR disagrees with the model's own text in {len(heard_otherwise)} transcribed windows "
                     f"(e.g. {m['case_id']} {m['label']}: text {m['model_text'][:60]!r}, ASR "
                     f"{m['transcript'][:60]!r}, "
                     + (f"{wer:.0%} word errors" if math.isfinite(wer) else "no words in the text")
                     + (f", answer {m['text_verdict']} by its text but {m['answer_verdict']} as heard"
                        if m.get("text_verdict") not in (None, m.get("answer_verdict")) else "")
                     + "): scores read the ASR, so these windows may be misjudged")
    return {"flags": flags, "n_episodes_checked": n, "no_speech_episodes": len(silent),
            "clipping_episodes": clipping, "dc_offset_episodes": dc, "constant_output_episodes": constant,
            "sound_outside_speech_episodes": unexplained, "sound_without_speech_windows": len(quiet_windows),
            "asr_no_words": len(wordless), "asr_text_disagreements": len(heard_otherwise)}


def text_disagreements(measurements: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """(measurement, word error rate) of the transcribed windows where the ASR and the model's own text disagree:
    a different answer verdict, or a word error rate of at least TEXT_ASR_WER; answer flips first, then by rate."""
    out = []
    for m in measurements:
        if m.get("failed") or m.get("model_text") is None or "transcript" not in m:
            continue
        wer = word_errors(m["model_text"], m["transcript"]).rate
        flipped = m.get("text_verdict") is not None and m["text_verdict"] != m.get("answer_verdict")
        if flipped or wer >= TEXT_ASR_WER:
            out.append((m, wer, flipped))
    return [(m, wer) for m, wer, _ in sorted(out, key=lambda x: (not x[2], -x[1]))]


def with_flags(health: dict[str, Any], first: list[str]) -> dict[str, Any]:
    """`health` with `first` (e.g. failure-accounting lines) ahead of its own flags."""
    return health | {"flags": [*first, *health["flags"]]}
