"""A progress line for long jobs: counts, rate and time left, on stderr, at most a few times a second."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """`label  6/40  15%  elapsed 0:12  left 1:08` — redrawn in place on a terminal, a line per step elsewhere.

    Off a terminal (CI, a log file) it prints at most every `every_s` seconds, plus the last item, so a log
    stays readable.
    """

    def __init__(self, label: str, total: int, *, enabled: bool = True, stream: TextIO | None = None,
                 every_s: float = 0.2, estimate_s: float | None = None, startup_s: float = 0.0) -> None:
        self.label, self.total, self.enabled = label, total, enabled
        self.stream = stream or sys.stderr
        self.every_s = every_s if self.stream.isatty() else max(every_s, 5.0)
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = float("-inf")
        # The job's expected length before anything is done (a build: from its cache misses), `startup_s` of it
        # before the first item (worker spawn, model loads). The first items carry that start-up, so their pace
        # alone overstates what is left (a build's first pair said "left 1:04:32").
        self.estimate_s, self.startup_s = estimate_s, startup_s

    def left_s(self) -> float | None:
        """Seconds left. With an estimate: the estimate's time for the items left, stretched by how much slower
        than estimated the job has run so far (a busy host slows start-up and items alike); before the first
        item, the estimate less the time gone (unknown once that is past). Without one: the measured pace."""
        elapsed = time.perf_counter() - self.t0
        if self.estimate_s is None or not self.total:
            return elapsed / self.done * (self.total - self.done) if self.done else None
        per_item = max(self.estimate_s - self.startup_s, 0.0) / self.total
        if not self.done:
            return self.estimate_s - elapsed if elapsed < self.estimate_s else None
        expected = self.startup_s + per_item * self.done
        stretch = elapsed / expected if expected > 0 else 1.0
        return stretch * per_item * (self.total - self.done)

    def line(self) -> str:
        elapsed = time.perf_counter() - self.t0
        pct = f"{100 * self.done / self.total:3.0f}%" if self.total else "   "
        left = self.left_s()
        return (f"{self.label}  {self.done}/{self.total}  {pct}  elapsed {_clock(elapsed)}  "
                f"left {'?' if left is None else _clock(left)}")

    def start(self, note: str = "", estimate_s: float | None = None, startup_s: float = 0.0) -> None:
        """Print the line now, before the first item (a job whose first item takes a while shows it started)."""
        if estimate_s is not None:
            self.estimate_s, self.startup_s = estimate_s, startup_s
        self.advance(0, note)

    def advance(self, k: int = 1, note: str = "", force: bool = False) -> None:
        """Count `k` more items done; the line is printed unless one was printed under `every_s` ago (`force`: a
        line whose note must not be lost, such as what has just finished)."""
        self.done += k
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < self.every_s and self.done < self.total and k and not force:
            return
        self._last = now
        text = self.line() + (f"  {note}" if note else "")
        if self.stream.isatty():
            self.stream.write("\r\033[K" + text + ("\n" if self.done >= self.total else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
