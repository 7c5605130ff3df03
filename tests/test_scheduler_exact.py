"""Schedule steps decided to the sample, against a fake model view whose state is set frame by frame
(tests/MUTATION.md).

The driver below is the orchestrator's loop in miniature: before each frame, the model view shows what a
streaming VAD would know after the frames already stepped (`speaking`, `silence_s`, `onsets`), the scheduler
fills the frame, and every clip start is recorded as a stream sample. Waits are asserted to the exact sample
where they end — on the threshold, and one frame / one sample either side — not within a frame's tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from eval.schedule import BargeIn, Ctx, Play, Silence, StepScheduler, TakeTurn, UntilTime

SR = 24_000
FRAME = 480  # 20 ms


@dataclass
class FakeModel:
    """A ModelView whose state the test sets before every frame."""

    speaking: bool = False
    silence_s: float = math.inf
    onsets: list[float] = field(default_factory=list)


State = Callable[[int], tuple[bool, float, list[float]]]


def speech(*spans: tuple[int, int], confirm: int = 0) -> State:
    """VAD-like state from model speech in [start, end) sample intervals, each known `confirm` samples late."""

    def state(pos: int) -> tuple[bool, float, list[float]]:
        known = [(a, b) for a, b in spans if pos >= a + confirm]
        speaking = any(pos < b for _, b in known)
        ended = [b for _, b in known if b <= pos]
        silence = 0.0 if speaking else ((pos - max(ended)) / SR if ended else math.inf)
        return speaking, silence, [a / SR for a, _ in known]

    return state


def silent(pos: int) -> tuple[bool, float, list[float]]:
    return False, math.inf, []


def drive(steps: list, state: State, frame: int = FRAME, max_samples: int = 60 * SR
          ) -> tuple[dict[str, int], dict[str, int], np.ndarray]:
    model = FakeModel()
    ctx = Ctx(sample=0, sr=SR, model=model)
    sched = StepScheduler(steps)
    starts: dict[str, int] = {}
    ends: dict[str, int] = {}
    out = []
    while not sched.done and ctx.sample < max_samples:
        model.speaking, model.silence_s, model.onsets = state(ctx.sample)
        before = ctx.sample
        out.append(sched.fill(frame, ctx))
        assert ctx.sample == before + frame and out[-1].shape == (frame,) and out[-1].dtype == np.float32
        for cue in ctx.cues:
            (starts if cue.kind == "clip_start" else ends)[cue.turn_id] = cue.sample
        ctx.cues = []
    return starts, ends, np.concatenate(out)


def clip(name: str, n: int = SR, value: float = 0.5) -> Play:
    return Play(name, "X", np.full(n, value, np.float32))


# --- take-turn: the endpoint rule ------------------------------------------------------------------------------

SPEECH_END = 57_600  # 2.4 s: a frame boundary for 20 ms and 80 ms frames


@pytest.mark.parametrize("frame", [480, 1920])
@pytest.mark.parametrize("end_shift, waited", [(0, 34_560), (1, 34_560 + 1), (-1, 34_560 - 1)])
def test_take_turn_ends_on_the_exact_endpoint_frame(frame: int, end_shift: int, waited: int) -> None:
    """tests/MUTATION.md bug 6: the wait ends on the first frame where silence_s >= endpoint_s (`>` ends one frame
    late).

    Speech ends at 2.4 s (+-1 sample); endpoint 1.44 s = 34,560 samples, a whole number of frames. The next clip
    starts at the first frame boundary at least 34,560 samples after the speech ended.
    """
    end = SPEECH_END + end_shift
    steps = [clip("a"), TakeTurn(endpoint_s=1.44, timeout_s=5.0, cap_s=20.0), clip("b")]
    starts, _, _ = drive(steps, speech((30_000, end), confirm=6000), frame=frame)
    assert starts["a"] == 0
    assert starts["b"] == frame * math.ceil((end + waited - end_shift) / frame)
    if end_shift == 0:
        assert starts["b"] == SPEECH_END + 34_560  # exactly on the threshold: not one frame later


def test_take_turn_endpoint_with_a_non_integral_frame_count() -> None:
    # endpoint 1.5 s = 36,000 samples = 75 frames of 480: the clip starts at 2.4 + 1.5 = 3.9 s exactly.
    steps = [clip("a"), TakeTurn(endpoint_s=1.5, timeout_s=5.0, cap_s=20.0), clip("b")]
    assert drive(steps, speech((30_000, SPEECH_END)))[0]["b"] == 93_600


@pytest.mark.parametrize("timeout_s, start_b", [(3.0, SR + 72_000), (3.0 - 1 / SR, SR + 72_000),
                                                (3.0 + 1 / SR, SR + 72_000 + FRAME)])
def test_take_turn_timeout_exact(timeout_s: float, start_b: int) -> None:
    """A model that never speaks is waited for exactly timeout_s from the step's start."""
    steps = [clip("a"), TakeTurn(endpoint_s=1.5, timeout_s=timeout_s, cap_s=20.0), clip("b")]
    starts, ends, user = drive(steps, silent)
    assert ends["a"] == SR and starts["b"] == start_b
    assert not user[SR:start_b].any() and user[start_b:start_b + 10].tolist() == [0.5] * 10


@pytest.mark.parametrize("cap_s, start_b", [(8.0, SR + 192_000), (8.0 + 1 / SR, SR + 192_000 + FRAME)])
def test_take_turn_cap_exact(cap_s: float, start_b: int) -> None:
    """A model that never stops is waited for exactly cap_s from the step's start."""
    steps = [clip("a"), TakeTurn(endpoint_s=1.5, timeout_s=3.0, cap_s=cap_s), clip("b")]
    assert drive(steps, speech((12_000, 10**9)))[0]["b"] == start_b


def test_take_turn_once_spoken_the_timeout_no_longer_applies() -> None:
    # The model speaks 1.2-2.4 s; the 2.0 s timeout (at 3.0 s) has passed before 1.5 s of silence (at 3.9 s):
    # it answered, so the wait is for its endpoint, not the timeout. A state that forgets it spoke once the
    # speech is over would cut in at 3.0 s.
    steps = [clip("a"), TakeTurn(endpoint_s=1.5, timeout_s=2.0, cap_s=20.0), clip("b")]
    assert drive(steps, speech((28_800, SPEECH_END)))[0]["b"] == 93_600


def test_take_turn_speech_already_on_at_the_step_start() -> None:
    # Speech from 0.5 s to 2.4 s covers the step's start (1.0 s): the wait is for its end plus the endpoint.
    steps = [clip("a"), TakeTurn(endpoint_s=1.5, timeout_s=0.5, cap_s=20.0), clip("b")]
    assert drive(steps, speech((12_000, SPEECH_END)))[0]["b"] == 93_600


def test_take_turn_waits_through_a_vad_hang_over() -> None:
    """While the VAD still calls it speaking (its merge hang-over), a long silence_s does not end the wait."""
    def hang_over(pos: int) -> tuple[bool, float, list[float]]:
        return True, 2.0, [0.5]

    steps = [clip("a"), TakeTurn(endpoint_s=1.5, timeout_s=3.0, cap_s=6.0), clip("b")]
    assert drive(steps, hang_over)[0]["b"] == SR + 6 * SR  # only the cap ends it


def test_take_turn_silence_just_below_the_endpoint_waits() -> None:
    def almost(pos: int) -> tuple[bool, float, list[float]]:
        if pos < 2 * SR:
            return True, 0.0, [0.2]
        return False, 1.5 - 1e-9, [0.2]  # a hair short of the endpoint, for good

    steps = [clip("a"), TakeTurn(endpoint_s=1.5, timeout_s=3.0, cap_s=7.0), clip("b")]
    assert drive(steps, almost)[0]["b"] == SR + 7 * SR  # it spoke, never went quiet long enough: the cap


def test_take_turn_decides_at_frame_boundaries_from_the_steps_own_start() -> None:
    # The clip ends mid-frame (700); the wait's clock starts there, and it decides at each later frame: its
    # 0.03 s timeout (720 samples) has run out at the frame starting at 1440, not before.
    steps = [clip("a", n=700), TakeTurn(endpoint_s=1.5, timeout_s=0.03, cap_s=20.0), clip("b")]
    starts, ends, user = drive(steps, silent)
    assert ends["a"] == 700 and starts["b"] == 1440
    assert user[:700].tolist() == [0.5] * 700 and not user[700:1440].any() and user[1440] == 0.5
    steps = [clip("a", n=700), TakeTurn(endpoint_s=1.5, timeout_s=0.031, cap_s=20.0), clip("b")]
    assert drive(steps, silent)[0]["b"] == 1920


# --- barge-in ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("after_s, start_b", [(1.0, 72_000), (1.0 + 1 / SR, 72_000 + FRAME)])
def test_barge_in_exactly_after_the_onset(after_s: float, start_b: int) -> None:
    # Onset at 2.0 s, confirmed 0.25 s later: the clip starts at onset + after_s, timed from the onset itself.
    steps = [clip("a"), BargeIn(after_s=after_s, timeout_s=10.0), clip("b")]
    assert drive(steps, speech((48_000, 10**9), confirm=6000))[0]["b"] == start_b


def test_barge_in_when_already_talking_times_from_the_latest_onset() -> None:
    steps = [clip("a"), BargeIn(after_s=1.0, timeout_s=10.0), clip("b")]
    # Two utterances started before the step (0.2 s ended, 0.6 s still on): time from 0.6 s -> 1.6 s.
    assert drive(steps, speech((4_800, 12_000), (14_400, 10**9)))[0]["b"] == 38_400


def test_barge_in_ignores_onsets_before_the_step() -> None:
    steps = [clip("a"), BargeIn(after_s=1.0, timeout_s=10.0), clip("b")]
    # An utterance 0.3-0.8 s is over when the step starts at 1.0 s; the next onset, 2.0 s, is the anchor.
    assert drive(steps, speech((7_200, 19_200), (48_000, 10**9), confirm=6000))[0]["b"] == 72_000
    # An onset exactly at the step's start counts as the anchor.
    assert drive(steps[:0] + [clip("a"), BargeIn(after_s=1.0, timeout_s=10.0), clip("b")],
                 speech((SR, 10**9), confirm=6000))[0]["b"] == 2 * SR


@pytest.mark.parametrize("timeout_s, start_b", [(4.0, 5 * SR), (4.0 + 1 / SR, 5 * SR + FRAME)])
def test_barge_in_timeout_exact(timeout_s: float, start_b: int) -> None:
    steps = [clip("a"), BargeIn(after_s=1.0, timeout_s=timeout_s), clip("b")]
    assert drive(steps, silent)[0]["b"] == start_b


def test_barge_in_onset_before_the_timeout_wins_over_it() -> None:
    # Onset at 4.5 s, timeout at 5.0 s: the barge-in comes 1.0 s after the onset (5.5 s), not at the timeout.
    steps = [clip("a"), BargeIn(after_s=1.0, timeout_s=4.0), clip("b")]
    assert drive(steps, speech((108_000, 10**9), confirm=6000))[0]["b"] == 132_000


# --- fixed times, clips, silence --------------------------------------------------------------------------------

@pytest.mark.parametrize("at_s, start_b", [(2.0, 48_000), (2.01, 48_240), (2.00002, 48_000), (0.5, SR),
                                           ((SR + 1) / SR, SR + 1), (1.0, SR)])
def test_until_time_to_the_sample(at_s: float, start_b: int) -> None:
    steps = [clip("a"), UntilTime(at_s), clip("b")]
    starts, ends, user = drive(steps, speech((0, 10**9)))
    assert starts["b"] == start_b and ends["b"] == start_b + SR
    assert not user[SR:start_b].any()


def test_clips_and_silence_are_contiguous_inside_a_frame() -> None:
    steps = [clip("a", n=700, value=0.25), Silence(300), clip("b", n=100, value=0.75), clip("c", n=5, value=1.0)]
    starts, ends, user = drive(steps, silent)
    assert (starts, ends) == ({"a": 0, "b": 1000, "c": 1100}, {"a": 700, "b": 1100, "c": 1105})
    assert user.size == 3 * FRAME  # the plan ends inside the third frame; the rest of it is silence
    assert user[:700].tolist() == [0.25] * 700 and not user[700:1000].any()
    assert user[1000:1100].tolist() == [0.75] * 100 and user[1100:1105].tolist() == [1.0] * 5
    assert not user[1105:].any()


def test_empty_clip_and_zero_silence_take_no_time() -> None:
    steps = [clip("a", n=0), Silence(0), clip("b", n=10)]
    starts, ends, _ = drive(steps, silent)
    assert starts == {"b": 0} and ends == {"b": 10}


def test_scheduler_after_the_plan_hands_out_silence() -> None:
    sched = StepScheduler([clip("a", n=10)])
    ctx = Ctx(sample=0, sr=SR, model=FakeModel())
    first = sched.fill(16, ctx)
    assert first[:10].tolist() == [0.5] * 10 and not first[10:].any() and sched.done and ctx.sample == 16
    assert not sched.fill(16, ctx).any() and ctx.sample == 32
    assert [(c.kind, c.turn_id, c.sample) for c in ctx.cues] == [("clip_start", "a", 0), ("clip_end", "a", 10)]
