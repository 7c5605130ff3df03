"""`moshi-server`: a Moshi-family model served by `moshi.server` or NVIDIA's PersonaPlex server (docs/models.md).

Written against kyutai-labs/moshi@e6a55d27 (`moshi/moshi/server.py`, `rust/protocol.md`) and
NVIDIA/personaplex@3428dfd9 (`moshi/moshi/server.py`, the web client `client/src/pages/Conversation/Conversation.tsx`),
`UPSTREAM`. The wire protocol: one websocket at `/api/chat`, binary messages whose first byte is the kind — 0x00
handshake (the server is ready: the model's streaming state is reset and, for PersonaPlex, its voice and role prompts
have been played in), 0x01 audio (Ogg pages of 24 kHz mono Opus), 0x02 text (a UTF-8 piece of the inner monologue),
0x05 error (UTF-8). Other kinds are ignored, as the protocol says.

What PersonaPlex's server reads from the query string, and refuses (NVIDIA server.py, at 3428dfd9):
- `voice_prompt` (line 152, `request.query[...]`: a KeyError without it) names a file in its voice folder (157-160:
  FileNotFoundError for an unknown one); its voices.tgz holds `.pt` embeddings (`NATF2.pt`, the client's list).
- `text_prompt` (170, 254: a KeyError without it); an empty one becomes None (170) and the prompt phase then
  iterates None (lm.py 1097): a TypeError. NVIDIA's code never runs without a role prompt, so a case without one
  sends NVIDIA's default (`adapters.moshi.DEFAULT_ROLE_PROMPT`, the client's and offline.py's default); the server
  wraps it in `<system>` tags itself (170, `wrap_with_system_tags`).
- `seed`: the line that reads it, `int(request["seed"]) if "seed" in request.query` (171), looks it up in aiohttp's
  per-request storage, not the query: a query carrying `seed` raises KeyError. It is never sent. NVIDIA's client sends
  `text_seed` and `audio_seed` (Conversation.tsx 68-69), which the server does not read: they are sent as the client
  does (`send_seed`), and the server samples from the one seed it set at start-up (server.py 410, `seed_all(42424242)`),
  so a served PersonaPlex's samples are not reproducible per case. Nor can sampling be set: the server leaves the
  query's temperatures commented out (143-146) and samples at its LMGen's defaults (fork lm.py 652-655: text 0.7,
  not DSB-IFEval's harness 0.8, its App. D.5; the in-process `personaplex` adapter runs at 0.8).
Each of these raises in the handler after `ws.prepare` (137): aiohttp answers with an HTTP 500 written onto the
upgraded connection and closes it, before any handshake. The session then fails with that reason.
Kyutai's own server reads nothing from the query (kyutai server.py at e6a55d27): the moshi flavour sends none.

How it maps onto the step protocol. `realtime = True`: the runner paces it in wall-clock time, as a microphone
would. Each step Opus-encodes the user frame (1920 samples, Mimi's 80 ms frame) and sends it; the server answers
each 80 ms it hears with one frame of model audio (silence included), which is queued here and played out one frame
per step after a jitter buffer of `buffer_frames` frames fills once at the start of the session. So the model
channel lags the user channel by the server's compute and network time plus the buffer, as a caller would hear it
(docs/adding-a-model.md, one timing rule: a served model's audio is played in the first step after it arrives).
A server that falls behind real time empties the buffer: the step plays zeros and counts an underrun. The session's
live feasibility, measured from the client (metrics/feasibility.py `SessionPace`: underruns of frames played, when
the audio arrived, the most ever queued), goes into each episode's rec.json (`session_feasibility`, docs/scale.md),
is kept in `session_stats` and logged at close. Text pieces are released with the audio of their frame: Kyutai's
server sends a frame's audio, then its text (server.py 83-92, `decode_and_send`); NVIDIA's appends the frame's audio
to its Opus writer, sends the text at once (server.py 234-241) and the audio from a send loop polled every 1 ms
(244-251), so its piece arrives before the audio it belongs with and is held for that audio (`text_before_audio`).

Anything that breaks a session (a dropped connection, an error message, a missing handshake) makes the next step
raise `RealtimeSessionError`, so the episode is recorded as failed with that reason.

Which server code ran cannot be asked over the wire: `server_revision=COMMIT` (the checkout the server runs) is
compared with the pin and recorded in rec.json (`adapter.runtime.upstream`); without it the record says it is unknown.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
from websockets.exceptions import ConnectionClosed

from adapters.loop_thread import LoopThread
from adapters.moshi import DEFAULT_ROLE_PROMPT
from adapters.protocol import Frame
from adapters.upstream import Pin, provenance
from adapters.ws_session import RealtimeSessionError, ServedAgent, WebsocketSession
from dataset_builder.errors import UsageError
from metrics.feasibility import SessionPace

log = logging.getLogger(__name__)

SAMPLE_RATE = 24_000  # Mimi's rate; the Opus stream is 24 kHz mono
FRAME = 1920  # Mimi's 12.5 Hz frame
KIND_HANDSHAKE, KIND_AUDIO, KIND_TEXT, KIND_ERROR = 0, 1, 2, 5
SERVERS = ("moshi", "personaplex")
UPSTREAM: tuple[Pin, ...] = (Pin("git", "kyutai-labs/moshi", "e6a55d2722a65870ef52a6c9f6ecfc0e90f38362"),
                             Pin("git", "NVIDIA/personaplex", "3428dfd95309a7f3c84fd93259ded0f810d1ff91"))
# What NVIDIA's client sends for sampling seeds (Conversation.tsx 68-69); `seed` itself makes the server raise.
SEED_PARAMS = ("text_seed", "audio_seed")


def _opus() -> Any:
    try:
        import sphn
    except ImportError:
        raise UsageError("moshi-server needs sphn for Opus: pip install -e \".[moshi]\"") from None
    return sphn


def chat_url(url: str, server: str, text_prompt: str | None, voice_prompt: str, seed: int | None) -> str:
    """The session's URL: for PersonaPlex's server `text_prompt` (never empty: NVIDIA's default role prompt stands in)
    and `voice_prompt`, both required, and the client's `text_seed`/`audio_seed`; never `seed` (see the module
    docstring). Kyutai's server reads no query: its URL is left as given."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss"):
        raise UsageError(f"moshi-server: url must start with ws:// or wss://, got scheme {parts.scheme!r}")
    if server == "moshi":
        return url
    ours = ("text_prompt", "voice_prompt", "seed", *SEED_PARAMS)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in ours]
    query += [("text_prompt", (text_prompt or "").strip() or DEFAULT_ROLE_PROMPT), ("voice_prompt", voice_prompt)]
    if seed is not None:
        query += [(k, str(seed)) for k in SEED_PARAMS]
    return urlunsplit(parts._replace(query=urlencode(query)))


class _Session(WebsocketSession):
    name, server, kind = "moshi-server", "moshi server", "message"

    def __init__(self, loop: asyncio.AbstractEventLoop, text_before_audio: bool = False) -> None:
        # Live feasibility as the client saw it (docs/scale.md): when the audio arrived, and the steps since the
        # buffer first filled that found none queued (the server behind real time).
        super().__init__(loop, SessionPace(SAMPLE_RATE, FRAME))
        # PersonaPlex's server sends a frame's text before its audio (the module docstring): the piece belongs with
        # the next frame of audio to arrive, not with the last one received.
        self.text_lead = FRAME if text_before_audio else 0
        self.pcm = np.zeros(0, np.float32)
        self.received = 0  # samples of model audio received
        self.played = 0
        self.texts: list[tuple[int, str]] = []  # (samples received once its frame has arrived, piece)
        self.started = False  # the jitter buffer filled once
        self.reader: Any = None
        self.writer: Any = None

    async def open(self, url: str, timeout_s: float) -> None:
        from websockets.asyncio.client import connect

        sphn = _opus()
        self.reader, self.writer = sphn.OpusStreamReader(SAMPLE_RATE), sphn.OpusStreamWriter(SAMPLE_RATE)
        self.ws = await connect(url, open_timeout=timeout_s, close_timeout=2.0, max_size=2**24)
        # PersonaPlex plays its prompts in before the handshake: the wait covers them.
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    message = await self.ws.recv()
                except ConnectionClosed as err:
                    raise RealtimeSessionError(
                        f"the server closed the connection before its handshake ({err}); PersonaPlex's server does "
                        f"so when the query lacks text_prompt or voice_prompt, names a voice it does not have, or "
                        f"carries `seed`") from None
                if isinstance(message, bytes) and message[:1] == bytes([KIND_HANDSHAKE]):
                    break
                if isinstance(message, bytes) and message[:1] == bytes([KIND_ERROR]):
                    raise RealtimeSessionError(f"the server refused the session: {_utf8(message[1:])}")
        self._start()

    def _on_raw(self, raw: str | bytes) -> None:
        if isinstance(raw, bytes) and raw:
            self._on_message(raw)

    def _on_message(self, message: bytes) -> None:
        kind, payload = message[0], message[1:]
        if kind == KIND_AUDIO:
            pcm = np.asarray(self.reader.append_bytes(payload), np.float32).reshape(-1)
            with self.lock:
                self.pcm = np.concatenate([self.pcm, pcm])
                self.received += pcm.size
                self.pace.arrived("", pcm.size, self.pcm.size)
        elif kind == KIND_TEXT:
            with self.lock:
                self.texts.append((self.received + self.text_lead, _utf8(payload)))
        elif kind == KIND_ERROR:
            self._fail(f"the moshi server sent an error: {_utf8(payload)}")

    # -- called from the stepping thread ----------------------------------------------------------------------
    def send_audio(self, frame: np.ndarray) -> None:
        data = self.writer.append_pcm(np.asarray(frame, np.float32))
        if data:
            self.send_raw(bytes([KIND_AUDIO]) + bytes(data))

    def take(self, n: int, buffer: int) -> tuple[np.ndarray, str | None]:
        out = np.zeros(n, np.float32)
        with self.lock:
            if self.failure is not None:
                raise RealtimeSessionError(self.failure)
            if not self.started and self.pcm.size >= buffer:
                self.started = True
            if self.started:
                k = min(n, self.pcm.size)
                out[:k], self.pcm = self.pcm[:k], self.pcm[k:]
                self.played += k
                self.pace.step(starved=k < n)
            # A piece comes with the last frame of audio received before it (moshi sends a frame's audio, then its
            # text): it is due once that frame has started playing.
            due = [t for at, t in self.texts if self.started and at - n < self.played]
            self.texts = [(at, t) for at, t in self.texts if not (self.started and at - n < self.played)]
        return out, "".join(due) or None


def _utf8(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class MoshiServerAgent(ServedAgent[_Session]):
    """A model behind `moshi.server` / PersonaPlex's server; one websocket session per case."""

    name = "moshi-server"
    realtime = True
    greets_first = True  # a Moshi-family model: M3's None/User get the authors' 5 s lead-in (M3-DuplexBench V-A fn. 2)
    sample_rate = SAMPLE_RATE
    frame_size = FRAME

    def __init__(self, url: str = "ws://localhost:8998/api/chat", server: str = "moshi", voice_prompt: str = "NATF2.pt",
                 buffer_frames: int = 2, connect_timeout_s: float = 60.0, send_seed: bool = True,
                 model: str | None = None, server_revision: str | None = None) -> None:
        if server not in SERVERS:
            raise UsageError(f"moshi-server: server must be one of {SERVERS}, got {server!r}")
        if buffer_frames < 0:
            raise UsageError(f"moshi-server: buffer_frames must be >= 0, got {buffer_frames}")
        chat_url(url, server, None, voice_prompt, None)  # a wrong scheme is a usage error now, not a failed episode
        self.url, self.server, self.voice_prompt = url, server, voice_prompt
        self.buffer_frames, self.connect_timeout_s, self.send_seed = buffer_frames, connect_timeout_s, send_seed
        # The moshi server takes no prompt; PersonaPlex's takes the role prompt as `text_prompt`.
        self.capabilities: frozenset[str] = frozenset({"text_output"} | ({"system_prompt"} if server == "personaplex"
                                                                          else set()))
        self.version = f"1/{server}/{model or 'server-default'}"
        pin = UPSTREAM[SERVERS.index(server)]
        # Said once per agent (one line) when the server's code is not the pinned commit, or cannot be told.
        self.upstream = provenance(self.name, pin, server_revision, f"the {server} server's code")
        self.session_stats: dict[str, Any] | None = None  # the last closed session's live feasibility
        self._io = LoopThread("moshi-server", "moshi server", RealtimeSessionError)
        self._session: _Session | None = None

    def runtime(self) -> dict[str, Any]:
        """The client's settings that shape the recording (rec.json): its jitter buffer, the server flavour, what
        PersonaPlex was prompted with when a case has no role prompt, and the server code it was written against."""
        persona = self.server == "personaplex"
        return {"server": self.server, "buffer_frames": self.buffer_frames,
                "voice_prompt": self.voice_prompt if persona else None,
                "default_role_prompt": DEFAULT_ROLE_PROMPT if persona else None,
                "seed_params": list(SEED_PARAMS) if persona and self.send_seed else [],
                "upstream": [self.upstream]}

    def reset(self, system_prompt: str | None, seed: int) -> None:
        """A fresh server session per case (the server resets its streaming state for each connection)."""
        self._close_session()
        url = chat_url(self.url, self.server, system_prompt, self.voice_prompt, seed if self.send_seed else None)
        session = _Session(self._io.loop, text_before_audio=self.server == "personaplex")
        self._session = self._open(session, session.open(url, self.connect_timeout_s), self.connect_timeout_s * 2 + 5)

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        session = self._current()
        session.send_audio(user_frame)
        audio, text = session.take(self.frame_size, self.buffer_frames * self.frame_size)
        return Frame(audio, text)

    def _closed(self, session: _Session) -> None:
        self.session_stats = stats = session.feasibility()
        if stats["underruns"]:
            log.warning("moshi-server: the server fell behind real time in %d of %d frames", stats["underruns"],
                        stats["frames"])
