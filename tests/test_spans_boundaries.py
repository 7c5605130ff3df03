"""Span helpers on their boundaries: half-open intervals, strict merge gaps, inclusive minimum duration
(tests/MUTATION.md).

Every window rule of the scorers rests on these (docs/conventions.md: a span is `[start_s, end_s)`), so each is checked
exactly on its edge and just either side of it.
"""

from __future__ import annotations

import pytest

from metrics.spans import (
    Span,
    active_at,
    drop_short,
    merge_spans,
    onsets_in,
    spans_from_json,
    spans_to_json,
    speech_in,
)

MS = 0.001


def test_span_is_half_open_and_may_be_empty() -> None:
    assert Span(1.0, 1.0).duration_s == 0.0
    assert Span(1.0, 2.5).duration_s == 1.5
    with pytest.raises(ValueError, match=r"span ends before it starts: \[2.0, 1.0\)"):
        Span(2.0, 1.0)


@pytest.mark.parametrize("t, hit", [(1.0 - MS, False), (1.0, True), (1.5, True), (2.0 - MS, True), (2.0, False)])
def test_active_at_edges(t: float, hit: bool) -> None:
    spans = [Span(1.0, 2.0), Span(3.0, 4.0)]
    assert (active_at(spans, t) == Span(1.0, 2.0)) is hit
    assert active_at(spans, 2.5) is None and active_at([], 1.0) is None
    assert active_at([Span(1.0, 2.0), Span(2.0, 3.0)], 2.0) == Span(2.0, 3.0)


@pytest.mark.parametrize("start, inside", [(1.0 - MS, False), (1.0, True), (2.0 - MS, True), (2.0, False)])
def test_onsets_in_edges(start: float, inside: bool) -> None:
    assert (onsets_in([Span(start, start + 5.0)], 1.0, 2.0) != []) is inside


def test_speech_in_clips_to_the_window() -> None:
    spans = [Span(0.0, 1.5), Span(1.75, 2.0), Span(3.0, 5.0)]
    assert speech_in(spans, 1.0, 4.0) == pytest.approx(0.5 + 0.25 + 1.0)
    assert speech_in(spans, 1.5, 1.75) == 0.0  # the gap between spans
    assert speech_in(spans, 5.0, 9.0) == 0.0 and speech_in([], 0.0, 9.0) == 0.0


@pytest.mark.parametrize("gap, merged", [(0.25 - MS, True), (0.25, False), (0.25 + MS, False), (0.0, True)])
def test_merge_gap_is_strict(gap: float, merged: bool) -> None:
    """Spans closer than max_gap_s merge; a gap of exactly max_gap_s keeps them apart (docs/benchmarks/mpe.md: pauses <
    300 ms merged). Times here are exact binary fractions, so "exactly" is exact (2.3 - 2.0 is 0.2999... in floats)."""
    a, b = Span(1.0, 2.0), Span(2.0 + gap, 3.0)
    assert merge_spans([b, a], 0.25) == ([Span(1.0, 3.0)] if merged else [a, b])


def test_merge_sorts_and_swallows_contained_spans() -> None:
    spans = [Span(5.0, 6.0), Span(1.0, 4.0), Span(2.0, 3.0), Span(1.0, 2.0), Span(4.1, 4.5)]
    assert merge_spans(spans, 0.3) == [Span(1.0, 4.5), Span(5.0, 6.0)]
    assert merge_spans([Span(2.0, 3.0), Span(1.0, 3.5)], 0.0) == [Span(1.0, 3.5)]
    assert merge_spans([], 0.3) == []


@pytest.mark.parametrize("length, kept", [(0.25 - MS, False), (0.25, True), (0.25 + MS, True)])
def test_drop_short_keeps_the_minimum(length: float, kept: bool) -> None:
    """A span lasting exactly min_s is kept (docs/benchmarks/mpe.md: min_speech_ms=250)."""
    span = Span(1.0, round(1.0 + length, 3))
    assert drop_short([span, Span(5.0, 6.0)], 0.25) == ([span] if kept else []) + [Span(5.0, 6.0)]


def test_json_round_trip_is_ms_rounded() -> None:
    spans = [Span(1.00049, 2.0006), Span(3.0, 3.5)]
    assert spans_to_json(spans) == [[1.0, 2.001], [3.0, 3.5]]
    assert Span(0.1234, 0.5678).to_list() == [0.123, 0.568]
    back = spans_from_json([[1, 2], ["3.5", 4.0]])
    assert back == [Span(1.0, 2.0), Span(3.5, 4.0)] and all(isinstance(s.start_s, float) for s in back)
