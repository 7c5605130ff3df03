"""A stand-in for `moshi.server` / PersonaPlex's server: a local websocket at /api/chat speaking their protocol.

A contract of kyutai-labs/moshi@e6a55d27 (`moshi/moshi/server.py`, `rust/protocol.md`) and, with
`require_prompt=True`, of NVIDIA/personaplex@3428dfd9 (`moshi/moshi/server.py` `handle_chat`, `models/lm.py` prompt
phases). The first byte of each binary message is its kind (0x00 handshake, 0x01 Ogg/Opus audio at 24 kHz, 0x02
text, 0x05 error). Like the real server it answers every 80 ms frame of user audio it decodes with one frame of model
audio (silence when it says nothing) and sends the inner monologue as text pieces: Kyutai's server after the audio
of their frame (server.py 83-92, `decode_and_send`), NVIDIA's before it (server.py 234-251: the text is sent as soon
as the frame is decoded, the audio by a send loop polled every 1 ms), and the stand-in in the same order per flavour.

What PersonaPlex's server refuses, the stand-in refuses the same way (`require_prompt=True`): a query without
`voice_prompt` (server.py 152: KeyError), naming a voice its folder lacks (157-160: FileNotFoundError), without
`text_prompt` (170: KeyError), with an empty `text_prompt` (170 makes it None, lm.py 1097 iterates it: TypeError), or
carrying `seed` (171 reads `request["seed"]`, aiohttp's request storage: KeyError). Each raises in the handler after
`ws.prepare` (137), so aiohttp answers an HTTP 500 on the upgraded connection and closes it, with no handshake:
the stand-in writes the same status line onto the connection and closes it (`refused` records why). Kyutai's server
reads no query and refuses none of these.

Kyutai's server answers nothing for the first user frame (server.py `recv_loop`: the frame is encoded, its encoder
state reset, and `LMGen.step` returns None until it has stepped past its delay); NVIDIA's has played its prompts
by then and answers from the first frame: the stand-in does the same per flavour.

Its "model": an energy VAD over each frame; once the user has been quiet `silence_frames` frames after an utterance
ending past `respond_after_s`, it says the reply clip, one word of its transcript per frame from the first; when the
user speaks over the reply for `barge_frames` frames it stops (a full-duplex model yielding). It can also drop the
TCP connection after some reply frames, or send an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import sphn

from tests.ws_standin import StandInServer

SR, FRAME = 24_000, 1920
# The voice presets NVIDIA's web client offers (client/src/pages/Queue/Queue.tsx 11-16): files in voices.tgz.
VOICES = frozenset(f"{name}.pt" for name in (*(f"NAT{g}{i}" for g in "FM" for i in range(4)),
                                              *(f"VAR{g}{i}" for g in "FM" for i in range(5))))
HTTP_500 = b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"


def personaplex_refusal(query: dict[str, str]) -> str | None:
    """Why PersonaPlex's handler (server.py at 3428dfd9) raises on this query, or None if it runs."""
    if "voice_prompt" not in query:
        return "KeyError: 'voice_prompt'"  # 152
    if query["voice_prompt"] not in VOICES:
        return f"FileNotFoundError: voice prompt {query['voice_prompt']!r} not found"  # 157-160
    if "text_prompt" not in query:
        return "KeyError: 'text_prompt'"  # 170
    if "seed" in query:
        return "KeyError: 'seed'"  # 171: request["seed"], not request.query
    if not query["text_prompt"]:
        return "TypeError: 'NoneType' object is not iterable"  # 170 -> lm.py 1097
    return None


@dataclass
class MoshiBehaviour:
    reply: np.ndarray  # float32 at 24 kHz
    transcript: str = ""
    respond_after_s: float = 0.0
    silence_frames: int = 5  # 400 ms of quiet ends the user's turn
    barge_frames: int = 2  # 160 ms of user speech over the reply stops it
    energy: float = 0.01
    drop_after_frames: int | None = None  # abort the connection after this many reply frames
    error_after_s: float | None = None
    require_prompt: bool = False  # PersonaPlex's server: its query rules (`personaplex_refusal`)


@dataclass
class MoshiConnection:
    query: dict[str, str]
    user: list[np.ndarray] = field(default_factory=list)  # the decoded user audio, frame by frame
    reply_frames: list[int] = field(default_factory=list)  # user frame index at which each reply frame was sent
    cut_at: int | None = None  # user frame at which the reply stopped for a barge-in
    close_code: int | None = None
    refused: str | None = None  # why PersonaPlex's handler raised (no handshake was sent)


class FakeMoshiServer(StandInServer):
    path = "/api/chat"
    logger_name = "tests.fake_moshi"

    def __init__(self, behaviour: MoshiBehaviour) -> None:
        super().__init__()
        self.behaviour = behaviour
        self.connections: list[MoshiConnection] = []

    async def _handle(self, ws: Any) -> None:
        parts = urlsplit(ws.request.path)
        conn = MoshiConnection(query=dict(parse_qsl(parts.query, keep_blank_values=True)))
        self.connections.append(conn)
        b = self.behaviour
        try:
            if parts.path != "/api/chat":
                await ws.close(1008, "unknown path")
                return
            if b.require_prompt and (refused := personaplex_refusal(conn.query)) is not None:
                conn.refused = refused
                ws.transport.write(HTTP_500 + f"500 Internal Server Error\n\n{refused}".encode())
                ws.transport.close()
                return
            await ws.send(b"\x00")
            await _Model(b, conn, ws).serve()
        except Exception:  # a dropped connection ends the handler like a closed one
            pass
        finally:
            conn.close_code = ws.close_code


class _Model:
    def __init__(self, b: MoshiBehaviour, conn: MoshiConnection, ws: Any) -> None:
        self.b, self.conn, self.ws = b, conn, ws
        self.reader, self.writer = sphn.OpusStreamReader(SR), sphn.OpusStreamWriter(SR)
        self.pending = np.zeros(0, np.float32)
        self.voiced_run = 0
        self.quiet_run = 0
        self.heard_speech = False
        self.last_voiced = 0  # user frames heard up to the last voiced one
        self.speaking_at: int | None = None  # reply sample position while speaking
        self.answered = False
        self.errored = False
        self.words = b.transcript.split(" ") if b.transcript else []

    async def serve(self) -> None:
        async for message in self.ws:
            if not isinstance(message, bytes) or not message or message[0] != 1:
                continue
            pcm = np.asarray(self.reader.append_bytes(message[1:]), np.float32).reshape(-1)
            self.pending = np.concatenate([self.pending, pcm])
            while self.pending.size >= FRAME:
                frame, self.pending = self.pending[:FRAME], self.pending[FRAME:]
                await self.on_frame(frame)

    async def on_frame(self, frame: np.ndarray) -> None:
        self.conn.user.append(frame)
        t = len(self.conn.user)  # user frames heard
        if t == 1 and not self.b.require_prompt:
            return  # kyutai's server: no model frame for the first user frame
        if self.b.error_after_s is not None and not self.errored and t * FRAME >= self.b.error_after_s * SR:
            self.errored = True
            await self.ws.send(b"\x05" + b"the fake model failed on purpose")
        voiced = float(np.sqrt(np.mean(frame**2))) > self.b.energy
        self.voiced_run = self.voiced_run + 1 if voiced else 0
        self.quiet_run = 0 if voiced else self.quiet_run + 1
        self.heard_speech |= voiced
        self.last_voiced = t if voiced else self.last_voiced
        if self.speaking_at is not None and self.voiced_run >= self.b.barge_frames:
            self.speaking_at, self.conn.cut_at = None, t  # yield the floor
        turn_over = self.quiet_run == self.b.silence_frames and self.last_voiced * FRAME >= self.b.respond_after_s * SR
        if self.speaking_at is None and not self.answered and self.heard_speech and turn_over:
            self.answered, self.speaking_at = True, 0
        out, text = np.zeros(FRAME, np.float32), None
        if self.speaking_at is not None:
            k = len(self.conn.reply_frames)
            chunk = self.b.reply[self.speaking_at:self.speaking_at + FRAME]
            out[:chunk.size] = chunk
            text = (" " if k else "") + self.words[k] if k < len(self.words) else None
            self.conn.reply_frames.append(t)
            self.speaking_at += FRAME
            if self.speaking_at >= self.b.reply.size:
                self.speaking_at = None
            if self.b.drop_after_frames is not None and len(self.conn.reply_frames) >= self.b.drop_after_frames:
                self.ws.transport.abort()
                return
        if text and self.b.require_prompt:  # NVIDIA's server: the piece goes out before its frame's audio
            await self.ws.send(b"\x02" + text.encode())
        data = self.writer.append_pcm(out)
        if data:
            await self.ws.send(b"\x01" + bytes(data))
        if text and not self.b.require_prompt:  # Kyutai's: after it
            await self.ws.send(b"\x02" + text.encode())
