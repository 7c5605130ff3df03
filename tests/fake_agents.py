"""Fake agents with the shapes real models have, each an echo with a known latency.

Because the output is the input delayed by a fixed, known amount, a test can check the orchestrator's alignment
of the two channels exactly. They are importable as "tests.fake_agents:<Class>" through the adapter registry.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from collections import deque
from typing import Any

import numpy as np

from adapters.base import SpeechQueue
from adapters.protocol import Frame, TimelineCue


class MimiStyleAgent:
    """Moshi/PersonaPlex shape: 24 kHz, 80 ms frames, one frame of algorithmic delay (like the Mimi codec).

    Output frame k is input frame k-1. A forced frame (teacher forcing) is returned instead and kept in the
    agent's own history, as a model feeds its forced tokens back into its context. Text "f{k}" every 25 frames.
    """

    name = "mimi-style-fake"
    version = "1"
    sample_rate = 24_000
    frame_size = 1920
    realtime = False
    capabilities = frozenset({"teacher_forcing", "text_output"})
    TEXT_EVERY = 25

    def __init__(self) -> None:
        self.reset(None, 0)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.previous = np.zeros(self.frame_size, np.float32)
        self.k = 0
        self.history: list[np.ndarray] = []  # what the model "said", forced or not
        self.forced_at: list[int] = []

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        if forced_model_frame is not None:
            out = np.asarray(forced_model_frame, np.float32).copy()
            self.forced_at.append(self.k)
        else:
            out = self.previous
        self.history.append(out)
        self.previous = np.asarray(user_frame, np.float32).copy()
        text = f"f{self.k}" if self.k % self.TEXT_EVERY == 0 else None
        self.k += 1
        return Frame(out, text)

    def close(self) -> None:
        pass


class ChunkedAgent:
    """MiniCPM-o shape: 16 kHz, 20 ms frames, thinks in 1 s chunks.

    A chunk of 50 input frames is emitted back frame by frame during the following second, so the latency is
    exactly 1.0 s; before the first chunk is complete it emits zeros.
    """

    name = "chunked-fake"
    version = "1"
    sample_rate = 16_000
    frame_size = 320
    realtime = False
    capabilities: frozenset[str] = frozenset()
    CHUNK_FRAMES = 50
    LATENCY_S = CHUNK_FRAMES * frame_size / sample_rate

    def __init__(self) -> None:
        self.reset(None, 0)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.collected: list[np.ndarray] = []
        self.playback = SpeechQueue()

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        out = self.playback.next_frame(self.frame_size)
        self.collected.append(np.asarray(user_frame, np.float32).copy())
        if len(self.collected) == self.CHUNK_FRAMES:
            self.playback.say(np.concatenate(self.collected))
            self.collected = []
        return Frame(out)

    def close(self) -> None:
        pass


class RealtimeAgent:
    """Websocket-API shape: realtime, 24 kHz, 20 ms frames; echoes with a delay of 10 frames (200 ms).

    Records `time.perf_counter()` at each step so a test can see whether it was paced in wall-clock time.
    `realtime=False` builds the same echo unpaced, to compare the two runs.
    """

    name = "realtime-fake"
    version = "1"
    sample_rate = 24_000
    frame_size = 480
    capabilities: frozenset[str] = frozenset()
    DELAY_FRAMES = 10

    def __init__(self, realtime: bool = True) -> None:
        self.realtime = realtime
        self.reset(None, 0)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.line = deque(np.zeros(self.frame_size, np.float32) for _ in range(self.DELAY_FRAMES))
        self.step_times: list[float] = []

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        self.step_times.append(time.perf_counter())
        self.line.append(np.asarray(user_frame, np.float32).copy())
        return Frame(self.line.popleft())

    def close(self) -> None:
        pass


BROKEN_MODES = ("raise", "shape", "nan", "stall", "reset")


class BrokenAgent:
    """Misbehaves at frame `at_frame` in one way (`mode`), so the orchestrator's failure records can be checked.

    "stall" blocks for `stall_s`; `close()` releases it early so a test leaves no sleeping thread behind.
    """

    name = "broken-fake"
    version = "1"
    sample_rate = 24_000
    frame_size = 1920
    realtime = False
    capabilities: frozenset[str] = frozenset()

    def __init__(self, mode: str = "raise", at_frame: int = 20, stall_s: float = 5.0) -> None:
        if mode not in BROKEN_MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {BROKEN_MODES}")
        self.mode = mode
        self.at_frame = at_frame
        self.stall_s = stall_s
        self.released = threading.Event()
        self.k = 0

    def reset(self, system_prompt: str | None, seed: int) -> None:
        if self.mode == "reset":
            raise RuntimeError("fake reset failure")
        self.k = 0

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        k, self.k = self.k, self.k + 1
        out = np.zeros(self.frame_size, np.float32)
        if k != self.at_frame:
            return Frame(out)
        if self.mode == "raise":
            raise RuntimeError(f"fake step failure at frame {k}")
        if self.mode == "shape":
            return Frame(np.zeros(self.frame_size - 1, np.float32))
        if self.mode == "nan":
            out[7] = np.nan
        elif self.mode == "stall":
            self.released.wait(self.stall_s)
        return Frame(out)

    def close(self) -> None:
        self.released.set()


class CtrlCInCallbackAgent:
    """Silent; at frame `at_frame` of its `episode`-th episode it sends itself SIGINT from inside a C callback,
    as a Ctrl-C lands while soundfile's cffi callback reads a case's audio. The KeyboardInterrupt raised there
    is swallowed by the callback ("Exception ignored"), so only a handler that remembers the signal stops the run.
    The callback runs on the thread that calls `step`: the main thread under `--step-timeout 0`."""

    name = "ctrl-c-in-callback-fake"
    version = "1"
    sample_rate = 24_000
    frame_size = 1920
    realtime = False
    capabilities: frozenset[str] = frozenset()

    def __init__(self, episode: int = 3, at_frame: int = 5) -> None:
        self.episode, self.at_frame = episode, at_frame
        self.episodes, self.k = 0, 0

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.episodes, self.k = self.episodes + 1, 0

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        k, self.k = self.k, self.k + 1
        if self.episodes == self.episode and k == self.at_frame:
            ctypes.CFUNCTYPE(None)(_sigint_self)()
        return Frame(np.zeros(self.frame_size, np.float32))

    def close(self) -> None:
        pass


def _sigint_self() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)  # the handler runs here, inside the callback


class CueTalkerAgent:
    """Speaks given audio right after it hears given user clips end (via the "gold_cues" timeline cues).

    `replies` maps a turn id to the audio to say once that turn's clip has ended; `started` records, per turn id,
    the agent-clock sample where the reply began, so a test knows exactly when the model spoke.
    """

    name = "cue-talker-fake"
    version = "1"
    sample_rate = 24_000
    realtime = False
    capabilities = frozenset({"gold_cues"})

    def __init__(self, replies: dict[str, np.ndarray], frame_size: int = 480) -> None:
        self.replies = replies
        self.frame_size = frame_size
        self.reset(None, 0)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.queue = SpeechQueue()
        self.due: list[str] = []
        self.started: dict[str, int] = {}
        self.t = 0

    def bind_case(self, case: Any) -> None:
        pass

    def cue(self, event: TimelineCue) -> None:
        if event.kind == "clip_end" and event.turn_id in self.replies:
            self.due.append(event.turn_id)

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        for turn_id in self.due:
            self.started[turn_id] = self.t
            self.queue.say(self.replies[turn_id])
        self.due = []
        self.t += self.frame_size
        return Frame(self.queue.next_frame(self.frame_size))

    def close(self) -> None:
        self.queue.stop()
