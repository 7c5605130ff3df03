"""HTTP requests to served models (an LLM judge, a transcription server) that survive a busy or flaky server.

One `RetryingClient` per endpoint: every request waits for a free slot (at most `max_concurrency` in flight,
whichever thread asks), is tried up to `max_attempts` times on what a retry can cure (429, 408, 5xx gateway and
server errors, timeouts, refused or dropped connections), waits with exponential backoff between tries, and
honours the server's Retry-After for everyone sharing the client, not just the thread that was told. Any other
HTTP error fails at once. Error messages and log lines name the URL and the reason only: never a header (the API
key travels in Authorization) and never an error body (a server may echo the request there).
"""

from __future__ import annotations

import email.utils
import http.client
import logging
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from dataset_builder.errors import UsageError
from dataset_builder.openai_compat import TRANSIENT_STATUS, EndpointError

log = logging.getLogger("duplex_eval.http_client")

# The seams of time: tests record the waits on a fake clock instead of timing them.
_sleep = time.sleep
_clock = time.monotonic


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. A wait is backoff_s * 2**(attempt-1), at most max_backoff_s, scaled by a random factor in
    [0.5, 1] so threads that failed together do not all come back together; a Retry-After replaces it (capped at
    max_backoff_s, so a server asking for an hour cannot stall a scoring run that long)."""

    max_attempts: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0

    def check(self, arg_option: str) -> None:
        if self.max_attempts < 1:
            raise UsageError(f"{arg_option} max_attempts must be >= 1, got {self.max_attempts}")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            raise UsageError(f"{arg_option} backoff_s and max_backoff_s must be >= 0")

    def wait_s(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(retry_after_s, self.max_backoff_s)
        return min(self.backoff_s * 2.0 ** (attempt - 1), self.max_backoff_s) * random.uniform(0.5, 1.0)


def retry_after_s(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class RetryingClient:
    """POSTs to one URL with retries, backoff and a concurrency limit; safe to share between threads."""

    def __init__(self, url: str, *, timeout_s: float, max_concurrency: int, policy: RetryPolicy,
                 arg_option: str) -> None:
        if timeout_s <= 0:
            raise UsageError(f"{arg_option} timeout_s must be > 0, got {timeout_s}")
        if max_concurrency < 1:
            raise UsageError(f"{arg_option} max_concurrency must be >= 1, got {max_concurrency}")
        policy.check(arg_option)
        self.url = url
        self.timeout_s = float(timeout_s)
        self.max_concurrency = int(max_concurrency)
        self.policy = policy
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self._lock = threading.Lock()
        self._paused_until = 0.0  # the _clock() time before which no request starts (a Retry-After)
        self.requests_made = 0  # answered with 2xx
        self.attempts_made = 0  # every try, failed ones included
        self.in_flight = 0
        self.max_in_flight = 0

    def __repr__(self) -> str:
        return f"RetryingClient(url={self.url!r}, max_concurrency={self.max_concurrency})"

    @contextmanager
    def _slot(self) -> Iterator[None]:
        while True:
            with self._lock:
                pause = self._paused_until - _clock()
            if pause <= 0:
                break
            _sleep(pause)
        with self._slots:
            with self._lock:
                self.in_flight += 1
                self.attempts_made += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                yield
            finally:
                with self._lock:
                    self.in_flight -= 1

    def _pause(self, seconds: float) -> None:
        with self._lock:
            self._paused_until = max(self._paused_until, _clock() + seconds)

    def post(self, data: bytes, headers: dict[str, str], what: str) -> bytes:
        """The response body of a POST of `data`; EndpointError once the attempts are spent or the error is not
        one a retry can cure. `what` names the request in messages ("judge request", "transcription")."""
        attempts = self.policy.max_attempts
        for attempt in range(1, attempts + 1):
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            retry_after: float | None = None
            try:
                with self._slot(), urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    body: bytes = resp.read()
                with self._lock:
                    self.requests_made += 1
                return body
            except urllib.error.HTTPError as err:
                problem = f"HTTP {err.code} {err.reason}"  # the reason phrase only, never the body
                transient = err.code in TRANSIENT_STATUS
                retry_after = retry_after_s(err.headers.get("Retry-After")) if err.headers else None
                err.close()
            except (OSError, http.client.HTTPException) as err:  # refused, reset, timed out, cut short
                problem = f"{type(err).__name__}: {getattr(err, 'reason', None) or err}"
                transient = True
            if not transient or attempt == attempts:
                raise EndpointError(f"{what} to {self.url} failed after {attempt} attempt(s): {problem}")
            wait = self.policy.wait_s(attempt, retry_after)
            if retry_after is not None:
                self._pause(wait)  # the server asked everyone to hold off, not only this thread
            log.warning("%s to %s failed (%s); trying again in %.1f s (attempt %d of %d)", what, self.url, problem,
                        wait, attempt + 1, attempts)
            _sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises


def served_concurrency(*backends: object) -> int:
    """How many items a scorer should work on at once: 1 for local backends (the CPU is the limit there), else the
    largest `max_concurrency` among the served ones (the server is the limit, and each client holds its own)."""
    limits = [getattr(b, "max_concurrency", None) for b in backends]
    return max([1, *(int(n) for n in limits if isinstance(n, int) and n > 0)])
