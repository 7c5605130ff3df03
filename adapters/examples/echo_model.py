"""A complete adapter in one file: a turn-based `generate` made full-duplex (docs/adding-a-model.md).

Replace `generate` with your model. Check it, then run it (from the folder this file is in):
    duplex-eval check-adapter echo_model:EchoModel
    duplex-eval run --dataset data/mpe-mini --adapter echo_model:EchoModel --out echo-run --limit 1
"""

import numpy as np

from adapters.protocol import Frame


def generate(turn: np.ndarray, sample_rate: int) -> np.ndarray:
    """Your model: one user turn in, the spoken reply out. This one says the turn back, at half the volume."""
    return 0.5 * turn


class EchoModel:
    name = "echo-model"
    version = "1"
    sample_rate = 16_000  # any rate: the harness resamples the user stream to it and your audio back
    frame_size = 320  # 20 ms per step
    realtime = False  # stepped as fast as it runs, on a virtual clock
    capabilities: frozenset[str] = frozenset()  # none of system_prompt, teacher_forcing, text_output

    def __init__(self, threshold: float = 0.01, end_of_turn_s: float = 0.6) -> None:
        self.threshold = threshold  # --adapter-arg threshold=0.02 arrives here
        self.end_frames = round(end_of_turn_s * self.sample_rate / self.frame_size)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.turn: list[np.ndarray] = []  # what the user has said since they started this turn
        self.quiet = 0  # frames since the user last spoke
        self.reply = np.zeros(0, np.float32)  # what is left to say

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        loud = np.sqrt(np.mean(user_frame**2)) > self.threshold
        self.quiet = 0 if loud else self.quiet + 1
        if loud or (self.turn and self.quiet < self.end_frames):
            self.turn.append(user_frame.copy())
        elif self.turn:  # the user has been quiet long enough: answer the whole turn
            reply = generate(np.concatenate(self.turn), self.sample_rate).astype(np.float32)
            self.reply, self.turn = np.concatenate([self.reply, reply]), []
        out = np.zeros(self.frame_size, np.float32)  # a new array every step: the recording keeps it
        said = self.reply[: self.frame_size]
        out[: len(said)], self.reply = said, self.reply[len(said):]
        return Frame(out)

    def close(self) -> None:
        pass
