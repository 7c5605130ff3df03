"""`oracle`: does the right thing at the right time from the case's gold metadata (docs/adding-a-model.md).

It hears realised timeline cues (one frame late, like a listener) and speaks through the project's TTS, so
its audio goes through the same VAD, ASR and judge as any model's: its score tests the whole chain. What it does
in a case is its benchmark's own script, named by the benchmark's registry entry (`oracle`): Duplex-MPE's in
`adapters.oracle_mpe`, DSB-IFEval's in `adapters.oracle_ifeval` (which also gives the text of what it says),
M3-DuplexBench's in `adapters.oracle_m3` (in the row's own system voice). It takes teacher forcing: a forced
frame is returned as it is (it says what it is made to say).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from adapters.base import AssistantVoice, Say, SpeechQueue
from adapters.protocol import Frame, TimelineCue
from dataset_builder.audio import SESSION_SR
from dataset_builder.benchmarks import get_benchmark


class OracleScript(Protocol):
    """The oracle's behaviour in one case of a benchmark (built by the entry's `oracle(case, agent)`)."""

    def on_cue(self, cue: TimelineCue) -> list[Say]:
        """Timed actions for the agent's speech queue, from one realised timeline cue."""
        ...

    def frame(self, n: int) -> tuple[np.ndarray, str | None] | None:
        """The next n samples of its own model channel and their text, or None: it speaks through the queue."""
        ...


class OracleAgent:
    name = "oracle"
    version = "1"
    realtime = False
    capabilities = frozenset({"gold_cues", "text_output", "teacher_forcing"})

    def __init__(self, frame_size: int = 1920, sample_rate: int = SESSION_SR, tts: str = "piper",
                 cache_dir: str | Path | None = None, answer_delay_s: float = 0.3,
                 stop_delay_s: float = 0.0, **tts_kwargs: Any) -> None:
        self.frame_size = frame_size
        self.sample_rate = sample_rate
        self.mouth = AssistantVoice(tts, cache_dir, sample_rate, **tts_kwargs)
        self.answer_delay_s = answer_delay_s
        self.stop_delay_s = stop_delay_s
        self.queue = SpeechQueue()
        self.planned: list[Say] = []  # (sample, what, audio, text)
        self.script: OracleScript | None = None
        self.t = 0

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.queue.stop()
        self.planned = []
        self.script = None
        self.t = 0

    def bind_case(self, case: Any) -> None:
        self.script = get_benchmark(case.benchmark).function("oracle")(case, self)

    def cue(self, event: TimelineCue) -> None:
        if self.script is not None:
            self.planned += self.script.on_cue(event)

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        own = self.script.frame(self.frame_size) if self.script is not None else None  # its track runs on if forced
        if forced_model_frame is not None:
            self.t += self.frame_size
            return Frame(np.asarray(forced_model_frame, np.float32).copy())
        if own is not None:
            self.t += self.frame_size
            return Frame(*own)
        due = [p for p in self.planned if p[0] <= self.t]
        self.planned = [p for p in self.planned if p[0] > self.t]
        texts = []
        for _, what, audio, text in sorted(due, key=lambda p: p[0]):
            if what == "stop":
                self.queue.stop()
            elif audio is not None:
                self.queue.say(audio)
            if text:
                texts.append(text)
        self.t += self.frame_size
        return Frame(self.queue.next_frame(self.frame_size), " ".join(texts) or None)

    def close(self) -> None:
        self.queue.stop()
