"""A local HTTP server for tests of served backends (judge, transcription): each request is answered by the next
scripted reply (then the default), and every request is kept with its path, headers and body."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # hold the request until the test ends, answering nothing


def chat_reply(content: str) -> Reply:
    data = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return Reply(200, json.dumps(data).encode(), {"Content-Type": "application/json"})


def json_reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class FakeServer:
    """`script` replies first, in order; then `default(request)`."""

    def __init__(self, default: Callable[[Seen], Reply]) -> None:
        self.default = default
        self.script: list[Reply] = []
        self.requests: list[Seen] = []
        self.release = threading.Event()  # set at teardown: hanging requests let go
        self.on_request: Callable[[Seen], None] | None = None
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                seen = Seen(self.path, dict(self.headers.items()),
                            self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with outer._lock:
                    outer.requests.append(seen)
                    reply = outer.script.pop(0) if outer.script else None
                if outer.on_request is not None:
                    outer.on_request(seen)
                reply = reply or outer.default(seen)
                if reply.hang:
                    outer.release.wait(30)
                    self.close_connection = True
                    return
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(reply.body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(reply.body)
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeClock:
    """Stands in for dataset_builder.http_client's _sleep and _clock: a wait is recorded and moves the clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []
        self._lock = threading.Lock()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(seconds)
            self.now += seconds

    def clock(self) -> float:
        with self._lock:
            return self.now
