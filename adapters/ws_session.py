"""One websocket session of a served agent, and the agent around it (docs/models.md): what `moshi-server`,
`openai-realtime` and `vllm-omni-duplex` share.

The connection's reader and writer run as tasks on the agent's event-loop thread (adapters/loop_thread.py); the
stepping thread queues outgoing messages (`send_raw`) and reads what arrived under `lock`. Anything that breaks the
session (the connection dropped or closed by the server, a message the subclass cannot handle, a
`RealtimeSessionError` it raises) is kept as `failure`, and the adapter's next step raises it, so the episode is
recorded as failed with that reason, never as a model that chose silence. `pace` is the session's live feasibility
as the client saw it (metrics/feasibility.py, docs/scale.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

from websockets.exceptions import ConnectionClosed

from adapters.loop_thread import LoopThread
from metrics.feasibility import SessionPace


class RealtimeSessionError(RuntimeError):
    """The session broke (server error, dropped connection, bad event): the episode fails with this reason."""


class WebsocketSession:
    """A connection's shared lifecycle; a subclass opens it (its handshake, then `_start`) and handles `_on_raw`."""

    name = "served"  # the adapter, in log lines
    server = "server"  # the other side, in failure reasons
    kind = "message"  # what the server sends, in failure reasons

    def __init__(self, loop: asyncio.AbstractEventLoop, pace: SessionPace) -> None:
        self.loop, self.pace = loop, pace
        self.lock = threading.Lock()
        self.ws: Any = None
        self.outbox: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self.closing = False
        self.failure: str | None = None

    def _start(self) -> None:
        """Start reading and writing (on the loop, once the handshake is done)."""
        self.tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._write())]

    async def aclose(self) -> None:
        self.closing = True
        self.outbox.put_nowait(None)
        if len(self.tasks) == 2:  # flush what the steps queued, so the server heard the whole user stream
            await asyncio.wait([self.tasks[1]], timeout=2.0)
        if self.ws is not None:
            await self.ws.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                self._on_raw(raw)
        except ConnectionClosed:
            pass
        except RealtimeSessionError as err:
            self._fail(str(err))
            return
        except Exception as err:  # a bad message or a bug here must fail the episode, not leave it playing silence
            self._fail(f"handling a server {self.kind} raised {type(err).__name__}: {err}")
            return
        if not self.closing:
            code, reason = self.ws.close_code, self.ws.close_reason
            how = "dropped (no close frame)" if code in (None, 1006) else f"closed with code {code}"
            self._fail(f"the connection to the {self.server} was {how}{f': {reason}' if reason else ''} mid-episode")

    async def _write(self) -> None:
        while (message := await self.outbox.get()) is not None:
            try:
                await self.ws.send(message)
            except ConnectionClosed:
                return  # the reader records why

    def _on_raw(self, raw: str | bytes) -> None:
        """One message from the server (on the loop); raise RealtimeSessionError to fail the session with a reason."""
        raise NotImplementedError

    def _fail(self, reason: str) -> None:
        with self.lock:
            if self.failure is None and not self.closing:
                self.failure = reason
                logging.getLogger(type(self).__module__).warning("%s: %s", self.name, reason)

    # -- called from the stepping thread ----------------------------------------------------------------------
    def send_raw(self, message: str | bytes) -> None:
        self.loop.call_soon_threadsafe(self.outbox.put_nowait, message)

    def feasibility(self) -> dict[str, Any]:
        """The session's live feasibility so far (rec.json `compute.session`)."""
        with self.lock:
            return self.pace.record()


S = TypeVar("S", bound=WebsocketSession)


class ServedAgent(Generic[S]):
    """What a served agent with one session at a time shares: opening a session on its loop thread (`_io`), the
    step's check that the session is open and unbroken, its live feasibility, and closing both."""

    _io: LoopThread
    _session: S | None

    def _open(self, session: S, opening: Coroutine[Any, Any, None], timeout_s: float) -> S:
        """`session` once `opening` (its connection and handshake) has finished on the loop; closed if it failed."""
        try:
            self._io.run(opening, timeout_s)
        except BaseException:
            with contextlib.suppress(Exception):  # the reason the session did not open is the one to report
                self._io.run(session.aclose(), 10)
            raise
        return session

    def _current(self) -> S:
        """The open session, for a step; raises the reason it broke, so the episode fails with it."""
        session = self._session
        if session is None:
            raise RealtimeSessionError("step before reset: no session is open")
        if session.failure is not None:
            raise RealtimeSessionError(session.failure)
        return session

    def session_feasibility(self, slot: int = 0) -> dict[str, Any] | None:
        """The open session's live feasibility as the client saw it (adapters.protocol.ServedSession)."""
        return None if self._session is None else self._session.feasibility()

    def _close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            self._io.run(session.aclose(), 10)
            self._closed(session)

    def _closed(self, session: S) -> None:
        """Called once a session has closed (a subclass keeps or logs its numbers)."""

    def close(self) -> None:
        self._close_session()
        self._io.stop()
