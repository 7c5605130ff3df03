"""What the served-model stand-ins share: a local websocket server on a free port, on its own event-loop thread.

tests/moshi_server_fake.py and tests/realtime_fake.py subclass `StandInServer` with their protocol's handler; a
test starts one with `with Fake(behaviour) as server:` and points the adapter at `server.url`. The loop runs on its
own thread (adapters/loop_thread.py, as the adapters' own) so the test's thread can step an agent synchronously
while the server answers.
"""

from __future__ import annotations

import logging
from typing import Any, Self

from adapters.loop_thread import LoopThread


class StandInServer:
    """A websocket server at ws://127.0.0.1:<free port><path>; subclasses define `_handle(ws)`."""

    path = "/"
    logger_name = "tests.standin"  # its own logger: what the server logs is not what the client logged

    def __init__(self) -> None:
        self._io = LoopThread(f"stand-in {type(self).__name__}", "stand-in server")
        self.server: Any = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}{self.path}"

    def __enter__(self) -> Self:
        from websockets.asyncio.server import serve

        async def start() -> None:
            self.server = await serve(self._handle, "127.0.0.1", 0, logger=logging.getLogger(self.logger_name))
            self.port = self.server.sockets[0].getsockname()[1]

        self._io.run(start(), 10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self.server.close()
            await self.server.wait_closed()

        try:
            self._io.run(stop(), 10)
        finally:
            self._io.stop()

    async def _handle(self, ws: Any) -> None:
        raise NotImplementedError
