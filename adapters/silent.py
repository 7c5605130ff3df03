"""`silent`: never speaks. It must score 0 on response rates and pass every silence check."""

from __future__ import annotations

import numpy as np

from adapters.protocol import Frame
from dataset_builder.audio import SESSION_SR


class SilentAgent:
    name = "silent"
    version = "1"
    realtime = False
    capabilities: frozenset[str] = frozenset()

    def __init__(self, frame_size: int = 1920, sample_rate: int = SESSION_SR) -> None:
        self.frame_size = frame_size
        self.sample_rate = sample_rate
        self._zeros = np.zeros(frame_size, np.float32)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        pass

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        return Frame(self._zeros)

    def close(self) -> None:
        pass
