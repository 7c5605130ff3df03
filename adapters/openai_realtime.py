"""`openai-realtime`: any server speaking the OpenAI Realtime websocket event protocol (docs/models.md).

One websocket session per case. `reset` connects, sends `session.update` (instructions, 24 kHz PCM16 in and
out, turn detection) and waits for `session.updated`; `step` first takes the model audio that has arrived, exactly
`frame_size` samples (zero-padded), then appends the user frame to the server's input buffer
(`input_audio_buffer.append`). The order is the one timing rule (docs/adding-a-model.md): the frame played in slot
t was on the client before user frame t was sent, so it cannot depend on it. A background thread runs the websocket
loop (adapters/loop_thread.py); the service streams audio faster than real time, so it queues here and leaves one
frame per step, which is what a caller's loudspeaker would play.

Event and field names are those of openai-python e43b4224 (`UPSTREAM`): the GA layout of
src/openai/types/realtime (`session.type: "realtime"`, `audio.input.format {type: "audio/pcm", rate: 24000}`,
`audio.input.turn_detection`, `response.output_audio.delta`, `response.output_audio_transcript.delta`) and the beta
layout of src/openai/types/beta/realtime (`modalities`, `input_audio_format: "pcm16"`, `turn_detection`,
`response.audio.delta`); both generations of the server events are accepted.

`protocol` picks how a barge-in is played, and the server VAD's defaults:
- "live" (default): a live client. The server's VAD settings are OpenAI's defaults (threshold 0.5, 300 ms prefix
  padding, 500 ms silence: realtime_audio_input_turn_detection_param.py:61,67,75). When the server reports the user
  started speaking (`input_audio_buffer.speech_started`, server turn detection with `interrupt_response`), it has
  cancelled the response: the queued audio is dropped, late deltas of the cancelled responses are ignored, and the
  played item is truncated to what was heard (`conversation.item.truncate`), as a live client would.
- "dsb-ifeval": DSB-IFEval's harness (its appendix D.1-D.3): server_vad with threshold 0.5, 800 ms end-of-turn
  silence and 300 ms prefix padding, and every audio delta kept and played from its arrival ("never suppresses,
  truncates, or constrains model output"; "pos = max(t, cursor)"): nothing is dropped on `speech_started` and no
  truncate is sent. The live behaviour would invert its Yield / Continue / Accept-Overlap verdicts.
The default, "auto", is the benchmark's own protocol where a paper evaluated the model on it (`for_benchmark`,
called by `duplex-eval run`: "dsb-ifeval" on DSB-IFEval) and "live" elsewhere; a protocol named with
`--adapter-arg protocol=...` is used as given, and a VAD setting named as an adapter-arg overrides the protocol's.
Every rec.json records the protocol and the settings it resolved to (`adapter.runtime`).

The key is read from the environment at connect time and only ever sent as the Authorization header: it is not
stored on the agent, and the websocket library's debug log (which prints request headers) sees it redacted.
Anything that breaks a session (a server `error` event, a dropped connection, an unparseable event) makes the
next `step` raise `RealtimeSessionError`, so the episode is recorded as failed with that reason, never as a
model that chose silence.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
from websockets.asyncio.client import connect

from adapters.loop_thread import LoopThread
from adapters.protocol import Frame
from adapters.upstream import Pin, provenance
from adapters.ws_session import RealtimeSessionError, ServedAgent, WebsocketSession
from dataset_builder.audio import to_pcm16
from dataset_builder.errors import UsageError
from metrics.feasibility import SessionPace

log = logging.getLogger(__name__)

DEFAULT_URL = "wss://api.openai.com/v1/realtime"
SAMPLE_RATE = 24_000  # the protocol's PCM16 rate ("Only a 24kHz sample rate is supported")
AUDIO_DELTAS = frozenset({"response.output_audio.delta", "response.audio.delta"})
AUDIO_DONE = frozenset({"response.output_audio.done", "response.audio.done"})
TRANSCRIPT_DELTAS = frozenset({"response.output_audio_transcript.delta", "response.audio_transcript.delta"})
TURN_DETECTION = ("server_vad", "semantic_vad", "none")
APIS = ("ga", "beta")
REDACTED = "[redacted]"
# The event and field names of both layouts, as openai-python states them (docs/models.md).
UPSTREAM: tuple[Pin, ...] = (Pin("git", "openai/openai-python", "e43b422412a9e96c9cc5192c61fffbe2d7e04836"),)
PLAYBACKS = ("truncate", "keep")  # on a barge-in: cut the played item to what was heard, or keep every delta


@dataclass(frozen=True)
class Protocol:
    """One way of driving the service: its server VAD settings and what a barge-in does to the playback."""

    turn_detection: str
    vad_threshold: float
    prefix_padding_ms: int
    silence_duration_ms: int
    playback: str


PROTOCOLS: dict[str, Protocol] = {
    # OpenAI's defaults (realtime_audio_input_turn_detection_param.py:61,67,75) and a live client's truncation.
    "live": Protocol("server_vad", 0.5, 300, 500, "truncate"),
    # DSB-IFEval's harness, its appendix D.1-D.3: 800 ms end-of-turn silence, every delta kept at its arrival.
    "dsb-ifeval": Protocol("server_vad", 0.5, 300, 800, "keep"),
}
BENCHMARK_PROTOCOLS = {"ifeval": "dsb-ifeval"}  # the benchmarks whose paper evaluated GPT-Realtime


def pcm16_to_float(data: bytes) -> np.ndarray:
    """Little-endian PCM16 bytes as float32; the inverse of dataset_builder.audio.to_pcm16 (scale 32767)."""
    return (np.frombuffer(data, dtype="<i2").astype(np.float32) / 32767.0).astype(np.float32)


def float_to_b64_pcm16(audio: np.ndarray) -> str:
    return base64.b64encode(to_pcm16(np.asarray(audio, np.float32)).astype("<i2").tobytes()).decode("ascii")


@dataclass(frozen=True)
class RealtimeConfig:
    """What the session asks of the server; validated so a typo is a one-line error, not a silent default."""

    api: str = "ga"
    turn_detection: str = "server_vad"
    vad_threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    voice: str | None = None

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise UsageError(f"openai-realtime: api must be one of {APIS}, got {self.api!r}")
        if self.turn_detection not in TURN_DETECTION:
            raise UsageError(f"openai-realtime: turn_detection must be one of {TURN_DETECTION}, "
                             f"got {self.turn_detection!r}")
        if not 0.0 <= self.vad_threshold <= 1.0:
            raise UsageError(f"openai-realtime: vad_threshold must lie in [0, 1], got {self.vad_threshold}")
        if self.prefix_padding_ms < 0 or self.silence_duration_ms < 0:
            raise UsageError("openai-realtime: prefix_padding_ms and silence_duration_ms must be >= 0")

    def turn_detection_block(self) -> dict[str, Any] | None:
        # interrupt_response: the server cancels its response when the user speaks over it (a barge-in), which
        # is the behaviour the benchmarks measure; create_response: it answers on its own when the user stops.
        if self.turn_detection == "none":
            return None
        if self.turn_detection == "semantic_vad":
            return {"type": "semantic_vad", "create_response": True, "interrupt_response": True}
        return {"type": "server_vad", "threshold": self.vad_threshold, "prefix_padding_ms": self.prefix_padding_ms,
                "silence_duration_ms": self.silence_duration_ms, "create_response": True,
                "interrupt_response": True}

    def session_update(self, instructions: str | None) -> dict[str, Any]:
        """The `session.update` event. `instructions` None leaves the server's own default in place (MPE speaks
        its duty preamble instead of a prompt); "" clears it."""
        turn = self.turn_detection_block()
        if self.api == "beta":
            session: dict[str, Any] = {"modalities": ["audio", "text"], "input_audio_format": "pcm16",
                                       "output_audio_format": "pcm16", "turn_detection": turn}
            if self.voice:
                session["voice"] = self.voice
        else:
            pcm = {"type": "audio/pcm", "rate": SAMPLE_RATE}
            output: dict[str, Any] = {"format": pcm}
            if self.voice:
                output["voice"] = self.voice
            session = {"type": "realtime", "output_modalities": ["audio"],
                       "audio": {"input": {"format": pcm, "turn_detection": turn}, "output": output}}
        if instructions is not None:
            session["instructions"] = instructions
        return {"type": "session.update", "session": session}


def session_url(url: str, model: str | None, extra: dict[str, str] | None = None) -> str:
    """`url` with `?model=` added unless it already names one (a gateway may route by path instead), and the
    `extra` query parameters it does not already carry."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss"):
        raise UsageError(f"openai-realtime: url must start with ws:// or wss://, got scheme {parts.scheme!r}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    if model and not any(k == "model" for k, _ in query):
        query.append(("model", model))
    query += [(k, v) for k, v in (extra or {}).items() if not any(q == k for q, _ in query)]
    return urlunsplit(parts._replace(query=urlencode(query)))


class _RedactingLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """The websocket library logs request headers at DEBUG; the key is replaced before anything is emitted."""

    def __init__(self, logger: logging.Logger, secret: str) -> None:
        super().__init__(logger, {})
        self._secret = secret

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
        text = str(msg) % args if args else str(msg)
        if self._secret:
            text = text.replace(self._secret, REDACTED)
        self.logger.log(level, text, **kwargs)


@dataclass
class _Chunk:
    response_id: str
    item_id: str
    audio: np.ndarray


class _Session(WebsocketSession):
    """One connection (one case): what it has received, guarded by a lock; its tasks run on the agent's loop."""

    name, server, kind = "openai-realtime", "realtime server", "event"
    ready = "session.updated"  # the event that says the configuration is in force

    def __init__(self, loop: asyncio.AbstractEventLoop, frame_size: int, playback: str = "truncate") -> None:
        # Live feasibility from the client's side (docs/scale.md): when each response's audio arrived, and the steps
        # at which a response was mid-stream and nothing of it was here to play (the server behind real time).
        super().__init__(loop, SessionPace(SAMPLE_RATE, frame_size))
        self.playback = playback  # "truncate" or "keep" (PLAYBACKS): what a barge-in does to the queued audio
        self.streaming: set[str] = set()  # responses whose audio has started and is not done or cancelled
        self.chunks: deque[_Chunk] = deque()
        self.received: dict[str, int] = {}  # item id -> samples of its audio received so far
        self.last_delta_at: dict[str, int] = {}  # item id -> samples of it received before its latest delta
        self.played: dict[str, int] = {}  # item id -> samples of it handed out so far
        self.item_response: dict[str, str] = {}
        self.audio_done: set[str] = set()  # items whose audio is complete
        # item id -> [(samples of its audio received when this text arrived, text)], not yet due
        self.text_waiting: dict[str, list[tuple[int, str]]] = {}
        self.text_ready: list[str] = []
        self.active: set[str] = set()  # responses created and not yet done
        self.cancelled: set[str] = set()  # responses and items whose late deltas are ignored

    # -- run on the loop --------------------------------------------------------------------------------------
    async def open(self, url: str, headers: dict[str, str], secret: str, update: dict[str, Any],
                   timeout_s: float) -> None:
        logger = _RedactingLogger(logging.getLogger("websockets.client"), secret)
        self.ws = await connect(url, additional_headers=headers, open_timeout=timeout_s, close_timeout=2.0,
                                max_size=2**24, logger=logger)
        await self.ws.send(json.dumps(update))
        # The configuration must be in force before the first user sample: wait for its acknowledgement.
        async with asyncio.timeout(timeout_s):
            while True:
                event = self._parse(await self.ws.recv())
                if event.get("type") == self.ready:
                    break
                if event.get("type") == "error":
                    raise RealtimeSessionError(f"the server refused the session: {_describe_error(event)}")
        self._start()

    def _on_raw(self, raw: str | bytes) -> None:
        self._on_event(self._parse(raw))

    def _parse(self, raw: str | bytes) -> dict[str, Any]:
        try:
            event = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RealtimeSessionError(f"the server sent an event that is not JSON: {str(raw)[:80]!r}") from None
        if not isinstance(event, dict):
            raise RealtimeSessionError(f"the server sent an event that is not an object: {str(raw)[:80]!r}")
        return event

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if self._on_dialect(event):
            return
        if kind == "error":
            self._fail(f"the realtime server sent an error: {_describe_error(event)}")
        elif kind in AUDIO_DELTAS:
            self._on_audio(event)
        elif kind in TRANSCRIPT_DELTAS:
            self._on_transcript(event)
        elif kind == "input_audio_buffer.speech_started":
            if self.playback == "truncate":
                self._on_user_speech()
        elif kind == "response.created":
            with self.lock:
                self.active.add(str((event.get("response") or {}).get("id") or ""))
        elif kind in AUDIO_DONE:
            with self.lock:
                self.audio_done.add(str(event.get("item_id") or ""))
                self.streaming.discard(str(event.get("response_id") or ""))
                self._release_text()
        elif kind == "response.done":
            with self.lock:
                response_id = str((event.get("response") or {}).get("id") or "")
                self.active.discard(response_id)
                self.streaming.discard(response_id)
                self.audio_done |= {i for i, r in self.item_response.items() if r == response_id}
                self._release_text()

    def _on_dialect(self, event: dict[str, Any]) -> bool:
        """A server dialect's own event (on the loop): True when handled here (adapters/vllm_omni_duplex.py)."""
        return False

    def _on_audio(self, event: dict[str, Any]) -> None:
        response_id, item_id = str(event.get("response_id") or ""), str(event.get("item_id") or "")
        try:
            audio = pcm16_to_float(base64.b64decode(event.get("delta") or "", validate=True))
        except (ValueError, TypeError) as err:
            raise RealtimeSessionError(f"an audio delta is not base64 PCM16: {err}") from None
        with self.lock:
            if (response_id and response_id in self.cancelled) or (item_id and item_id in self.cancelled):
                return
            self.chunks.append(_Chunk(response_id, item_id, audio))
            self.pace.arrived(response_id, audio.size, sum(c.audio.size for c in self.chunks))
            self.streaming.add(response_id)
            self.last_delta_at[item_id] = self.received.get(item_id, 0)
            self.received[item_id] = self.received.get(item_id, 0) + audio.size
            self.item_response[item_id] = response_id

    def _on_transcript(self, event: dict[str, Any]) -> None:
        response_id, item_id = str(event.get("response_id") or ""), str(event.get("item_id") or "")
        text = str(event.get("delta") or "")
        with self.lock:
            if not text or (response_id and response_id in self.cancelled) or (item_id and item_id in
                                                                                 self.cancelled):
                return
            if not item_id:
                self.text_ready.append(text)
                return
            # A piece is due once the audio it belongs to starts sounding, so the recorded text follows what was
            # heard, and a barge-in drops the words never spoken.
            self.text_waiting.setdefault(item_id, []).append((self._text_mark(item_id), text))
            self._release_text()

    def _text_mark(self, item_id: str) -> int:
        """Samples of the item received before the audio a transcript piece arriving now belongs to (lock held).
        OpenAI's text runs ahead of its audio: the piece belongs to the audio that comes after it."""
        return self.received.get(item_id, 0)

    def _release_text(self) -> None:
        """Move due transcript pieces to text_ready (lock held)."""
        for item, pieces in list(self.text_waiting.items()):
            played = self.played.get(item, 0)
            done = item in self.audio_done and played >= self.received.get(item, 0)
            while pieces and (played > pieces[0][0] or done):
                self.text_ready.append(pieces.pop(0)[1])
            if not pieces:
                del self.text_waiting[item]

    def _on_user_speech(self) -> None:
        """The server heard the user start and (interrupt_response) cancelled its response: stop playing."""
        with self.lock:
            if self.chunks:
                head = self.chunks[0].item_id
                heard = self.played.get(head, 0)
                if head and heard > 0:
                    # Tell the server what the user actually heard, so its context matches the recording.
                    truncate = {"type": "conversation.item.truncate", "item_id": head, "content_index": 0,
                                "audio_end_ms": heard * 1000 // SAMPLE_RATE}
                    self.outbox.put_nowait(json.dumps(truncate))
            dropped = {c.response_id for c in self.chunks} | {c.item_id for c in self.chunks} | self.active
            self.cancelled |= {x for x in dropped if x}
            for item in {c.item_id for c in self.chunks}:
                self.text_waiting.pop(item, None)
            self.chunks.clear()
            self.streaming -= self.cancelled

    # -- called from the stepping thread ----------------------------------------------------------------------
    def send(self, event: dict[str, Any]) -> None:
        self.send_raw(json.dumps(event))

    def take(self, n: int) -> tuple[np.ndarray, str | None]:
        """The next n samples of model audio (zero-padded) and the text that became due with them."""
        out = np.zeros(n, np.float32)
        k = 0
        with self.lock:
            if self.failure is not None:
                raise RealtimeSessionError(self.failure)
            while k < n and self.chunks:
                chunk = self.chunks[0]
                m = min(n - k, chunk.audio.size)
                out[k:k + m] = chunk.audio[:m]
                k += m
                self.played[chunk.item_id] = self.played.get(chunk.item_id, 0) + m
                if m == chunk.audio.size:
                    self.chunks.popleft()
                else:
                    chunk.audio = chunk.audio[m:]
            if k or self.streaming:  # the model's audio was due: starved when a response is mid-stream, short
                self.pace.step(starved=k < n and bool(self.streaming))
            self._release_text()
            text = "".join(self.text_ready) or None
            self.text_ready = []
        return out, text


def _describe_error(event: dict[str, Any]) -> str:
    err = event.get("error")
    if not isinstance(err, dict):
        return json.dumps(event)[:200]
    kind = "/".join(str(err[k]) for k in ("type", "code") if err.get(k))
    return f"{err.get('message') or 'no message'}" + (f" ({kind})" if kind else "")


class OpenAIRealtimeAgent(ServedAgent[_Session]):
    """A Realtime-protocol websocket model; `realtime=True`, so the orchestrator paces it in wall-clock time.

    frame_size 480 (20 ms at 24 kHz): the packet size of live voice clients (and of DSB-IFEval's harness, its
    appendix D.5), so user audio reaches the server's turn detection, and barge-ins land, at the granularity a
    phone call would give; a step costs one small event each way (640 base64 bytes of audio). The VAD settings left
    unset take the `protocol`'s values (`PROTOCOLS`).
    """

    name = "openai-realtime"
    realtime = True
    sample_rate = SAMPLE_RATE
    capabilities: frozenset[str] = frozenset({"system_prompt", "text_output"})

    def __init__(self, url: str = DEFAULT_URL, model: str | None = "gpt-realtime",
                 api_key_env: str = "OPENAI_API_KEY", frame_size: int = 480, api: str = "ga",
                 turn_detection: str | None = None, vad_threshold: float | None = None,
                 prefix_padding_ms: int | None = None, silence_duration_ms: int | None = None,
                 voice: str | None = None, connect_timeout_s: float = 15.0, protocol: str = "auto") -> None:
        if frame_size <= 0:
            raise UsageError(f"openai-realtime: frame_size must be positive, got {frame_size}")
        if protocol != "auto" and protocol not in PROTOCOLS:
            raise UsageError(f"openai-realtime: protocol must be 'auto' or one of {tuple(PROTOCOLS)}, "
                             f"got {protocol!r}")
        self.url = session_url(url, model)  # checked now: a wrong scheme is a usage error, not a failed episode
        self.model = model
        self.api_key_env = api_key_env  # the variable's name; its value is read at connect time, never kept
        self.frame_size = frame_size
        self.protocol_arg = protocol
        # The settings given as adapter-args: they win over the protocol's.
        self._given = {"api": api, "voice": voice, "turn_detection": turn_detection, "vad_threshold": vad_threshold,
                       "prefix_padding_ms": prefix_padding_ms, "silence_duration_ms": silence_duration_ms}
        self._use_protocol("live" if protocol == "auto" else protocol)
        self.connect_timeout_s = connect_timeout_s
        # The served model changes what a run measures: it is part of the version every rec.json records.
        self.version = f"1/{model or 'server-default'}"
        # What serves the events cannot be asked for its revision: the record says which schema this was read at.
        self.upstream = [provenance(self.name, pin, None, "the served event schema") for pin in self._pins()]
        self._io = LoopThread(self.name, "realtime server", RealtimeSessionError)
        self._session: _Session | None = None

    def _use_protocol(self, protocol: str) -> None:
        preset = PROTOCOLS[protocol]
        given = {k: v for k, v in self._given.items() if v is not None}
        self.protocol, self.playback = protocol, preset.playback
        self.config = RealtimeConfig(**{"turn_detection": preset.turn_detection, "vad_threshold": preset.vad_threshold,
                                        "prefix_padding_ms": preset.prefix_padding_ms,
                                        "silence_duration_ms": preset.silence_duration_ms, **given})

    def for_benchmark(self, benchmark: str) -> None:
        """The run names the benchmark before the first case: with `protocol="auto"`, its paper's protocol."""
        if self.protocol_arg == "auto":
            self._use_protocol(BENCHMARK_PROTOCOLS.get(benchmark, "live"))

    @staticmethod
    def _pins() -> tuple[Pin, ...]:
        return UPSTREAM

    def __repr__(self) -> str:
        return (f"OpenAIRealtimeAgent(model={self.model!r}, api={self.config.api!r}, frame_size={self.frame_size}, "
                f"protocol={self.protocol!r}, turn_detection={self.config.turn_detection!r}, "
                f"api_key_env={self.api_key_env!r})")

    def runtime(self) -> dict[str, Any]:
        """Recorded in every rec.json: how the session was driven (the protocol and what it resolved to)."""
        c = self.config
        return {"protocol": self.protocol, "protocol_arg": self.protocol_arg, "playback": self.playback, "api": c.api,
                "turn_detection": c.turn_detection_block(), "upstream": self.upstream}

    def _headers(self) -> tuple[dict[str, str], str]:
        headers: dict[str, str] = {}
        if self.config.api == "beta":
            headers["OpenAI-Beta"] = "realtime=v1"
        if not self.api_key_env:  # a local server without authentication
            return headers, ""
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise RealtimeSessionError(f"environment variable {self.api_key_env} is not set: it holds the API key "
                                       "sent as the Authorization header (api_key_env='' for a server without one)")
        headers["Authorization"] = f"Bearer {key}"
        return headers, key

    def reset(self, system_prompt: str | None, seed: int) -> None:
        """A fresh server session per case. `seed` cannot reach a served model: its sampling is its own."""
        self._close_session()
        self._session = self._open_session(system_prompt)

    def _session_update(self, system_prompt: str | None) -> dict[str, Any]:
        return self.config.session_update(system_prompt)

    def _new_session(self) -> _Session:
        return _Session(self._io.loop, self.frame_size, self.playback)

    def _open_session(self, system_prompt: str | None) -> _Session:
        headers, secret = self._headers()
        session = self._new_session()
        return self._open(session, session.open(self.url, headers, secret, self._session_update(system_prompt),
                                                self.connect_timeout_s), self.connect_timeout_s * 2 + 5)

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        session = self._current()
        audio, text = session.take(self.frame_size)  # before sending frame t: slot t cannot depend on it
        session.send({"type": "input_audio_buffer.append", "audio": float_to_b64_pcm16(user_frame)})
        return Frame(audio, text)
