"""The schedule steps as state machines, against a scripted model whose speech times are known exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.schedule import BargeIn, Ctx, Play, Silence, StepScheduler, TakeTurn, UntilTime

SR = 24_000
FRAME = 480  # 20 ms
CONFIRM_S = 0.25  # like the VAD: speech is known only this long after it starts


class ScriptedModel:
    """Model speech in fixed [start, end) intervals; the scheduler sees it as a streaming VAD would."""

    def __init__(self, ctx_ref: list[Ctx], spans: list[tuple[float, float]]) -> None:
        self.ctx_ref, self.spans = ctx_ref, spans

    @property
    def now(self) -> float:
        return self.ctx_ref[0].sample / SR

    @property
    def speaking(self) -> bool:
        return any(a + CONFIRM_S <= self.now < b for a, b in self.spans)

    @property
    def silence_s(self) -> float:
        ended = [b for a, b in self.spans if b <= self.now and b - a >= CONFIRM_S]
        return self.now - max(ended) if ended and not self.speaking else (0.0 if self.speaking else math.inf)

    @property
    def onsets(self) -> list[float]:
        return [a for a, _ in self.spans if a + CONFIRM_S <= self.now]


def run(steps: list, spans: list[tuple[float, float]], seconds: float = 30.0) -> dict[str, float]:
    """Clip start times (s) when the plan runs against the scripted model."""
    ref: list[Ctx] = []
    ctx = Ctx(sample=0, sr=SR, model=ScriptedModel(ref, spans))
    ref.append(ctx)
    sched = StepScheduler(steps)
    starts: dict[str, float] = {}
    while not sched.done and ctx.sample < seconds * SR:
        sched.fill(FRAME, ctx)
        for cue in ctx.cues:
            if cue.kind == "clip_start":
                starts[cue.turn_id] = cue.sample / SR
        ctx.cues = []
    return starts


def clip(name: str, seconds: float = 1.0) -> Play:
    return Play(name, "X", np.full(int(seconds * SR), 0.1, np.float32))


def test_fixed_schedule_ignores_the_model() -> None:
    starts = run([clip("a"), UntilTime(4.0), clip("b"), Silence(SR // 2), clip("c")], spans=[(1.0, 9.0)])
    assert starts == {"a": 0.0, "b": 4.0, "c": 5.5}


@pytest.mark.parametrize(
    "spans, expected",
    [
        ([], 1.0 + 3.0),  # never speaks: timeout
        ([(1.5, 3.0)], 3.0 + 1.5),  # speaks, then endpoint_s of silence
        ([(1.5, 30.0)], 1.0 + 8.0),  # never stops: cap
    ],
)
def test_take_turn(spans: list[tuple[float, float]], expected: float) -> None:
    starts = run([clip("a"), TakeTurn(endpoint_s=1.5, timeout_s=3.0, cap_s=8.0), clip("b")], spans)
    assert starts["b"] == pytest.approx(expected, abs=FRAME / SR)


@pytest.mark.parametrize(
    "spans, expected",
    [
        ([(2.0, 9.0)], 2.0 + 1.0),  # onset at 2.0 (confirmed at 2.25): barge in 1.0 s after the onset
        ([(0.5, 9.0)], 0.5 + 1.0),  # already talking when the step starts: timed from that onset
        ([], 1.0 + 4.0),  # never speaks: timeout
    ],
)
def test_barge_in(spans: list[tuple[float, float]], expected: float) -> None:
    starts = run([clip("a"), BargeIn(after_s=1.0, timeout_s=4.0), clip("b")], spans)
    assert starts["b"] == pytest.approx(max(expected, 1.0), abs=FRAME / SR)


def test_mpe_wait_after_t_uses_onset_window_then_endpoint() -> None:
    step = lambda: TakeTurn(endpoint_s=1.5, timeout_s=5.0 + CONFIRM_S, cap_s=20.0)  # noqa: E731
    assert run([clip("t"), step(), clip("n")], spans=[])["n"] == pytest.approx(6.25, abs=FRAME / SR)
    assert run([clip("t"), step(), clip("n")], spans=[(2.0, 4.0)])["n"] == pytest.approx(5.5, abs=FRAME / SR)
    assert run([clip("t"), step(), clip("n")], spans=[(2.0, 40.0)], seconds=40)["n"] == pytest.approx(
        21.0, abs=FRAME / SR)
