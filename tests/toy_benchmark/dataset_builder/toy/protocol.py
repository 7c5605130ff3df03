"""The toy's protocol: the registry entry names this class, so it lives with the toy's own dataset code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dataset_builder.benchmark_params import ProtocolParams


@dataclass(frozen=True)
class ToyProtocol(ProtocolParams):
    lead_s: float = 0.5  # silence before the question
    answer_window_s: float = 2.0  # the scored window after the question's realised end
    tail_s: float = 0.5  # recorded after the window, so speech running past it is heard whole
    vad_min_speech_ms: int = 90

    RANGES: ClassVar[dict[str, tuple[float, bool]]] = {
        "lead_s": (0.0, True), "answer_window_s": (0.0, False), "tail_s": (0.0, True),
        "vad_min_speech_ms": (0, False),
    }
