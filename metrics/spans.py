"""Speech spans: half-open `[start_s, end_s)` intervals in seconds on one channel (docs/conventions.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dataset_builder.atomic import round_ms


@dataclass(frozen=True)
class Span:
    start_s: float
    end_s: float

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise ValueError(f"span ends before it starts: [{self.start_s}, {self.end_s})")

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def to_list(self) -> list[float]:
        return [round_ms(self.start_s), round_ms(self.end_s)]


def _sorted(spans: Iterable[Span]) -> list[Span]:
    return sorted(spans, key=lambda s: (s.start_s, s.end_s))


def merge_spans(spans: Iterable[Span], max_gap_s: float) -> list[Span]:
    """Merge overlapping spans and spans separated by a gap strictly shorter than `max_gap_s`."""
    out: list[Span] = []
    for s in _sorted(spans):
        if out and s.start_s - out[-1].end_s < max_gap_s:
            out[-1] = Span(out[-1].start_s, max(out[-1].end_s, s.end_s))
        else:
            out.append(s)
    return out


def drop_short(spans: Iterable[Span], min_s: float) -> list[Span]:
    """Keep spans lasting at least `min_s` seconds."""
    return [s for s in spans if s.duration_s >= min_s]


def active_at(spans: Sequence[Span], t: float) -> Span | None:
    """The span covering time `t` (start <= t < end), or None."""
    for s in spans:
        if s.start_s <= t < s.end_s:
            return s
    return None


def onsets_in(spans: Sequence[Span], a: float, b: float) -> list[Span]:
    """Spans whose start lies in `[a, b)`: genuine onsets inside a window, not speech carried into it."""
    return [s for s in spans if a <= s.start_s < b]


def speech_in(spans: Sequence[Span], a: float, b: float) -> float:
    """Seconds of speech overlapping the window `[a, b)`."""
    return sum(max(0.0, min(s.end_s, b) - max(s.start_s, a)) for s in spans)


def spans_to_json(spans: Iterable[Span]) -> list[list[float]]:
    return [s.to_list() for s in spans]


def spans_from_json(data: Iterable[Sequence[float]]) -> list[Span]:
    return [Span(float(a), float(b)) for a, b in data]
