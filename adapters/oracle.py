"""`oracle`: does the right thing at the right time from the case's gold metadata (SPEC §3).

It hears realised timeline cues (one frame late, like a listener) and speaks through the project's TTS, so
its audio goes through the same VAD, ASR and judge as any model's: its score tests the whole chain. DSB-IFEval
cases are played by `adapters.oracle_ifeval`, which also gives the text of what it says (MPE episodes carry none);
M3-DuplexBench cases by `adapters.oracle_m3`, in the row's own system voice. It takes teacher forcing: a forced
frame is returned as it is (it says what it is made to say).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from adapters.base import AssistantVoice, SpeechQueue
from adapters.oracle_ifeval import IFEvalOracleScript
from adapters.oracle_m3 import M3OracleScript
from adapters.protocol import Frame, TimelineCue
from dataset_builder.audio import SESSION_SR, seconds_to_samples

# Long enough to still be speaking when N4R starts after the answering window, so yielding is exercised.
HOLDING_REPLY = ("Sure, let me look into that for you. I am checking what I know about it, "
                 "and I will have an answer for you in just a moment.")


def answer_sentence(gold_answer: str) -> str:
    return f"The answer is {gold_answer}."


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
        self.labels: dict[str, str] = {}
        self.planned: list[tuple[int, str, np.ndarray | None, str | None]] = []  # (sample, what, audio, text)
        self.ifeval: IFEvalOracleScript | None = None
        self.m3: M3OracleScript | None = None
        self.t = 0
        self.answer = np.zeros(0, np.float32)
        self.holding = np.zeros(0, np.float32)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.queue.stop()
        self.planned = []
        self.labels = {}
        self.ifeval = None
        self.m3 = None
        self.t = 0

    def bind_case(self, case: Any) -> None:
        if getattr(case, "benchmark", "") == "ifeval":
            self.ifeval = IFEvalOracleScript(case, self.mouth.speak, self.sample_rate, self.answer_delay_s,
                                             self.stop_delay_s)
            return
        if getattr(case, "benchmark", "") == "m3":  # bound to the plan's M3Bound: the case and its reference audio
            self.m3 = M3OracleScript(case, self.answer_delay_s, self.stop_delay_s)
            return
        self.labels = {t.turn_id: t.label for t in case.script.turns}
        self.answer = self.mouth.speak(answer_sentence(case.script.gold_answer))
        self.holding = self.mouth.speak(HOLDING_REPLY) if "N4Q" in self.labels.values() else self.holding

    def cue(self, event: TimelineCue) -> None:
        if self.ifeval is not None:
            self.planned += self.ifeval.on_cue(event)
            return
        if self.m3 is not None:
            self.m3.on_cue(event)
            return
        label = self.labels.get(event.turn_id)
        delay = seconds_to_samples(self.answer_delay_s, self.sample_rate)
        if event.kind == "clip_end" and label == "T":
            self.planned.append((event.sample + delay, "say", self.answer, None))
        elif event.kind == "clip_end" and label == "N4Q":
            self.planned.append((event.sample + delay, "say", self.holding, None))
        elif event.kind == "clip_start" and label == "N4R":
            self.planned.append((event.sample + seconds_to_samples(self.stop_delay_s, self.sample_rate),
                                 "stop", None, None))

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        if self.m3 is not None:
            audio, text = self.m3.frame(self.frame_size)
            self.t += self.frame_size
            if forced_model_frame is not None:
                return Frame(np.asarray(forced_model_frame, np.float32).copy())
            return Frame(audio, text)
        if forced_model_frame is not None:
            self.t += self.frame_size
            return Frame(np.asarray(forced_model_frame, np.float32).copy())
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
