"""`vllm-omni-duplex`: a full-duplex model served by vLLM-Omni on `/v1/realtime?duplex=1` (docs/models.md).

vLLM-Omni serves MiniCPM-o 4.5 and PersonaPlex full duplex through a session on its OpenAI-Realtime-shaped
websocket with `?duplex=1` (its `DuplexClient`): the client streams PCM16 continuously (`input_audio_buffer.append`),
the model itself decides when to listen and when to speak (announced as `response.speak` events carrying the
decision), its speech arrives as audio deltas of ordinary responses, and when it yields to a barge-in the server
clears the output (`output_audio_buffer.cleared`, the response `cancelled`). The session's own turn detection is
off (`turn_detection: null`): turn-taking is the model's, which is what the benchmarks measure.

This reuses the `openai-realtime` session (adapters/openai_realtime.py) with the model owning its turns: a cleared
output or a cancelled response stops the playback at once and the played item is truncated to what was heard
(`conversation.item.truncate`, the protocol's playback position); the listen/speak decisions are counted.
Not verified against a running vLLM-Omni (no stored copy of its duplex code was available when this was written):
the event names above are those its pull requests and issues describe; the playback acknowledgement its
`DuplexClient.ack_playback` sends may be a dialect event of its own rather than the standard truncate.

`sessions=N` opens N concurrent sessions, one per batch slot (`batch_size = N`), so the lockstep runner keeps N
episodes in flight against one engine, all paced together in wall-clock time; each slot's session is independent
(its own connection), and a session that breaks fails its own episode only. Live feasibility is measured per
session from the client (`session_feasibility(slot)`): how many steps found a response mid-stream with nothing of
it arrived yet, and the server's real-time factor; each episode's rec.json records its own session's
(docs/scale.md), so one slow session shows in its own episodes only. `session_stats` keeps each slot's last closed
session with its listen/speak decisions, logged when it closes; the run's step times measure the client alone.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np

from adapters.openai_realtime import (
    OpenAIRealtimeAgent,
    RealtimeSessionError,
    _Session,
    float_to_b64_pcm16,
    session_url,
)
from adapters.protocol import Frame
from dataset_builder.errors import UsageError

log = logging.getLogger(__name__)


class VllmOmniDuplexAgent(OpenAIRealtimeAgent):
    """N concurrent duplex sessions against a vLLM-Omni server; a plain agent when `sessions=1`."""

    name = "vllm-omni-duplex"

    def __init__(self, url: str = "ws://localhost:8000/v1/realtime", model: str | None = None,
                 api_key_env: str = "", sessions: int = 1, frame_size: int = 480, voice: str | None = None,
                 session_extra: str | dict[str, Any] | None = None, connect_timeout_s: float = 60.0) -> None:
        if not isinstance(sessions, int) or sessions < 1:
            raise UsageError(f"vllm-omni-duplex: sessions must be a positive integer, got {sessions!r}")
        super().__init__(url=url, model=model, api_key_env=api_key_env, frame_size=frame_size, api="ga",
                         turn_detection="none", voice=voice, connect_timeout_s=connect_timeout_s)
        self.url = session_url(url, model, {"duplex": "1"})
        if isinstance(session_extra, str):
            try:
                session_extra = json.loads(session_extra) if session_extra else None
            except json.JSONDecodeError as err:
                raise UsageError(f"vllm-omni-duplex: session_extra is not JSON: {err}") from None
        if session_extra is not None and not isinstance(session_extra, dict):
            raise UsageError("vllm-omni-duplex: session_extra must be a JSON object (extra `session` fields, e.g. "
                             "MiniCPM-o's reference voice)")
        self.session_extra: dict[str, Any] = session_extra or {}
        self.batch_size = sessions
        self.version = f"1/duplex/{model or 'server-default'}"
        self._slots: list[_Session | None] = [None] * sessions
        self.session_stats: list[dict[str, Any] | None] = [None] * sessions  # each slot's last closed session

    def __repr__(self) -> str:
        return (f"VllmOmniDuplexAgent(model={self.model!r}, sessions={self.batch_size}, "
                f"frame_size={self.frame_size}, api_key_env={self.api_key_env!r})")

    def runtime(self) -> dict[str, Any]:
        """Recorded in every rec.json: how many sessions ran at once (they share the engine's throughput)."""
        return {"sessions": self.batch_size, "session_extra_keys": sorted(self.session_extra)}

    def _session_update(self, system_prompt: str | None) -> dict[str, Any]:
        update = self.config.session_update(system_prompt)
        update["session"].update(self.session_extra)
        return update

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.reset_slot(0, system_prompt, seed)

    def reset_slot(self, slot: int, system_prompt: str | None, seed: int) -> None:
        """A fresh server session for one slot; the others go on. `seed` cannot reach a served model."""
        self._close_slot(slot)
        self._slots[slot] = self._open_session(system_prompt, model_owned=True)

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        frame = self._step_slot(0, user_frame)
        if isinstance(frame, BaseException):
            raise frame
        return frame

    def step_batch(self, user_frames: np.ndarray, forced: np.ndarray | None = None,
                   forced_mask: np.ndarray | None = None) -> list[Frame | BaseException]:
        return [self._step_slot(i, user_frames[i]) for i in range(self.batch_size)]

    def _step_slot(self, slot: int, user_frame: np.ndarray) -> Frame | BaseException:
        session = self._slots[slot]
        if session is None:  # a slot without an episode hears silence and says nothing
            return Frame(np.zeros(self.frame_size, np.float32))
        if session.failure is not None:
            return RealtimeSessionError(session.failure)
        session.send({"type": "input_audio_buffer.append", "audio": float_to_b64_pcm16(user_frame)})
        try:
            audio, text = session.take(self.frame_size)
        except RealtimeSessionError as err:
            return err
        return Frame(audio, text)

    def _close_slot(self, slot: int) -> None:
        session, self._slots[slot] = self._slots[slot], None
        if session is None:
            return
        self._io.run(session.aclose(), 10)
        self.session_stats[slot] = stats = {**session.feasibility(), "decisions": dict(session.decisions)}
        if stats["underruns"]:
            log.warning("vllm-omni-duplex: session %d: the server fell behind real time in %d of %d frames",
                        slot, stats["underruns"], stats["frames"])

    def session_feasibility(self, slot: int = 0) -> dict[str, Any] | None:
        """Slot `slot`'s open session, as its client saw it: each episode records its own (docs/scale.md)."""
        session = self._slots[slot]
        return None if session is None else session.feasibility()

    def _close_session(self) -> None:
        for slot in range(len(getattr(self, "_slots", []))):
            self._close_slot(slot)
