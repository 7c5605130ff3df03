"""A fake OpenAI-Realtime model: a local asyncio `websockets` server speaking the Realtime event protocol.

It keeps what a test needs to check (the handshake headers, every `session.update`, the user audio it heard, the
utterances its VAD found, the truncations it was asked for, how each connection closed) and behaves like a served
model with server turn detection: an energy VAD over 20 ms windows with the session's `silence_duration_ms`,
`speech_started` / `speech_stopped` events, and after the chosen utterance a known reply clip streamed in audio
deltas with its transcript (a first burst, then twice as fast as real time, like the real service). A barge-in
cancels the reply. It can also drop the TCP connection mid-reply, send an `error`, refuse the session, or fall
behind real time on chosen connections.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dataset_builder.audio import to_pcm16
from tests.ws_standin import StandInServer

SR = 24_000
SERVER_LOGGER = "tests.realtime_fake.server"
WINDOW = 480  # 20 ms


@dataclass
class Behaviour:
    reply: np.ndarray  # float32 at 24 kHz: what the model says
    transcript: str = ""
    respond_after_s: float = 0.0  # answer the first utterance ending at or after this point of the user stream
    naming: str = "ga"  # "ga": response.output_audio.delta; "beta": response.audio.delta
    delta_ms: int = 100
    burst_ms: int = 1000  # sent at once before pacing at `pace`, so host jitter cannot starve playback
    pace: float = 2.0  # after the burst, the reply streams this many times faster than real time
    late_delta: bool = False  # after a barge-in, one more delta of the cancelled reply (a race the client must ignore)
    drop_after_deltas: int | None = None  # abort the TCP connection after this many audio deltas
    error_after_s: float | None = None  # send an `error` once this much user audio has arrived
    refuse_session: bool = False
    energy: float = 0.01  # RMS above which a window is speech
    # vLLM-Omni's duplex dialect (`/v1/realtime?duplex=1`): the model owns turn-taking. No VAD events are sent; it
    # announces each decision as `response.speak`, and yields to a barge-in by deciding to listen, clearing its
    # output buffer and cancelling the response. A session without `duplex=1` in its URL is refused.
    duplex: bool = False
    drop_connections: frozenset[int] = frozenset()  # 1-based connection numbers whose reply drops the connection
    # 1-based connection numbers served by a server falling behind: the reply streams at half real time, no burst
    slow_connections: frozenset[int] = frozenset()


@dataclass
class Connection:
    headers: dict[str, str]
    path: str
    session_updates: list[dict[str, Any]] = field(default_factory=list)
    audio: bytearray = field(default_factory=bytearray)
    truncations: list[dict[str, Any]] = field(default_factory=list)
    close_code: int | None = None
    replies: int = 0
    utterances: list[tuple[int, int]] = field(default_factory=list)  # (first, last voiced sample) its VAD heard
    reply_at: list[int] = field(default_factory=list)  # user samples heard when it decided to answer

    def user_audio(self) -> np.ndarray:
        return np.frombuffer(bytes(self.audio), dtype="<i2")


class FakeRealtimeServer(StandInServer):
    """Start with `with FakeRealtimeServer(behaviour) as server:`; `server.url` is its ws:// address."""

    path = "/v1/realtime"
    logger_name = SERVER_LOGGER  # the server logs the headers it received: not what the client logged

    def __init__(self, behaviour: Behaviour) -> None:
        super().__init__()
        self.behaviour = behaviour
        self.connections: list[Connection] = []

    async def _handle(self, ws: Any) -> None:
        conn = Connection(headers={k: v for k, v in ws.request.headers.raw_items()}, path=ws.request.path)
        self.connections.append(conn)
        await _send(ws, {"type": "session.created", "session": {"id": f"sess_{len(self.connections)}"}})
        behaviour = self.behaviour
        if len(self.connections) in behaviour.drop_connections:
            behaviour = replace(behaviour, drop_after_deltas=behaviour.drop_after_deltas or 3)
        if len(self.connections) in behaviour.slow_connections:
            behaviour = replace(behaviour, burst_ms=0, pace=0.5)
        model = _Model(behaviour, conn, ws)
        try:
            async for raw in ws:
                await model.on_event(json.loads(raw))
        except Exception:  # a dropped connection ends the handler like a closed one
            pass
        finally:
            model.cancel()
            conn.close_code = ws.close_code


async def _send(ws: Any, event: dict[str, Any]) -> None:
    await ws.send(json.dumps(event))


class _Model:
    def __init__(self, b: Behaviour, conn: Connection, ws: Any) -> None:
        self.b, self.conn, self.ws = b, conn, ws
        self.silence_ms = 500
        self.detect = True
        self.pending = np.zeros(0, np.int16)
        self.heard = 0  # samples of user audio processed
        self.speaking_since: int | None = None
        self.last_voiced = 0
        self.reply_task: asyncio.Task[None] | None = None
        self.answered = False
        self.errored = False

    async def on_event(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "session.update":
            self.conn.session_updates.append(event)
            if self.b.refuse_session or (self.b.duplex and "duplex=1" not in self.conn.path):
                await _send(self.ws, {"type": "error", "error": {"type": "invalid_request_error",
                                                                 "code": "model_not_found",
                                                                 "message": "The model does not exist."}})
                return
            session = event["session"]
            turn = session["turn_detection"] if "turn_detection" in session else \
                session["audio"]["input"]["turn_detection"]
            self.detect = turn is not None or self.b.duplex
            if turn and "silence_duration_ms" in turn:
                self.silence_ms = turn["silence_duration_ms"]
            await _send(self.ws, {"type": "session.updated", "session": session})
        elif kind == "input_audio_buffer.append":
            data = base64.b64decode(event["audio"])
            self.conn.audio += data
            self.pending = np.concatenate([self.pending, np.frombuffer(data, dtype="<i2")])
            while self.pending.size >= WINDOW:
                window, self.pending = self.pending[:WINDOW], self.pending[WINDOW:]
                await self.on_window(window.astype(np.float32) / 32767.0)
        elif kind == "conversation.item.truncate":
            self.conn.truncations.append(event)
            await _send(self.ws, {"type": "conversation.item.truncated", "item_id": event["item_id"],
                                  "content_index": 0, "audio_end_ms": event["audio_end_ms"]})

    async def on_window(self, window: np.ndarray) -> None:
        self.heard += WINDOW
        if self.b.error_after_s is not None and not self.errored and self.heard >= self.b.error_after_s * SR:
            self.errored = True
            await _send(self.ws, {"type": "error", "error": {"type": "server_error", "code": "fake_code",
                                                             "message": "The fake model failed on purpose."}})
        if not self.detect:
            return
        if float(np.sqrt(np.mean(window**2))) > self.b.energy:
            self.last_voiced = self.heard
            if self.speaking_since is None:
                self.speaking_since = self.heard - WINDOW
                if not self.b.duplex:
                    await _send(self.ws, {"type": "input_audio_buffer.speech_started",
                                          "audio_start_ms": self.speaking_since * 1000 // SR, "item_id": "user_item"})
                await self.barge_in()
        elif self.speaking_since is not None and self.heard - self.last_voiced >= self.silence_ms * SR // 1000:
            self.conn.utterances.append((self.speaking_since, self.last_voiced))
            self.speaking_since = None
            if not self.b.duplex:
                await _send(self.ws, {"type": "input_audio_buffer.speech_stopped",
                                      "audio_end_ms": self.last_voiced * 1000 // SR, "item_id": "user_item"})
            if not self.answered and self.last_voiced >= self.b.respond_after_s * SR:
                self.answered = True
                self.conn.reply_at.append(self.heard)
                self.reply_task = asyncio.create_task(self.reply())

    async def barge_in(self) -> None:
        if self.reply_task is None or self.reply_task.done():
            return
        self.reply_task.cancel()
        rid, iid = f"resp_{self.conn.replies}", f"item_{self.conn.replies}"
        if self.b.duplex:
            await _send(self.ws, {"type": "response.speak", "decision": "listen", "response_id": rid})
            await _send(self.ws, {"type": "output_audio_buffer.cleared", "response_id": rid})
        if self.b.late_delta:
            await _send(self.ws, self.delta(rid, iid, np.full(WINDOW * 4, 0.5, np.float32)))
        await _send(self.ws, {"type": "response.done", "response": {"id": rid, "status": "cancelled"}})

    def delta(self, rid: str, iid: str, audio: np.ndarray) -> dict[str, Any]:
        kind = "response.output_audio.delta" if self.b.naming == "ga" else "response.audio.delta"
        return {"type": kind, "response_id": rid, "item_id": iid, "output_index": 0, "content_index": 0,
                "delta": base64.b64encode(to_pcm16(audio).astype("<i2").tobytes()).decode("ascii")}

    async def reply(self) -> None:
        self.conn.replies += 1
        rid, iid = f"resp_{self.conn.replies}", f"item_{self.conn.replies}"
        text_kind = ("response.output_audio_transcript.delta" if self.b.naming == "ga"
                     else "response.audio_transcript.delta")
        if self.b.duplex:
            await _send(self.ws, {"type": "response.speak", "decision": "speak", "response_id": rid})
        await _send(self.ws, {"type": "response.created", "response": {"id": rid, "status": "in_progress"}})
        words = self.b.transcript.split(" ") if self.b.transcript else []
        step = SR * self.b.delta_ms // 1000
        for k, start in enumerate(range(0, self.b.reply.size, step)):
            if k < len(words):  # text runs ahead of the audio, as it does on the real service
                await _send(self.ws, {"type": text_kind, "response_id": rid, "item_id": iid,
                                      "delta": words[k] + (" " if k + 1 < len(words) else "")})
            await _send(self.ws, self.delta(rid, iid, self.b.reply[start:start + step]))
            if self.b.drop_after_deltas is not None and k + 1 >= self.b.drop_after_deltas:
                self.ws.transport.abort()
                return
            if (k + 1) * self.b.delta_ms >= self.b.burst_ms:
                await asyncio.sleep(self.b.delta_ms / 1000 / self.b.pace)
        rest = " ".join(words[len(range(0, self.b.reply.size, step)):])
        if rest:  # the transcript's tail after the last audio: due once the audio is done and played
            await _send(self.ws, {"type": text_kind, "response_id": rid, "item_id": iid, "delta": rest})
        await _send(self.ws, {"type": "response.output_audio.done" if self.b.naming == "ga" else
                              "response.audio.done", "response_id": rid, "item_id": iid})
        await _send(self.ws, {"type": "response.done", "response": {"id": rid, "status": "completed"}})

    def cancel(self) -> None:
        if self.reply_task is not None:
            self.reply_task.cancel()
