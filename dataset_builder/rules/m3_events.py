"""M3 events from speech spans (DESIGN.md "Parties and channels", paper §III-A): IPUs, then SHIFT / PAUSE / BC /
BARGE_IN for both parties, then the user-caused events a benchmark evaluates with their regions b and τ(L).

Pure functions on times in seconds: no audio, no VAD (dataset_builder may not import metrics; the VAD front end is
`metrics/m3/extract.py`). The builder, the authors'-layout import, the CLI and the tests all come through here, so
each rule has one definition.

The three boundaries, each decided by one named predicate of `EventParams`:
- `splits_ipu(gap)`: a silence **longer than** 0.5 s splits IPUs; exactly 0.5 s does not (paper: "separated by
  silences longer than 0.5 seconds").
- `is_bc(duration)`: an IPU of **0.8 s or less** is a BC, longer is a TURN (paper: "0.8 seconds or less").
- `is_barge_in(overlap)`: an overlap **longer than** 0.4 s is a BARGE_IN; exactly 0.4 s is still a SHIFT (paper:
  "overlaps of up to 0.4 seconds are allowed").
Times are compared with a 1 ns tolerance (`TIME_EPS_S`): `1.7 - 1.2` is 0.49999999999999994 in binary and must
count as the 0.5 s it means, on both sides of each boundary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from dataset_builder.m3.schema import CONTEXT_S, EVENT_TYPES, USER_CHANNEL, WINDOW_S
from dataset_builder.schema import SchemaError

TIME_EPS_S = 1e-9  # float noise, far below any corpus's time resolution (ms)
CHANNELS = (0, 1)
TURN, BC = "turn", "bc"  # Ipu.kind (schema.KINDS)


@dataclass(frozen=True)
class EventParams:
    """The paper's three thresholds (§III-A). Each boundary's inclusive/exclusive side is one method below."""

    ipu_gap_s: float = 0.5  # silences > this split IPUs
    bc_max_s: float = 0.8  # IPUs <= this are BCs
    shift_overlap_max_s: float = 0.4  # overlaps <= this are SHIFTs, longer ones BARGE_INs

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"EventParams.{f.name} must be a positive number, got {v!r}")

    def splits_ipu(self, gap_s: float) -> bool:
        """A silence splits two IPUs only when strictly longer than `ipu_gap_s`."""
        return gap_s > self.ipu_gap_s + TIME_EPS_S

    def is_bc(self, duration_s: float) -> bool:
        """An IPU is a BC when at most `bc_max_s` long (inclusive)."""
        return duration_s <= self.bc_max_s + TIME_EPS_S

    def is_barge_in(self, overlap_s: float) -> bool:
        """A speaker change is a BARGE_IN when the overlap is strictly longer than `shift_overlap_max_s`."""
        return overlap_s > self.shift_overlap_max_s + TIME_EPS_S

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EventParams:
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown EventParams fields: {sorted(unknown)}")
        return cls(**d)


@dataclass(frozen=True)
class Ipu:
    """An inter-pausal unit on one channel: speech whose inner silences are all <= ipu_gap_s."""

    channel: int
    start_s: float
    end_s: float
    kind: str  # TURN | BC
    text: str = ""  # the words, when the IPU came from a word-timestamp transcript

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def is_turn(self) -> bool:
        return self.kind == TURN


@dataclass(frozen=True)
class Event:
    """One event e = (type, s, t) of either party (paper §III-A), with the turns it was decided from.

    `channel` is the party whose act the event is: SHIFT the party that yields (its TURN ends at s), PAUSE the
    party that pauses, BC and BARGE_IN the party that speaks. `turn_start_s` is the start of `channel`'s TURN that
    ends at s (SHIFT, PAUSE) or s itself (BC, BARGE_IN: no preceding turn of theirs). `other_start_s` /
    `other_end_s` is the other party's TURN the event relates to: SHIFT the TURN that takes over (it starts at t),
    BARGE_IN the TURN interrupted, BC the TURN active at s (None when the BC falls outside the other's TURNs),
    PAUSE None.
    """

    type: str  # schema.EVENT_TYPES
    start_s: float  # s
    end_s: float  # t (t < s for a SHIFT that overlaps, by at most shift_overlap_max_s)
    channel: int
    other_channel: int
    turn_start_s: float
    other_start_s: float | None = None
    other_end_s: float | None = None

    @property
    def duration_s(self) -> float:
        """t - s: the gap of a SHIFT (negative when overlapping) or PAUSE, the length of a BC or BARGE_IN IPU."""
        return self.end_s - self.start_s

    @property
    def overlap_s(self) -> float:
        """SHIFT: how much the taker overlaps the yielder; BARGE_IN: how long the interrupted party goes on
        talking after s; 0 for the others."""
        if self.type == "SHIFT":
            return max(0.0, self.start_s - self.end_s)
        if self.type == "BARGE_IN" and self.other_end_s is not None:
            return self.other_end_s - self.start_s
        return 0.0


def _pair(span: Any) -> tuple[float, float]:
    if hasattr(span, "start_s"):
        return float(span.start_s), float(span.end_s)
    a, b = span
    return float(a), float(b)


def _merge(items: Iterable[tuple[float, float, str]], channel: int, params: EventParams) -> list[Ipu]:
    """Sorted (start, end, text) pieces -> IPUs: pieces not split by a silence > ipu_gap_s (or overlapping) join."""
    runs: list[list[Any]] = []
    for a, b, text in sorted(items, key=lambda x: (x[0], x[1])):
        if not (math.isfinite(a) and math.isfinite(b)) or b < a:
            raise ValueError(f"channel {channel}: bad span [{a}, {b}]")
        if runs and not params.splits_ipu(a - runs[-1][1]):
            runs[-1][1] = max(runs[-1][1], b)
            if text:
                runs[-1][2].append(text)
        else:
            runs.append([a, b, [text] if text else []])
    return [Ipu(channel, a, b, BC if params.is_bc(b - a) else TURN, _join(words)) for a, b, words in runs]


def _cjk(ch: str) -> bool:
    o = ord(ch)
    return 0x3000 <= o <= 0x30FF or 0x4E00 <= o <= 0x9FFF or 0xFF00 <= o <= 0xFFEF


def _join(words: list[str]) -> str:
    """Words -> text: spaces between words, none between two Japanese ones (aligners split 'そうですね' into
    morphemes that are written together)."""
    out = ""
    for w in words:
        out += w if not out or (_cjk(out[-1]) and _cjk(w[0])) else " " + w
    return out


def ipus_from_spans(spans: Iterable[Any], channel: int, params: EventParams | None = None) -> list[Ipu]:
    """Speech spans of one channel ((start, end) pairs or objects with start_s/end_s, any order) -> its IPUs.

    Spans closer than the split gap are joined, so the VAD's own (finer) merging never decides a 0.5 s split.
    """
    if channel not in CHANNELS:
        raise ValueError(f"channel must be 0 or 1, got {channel}")
    return _merge(((*_pair(s), "") for s in spans), channel, params or EventParams())


def _check_channel(ipus: Sequence[Ipu], channel: int, params: EventParams) -> list[Ipu]:
    out = sorted(ipus, key=lambda i: (i.start_s, i.end_s))
    for i, ipu in enumerate(out):
        if ipu.channel != channel:
            raise ValueError(f"an IPU of channel {ipu.channel} was given as channel {channel}")
        if i and not params.splits_ipu(ipu.start_s - out[i - 1].end_s):
            raise ValueError(f"channel {channel}: IPUs [{out[i - 1].start_s}, {out[i - 1].end_s}] and "
                             f"[{ipu.start_s}, {ipu.end_s}] are not split by the IPU rule; build them with "
                             "ipus_from_spans")
    return out


def extract_events(ipus_ch0: Sequence[Ipu], ipus_ch1: Sequence[Ipu], params: EventParams | None = None) -> list[Event]:
    """Every SHIFT, PAUSE, BC and BARGE_IN of both parties, sorted by s (then channel).

    TURNs are visited in order of start. For each TURN B the floor was last held by A = the earlier-starting TURN
    (either party) that ends latest (ties: the later-starting one, the most recent speaker):
    - A is the other party and ends after B starts: overlap = A.end - B.start. Up to `shift_overlap_max_s` it is a
      SHIFT from A's party (s = A.end, t = B.start < s); longer, a BARGE_IN by B's party (s, t = B's IPU). A TURN
      that starts and ends inside the other's TURN is therefore a BARGE_IN (its overlap is its whole length,
      > 0.8 s): in a corpus it is an attempt to take the floor, and the model should react to it as one.
    - A is the other party and has ended: SHIFT (s = A.end, t = B.start).
    - A is B's own party: PAUSE (s = A.end, t = B.start, always > 0.5 s since the IPUs are split).
    Using the latest-ending TURN, not the latest-starting one, keeps the floor with the speaker who kept talking:
    user TURN [0, 10], system barge-in [3, 5], user TURN [11, 15] gives a system BARGE_IN at 3 and a user PAUSE
    [10, 11], not a system->user SHIFT [5, 11].
    BCs are not TURNs: they never take the floor, so a BC between two TURNs of the other party leaves the PAUSE
    between them a PAUSE, and a BC between TURNs of different parties leaves the SHIFT a SHIFT. Every BC IPU is a
    BC event; `other_start_s` names the other's TURN active at its start (start <= s < end), None if there is
    none (a BC in the other's pause or in silence: recorded, but not one the benchmark evaluates).
    """
    p = params or EventParams()
    by_channel = [_check_channel(ipus_ch0, 0, p), _check_channel(ipus_ch1, 1, p)]
    turns = sorted((i for ch in by_channel for i in ch if i.is_turn), key=lambda i: (i.start_s, i.end_s, i.channel))
    events: list[Event] = []
    floor: Ipu | None = None
    for b in turns:
        a = floor
        if a is not None:
            if a.channel == b.channel:
                events.append(Event("PAUSE", a.end_s, b.start_s, b.channel, 1 - b.channel, a.start_s))
            elif p.is_barge_in(a.end_s - b.start_s):
                events.append(Event("BARGE_IN", b.start_s, b.end_s, b.channel, a.channel, b.start_s,
                                    a.start_s, a.end_s))
            else:
                events.append(Event("SHIFT", a.end_s, b.start_s, a.channel, b.channel, a.start_s,
                                    b.start_s, b.end_s))
        if floor is None or b.end_s >= floor.end_s - TIME_EPS_S:
            floor = b
    for ch, ipus in enumerate(by_channel):
        other_turns = [i for i in by_channel[1 - ch] if i.is_turn]
        for x in ipus:
            if x.is_turn:
                continue
            host = next((o for o in other_turns if o.start_s <= x.start_s < o.end_s), None)
            events.append(Event("BC", x.start_s, x.end_s, ch, 1 - ch, x.start_s,
                                host.start_s if host else None, host.end_s if host else None))
    events.sort(key=lambda e: (e.start_s, e.channel, EVENT_TYPES.index(e.type)))
    return events


# ----------------------------------------------------------------------------------- word-timestamp transcripts


@dataclass(frozen=True)
class Word:
    channel: int
    start_s: float
    end_s: float
    text: str


def parse_words(text: str, source: str = "<words>") -> list[Word]:
    """The M3 authors' `txt_align` format: one word a line, `channel<TAB>start<TAB>end<TAB>word`, seconds.

    Blank lines and lines starting with '#' are skipped. A bad line raises a one-line SchemaError naming the file
    and the line number.
    """
    words: list[Word] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.rstrip("\r\n").split("\t", 3)

        def bad(msg: str, n: int = n) -> SchemaError:
            return SchemaError(f"{source}:{n}: {msg} (expected channel<TAB>start<TAB>end<TAB>word)")

        if len(parts) != 4:
            raise bad(f"{len(parts)} tab-separated fields")
        ch, a, b, word = parts
        if ch.strip() not in ("0", "1"):
            raise bad(f"channel {ch!r} is not 0 or 1")
        try:
            start, end = float(a), float(b)
        except ValueError:
            raise bad(f"start {a!r} / end {b!r} not numbers") from None
        if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or end < start:
            raise bad(f"times [{a}, {b}] need 0 <= start <= end")
        if not word.strip():
            raise bad("empty word")
        words.append(Word(int(ch), start, end, word.strip()))
    return words


def read_words(path: str | Path) -> list[Word]:
    """Read a `txt_align` file (see `parse_words`); a missing or undecodable file is a one-line error too."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SchemaError(f"{p}: cannot read word timestamps ({err.__class__.__name__}: {err})") from None
    return parse_words(text, str(p))


def ipus_from_words(words: Iterable[Word], params: EventParams | None = None) -> tuple[list[Ipu], list[Ipu]]:
    """Word timestamps -> (channel 0 IPUs, channel 1 IPUs), the words joined into each IPU's text.

    The silence between words is what splits IPUs, exactly as between VAD spans; a corpus's alignment is the
    better source when it has one (no VAD edge error).
    """
    p = params or EventParams()
    ws = list(words)
    out = tuple(_merge(((w.start_s, w.end_s, w.text) for w in ws if w.channel == ch), ch, p) for ch in CHANNELS)
    return out[0], out[1]


# ---------------------------------------------------------------------------------------- evaluated events


@dataclass(frozen=True)
class EventRegions:
    """A user-caused event with its regions (DESIGN.md "Regions") on the dialogue clock.

    C = [context_start_s, prompt_start_s), P = [prompt_start_s, s), W = [s, s + Δ).
    """

    event: Event
    prompt_start_s: float  # b
    context_start_s: float  # τ(L)

    @property
    def event_start_s(self) -> float:
        return self.event.start_s

    @property
    def event_end_s(self) -> float:
        return self.event.end_s

    @property
    def window_end_s(self) -> float:
        return self.event.start_s + WINDOW_S


def is_evaluated(event: Event, user_channel: int = USER_CHANNEL) -> bool:
    """Whether the benchmark evaluates `event` with `user_channel` as the user (DESIGN.md table).

    user->system SHIFT, user PAUSE, user BARGE_IN, and a user BC that starts inside a system TURN (a BC in the
    system's pause or in silence leaves nothing whose continuation the model could show).
    """
    if event.channel != user_channel:
        return False
    if event.type == "BC":
        return event.other_start_s is not None
    return event.type in ("SHIFT", "PAUSE", "BARGE_IN")


def _latest_turn_before(turns: Sequence[Ipu], t: float) -> Ipu | None:
    before = [i for i in turns if i.start_s < t - TIME_EPS_S]
    return max(before, key=lambda i: i.start_s) if before else None


def prompt_start(event: Event, user_turns: Sequence[Ipu], user_pauses: Sequence[Event],
                 tol_s: float = 1e-3) -> float:
    """b for one user event: BC / BARGE_IN s; SHIFT the start of the user TURN that ends at s; PAUSE the start of
    the user's turn that contains the pause, i.e. walking back from the TURN that ends at s through the user's
    PAUSEs to the first TURN of that run (DESIGN.md: "its first TURN IPU after the last system TURN"; the walk
    also gets it right when a system barge-in sat inside the user's run).

    The TURN "that ends at s" is the latest user TURN starting before s, so events that do not match an IPU end
    exactly (an imported corpus's own annotation) still find their turn; `tol_s` matches a PAUSE's end to a TURN
    start when walking back.
    """
    if event.type in ("BC", "BARGE_IN"):
        return event.start_s
    turn = _latest_turn_before(user_turns, event.start_s)
    if turn is None:
        return event.start_s
    if event.type == "PAUSE":
        seen = {id(turn)}
        while True:
            link = next((q for q in user_pauses if abs(q.end_s - turn.start_s) <= tol_s), None)
            prev = _latest_turn_before(user_turns, link.start_s) if link else None
            if prev is None or id(prev) in seen:
                break
            seen.add(id(prev))
            turn = prev
    return turn.start_s


def context_start(ipus: Iterable[Ipu], b: float, context_s: float = CONTEXT_S) -> float:
    """τ(L): the start of the earliest IPU (either party, TURN or BC) overlapping [b - L, b]; b when none does.

    "Overlapping" means starting before b and ending after b - L (touching b - L is not overlapping), so C starts
    at an utterance's start and may be a little longer than L.
    """
    starts = [i.start_s for i in ipus if i.start_s < b - TIME_EPS_S and i.end_s > b - context_s + TIME_EPS_S]
    return min(starts, default=b)


def evaluated_events(events: Sequence[Event], ipus: Iterable[Ipu], user_channel: int = USER_CHANNEL,
                     context_s: float = CONTEXT_S) -> list[EventRegions]:
    """The user-caused events (`is_evaluated`) of one dialogue with b and τ(L), in order of s.

    `ipus` are both channels' IPUs (the IPU lists the events came from, or an imported corpus's TURN/BC spans).
    """
    if user_channel not in CHANNELS:
        raise ValueError(f"user_channel must be 0 or 1, got {user_channel}")
    all_ipus = list(ipus)
    user_turns = [i for i in all_ipus if i.channel == user_channel and i.is_turn]
    user_pauses = [e for e in events if e.type == "PAUSE" and e.channel == user_channel]
    out = []
    for e in sorted(events, key=lambda e: e.start_s):
        if is_evaluated(e, user_channel):
            b = prompt_start(e, user_turns, user_pauses)
            out.append(EventRegions(e, b, context_start(all_ipus, b, context_s)))
    return out


def channel_names(user_channel: int = USER_CHANNEL) -> dict[int, str]:
    """{channel: "user" | "system"} for a dialogue whose user is on `user_channel`."""
    if user_channel not in CHANNELS:
        raise ValueError(f"user_channel must be 0 or 1, got {user_channel}")
    return {user_channel: "user", 1 - user_channel: "system"}
