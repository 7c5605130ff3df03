"""`Frame.note` (docs/adding-a-model.md: notes): optional, backwards compatible, checked like the text."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.protocol import Frame
from eval.conformance import frame_problem
from eval.orchestrator import check_frame

N = 1920


def test_a_frame_may_carry_a_note_and_older_frames_are_unchanged() -> None:
    audio = np.zeros(N, np.float32)
    assert Frame(audio) == (audio, None, None) and Frame(audio, "hi").note is None
    for frame in (Frame(audio), Frame(audio, "hi"), Frame(audio, None, "heard 'hey aria' -> answers"),
                  (audio, None)):  # a plain 2-tuple, as adapters written before notes return
        assert frame_problem(frame, N) is None
    assert check_frame(Frame(audio, "hi", "heard x"), N, 0.0)[1:] == ("hi", "heard x")
    assert check_frame((audio, "hi"), N, 0.0)[1:] == ("hi", None)
    assert check_frame(audio, N, 0.0)[1:] == (None, None)


@pytest.mark.parametrize(("frame", "problem"), [
    (Frame(np.zeros(N, np.float32), None, 3), "returned a note of type int, expected str or None"),
    ((np.zeros(N, np.float32), None, None, None), "returned tuple, not Frame(audio, text)"),
])
def test_a_bad_note_or_shape_is_named(frame: tuple, problem: str) -> None:
    assert (frame_problem(frame, N) or "").startswith(problem)
