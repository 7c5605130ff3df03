"""What the ASR hears of a VAD span: the span padded by ASR_PAD_S into the silence around it, inside the scored
window, never into the other channel's speech or the model's own speech that was not chosen (metrics/scoring.py)."""

from __future__ import annotations

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR
from metrics.asr import DEFAULT_ASR, get_asr
from metrics.judges import HeuristicJudge
from metrics.scoring import ASR_PAD_S, asr_audio, asr_spans, spans_audio
from metrics.spans import Span
from metrics.vad import SileroVAD, VADParams

P = 0.25  # a pad exact in binary, so the known answers are exact


def test_a_span_is_padded_on_both_sides() -> None:
    assert asr_spans([Span(1.0, 1.5)], (0.0, 10.0), pad_s=P) == [Span(0.75, 1.75)]


def test_the_default_pad_is_the_named_parameter() -> None:
    got = asr_spans([Span(2.0, 3.0)], (0.0, 10.0))
    assert got == [Span(2.0 - ASR_PAD_S, 3.0 + ASR_PAD_S)]


def test_the_pad_stays_inside_the_window() -> None:
    assert asr_spans([Span(1.0, 1.5)], (0.875, 1.625), pad_s=P) == [Span(0.875, 1.625)]
    assert asr_spans([Span(1.0, 1.5)], (1.0, 1.5), pad_s=P) == [Span(1.0, 1.5)]


def test_a_span_reaching_past_the_window_keeps_its_own_extent() -> None:
    """MPE gives the ASR whole spans that overlap a window: the span is kept, only its pad is clipped."""
    assert asr_spans([Span(0.5, 1.5)], (1.0, 3.0), pad_s=P) == [Span(0.5, 1.75)]
    assert asr_spans([Span(2.5, 3.5)], (1.0, 3.0), pad_s=P) == [Span(2.25, 3.5)]


def test_the_pad_stops_at_the_other_channels_speech() -> None:
    user = [Span(0.0, 0.875), Span(1.625, 4.0)]
    assert asr_spans([Span(1.0, 1.5)], (0.0, 10.0), user, pad_s=P) == [Span(0.875, 1.625)]


def test_no_pad_on_a_side_that_overlaps_the_other_channels_speech() -> None:
    assert asr_spans([Span(1.0, 1.5)], (0.0, 10.0), [Span(0.5, 1.25)], pad_s=P) == [Span(1.0, 1.75)]
    assert asr_spans([Span(1.0, 1.5)], (0.0, 10.0), [Span(0.0, 5.0)], pad_s=P) == [Span(1.0, 1.5)]


def test_the_pad_stops_at_model_speech_that_was_not_chosen() -> None:
    unchosen = Span(1.625, 2.5)
    assert asr_spans([Span(1.0, 1.5)], (0.0, 10.0), [unchosen], pad_s=P) == [Span(0.75, 1.625)]


def test_padded_spans_that_meet_are_merged_so_no_sample_is_heard_twice() -> None:
    assert asr_spans([Span(1.9, 2.4), Span(1.0, 1.5)], (0.0, 10.0), pad_s=P) == [Span(0.75, 2.65)]
    # spans whose pads do not meet stay apart: the gap between them is not heard
    assert asr_spans([Span(1.0, 1.5), Span(2.25, 3.0)], (0.0, 10.0), pad_s=P) == [Span(0.75, 1.75), Span(2.0, 3.25)]


def test_a_fence_starting_or_ending_with_the_span_leaves_the_other_side_padded() -> None:
    """Other speech that starts exactly with the chosen span is not before it, and speech that ends exactly with it
    is not after it: each stops only the pad on its own side."""
    assert asr_spans([Span(1.0, 1.5)], (0.0, 10.0), [Span(1.0, 1.25)], pad_s=P) == [Span(0.75, 1.75)]
    assert asr_spans([Span(1.0, 1.5)], (0.0, 10.0), [Span(1.25, 1.5)], pad_s=P) == [Span(0.75, 1.75)]
    assert asr_spans([Span(1.0, 1.5)], (0.0, 10.0), [Span(0.5, 1.5)], pad_s=P) == [Span(1.0, 1.75)]
    assert asr_spans([Span(1.0, 1.5)], (0.0, 10.0), [Span(1.0, 2.0)], pad_s=P) == [Span(0.75, 1.5)]


def test_asr_audio_cuts_then_pads_and_the_cut_off_part_is_a_fence() -> None:
    x = np.arange(40, dtype=np.float32)  # 10 Hz: sample k is time k/10 s
    # [0.5, 2.0) cut at lo=1.0: [1.0, 2.0), padded to 2.25 (no further: the window); 0.5-1.0 is not heard.
    got = asr_audio(x, 10, [Span(0.5, 2.0)], (1.0, 2.25), lo=1.0, pad_s=P)
    assert got.tolist() == list(range(10, 22))
    # Without a cut, the same span is heard from 0.25 s (its pad into the silence before it) on.
    assert asr_audio(x, 10, [Span(0.5, 2.0)], (0.0, 4.0), pad_s=P).tolist() == list(range(2, 22))


def test_the_cut_off_part_fences_the_pad_inside_a_wider_window() -> None:
    """A span cut at lo or hi inside the window: its pad does not reach back into the part cut off (that speech was
    not chosen), though the window would allow it."""
    x = np.arange(40, dtype=np.float32)  # 10 Hz: sample k is time k/10 s
    # [0.5, 2.0) cut at lo=1.0 -> [1.0, 2.0); left pad 0.75 stops at the cut part's end, 1.0; right pad to 2.25
    assert asr_audio(x, 10, [Span(0.5, 2.0)], (0.0, 4.0), lo=1.0, pad_s=P).tolist() == list(range(10, 22))
    # [2.0, 3.5) cut at hi=3.0 -> [2.0, 3.0); left pad to 1.75, right pad stops at the cut part's start, 3.0
    assert asr_audio(x, 10, [Span(2.0, 3.5)], (0.0, 4.0), hi=3.0, pad_s=P).tolist() == list(range(17, 30))
    # a span that only touches the cut (ends at lo, starts at hi) has nothing inside it: nothing is heard
    assert asr_audio(x, 10, [Span(0.5, 1.0)], (0.0, 4.0), lo=1.0, pad_s=P).tolist() == []
    assert asr_audio(x, 10, [Span(3.0, 3.5)], (0.0, 4.0), hi=3.0, pad_s=P).tolist() == []


@pytest.fixture(scope="module")
def asr():
    return get_asr(DEFAULT_ASR)


def test_a_clipped_acknowledgement_is_heard_as_one_when_padded(piper, asr) -> None:
    """Real piper, real whisper: a "mm-hmm" whose VAD span starts 46 ms after the voice does. Given only the
    span's samples, whisper hears "remember." and the silent window would fail on an intrusion; padded, it hears
    the acknowledgement the model said."""
    clip = piper.synthesize("Mm-hmm.", "piper-joe-psola-p136-f108")
    second = np.zeros(SESSION_SR, np.float32)
    x = np.concatenate([second, clip, second])
    (span,) = SileroVAD(VADParams()).spans(x, SESSION_SR)
    late = Span(span.start_s + 0.046, span.end_s)
    window = (0.0, x.size / SESSION_SR)
    judge = HeuristicJudge()
    unpadded = asr.transcribe(spans_audio(x, SESSION_SR, [late]), SESSION_SR)
    padded = asr.transcribe(asr_audio(x, SESSION_SR, [late], window), SESSION_SR)
    assert judge.classify_ack(unpadded).label == "intrusion", unpadded
    assert judge.classify_ack(padded).label == "acknowledgement", padded
    # The user speaking up to the span's start leaves nothing to pad before it: the onset stays clipped.
    fenced = asr.transcribe(asr_audio(x, SESSION_SR, [late], window, [Span(0.0, late.start_s)]), SESSION_SR)
    assert judge.classify_ack(fenced).label == "intrusion", fenced
