"""A stand-in vLLM-Omni server: MiniCPM-o 4.5 native full duplex on `/v1/realtime?duplex=1`.

A contract of vLLM-Omni's experimental full-duplex serving at vraiti/vllm-omni@d6240742 (upstream PR 5115); the
files it mirrors, under vllm_omni/experimental/fullduplex/:
- openai/realtime_state.py:125-143 and openai/realtime_session.py:51-97: the query (`duplex`, `model`,
  `minicpmo45_native_duplex`, `autostart`); `?model=` without `autostart=0` opens a default session before the
  client's first event is read, and that session has no reference voice (so a native one is refused) or is the
  generic commit-only path, which never answers an uncommitted stream;
- openai/realtime_input.py:67-101,995-1012 and minicpmo45/adapter.py:43-60,95-106: `session.update` opens the
  session; turn detection other than null is refused (`unsupported_turn_detection`); the native path needs
  `extra_body.minicpmo45_native_duplex` true, refuses server-owned runtime keys in `extra_body`, and refuses audio
  output without `ref_audio` (`ref_audio_required`); it answers `session.created` then `session.updated`
  (openai/realtime_output.py:17-35);
- DESIGN.md:457-463 and engine/lease.py:28: at most `max_sessions` sessions at once
  (1 by default), a session left without `session.close` is held for `disconnect_grace_s` (30 s), and a session
  beyond the limit is refused with `resource_exhausted` (type `rate_limit_error`, openai/realtime_state.py:44);
- openai/realtime_input.py:255-300 and openai/audio.py:119-154: `input_audio_buffer.append` at the append's
  `sample_rate_hz` (else the session's, 16 kHz by default, realtime_state.py:105), resampled to 16 kHz by linear
  interpolation; `input_audio_buffer.speech_started` once, on the first append whose RMS reaches 0.003;
- openai/realtime_output.py:47-100,112-150,685-754,790-907: `response.created`, then `response.speak` with
  `metadata {session_id, epoch, model_speak}`, then each `response.audio.delta` (`format` "pcm16", `sample_rate_hz`
  24000) followed by its `response.audio_transcript.delta`, `response.audio.done`,
  `response.audio_transcript.done`, `response.done` and `rate_limits.updated`; `response.listen` at a model unit
  (1 s of 16 kHz audio, minicpmo45/policy.py:21-22) where the model does not speak;
- openai/session_runner.py:788-817 and openai/websocket.py:13-31: `session.close` answered with `session.closed`;
  `playback.ack` with `playback.acknowledged`; an event type it does not accept with `unknown_event`.

The model is tests/realtime_fake.py's (an energy VAD at 16 kHz; the known reply after the chosen utterance),
turn-taking its own: with `overlap_policy: "listen_only"` nothing is cut by the server, and when the user speaks
over the reply the model decides to listen at the next unit boundary, ending the response there.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from dataset_builder.audio import to_pcm16
from tests.realtime_fake import SR, Behaviour, Connection, _Model, _send
from tests.ws_standin import StandInServer

MODEL_RATE = 16_000  # what the model hears (minicpmo45/policy.py:21)
UNIT = 16_000  # one model unit (minicpmo45/policy.py:22)
TRUE = {"1", "true", "yes", "on"}
PRIVATE_KEYS = frozenset({"duplex_stage_sampling_params", "duplex_stage_max_tokens", "duplex_stage0_max_tokens",
                          "duplex_scheduler_token_id", "duplex_first_append_context_tokens", "ref_audio_data",
                          "ref_audio_format", "ref_audio_sample_rate_hz"})  # minicpmo45/adapter.py:30-41
ACCEPTED = frozenset({"session.update", "input_audio_buffer.append", "input_audio_buffer.commit",
                      "input_audio_buffer.clear", "playback.ack", "session.close", "response.create",
                      "response.cancel", "conversation.item.truncate", "output_audio_buffer.clear", "turn.signal"})


def vllm_behaviour(reply: np.ndarray, transcript: str = "", **kwargs: Any) -> Behaviour:
    """A reply streamed a little faster than real time after a short burst, as the model speaks unit by unit."""
    return Behaviour(reply=reply, transcript=transcript, **{"burst_ms": 400, "pace": 1.25, **kwargs})


@dataclass
class DuplexConnection(Connection):
    query: dict[str, str] = field(default_factory=dict)
    rates: list[int] = field(default_factory=list)  # each append's sample rate
    acks: list[dict[str, Any]] = field(default_factory=list)
    closed_session: bool = False  # `session.close` received and answered
    opened: str = ""  # "native", "generic" or "" (no session)

    def user_audio(self) -> np.ndarray:
        return np.frombuffer(bytes(self.audio), dtype="<i2")


def _error(code: str, message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "event_id": "event_err", "error": {"type": kind, "code": code, "message": message}}


class _DuplexModel(_Model):
    """The model of a native session: 16 kHz, no server VAD events, a decision at every unit."""

    vad_events = False
    rate = MODEL_RATE

    def __init__(self, b: Behaviour, conn: Connection, ws: Any, session_id: str) -> None:
        super().__init__(b, conn, ws)
        self.session_id = session_id
        self.interrupt = False  # overlap_policy "listen_only": the server never cuts the model
        self.user_over_reply = False
        self.stop_reply = False

    def speak_metadata(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "epoch": 0, "model_speak": True}

    async def on_window(self, window: np.ndarray) -> None:
        replying = self.reply_task is not None and not self.reply_task.done()
        if replying and float(np.sqrt(np.mean(window**2))) > self.b.energy:
            self.user_over_reply = True
        await super().on_window(window)
        if self.heard % UNIT == 0:  # a model unit: listen, speak on, or yield to the user speaking over it
            if replying and self.user_over_reply:
                self.stop_reply = True  # it decides to listen: its response ends at this unit
            elif not replying and (self.reply_task is None or self.reply_task.done()):
                await _send(self.ws, {"type": "response.listen", "session_id": self.session_id, "epoch": 0,
                                      "response": {"object": "realtime.response", "status": "listening",
                                                   "metadata": {"type": "response.listen"}}})
            self.user_over_reply = False

    async def reply(self) -> None:
        self.conn.replies += 1
        rid = f"resp_{self.conn.replies}"
        iid = f"item_{rid}"
        await _send(self.ws, {"type": "response.created", "event_id": "event_c", "response_id": rid, "response": {
            "id": rid, "object": "realtime.response", "status": "in_progress", "status_details": None,
            "output": [], "modalities": ["audio", "text"], "metadata": {}}})
        await _send(self.ws, {"type": "response.speak", "event_id": "event_s", "response_id": rid, "item_id": iid,
                              "output_index": 0, "content_index": 0, "metadata": self.speak_metadata()})
        words = self.b.transcript.split(" ") if self.b.transcript else []
        step = SR * self.b.delta_ms // 1000
        starts = range(0, self.b.reply.size, step)
        for k, start in enumerate(starts):
            if self.stop_reply:
                break
            audio = to_pcm16(self.b.reply[start:start + step]).astype("<i2").tobytes()
            await _send(self.ws, {"type": "response.audio.delta", "event_id": "event_a", "response_id": rid,
                                  "item_id": iid, "output_index": 0, "content_index": 0,
                                  "delta": base64.b64encode(audio).decode("ascii"), "format": "pcm16",
                                  "sample_rate_hz": SR, "metadata": {**self.speak_metadata(),
                                                                     "audio_duration_ms": (start + step) * 1000 // SR}})
            text = words[k] + (" " if k + 1 < len(words) else "") if k < len(words) else ""
            if k == len(starts) - 1:  # the last audio carries the words left
                text += " ".join(words[k + 1:])
            await _send(self.ws, {"type": "response.audio_transcript.delta", "event_id": "event_t",
                                  "response_id": rid, "item_id": iid, "output_index": 0, "content_index": 0,
                                  "delta": text})
            if self.b.drop_after_deltas is not None and k + 1 >= self.b.drop_after_deltas:
                self.ws.transport.abort()
                return
            if (k + 1) * self.b.delta_ms >= self.b.burst_ms:
                await asyncio.sleep(self.b.delta_ms / 1000 / self.b.pace)
        for event in ({"type": "response.audio.done"},
                      {"type": "response.audio_transcript.done", "transcript": self.b.transcript}):
            await _send(self.ws, {**event, "event_id": "event_d", "response_id": rid, "item_id": iid,
                                  "output_index": 0, "content_index": 0})
        await _send(self.ws, {"type": "response.done", "event_id": "event_e", "response_id": rid, "response": {
            "id": rid, "object": "realtime.response", "status": "completed",
            "status_details": {"type": "completed", "reason": "stop"}, "output": [], "metadata": {}}})
        await _send(self.ws, {"type": "rate_limits.updated", "rate_limits": []})
        self.stop_reply = False


class FakeVllmOmniServer(StandInServer):
    """Start with `with FakeVllmOmniServer(behaviour) as server:`; `server.url` is its ws:// address (no query)."""

    path = "/v1/realtime"
    logger_name = "tests.vllm_omni_fake.server"

    def __init__(self, behaviour: Behaviour, max_sessions: int = 1, disconnect_grace_s: float = 30.0) -> None:
        super().__init__()
        self.behaviour = behaviour
        self.max_sessions = max_sessions
        self.grace_s = disconnect_grace_s
        self.connections: list[DuplexConnection] = []
        self.held: dict[int, float | None] = {}  # connection number -> when its native session is released

    def _admit(self, number: int) -> bool:
        now = time.monotonic()
        live = [k for k, until in self.held.items() if until is None or until > now]
        if len(live) >= self.max_sessions:
            return False
        self.held[number] = None
        return True

    async def _handle(self, ws: Any) -> None:
        query = dict(parse_qsl(urlsplit(ws.request.path).query, keep_blank_values=True))
        conn = DuplexConnection(headers={k: v for k, v in ws.request.headers.raw_items()}, path=ws.request.path,
                                query=query)
        self.connections.append(conn)
        number = len(self.connections)
        behaviour = self.behaviour
        if number in behaviour.drop_connections:
            behaviour = replace(behaviour, drop_after_deltas=behaviour.drop_after_deltas or 3)
        if number in behaviour.slow_connections:
            behaviour = replace(behaviour, burst_ms=0, pace=0.5)
        state = _Served(self, conn, ws, behaviour, number)
        try:
            if query.get("duplex", "").lower() not in TRUE:
                await _send(ws, _error("bad_event", "the stand-in serves only the duplex route (?duplex=1)"))
                return
            if query.get("model") and query.get("autostart", "").lower() not in {"0", "false", "no", "off"}:
                await state.open({"model": query["model"], "session_id": None,
                                  "extra_body": {"minicpmo45_native_duplex": True}
                                  if query.get("minicpmo45_native_duplex", "").lower() in TRUE else {}})
            async for raw in ws:
                await state.on_event(json.loads(raw))
        except Exception:  # a dropped connection ends the handler like a closed one
            pass
        finally:
            state.end()
            conn.close_code = ws.close_code


class _Served:
    """One connection's session on the stand-in server."""

    def __init__(self, server: FakeVllmOmniServer, conn: DuplexConnection, ws: Any, b: Behaviour,
                 number: int) -> None:
        self.server, self.conn, self.ws, self.b, self.number = server, conn, ws, b, number
        self.model: _DuplexModel | None = None  # set once a native session with auto_response is open
        self.input_rate = MODEL_RATE
        self.speech_started = False
        self.attempted = False  # a session was opened or refused: later updates do not open another

    async def open(self, session: dict[str, Any]) -> None:
        self.attempted = True
        extra = session.get("extra_body") if isinstance(session.get("extra_body"), dict) else {}
        sid = f"sess_{self.number}"
        if extra.get("minicpmo45_native_duplex") is not True:
            self.conn.opened = "generic"  # the commit-only path: this stand-in never answers an uncommitted stream
        elif private := sorted(PRIVATE_KEYS & set(extra)):
            await _send(self.ws, _error("invalid_request_error",
                                        "native duplex runtime configuration is server-owned: " + ", ".join(private)))
            return
        elif "audio" in (session.get("modalities") or session.get("output_modalities") or ["text", "audio"]) \
                and not session.get("ref_audio"):
            await _send(self.ws, _error("ref_audio_required",
                                        "MiniCPM-o native duplex audio output requires ref_audio"))
            return
        elif not self.server._admit(self.number):
            await _send(self.ws, _error("resource_exhausted", "duplex session capacity exhausted", "rate_limit_error"))
            return
        else:
            self.conn.opened = "native"
            if extra.get("auto_response") is True:
                self.model = _DuplexModel(self.b, self.conn, self.ws, sid)
        fmt = (session.get("audio") or {}).get("input", {}).get("format")
        if isinstance(fmt, dict) and isinstance(fmt.get("rate"), int):
            self.input_rate = fmt["rate"]
        await _send(self.ws, {"type": "session.created", "event_id": "event_0",
                              "session": {"id": sid, "object": "realtime.session", "model": session.get("model")}})

    async def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind not in ACCEPTED:
            await _send(self.ws, _error("unknown_event", f"Unsupported event type: {kind}"))
            return
        if kind == "session.update":
            self.conn.session_updates.append(event)
            session = event.get("session") or {}
            turn = session.get("turn_detection", (session.get("audio") or {}).get("input", {}).get("turn_detection"))
            if turn is not None:
                await _send(self.ws, _error("unsupported_turn_detection", f"turn_detection={turn!r} is not "
                                            "implemented by the duplex Realtime adapter"))
                return
            if not self.attempted:
                await self.open(session)
            if self.conn.opened:  # the first update's, after session.created (openai/realtime_output.py:27-29)
                await _send(self.ws, {"type": "session.updated", "event_id": "event_1", "session": session})
        elif kind == "input_audio_buffer.append":
            await self.append(event)
        elif kind == "playback.ack":
            self.conn.acks.append(event)
            await _send(self.ws, {"type": "playback.acknowledged", "event": event})
        elif kind == "session.close":
            self.conn.closed_session = True
            self.server.held.pop(self.number, None)
            if self.model is not None:
                self.model.cancel()
            await _send(self.ws, {"type": "session.closed", "event": {"type": "session.closed",
                                                                      "session_id": f"sess_{self.number}"}})
        elif kind == "conversation.item.truncate":
            self.conn.truncations.append(event)

    async def append(self, event: dict[str, Any]) -> None:
        rate = int(event.get("sample_rate_hz") or self.input_rate)
        raw = base64.b64decode(event["audio"])
        self.conn.rates.append(rate)
        self.conn.audio += raw
        pcm = np.frombuffer(raw, dtype="<i2").astype(np.float32)
        if rate != MODEL_RATE and pcm.size > 1:  # openai/audio.py:35-45
            n = max(1, round(pcm.size * MODEL_RATE / rate))
            pcm = np.interp(np.linspace(0, 1, n), np.linspace(0, 1, pcm.size), pcm)
        samples = pcm / 32768.0
        if not self.speech_started and samples.size and float(np.sqrt(np.mean(samples**2))) >= 0.003:
            self.speech_started = True
            await _send(self.ws, {"type": "input_audio_buffer.speech_started", "audio_start_ms": 0,
                                  "item_id": "item_input"})
        if self.model is not None:
            await self.model.hear(np.clip(np.round(pcm), -32768, 32767).astype(np.int16))

    def end(self) -> None:
        if self.model is not None:
            self.model.cancel()
        if self.number in self.server.held and not self.conn.closed_session:
            self.server.held[self.number] = time.monotonic() + self.server.grace_s  # kept for a resume
