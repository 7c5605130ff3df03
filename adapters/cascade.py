"""`cascade`: a genuine turn-based baseline from shipped parts (docs/adding-a-model.md).

streaming Silero VAD end-of-turn -> offline ASR (whisper tiny.en) -> addressee/compute policy -> TTS.
It listens while it speaks only to stop: sustained user speech over its own reply makes it yield.

A session reset with a text prompt (DSB-IFEval passes one at every level, "" at L0) is one to one, so every turn
is addressed to it (`TurnPolicy`); without one (Duplex-MPE: the duty preamble is spoken) it answers only when named
(`Policy`). It never reads the prompt's text: it is persona-blind, and says so by lacking "system_prompt".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from adapters.base import AssistantVoice, SpeechQueue
from adapters.cascade_policy import Policy, TurnPolicy, addressed, sentences
from adapters.protocol import Frame
from dataset_builder.audio import SESSION_SR, seconds_to_samples
from metrics.asr import DEFAULT_ASR, get_asr
from metrics.vad import StreamingVAD, VADParams


class CascadeAgent:
    name = "cascade"
    version = "1"
    realtime = False
    capabilities: frozenset[str] = frozenset()

    def __init__(self, frame_size: int = 1920, sample_rate: int = SESSION_SR, tts: str = "piper",
                 cache_dir: str | Path | None = None, asr: str = DEFAULT_ASR, end_of_turn_s: float = 0.6,
                 barge_in_stop_s: float = 0.4, response_delay_s: float = 0.3, **tts_kwargs: Any) -> None:
        self.frame_size = frame_size
        self.sample_rate = sample_rate
        self.mouth = AssistantVoice(tts, cache_dir, sample_rate, **tts_kwargs)
        self.asr = get_asr(asr)
        self.end_of_turn_s = end_of_turn_s
        self.barge_in_stop_s = barge_in_stop_s
        self.response_delay = seconds_to_samples(response_delay_s, sample_rate)
        self.vad = StreamingVAD(VADParams(min_speech_ms=150, merge_gap_ms=300), sr=sample_rate)
        self.queue = SpeechQueue()
        self.policy: Policy | TurnPolicy = Policy()
        self.utterance: list[np.ndarray] = []
        self.preroll: list[np.ndarray] = []
        self.user_speech_s = 0.0
        self.quiet_s = 0.0

    def runtime(self) -> dict[str, Any]:
        """What decides what it hears and says, recorded in every rec.json: its ASR and the native settings that ASR
        computes with (dataset_builder.numerics; its TTS's ONNX threads are among them)."""
        asr_runtime = getattr(self.asr, "runtime", None)
        return {"asr": self.asr.name, "asr_runtime": asr_runtime() if callable(asr_runtime) else None,
                "tts": self.mouth.tts.name}

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.vad.reset()
        self.queue.stop()
        self.policy = Policy() if system_prompt is None else TurnPolicy()
        self.utterance, self.preroll = [], []
        self.user_speech_s = 0.0
        self.quiet_s = 0.0

    def _end_of_turn(self) -> str:
        """Transcribe the utterance, decide, queue the reply; what it heard and decided (its `Frame.note`)."""
        audio = np.concatenate(self.preroll + self.utterance)
        self.utterance, self.preroll = [], []
        heard = self.asr.transcribe(audio, self.sample_rate)
        reply = self.policy.hear(heard)
        if reply and not self.queue.speaking:
            speech = self.mouth.speak(reply)
            self.queue.say(np.concatenate([np.zeros(self.response_delay, np.float32), speech]))
            decision = f"answers: {reply}"
        elif reply:
            decision = f"would answer ({reply}) but is still speaking: dropped"
        else:
            decision = f"stays silent ({self._why_silent(heard)})"
        return f"heard {heard.strip()!r} ({len(audio) / self.sample_rate:.1f} s) -> {decision}"

    def _why_silent(self, heard: str) -> str:
        if not isinstance(self.policy, Policy):
            return "nothing to say"
        # Heard its name but no request it takes: "Aria, go on then." split from its question, or too long.
        named = any(addressed(s) for s in sentences(heard))
        return "named, but no request it takes" if named else "not addressed by name"

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        self.vad.push(user_frame)
        frame_s = self.frame_size / self.sample_rate
        note = None
        if self.vad.speaking:
            self.utterance.append(user_frame)
            self.user_speech_s += frame_s
            self.quiet_s = 0.0
            # Someone else has the floor: a reply in progress is abandoned.
            if self.queue.speaking and self.user_speech_s >= self.barge_in_stop_s:
                self.queue.stop()
                note = f"yields: the user spoke over its reply for {self.user_speech_s:.1f} s"
        else:
            self.user_speech_s = 0.0
            if self.utterance:
                self.utterance.append(user_frame)
                self.quiet_s += frame_s
                # End of turn: this long without speech after the VAD's own 300 ms merge hang-over.
                if self.quiet_s >= self.end_of_turn_s:
                    note = self._end_of_turn()
            else:
                # Keep ~0.5 s before confirmed onset: the VAD confirms speech only after it has started.
                self.preroll = (self.preroll + [user_frame])[-max(1, int(0.5 / frame_s)):]
        return Frame(self.queue.next_frame(self.frame_size), note=note)

    def close(self) -> None:
        self.queue.stop()
