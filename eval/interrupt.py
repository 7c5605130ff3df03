"""Ctrl-C that is never lost.

Python raises KeyboardInterrupt wherever the signal finds the main thread. Where that is inside a C library's
callback (soundfile reading a case's audio through cffi, a ctypes callback), the library cannot pass the exception
on: it reports it as "Exception ignored" with a traceback and carries on, and a run would finish its episodes as if
nobody had pressed Ctrl-C. So the handler installed here also remembers the signal, the orchestrator checks before
each step (`check`; the lockstep runner before each batch step), and such a swallowed interrupt is not reported as
an error, since the next check acts on it.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

_heard = threading.Event()
_previous_hook: Any = None


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _heard.set()
    raise KeyboardInterrupt


def _quiet_swallowed_interrupt(unraisable: Any) -> None:
    if issubclass(unraisable.exc_type, KeyboardInterrupt) and _heard.is_set():
        return  # the next check() raises it where it can be handled
    _previous_hook(unraisable)


def install(*, even_if_ignored: bool = False) -> None:
    """Handle SIGINT here from now on, forgetting any Ctrl-C heard before. Left alone where the process ignores
    SIGINT (a shell's background job, a pool worker), unless `even_if_ignored` (a launched worker, whose launcher
    passes Ctrl-C on as SIGINT), and off the main thread, where no handler can be set."""
    global _previous_hook
    _heard.clear()
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN and not even_if_ignored:
        return
    signal.signal(signal.SIGINT, _on_sigint)
    if sys.unraisablehook is not _quiet_swallowed_interrupt:
        _previous_hook, sys.unraisablehook = sys.unraisablehook, _quiet_swallowed_interrupt


def check() -> None:
    """Raise KeyboardInterrupt if Ctrl-C was heard, even if the exception it raised was swallowed."""
    if _heard.is_set():
        raise KeyboardInterrupt
