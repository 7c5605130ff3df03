"""A stand-in OpenAI Realtime model: a local asyncio `websockets` server speaking the Realtime event protocol.

A contract of the protocol as openai-python e43b4224 states it: src/openai/types/realtime (GA:
realtime_session_create_request_param.py, realtime_audio_config_input_param.py, realtime_audio_config_output_param.py,
realtime_audio_formats_param.py, realtime_audio_input_turn_detection_param.py, response_audio_delta_event.py,
response_audio_transcript_delta_event.py, input_audio_buffer_speech_started_event.py,
conversation_item_truncate_event.py, response_done_event.py) and src/openai/types/beta/realtime (the beta layout:
session_update_event.py and the beta events). A `session.update` with a field its layout does not define, a GA
session without `type: "realtime"`, or a PCM format at another rate than 24000 is refused with an `error` event
(`unknown_parameter`, `missing_required_parameter`, `invalid_value`), as the service refuses it; so is a truncate
past the audio it sent of an item. It sends only the fields those types define.

It keeps what a test needs to check (the handshake headers, every `session.update`, the user audio it heard, the
utterances its VAD found, the truncations it was asked for, how each connection closed) and behaves like a served
model with server turn detection: an energy VAD over 20 ms windows with the session's `silence_duration_ms`,
`speech_started` / `speech_stopped` events, and after the chosen utterance a known reply clip streamed in audio
deltas with its transcript (a first burst, then twice as fast as real time, like the real service). With
`interrupt_response` a barge-in cancels the reply. It can also drop the TCP connection mid-reply, send an `error`,
refuse the session, or fall behind real time on chosen connections.
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
    delta_ms: int = 100
    burst_ms: int = 1000  # sent at once before pacing at `pace`, so host jitter cannot starve playback
    pace: float = 2.0  # after the burst, the reply streams this many times faster than real time
    late_delta: bool = False  # after a barge-in, one more delta of the cancelled reply (a race the client must ignore)
    drop_after_deltas: int | None = None  # abort the TCP connection after this many audio deltas
    error_after_s: float | None = None  # send an `error` once this much user audio has arrived
    refuse_session: bool = False
    energy: float = 0.01  # RMS above which a window is speech
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


# The fields each layout defines (openai-python e43b4224); anything else in a session.update is refused.
GA_SESSION = frozenset({"type", "audio", "include", "instructions", "max_output_tokens", "model", "output_modalities",
                        "parallel_tool_calls", "prompt", "reasoning", "tool_choice", "tools", "tracing", "truncation"})
GA_AUDIO = {"input": frozenset({"format", "noise_reduction", "transcription", "turn_detection"}),
            "output": frozenset({"format", "speed", "voice"})}
GA_TURN = {"server_vad": frozenset({"type", "create_response", "idle_timeout_ms", "interrupt_response",
                                    "prefix_padding_ms", "silence_duration_ms", "threshold"}),
           "semantic_vad": frozenset({"type", "create_response", "eagerness", "interrupt_response"})}
BETA_SESSION = frozenset({"client_secret", "input_audio_format", "input_audio_noise_reduction",
                          "input_audio_transcription", "instructions", "max_response_output_tokens", "modalities",
                          "model", "output_audio_format", "speed", "temperature", "tool_choice", "tools", "tracing",
                          "turn_detection", "voice"})
BETA_TURN = frozenset({"type", "create_response", "eagerness", "interrupt_response", "prefix_padding_ms",
                       "silence_duration_ms", "threshold"})


def _unknown(keys: Any, known: frozenset[str], where: str) -> tuple[str, str, str] | None:
    extra = sorted(set(keys) - known)
    if not extra:
        return None
    return "unknown_parameter", f"{where}.{extra[0]}", f"Unknown parameter: '{where}.{extra[0]}'."


def session_problem(session: dict[str, Any], beta: bool) -> tuple[str, str, str] | None:
    """(code, param, message) of what the service refuses in a `session.update`'s session, or None."""
    if beta:
        turn = session.get("turn_detection")
        return _unknown(session, BETA_SESSION, "session") or (
            _unknown(turn, BETA_TURN, "session.turn_detection") if isinstance(turn, dict) else None)
    if problem := _unknown(session, GA_SESSION, "session"):
        return problem
    if session.get("type") != "realtime":
        return "missing_required_parameter", "session.type", "Missing required parameter: 'session.type'."
    for side, known in GA_AUDIO.items():
        block = (session.get("audio") or {}).get(side) or {}
        if problem := _unknown(block, known, f"session.audio.{side}"):
            return problem
        fmt = block.get("format") or {}
        if fmt.get("type") == "audio/pcm" and fmt.get("rate", 24000) != 24000:
            return "invalid_value", f"session.audio.{side}.format.rate", "Only a 24kHz sample rate is supported."
        turn = block.get("turn_detection")
        if isinstance(turn, dict) and (problem := _unknown(turn, GA_TURN.get(turn.get("type"), frozenset({"type"})),
                                                           "session.audio.input.turn_detection")):
            return problem
    return None


class _Model:
    vad_events = True  # input_audio_buffer.speech_started / speech_stopped (server turn detection)
    rate = SR  # the rate of the user audio it hears

    def __init__(self, b: Behaviour, conn: Connection, ws: Any) -> None:
        self.b, self.conn, self.ws = b, conn, ws
        self.window = self.rate // 50  # 20 ms
        self.silence_ms = 500
        self.interrupt = True  # interrupt_response: a barge-in cancels the reply
        self.naming = "ga"  # the event names of the session's layout: GA, or beta under `OpenAI-Beta: realtime=v1`
        self.sent: dict[str, int] = {}  # item id -> samples of its audio sent
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
            beta = self.conn.headers.get("OpenAI-Beta") == "realtime=v1"
            problem = session_problem(event["session"], beta)
            if self.b.refuse_session or problem:
                code, param, message = problem or ("model_not_found", "", "The model does not exist.")
                await _send(self.ws, {"type": "error", "event_id": "evt_err", "error": {
                    "type": "invalid_request_error", "code": code, "message": message,
                    **({"param": param} if param else {})}})
                return
            session = event["session"]
            turn = session.get("turn_detection") if beta else session["audio"]["input"].get("turn_detection")
            self.naming = "beta" if beta else "ga"
            self.detect = turn is not None
            if turn:
                self.silence_ms = turn.get("silence_duration_ms", 500)
                self.interrupt = turn.get("interrupt_response", True)
            await _send(self.ws, {"type": "session.updated", "event_id": "evt_session", "session": session})
        elif kind == "input_audio_buffer.append":
            data = base64.b64decode(event["audio"])
            self.conn.audio += data
            await self.hear(np.frombuffer(data, dtype="<i2"))
        elif kind == "conversation.item.truncate":
            self.conn.truncations.append(event)
            if event["audio_end_ms"] * SR // 1000 > self.sent.get(event["item_id"], -1):
                await _send(self.ws, {"type": "error", "event_id": "evt_err", "error": {
                    "type": "invalid_request_error", "code": "invalid_value", "param": "audio_end_ms",
                    "message": "Audio content of that length or item was not found."}})
                return
            await _send(self.ws, {"type": "conversation.item.truncated", "event_id": "evt_trunc",
                                  "item_id": event["item_id"], "content_index": 0,
                                  "audio_end_ms": event["audio_end_ms"]})

    async def hear(self, pcm: np.ndarray) -> None:
        """User audio (int16 at `rate`), judged 20 ms at a time."""
        self.pending = np.concatenate([self.pending, pcm.astype(np.int16)])
        while self.pending.size >= self.window:
            window, self.pending = self.pending[:self.window], self.pending[self.window:]
            await self.on_window(window.astype(np.float32) / 32767.0)

    async def on_window(self, window: np.ndarray) -> None:
        self.heard += self.window
        if self.b.error_after_s is not None and not self.errored and self.heard >= self.b.error_after_s * self.rate:
            self.errored = True
            await _send(self.ws, {"type": "error", "error": {"type": "server_error", "code": "fake_code",
                                                             "message": "The fake model failed on purpose."}})
        if not self.detect:
            return
        if float(np.sqrt(np.mean(window**2))) > self.b.energy:
            self.last_voiced = self.heard
            if self.speaking_since is None:
                self.speaking_since = self.heard - self.window
                if self.vad_events:
                    await _send(self.ws, {"type": "input_audio_buffer.speech_started", "event_id": "evt_vad",
                                          "audio_start_ms": self.speaking_since * 1000 // self.rate,
                                          "item_id": "user_item"})
                if self.interrupt:
                    await self.barge_in()
        elif self.speaking_since is not None and self.heard - self.last_voiced >= self.silence_ms * self.rate // 1000:
            self.conn.utterances.append((self.speaking_since, self.last_voiced))
            self.speaking_since = None
            if self.vad_events:
                await _send(self.ws, {"type": "input_audio_buffer.speech_stopped", "event_id": "evt_vad",
                                      "audio_end_ms": self.last_voiced * 1000 // self.rate, "item_id": "user_item"})
            if not self.answered and self.last_voiced >= self.b.respond_after_s * self.rate:
                self.answered = True
                self.conn.reply_at.append(self.heard)
                self.reply_task = asyncio.create_task(self.reply())

    async def barge_in(self) -> None:
        if self.reply_task is None or self.reply_task.done():
            return
        self.reply_task.cancel()
        rid, iid = f"resp_{self.conn.replies}", f"item_{self.conn.replies}"
        if self.b.late_delta:
            await _send(self.ws, self.delta(rid, iid, np.full(WINDOW * 4, 0.5, np.float32)))
        await _send(self.ws, {"type": "response.done", "event_id": "evt_done",
                              "response": {"id": rid, "object": "realtime.response", "status": "cancelled"}})

    def delta(self, rid: str, iid: str, audio: np.ndarray) -> dict[str, Any]:
        kind = "response.output_audio.delta" if self.naming == "ga" else "response.audio.delta"
        self.sent[iid] = self.sent.get(iid, 0) + audio.size
        return {"type": kind, "event_id": "evt_audio", "response_id": rid, "item_id": iid, "output_index": 0,
                "content_index": 0, "delta": base64.b64encode(to_pcm16(audio).astype("<i2").tobytes()).decode("ascii")}

    async def reply(self) -> None:
        self.conn.replies += 1
        rid, iid = f"resp_{self.conn.replies}", f"item_{self.conn.replies}"
        text_kind = ("response.output_audio_transcript.delta" if self.naming == "ga"
                     else "response.audio_transcript.delta")
        await _send(self.ws, {"type": "response.created", "event_id": "evt_created",
                              "response": {"id": rid, "object": "realtime.response", "status": "in_progress"}})
        words = self.b.transcript.split(" ") if self.b.transcript else []
        step = SR * self.b.delta_ms // 1000
        for k, start in enumerate(range(0, self.b.reply.size, step)):
            if k < len(words):  # text runs ahead of the audio, as it does on the real service
                await _send(self.ws, {"type": text_kind, "event_id": "evt_text", "response_id": rid, "item_id": iid,
                                      "output_index": 0, "content_index": 0,
                                      "delta": words[k] + (" " if k + 1 < len(words) else "")})
            await _send(self.ws, self.delta(rid, iid, self.b.reply[start:start + step]))
            if self.b.drop_after_deltas is not None and k + 1 >= self.b.drop_after_deltas:
                self.ws.transport.abort()
                return
            if (k + 1) * self.b.delta_ms >= self.b.burst_ms:
                await asyncio.sleep(self.b.delta_ms / 1000 / self.b.pace)
        rest = " ".join(words[len(range(0, self.b.reply.size, step)):])
        if rest:  # the transcript's tail after the last audio: due once the audio is done and played
            await _send(self.ws, {"type": text_kind, "event_id": "evt_text", "response_id": rid, "item_id": iid,
                                  "output_index": 0, "content_index": 0, "delta": rest})
        await _send(self.ws, {"type": "response.output_audio.done" if self.naming == "ga" else
                              "response.audio.done", "event_id": "evt_adone", "response_id": rid, "item_id": iid,
                              "output_index": 0, "content_index": 0})
        await _send(self.ws, {"type": "response.done", "event_id": "evt_done",
                              "response": {"id": rid, "object": "realtime.response", "status": "completed"}})

    def cancel(self) -> None:
        if self.reply_task is not None:
            self.reply_task.cancel()
