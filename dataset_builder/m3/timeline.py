"""One M3 dialogue on a two-channel timeline (paper §III-B1; DESIGN.md "Timeline"): clips trimmed to speech,
placed with sampled PAUSE / SHIFT / BC / barge-in timings, the intended IPUs and events, and the audio.

The work is split so that each piece is checkable on its own:
- `trim_clip`: a synthesised clip cut to its speech (energy based), inner silences capped, length a whole number
  of milliseconds, so the clip's edges are the IPU's edges and no inner pause can split it.
- `place`: the dialogue's utterances on a millisecond grid from the clips' lengths and a seeded `TimingStats`
  (no audio needed); the intended IPUs, the events `events.extract_events` finds in them, and the evaluated
  events with their regions; checked against what the script intended (`TimelineError` if not).
- `render`: the 2-channel audio (ch0 user, ch1 system); a cut system clip ends in a short fade.
- `event_rows`: one `M3Event` per evaluated event with its audio cut to [τ(L), s + Δ), zero-padded past the end.

Placement rules (every sampled timing keeps the samplers' 0.1 s margin from the rule it must not cross, so the
VAD's edge error cannot change an event when the audio is extracted back):
- A party's consecutive IPUs are at least `OWN_GAP_MS` apart (0.5 s split + margin), whatever was sampled: a
  reply that would start too soon after the replier's own backchannel starts later (its SHIFT gap grows).
- SHIFT: the next TURN starts a sampled gap after the previous TURN's end (negative: overlap, at most 0.3 s).
- PAUSE: the second half of a user line split at `|` starts a sampled pause (> 0.6 s) after the first half.
- BC: starts at a sampled fraction of the other party's TURN, clamped to lie wholly inside it
  (`BC_START_EDGE_MS`, `BC_END_EDGE_MS` from its edges) and `OWN_GAP_MS` from the listener's own speech; a BC
  that cannot fit, or whose clip is not `BC_MIN_MS`-`BC_MAX_MS` long, is dropped (counted in `Timeline.dropped`).
  A BC with `bc_before_chars` ends before that much of its host's text has been said (estimated in proportion
  to the characters): the host's telling, not the question after it, which a listener answers rather than
  backchannels through. A BC with `bc_at_chars` (written after certain words, the chat corpus) starts once that
  much of the host has been said, late by the sampled offset fraction of `BC_AT_LAG_MS`, then clamped the same.
- BARGE_IN: the user starts a sampled offset into the system TURN, but not before `cut_after_chars` of its text
  have been said (estimated in proportion to the characters, plus `CUT_AFTER_PAD_MS`); the system clip is cut a
  sampled overlap (> 0.75 s) later, inside a voiced stretch, faded over `FADE_MS`, and at least
  `CUT_REMAINDER_MS` before its natural end.
  The overlap is kept `BARGE_TAIL_MS` shorter than the user's turn, so the system never outlasts it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dataset_builder.atomic import whole_ms
from dataset_builder.audio import SESSION_SR
from dataset_builder.m3.dialogues import Dialogue, DialogueUtterance
from dataset_builder.m3.language import LANGUAGES
from dataset_builder.m3.schema import (
    CONTEXT_S,
    SYSTEM_CHANNEL,
    USER_CHANNEL,
    WINDOW_S,
    M3Event,
    Utterance,
)
from dataset_builder.rules.m3_events import (
    Event,
    EventParams,
    EventRegions,
    Ipu,
    evaluated_events,
    extract_events,
    ipus_from_spans,
)
from dataset_builder.rules.m3_timing_stats import DEFAULT_MARGIN_S, TimingStats
from dataset_builder.speech_gate import EdgeTolerance

MS = SESSION_SR // 1000  # samples per millisecond: every placed time is a whole millisecond
_PARAMS = EventParams()
_MARGIN_MS = whole_ms(DEFAULT_MARGIN_S)
# Silero hears some onsets late: measured up to 0.33 s on Japanese interjections ("あ、それで", "イギリスか"),
# under 0.07 s on most clips; it hears ends within 0.05 s. Where a late onset shrinks what a rule measures, the
# margin covers it: a barge-in's overlap, a BC's distance from its host's start, a cut's distance into a voiced
# stretch. A TURN's length gets the samplers' margin only (longer would slow every short phrase down; a short TURN
# with a weak onset is the rare case left, and the extract-back test over the mini set would show it).
LATE_ONSET_MS = 350
OWN_GAP_MS = whole_ms(_PARAMS.ipu_gap_s) + _MARGIN_MS  # a party's IPUs stay this far apart (never merge)
# A BC clip at most this long (extracts as a BC): the VAD never starts a clip early and ends it under 0.05 s late.
BC_END_LATE_MS = 60
BC_MAX_MS = whole_ms(_PARAMS.bc_max_s) - BC_END_LATE_MS
# Where the VAD must hear a BC clip, at every placement, for the build to keep it (the heard gate,
# dataset_builder/m3/build.py `speak_clip`): onset within the late-onset margin, end no later than BC_MAX_MS
# allows, and no earlier than the extract-back test tolerates.
BC_HEARD = EdgeTolerance(onset_early_s=0.1, onset_late_s=LATE_ONSET_MS / 1000, end_early_s=0.2,
                         end_late_s=BC_END_LATE_MS / 1000)
BC_MIN_MS = 250  # a BC clip at least this long (Silero misses shorter sounds: a 135 ms "huh" went unheard)
TURN_MIN_MS = whole_ms(_PARAMS.bc_max_s) + _MARGIN_MS  # a TURN clip at least this long
BARGE_MARGIN_S = LATE_ONSET_MS / 1000  # the barge-in overlap sampler's margin: overlaps > 0.75 s
BC_START_EDGE_MS = LATE_ONSET_MS + 50  # a BC starts this far after its host TURN's start...
BC_END_EDGE_MS = 2 * _MARGIN_MS  # ...and ends this far before its end (it must start inside it when extracted)
CUT_VOICED_MS = LATE_ONSET_MS + 50  # a cut falls at least this far into a voiced stretch of the system clip
LEAD_MS = 500  # silence before the first utterance
TAIL_MS = 500  # silence after the last one
FADE_MS = 20  # a cut system clip fades out over this
CUT_REMAINDER_MS = 200  # a cut leaves at least this much of the system clip unsaid (else it is no cut)
# A backchannel written after certain words (`bc_at_chars`) starts after the estimated end of those words, late by
# the statistics' bc offset fraction of this much: a listener reacts within a few hundred milliseconds.
BC_AT_LAG_MS = 400
CUT_AFTER_PAD_MS = 200  # the user barges in this long after the estimated end of `cut_after_chars`
SPEAKING_AT_S_MS = 150  # a barge-in starts at least this far inside a voiced stretch of the system clip
MIN_HEARD_MS = 500  # at least this much of a system TURN is heard before a barge-in
BARGE_TAIL_MS = 300  # the user's barge-in TURN outlasts the cut system clip by at least this
# Trimming: a sample below SILENCE_DB of the clip's peak is silence at the edges; a 10 ms frame whose RMS is
# below INNER_SILENCE_DB of the loudest frame's is silence inside. Inner silences longer than MAX_INNER_SILENCE_MS
# are shortened to it: the VAD measures such a pause as a gap of about 0.35-0.4 s, well under the 0.5 s split.
SILENCE_DB = -45.0
INNER_SILENCE_DB = -40.0
FRAME_MS = 10
MAX_INNER_SILENCE_MS = 300
# Voiced stretches (where a barge-in may cut): frames within VOICED_DB of the loudest, joined across < 100 ms.
VOICED_DB = -35.0
VOICED_JOIN_MS = 100


class TimelineError(ValueError):
    """A dialogue that cannot be placed as its script intends (a clip too short for a TURN, a system turn too
    short to be cut), or whose extracted events differ from the intended ones."""


# ------------------------------------------------------------------------------------------------ clips


@dataclass(frozen=True)
class TrimmedClip:
    audio: np.ndarray  # float32, a whole number of milliseconds at SESSION_SR
    inner_silences_capped: int  # inner silences that were longer than MAX_INNER_SILENCE_MS
    longest_inner_silence_ms: int  # the longest inner silence before capping
    voiced: tuple[tuple[int, int], ...] = ()  # [start, end) ms of the clip's voiced stretches

    @property
    def ms(self) -> int:
        return self.audio.size // MS


def _quiet_runs(quiet: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index runs of True."""
    padded = np.concatenate([[False], quiet, [False]]).astype(np.int8)  # also used for loud runs
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def trim_clip(audio: np.ndarray, sr: int = SESSION_SR) -> TrimmedClip:
    """A clip cut to its speech: from the first to the last sample above SILENCE_DB of its peak; inner silences
    (10 ms frames below INNER_SILENCE_DB of the loudest frame) longer than MAX_INNER_SILENCE_MS cut down to it
    (their middle removed); zero-padded at the end to a whole millisecond. Deterministic (no randomness, no
    model), so the same clip always trims the same."""
    if sr != SESSION_SR:
        raise ValueError(f"clips are on the {SESSION_SR} Hz session clock, got {sr}")
    x = np.asarray(audio, dtype=np.float32).ravel()
    peak = float(np.max(np.abs(x))) if x.size else 0.0
    if peak <= 0.0:
        return TrimmedClip(np.zeros(0, np.float32), 0, 0)
    loud = np.flatnonzero(np.abs(x) > peak * 10 ** (SILENCE_DB / 20))
    x = x[loud[0] : loud[-1] + 1]
    frame = FRAME_MS * MS
    n = x.size // frame
    capped, longest = 0, 0
    if n > 2:
        rms = np.sqrt(np.mean(np.square(x[: n * frame].reshape(n, frame), dtype=np.float64), axis=1))
        quiet = rms < rms.max() * 10 ** (INNER_SILENCE_DB / 20)
        keep = np.ones(x.size, dtype=bool)
        cap = MAX_INNER_SILENCE_MS // FRAME_MS
        for a, b in _quiet_runs(quiet):
            if a == 0 or b == n:
                continue  # an edge run: the edge trim kept it for its faint speech
            longest = max(longest, (b - a) * FRAME_MS)
            if b - a > cap:
                capped += 1
                left = a + cap // 2
                keep[left * frame : (left + (b - a) - cap) * frame] = False
        x = x[keep]
    pad = (-x.size) % MS
    x = np.concatenate([x, np.zeros(pad, np.float32)])
    return TrimmedClip(x, capped, longest, voiced_runs(x))


def voiced_runs(x: np.ndarray) -> tuple[tuple[int, int], ...]:
    """[start, end) ms of the voiced stretches of a clip: 10 ms frames within VOICED_DB of the loudest frame,
    joined across quieter stretches shorter than VOICED_JOIN_MS."""
    frame = FRAME_MS * MS
    n = x.size // frame
    if n == 0:
        return ()
    rms = np.sqrt(np.mean(np.square(x[: n * frame].reshape(n, frame), dtype=np.float64), axis=1))
    runs: list[list[int]] = []
    for a, b in _quiet_runs(rms >= rms.max() * 10 ** (VOICED_DB / 20)):
        if runs and (a - runs[-1][1]) * FRAME_MS < VOICED_JOIN_MS:
            runs[-1][1] = b
        else:
            runs.append([a, b])
    return tuple((a * FRAME_MS, b * FRAME_MS) for a, b in runs)


# ------------------------------------------------------------------------------------------------ placing


@dataclass(frozen=True)
class Placed:
    """One utterance on the dialogue clock, in whole milliseconds; `end_ms` is where its audio stops (the cut
    point for a system clip cut by a barge-in)."""

    utt: DialogueUtterance
    start_ms: int
    end_ms: int
    clip_ms: int  # the whole clip's length (end_ms - start_ms unless cut)
    cut: bool = False

    @property
    def channel(self) -> int:
        return USER_CHANNEL if self.utt.speaker == "user" else SYSTEM_CHANNEL

    @property
    def start_s(self) -> float:
        return self.start_ms / 1000

    @property
    def end_s(self) -> float:
        return self.end_ms / 1000


@dataclass(frozen=True)
class Intended:
    """An evaluated event as the script means it: its type, s and t (ms), and the utterances it is made of."""

    type: str
    s_ms: int
    t_ms: int
    before: str  # utt_id of the user turn ending at s (SHIFT, PAUSE) or the event's own utterance
    after: str  # utt_id of the utterance starting at t (SHIFT, PAUSE) or the event's own


@dataclass(frozen=True)
class Timeline:
    dialogue: Dialogue
    placed: tuple[Placed, ...]
    length_ms: int
    ipus: tuple[Ipu, ...]
    events: tuple[Event, ...]
    evaluated: tuple[EventRegions, ...]
    intended: tuple[Intended, ...]
    dropped: tuple[str, ...] = ()  # utt_ids of backchannels that did not fit (see the module doc)
    draws: dict[str, list[float]] = field(default_factory=dict)  # sampled timings, seconds, by kind

    def by_id(self) -> dict[str, Placed]:
        return {p.utt.utt_id: p for p in self.placed}


def timeline_seed(dialogue_seed: int) -> int:
    """The placement's own seed, derived from the dialogue's (a stable digest; hash() of str is salted)."""
    digest = hashlib.sha256(f"m3-timeline/{dialogue_seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def _chars_ms(u: DialogueUtterance, clip_ms: int, chars: int | None = None) -> int:
    """How long `chars` (default `cut_after_chars`) of the text take to say, in proportion to the characters."""
    text = u.text.strip()
    n = u.cut_after_chars if chars is None else chars
    return int(round(clip_ms * n / max(len(text), 1)))


Voiced = Sequence[tuple[int, int]]  # [start, end) ms of a clip's voiced stretches


def place(dialogue: Dialogue, clip_ms: Mapping[str, int], stats: TimingStats, rng: random.Random | None = None,
          voiced: Mapping[str, Voiced] | None = None) -> Timeline:
    """Place `dialogue` from its clips' lengths (utt_id -> ms of trimmed speech) with timings sampled from
    `stats` (seeded by the dialogue unless `rng` is given). `voiced` (utt_id -> the clip's voiced stretches,
    `TrimmedClip.voiced`) lets a barge-in cut the system clip where it is speaking; without it every instant of a
    clip counts as voiced. The result is checked against the script (`TimelineError`)."""
    if stats.params != _PARAMS:
        raise TimelineError(f"timing stats made with {stats.params}; the builder places for {_PARAMS}")
    rng = rng or random.Random(timeline_seed(dialogue.seed))
    busy = {USER_CHANNEL: -10**9, SYSTEM_CHANNEL: -10**9}  # end of each channel's latest IPU
    placed: list[Placed] = []
    last_turn: int | None = None  # index in `placed` of the latest TURN (script order)
    dropped: list[str] = []
    draws: dict[str, list[float]] = {k: [] for k in ("shift_gap_s", "pause_s", "bc_offset_frac",
                                                      "barge_in_offset_s", "barge_in_overlap_s")}
    for u in dialogue.utterances:
        d = clip_ms[u.utt_id]
        ch = USER_CHANNEL if u.speaker == "user" else SYSTEM_CHANNEL
        where = f"{dialogue.dialogue_id} {u.utt_id} ({u.relation}, {d} ms) {u.text!r}"
        if u.kind == "bc":
            host = placed[last_turn] if last_turn is not None else None
            if not BC_MIN_MS <= d <= BC_MAX_MS or host is None or host.channel == ch:
                dropped.append(u.utt_id)
                continue
            frac = stats.sample_bc_offset_frac(rng)
            draws["bc_offset_frac"].append(frac)
            lo = max(host.start_ms + BC_START_EDGE_MS, busy[ch] + OWN_GAP_MS)
            hi = host.end_ms - BC_END_EDGE_MS - d
            if u.bc_before_chars:  # inside the host's telling, before its question
                hi = min(hi, host.start_ms + _chars_ms(host.utt, host.clip_ms, u.bc_before_chars) - d)
            if lo > hi:
                dropped.append(u.utt_id)
                continue
            if u.bc_at_chars:  # placed by meaning: right after those words, late by up to BC_AT_LAG_MS
                at = host.start_ms + _chars_ms(host.utt, host.clip_ms, u.bc_at_chars) + whole_ms(frac * BC_AT_LAG_MS
                                                                                                / 1000)
            else:
                at = host.start_ms + whole_ms(frac * (host.end_ms - host.start_ms) / 1000)
            start = min(max(at, lo), hi)
            placed.append(Placed(u, start, start + d, d))
            busy[ch] = start + d
            continue
        if d < TURN_MIN_MS:
            raise TimelineError(f"{where}: a TURN clip must last at least {TURN_MIN_MS} ms")
        prev = placed[last_turn] if last_turn is not None else None
        if u.relation == "first" or prev is None:
            start = LEAD_MS
        elif u.relation == "pause":
            pause = stats.sample_pause_s(rng)
            draws["pause_s"].append(pause)
            start = max(prev.end_ms + whole_ms(pause), busy[ch] + OWN_GAP_MS)
        elif u.relation == "barge_in":
            if last_turn is None or prev.utt.speaker != "system":
                raise TimelineError(f"{where}: a barge-in needs a system TURN before it")
            offset = stats.sample_barge_in_offset_s(rng)
            overlap = stats.sample_barge_in_overlap_s(rng, BARGE_MARGIN_S)
            draws["barge_in_offset_s"].append(offset)
            draws["barge_in_overlap_s"].append(overlap)
            runs = (voiced or {}).get(prev.utt.utt_id) or ((0, prev.clip_ms),)
            start, cut = _barge_in(prev, d, busy[USER_CHANNEL], whole_ms(offset), whole_ms(overlap), runs, where)
            placed[last_turn] = Placed(prev.utt, prev.start_ms, cut, prev.clip_ms, cut=True)
            busy[SYSTEM_CHANNEL] = cut
        else:  # shift
            gap = stats.sample_shift_gap_s(rng)
            draws["shift_gap_s"].append(gap)
            start = max(prev.end_ms + whole_ms(gap), busy[ch] + OWN_GAP_MS)
        placed.append(Placed(u, start, start + d, d))
        busy[ch] = start + d
        last_turn = len(placed) - 1
    length = max(p.end_ms for p in placed) + TAIL_MS
    return _checked(dialogue, tuple(placed), length, tuple(dropped), draws)


def _barge_in(h: Placed, d: int, user_busy: int, offset: int, overlap: int, runs: Voiced,
              where: str) -> tuple[int, int]:
    """(where the user's barge-in TURN of `d` ms starts, where the system clip `h` is cut).

    Wanted: the user starts `offset` into the system clip, and not before `cut_after_chars` of it are said; the
    cut comes `overlap` later, inside a voiced stretch (`CUT_VOICED_MS` into it, so the VAD hears the system up
    to the cut), at least `CUT_REMAINDER_MS` before the clip's end, and the user outlasts it by `BARGE_TAIL_MS`.
    Where that cannot be had, the user starts earlier (never before `MIN_HEARD_MS` nor near the user's own last
    speech) and the overlap moves to the nearest voiced point; the `cut_after_chars` floor is given up first, then
    the wish that the user starts `SPEAKING_AT_S_MS` inside a voiced stretch.
    """
    o_min = whole_ms(_PARAMS.shift_overlap_max_s) + LATE_ONSET_MS + 1
    o_max = d - BARGE_TAIL_MS
    c_hi = h.start_ms + h.clip_ms - CUT_REMAINDER_MS
    floor = max(h.start_ms + MIN_HEARD_MS, user_busy + OWN_GAP_MS)
    allowed = [(h.start_ms + a + CUT_VOICED_MS, h.start_ms + b) for a, b in runs if b - a > CUT_VOICED_MS]
    said = h.start_ms + _chars_ms(h.utt, h.clip_ms) + CUT_AFTER_PAD_MS if h.utt.cut_after_chars else floor
    # The user should start while the system is audibly speaking (not in a breath between its words): stop latency
    # is defined only for a model speaking at s, so a barge-in into a micro-pause would measure nothing.
    def speaking(x: int) -> bool:
        return any(h.start_ms + a + SPEAKING_AT_S_MS <= x <= h.start_ms + b - SPEAKING_AT_S_MS for a, b in runs)

    for x_lo, need_voice in ((max(floor, said), True), (floor, True), (max(floor, said), False), (floor, False)):
        want = max(h.start_ms + offset, x_lo)
        for x in range(min(want, c_hi - o_min), x_lo - 1, -50):
            if need_voice and not speaking(x):
                continue
            lo_c, hi_c = x + o_min, min(c_hi, x + o_max)
            target = min(max(x + overlap, lo_c), hi_c)
            spans = [(max(a, lo_c), min(b, hi_c)) for a, b in allowed]
            cuts = [min(max(target, a), b) for a, b in spans if a <= b]
            if cuts:
                return x, min(cuts, key=lambda c: (abs(c - target), c))
    raise TimelineError(f"{where}: the system turn {h.utt.utt_id} ({h.clip_ms} ms) is too short to be cut by this "
                        f"barge-in with an overlap over {o_min} ms at a voiced point")


def intended_events(placed: Sequence[Placed]) -> list[Intended]:
    """The evaluated events the script means, from the placed utterances (DESIGN.md table): a user->system
    SHIFT at each system TURN that follows a user TURN, a PAUSE at each user TURN continuing the user's turn,
    a BC at each placed user backchannel, a BARGE_IN at each user barge-in TURN."""
    out: list[Intended] = []
    prev: Placed | None = None
    for p in placed:
        u = p.utt
        if u.kind == "bc":
            if u.speaker == "user":
                out.append(Intended("BC", p.start_ms, p.end_ms, u.utt_id, u.utt_id))
            continue
        if u.speaker == "system" and prev is not None and prev.utt.speaker == "user":
            out.append(Intended("SHIFT", prev.end_ms, p.start_ms, prev.utt.utt_id, u.utt_id))
        elif u.speaker == "user" and u.relation == "pause" and prev is not None:
            out.append(Intended("PAUSE", prev.end_ms, p.start_ms, prev.utt.utt_id, u.utt_id))
        elif u.speaker == "user" and u.relation == "barge_in":
            out.append(Intended("BARGE_IN", p.start_ms, p.end_ms, u.utt_id, u.utt_id))
        prev = p
    return out


def ipus_of(placed: Sequence[Placed]) -> list[Ipu]:
    """Both channels' IPUs as the audio has them: one per placed utterance."""
    out: list[Ipu] = []
    for ch in (USER_CHANNEL, SYSTEM_CHANNEL):
        out += ipus_from_spans([(p.start_s, p.end_s) for p in placed if p.channel == ch], ch, _PARAMS)
    return out


def _checked(dialogue: Dialogue, placed: tuple[Placed, ...], length_ms: int, dropped: tuple[str, ...],
             draws: dict[str, list[float]]) -> Timeline:
    ipus = ipus_of(placed)
    where = f"dialogue {dialogue.dialogue_id}"
    if len(ipus) != len(placed):
        raise TimelineError(f"{where}: {len(placed)} utterances made {len(ipus)} IPUs (two of one party too close)")
    for p, ipu in zip(sorted(placed, key=lambda p: (p.channel, p.start_ms)), ipus, strict=True):
        if ipu.kind != p.utt.kind:
            raise TimelineError(f"{where}: {p.utt.utt_id} is a {p.utt.kind} but lasts {p.end_ms - p.start_ms} ms "
                                f"(extracts as a {ipu.kind})")
    events = extract_events([i for i in ipus if i.channel == USER_CHANNEL],
                            [i for i in ipus if i.channel == SYSTEM_CHANNEL], _PARAMS)
    evaluated = evaluated_events(events, ipus, USER_CHANNEL, CONTEXT_S)
    intended = intended_events(placed)
    got = [(r.event.type, whole_ms(r.event_start_s), whole_ms(r.event_end_s)) for r in evaluated]
    want = [(i.type, i.s_ms, i.t_ms) for i in sorted(intended, key=lambda i: i.s_ms)]
    if got != want:
        diff = [f"extracted {g} / intended {w}" for g, w in zip(got, want, strict=False) if g != w][:3]
        raise TimelineError(f"{where}: the events extracted from the placed IPUs differ from the script's "
                            f"({len(got)} vs {len(want)}): {'; '.join(diff) or 'counts differ'}")
    return Timeline(dialogue, placed, length_ms, tuple(ipus), tuple(events), tuple(evaluated),
                    tuple(sorted(intended, key=lambda i: i.s_ms)), dropped, draws)


# ------------------------------------------------------------------------------------------------ audio


def render(timeline: Timeline, clips: Mapping[str, np.ndarray]) -> np.ndarray:
    """The dialogue's (n, 2) float32 audio, ch0 user, ch1 system; `clips` are the trimmed clips by utt_id."""
    audio = np.zeros((timeline.length_ms * MS, 2), np.float32)
    fade = np.linspace(1.0, 0.0, FADE_MS * MS, dtype=np.float32)
    for p in timeline.placed:
        clip = np.asarray(clips[p.utt.utt_id], np.float32)
        if clip.size != p.clip_ms * MS:
            raise TimelineError(f"{p.utt.utt_id}: clip of {clip.size} samples, placed as {p.clip_ms} ms")
        clip = clip[: (p.end_ms - p.start_ms) * MS].copy()
        if p.cut:
            clip[-fade.size:] *= fade
        audio[p.start_ms * MS : p.end_ms * MS, p.channel] += clip
    return audio


# ------------------------------------------------------------------------------------------------ rows


def _floor_text(placed: Sequence[Placed], before: str, joiner: str) -> str:
    """The user's whole turn ending with utterance `before`: its TURN IPUs linked by held pauses, joined."""
    turns = [p for p in placed if p.utt.kind == "turn"]
    k = next(i for i, p in enumerate(turns) if p.utt.utt_id == before)
    parts = [turns[k].utt.text]
    while k > 0 and turns[k].utt.relation == "pause" and turns[k - 1].utt.speaker == turns[k].utt.speaker:
        k -= 1
        parts.insert(0, turns[k].utt.text)
    return joiner.join(parts)


@dataclass(frozen=True)
class Voices:
    user: str
    system: str
    tts_backend: str


def event_rows(timeline: Timeline, audio: np.ndarray, voices: Voices) -> list[tuple[M3Event, np.ndarray]]:
    """One (M3Event, (n, 2) audio) per evaluated event, in order of s: the audio is the dialogue cut to
    [τ(L), s + Δ) and zero-padded past its end; every time is on the clip clock (0 = τ(L)), in whole ms."""
    d = timeline.dialogue
    joiner = LANGUAGES[d.language].joiner
    by_id = timeline.by_id()
    out = []
    for k, (r, want) in enumerate(zip(timeline.evaluated, timeline.intended, strict=True)):
        tau, s, t = whole_ms(r.context_start_s), whole_ms(r.event_start_s), whole_ms(r.event_end_s)
        b, w = whole_ms(r.prompt_start_s), s + whole_ms(WINDOW_S)
        clip = np.zeros(((w - tau) * MS, 2), np.float32)
        part = audio[tau * MS : w * MS]
        clip[: part.shape[0]] = part
        utts = tuple(
            Utterance(p.utt.utt_id, p.utt.speaker, p.utt.kind, p.utt.text, max(p.start_ms - tau, 0) / 1000,
                      (p.end_ms - tau) / 1000, p.cut)
            for p in timeline.placed if p.end_ms > tau and p.start_ms < w)
        question = reply = gold = ""
        aliases: tuple[str, ...] = ()
        dependent = False
        if r.event.type == "SHIFT":
            question = _floor_text(timeline.placed, want.before, joiner)
            answer = by_id[want.after].utt
            reply, gold, aliases, dependent = (answer.text, answer.gold_answer, answer.gold_aliases,
                                               answer.context_dependent)
        event = M3Event(
            event_id=f"{d.dialogue_id}-e{k:02d}", dialogue_id=d.dialogue_id, language=d.language, domain=d.domain,
            event_type=r.event.type, prompt_start_s=(b - tau) / 1000, event_start_s=(s - tau) / 1000,
            event_end_s=(t - tau) / 1000, window_end_s=(w - tau) / 1000, dialogue_offset_s=tau / 1000,
            utterances=utts, question=question, reply=reply, gold_answer=gold, gold_aliases=tuple(aliases),
            context_dependent=dependent, user_voice=voices.user, system_voice=voices.system,
            tts_backend=voices.tts_backend, seed=d.seed)
        event.validate()
        out.append((event, clip))
    return out
