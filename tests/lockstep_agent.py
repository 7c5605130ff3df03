"""A deterministic batch-capable agent for the lockstep tests and benchmark: a tiny random recurrent net per slot.

Each slot hears its user frames, keeps the last `REPLY_FRAMES` of them, and a tiny randomly initialised recurrent
net (fixed weights from `weight_seed`; its state and per-step noise from the seed `reset_slot` is given) decides
how long a pause after user speech it waits before it "replies" by replaying what it last heard at a gain the net
picks. It speaks at different times in different cases, depends causally on the user audio, and Silero hears its
replies as speech, so each slot's scheduler waits really depend on it.

Batching is real: every tick is one set of tensor operations over [batch_size, ...]. They are written as
broadcast products and sums, not matrix products, because CPU matrix kernels round differently at different
batch sizes (measured here: a GRUCell's rows differ between B=1 and B=4), and a slot's samples must not depend on
the batch (adapters/protocol.py). `fail_mode` makes the `fail_episode`-th episode the agent is reset for (0-based,
in the order cases enter it) misbehave at its `fail_frame`-th frame: "nan" or "shape" spoil that slot's frame
only; "raise" and "stall" break the whole call.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from adapters.protocol import Frame

FAIL_MODES = ("", "nan", "shape", "raise", "stall")


class TinyBatchAgent:
    name = "tiny-batch"
    version = "1"
    sample_rate = 24_000
    frame_size = 1920
    realtime = False
    capabilities = frozenset({"teacher_forcing", "text_output"})
    BANDS = 8
    REPLY_FRAMES = 15  # 1.2 s replayed
    LOUD_RMS = 0.01  # a user frame this loud counts as speech

    def __init__(self, batch_size: int = 1, hidden: int = 32, weight_seed: int = 0, fail_mode: str = "",
                 fail_episode: int = -1, fail_frame: int = 0, stall_s: float = 5.0) -> None:
        if fail_mode not in FAIL_MODES:
            raise ValueError(f"fail_mode must be one of {FAIL_MODES}, got {fail_mode!r}")
        self.batch_size, self.hidden = int(batch_size), int(hidden)
        self.fail_mode, self.fail_episode, self.fail_frame, self.stall_s = fail_mode, fail_episode, fail_frame, stall_s
        self.released = threading.Event()
        g = torch.Generator().manual_seed(weight_seed)
        H, F = self.hidden, self.BANDS
        self.w_in = torch.randn(F, H, generator=g) / F ** 0.5
        self.w_rec = torch.randn(H, H, generator=g) / H ** 0.5
        self.w_wait = torch.randn(H, generator=g) / H ** 0.5
        self.w_gain = torch.randn(H, generator=g) / H ** 0.5
        B, n = self.batch_size, self.frame_size
        self.h = torch.zeros(B, H)
        self.heard = torch.zeros(B, self.REPLY_FRAMES, n)  # the last frames of user audio, oldest first
        self.reply = torch.zeros(B, self.REPLY_FRAMES, n)
        self.reply_pos = torch.full((B,), self.REPLY_FRAMES, dtype=torch.long)  # == REPLY_FRAMES: not replying
        self.quiet = torch.zeros(B, dtype=torch.long)  # frames since the last loud user frame
        self.spoke_to = torch.zeros(B, dtype=torch.bool)  # user speech heard since the last reply
        self.frames = [0] * B
        self.episode = [-1] * B
        self.generators = [torch.Generator() for _ in range(B)]
        self.resets = 0

    def reset_slot(self, slot: int, system_prompt: str | None, seed: int) -> None:
        g = self.generators[slot].manual_seed(int(seed))
        self.h[slot] = 0.5 * torch.randn(self.hidden, generator=g)
        self.heard[slot] = 0.0
        self.reply[slot] = 0.0
        self.reply_pos[slot] = self.REPLY_FRAMES
        self.quiet[slot] = 0
        self.spoke_to[slot] = False
        self.frames[slot] = 0
        self.episode[slot] = self.resets
        self.resets += 1

    def step_batch(self, user_frames: np.ndarray, forced: np.ndarray | None = None,
                   forced_mask: np.ndarray | None = None) -> list[Frame]:
        B, n, R = self.batch_size, self.frame_size, self.REPLY_FRAMES
        user = torch.from_numpy(np.asarray(user_frames, np.float32).reshape(B, n).copy())
        if self.fail_mode in ("raise", "stall") and self._failing() is not None:
            if self.fail_mode == "raise":
                raise RuntimeError("the tiny model broke")
            self.released.wait(self.stall_s)
        # Log band energies of the user frame, then one recurrent step (its noise from each slot's own generator).
        power = torch.fft.rfft(user).abs().square()[:, 1:1 + (n // 2 // self.BANDS) * self.BANDS]
        feats = torch.log1p(1e3 * power.reshape(B, self.BANDS, -1).mean(-1))
        noise = torch.stack([torch.randn(self.hidden, generator=g) for g in self.generators])
        self.h = torch.tanh((feats[:, :, None] * self.w_in).sum(1) + (self.h[:, :, None] * self.w_rec).sum(1)
                            + 0.1 * noise)
        wait = 2 + torch.floor(8 * torch.sigmoid((self.h * self.w_wait).sum(-1))).long()  # 160-800 ms of pause
        gain = 0.4 + 0.3 * torch.sigmoid((self.h * self.w_gain).sum(-1))
        loud = user.square().mean(-1).sqrt() >= self.LOUD_RMS
        self.heard = torch.cat([self.heard[:, 1:], user[:, None]], dim=1)
        self.quiet = torch.where(loud, 0, self.quiet + 1)
        self.spoke_to |= loud
        replying = self.reply_pos < R
        start = ~replying & self.spoke_to & (self.quiet >= wait)
        self.reply = torch.where(start[:, None, None], self.heard * gain[:, None, None], self.reply)
        self.reply_pos = torch.where(start, 0, self.reply_pos)
        self.spoke_to &= ~start
        idx = self.reply_pos.clamp(max=R - 1)
        out = torch.where((self.reply_pos < R)[:, None], self.reply[torch.arange(B), idx], 0.0)
        self.reply_pos = torch.where(self.reply_pos < R, self.reply_pos + 1, self.reply_pos)
        audio = out.numpy()
        if forced is not None:
            mask = np.ones(B, bool) if forced_mask is None else np.asarray(forced_mask, bool)
            audio = np.where(mask[:, None], np.asarray(forced, np.float32), audio)
        frames = []
        for s in range(B):
            a = audio[s].copy()
            if self._failing(s) == s and self.fail_mode in ("nan", "shape"):
                a = np.full(n, np.nan, np.float32) if self.fail_mode == "nan" else a[: n // 2]
            frames.append(Frame(a, f"r{self.frames[s]}" if bool(start[s]) else None))
            self.frames[s] += 1
        return frames

    def _failing(self, slot: int | None = None) -> int | None:
        """The slot (of `slot`, or of any) now at the failing episode's failing frame, else None."""
        for s in range(self.batch_size) if slot is None else (slot,):
            if self.episode[s] == self.fail_episode and self.frames[s] == self.fail_frame:
                return s
        return None

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.reset_slot(0, system_prompt, seed)

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        users = np.zeros((self.batch_size, self.frame_size), np.float32)
        users[0] = user_frame
        forced = mask = None
        if forced_model_frame is not None:
            forced = np.zeros_like(users)
            forced[0] = forced_model_frame
            mask = np.arange(self.batch_size) == 0
        return self.step_batch(users, forced, mask)[0]

    def close(self) -> None:
        self.released.set()
