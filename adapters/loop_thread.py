"""An asyncio event loop on a background thread, for the served adapters (docs/models.md).

Why a thread: the step protocol is synchronous (the runner calls `step` and waits for one frame), while a served
model speaks over a websocket that must be read all the time, between steps too, or its audio, text and barge-in
events would only be seen when a step happens to ask. So each served agent keeps one event loop running on a
daemon thread: the connection's reader and writer tasks live there, and the stepping thread hands it coroutines
(`run`) or callbacks (`loop.call_soon_threadsafe`). The loop starts on first use and `stop` ends it; an agent that
is never reset starts no thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any


class LoopThread:
    """One event loop on one daemon thread, started lazily; `run` waits for a coroutine with a timeout.

    `server` names the other side in the timeout message ("no answer from the {server} within 10s") and `error` is
    the exception raised then, so a session that stops answering fails its episode with that reason.
    """

    def __init__(self, name: str, server: str, error: type[Exception] = RuntimeError) -> None:
        self.name, self.server, self.error = name, server, error
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started on first use)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name=self.name, daemon=True)
            self._thread.start()
        return self._loop

    def run(self, coro: Coroutine[Any, Any, Any], timeout_s: float) -> Any:
        """Run `coro` on the loop and return its result; past `timeout_s` it is cancelled and `error` raised."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise self.error(f"no answer from the {self.server} within {timeout_s:.0f}s") from None

    def stop(self) -> None:
        """Stop the loop and join its thread (at most 5 s); a later `run` starts a fresh one."""
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop.close()
        self._loop = self._thread = None
