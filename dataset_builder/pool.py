"""A process pool that returns results in input order, with a bounded number of items in flight.

Builds synthesise on every core, and their output must not depend on how many cores did the work: results come
back in the order the items went in, whatever order the workers finish them in, and every worker computes with
the same number of native threads (`WORKER_THREADS`), because ONNX Runtime's float results change with its
intra-op thread count (piper through 1 thread and through 2 differ in the last bit of some samples). For the
same reason `workers=1` is one worker process too, not this process: this process's ONNX sessions use every
core, and may already exist.

Workers are started with `spawn`, never `fork`: a parent that already runs ONNX, torch or BLAS thread pools can
deadlock a forked child.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

from dataset_builder.errors import UsageError

_T = TypeVar("_T")
_R = TypeVar("_R")

# One native thread per worker, on any machine and for any number of workers: the bytes stay the same, and N
# workers on N cores do not oversubscribe them.
WORKER_THREADS = 1
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS reports it, else `os.cpu_count()`)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def resolve_workers(workers: int | None, n_items: int) -> int:
    """`workers` (None: one per core), never more than there are items to share out."""
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    return max(1, min(workers or available_cores(), n_items))


def limit_threads(threads: int) -> None:
    """Size this (worker) process's native thread pools to `threads`.

    ONNX Runtime sizes each session's spin-waiting thread pool to all physical cores, and has no environment
    variable for it: 2 piper processes on 2 cores ran at 6.7x real time that way against 21x with one thread
    each. So sessions created after this call get `threads` intra-op threads through the default
    SessionOptions. OpenMP/BLAS libraries loaded later read the environment.
    """
    for name in THREAD_ENV:
        os.environ[name] = str(threads)
    try:
        import onnxruntime
    except ImportError:
        return
    base = onnxruntime.SessionOptions
    if getattr(base, "_duplex_eval_threads", None) == threads:
        return

    class SessionOptions(base):  # type: ignore[misc, valid-type]
        _duplex_eval_threads = threads

        def __init__(self) -> None:
            super().__init__()
            self.intra_op_num_threads = threads
            self.inter_op_num_threads = 1

    onnxruntime.SessionOptions = SessionOptions  # type: ignore[misc]


def _start_worker(initializer: Callable[..., None], initargs: tuple[Any, ...]) -> None:
    limit_threads(WORKER_THREADS)
    initializer(*initargs)


class WorkerPool:
    """`workers` spawned processes that each ran `initializer(*initargs)` once, with `WORKER_THREADS` native
    threads each. `fn`, its items and `initargs` must be picklable (module-level functions, plain data)."""

    def __init__(self, workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...] = ()) -> None:
        if workers < 1:
            raise UsageError(f"--workers must be >= 1, got {workers}")
        try:  # fail here, by name, rather than as a broken pool at the first item
            pickle.dumps((initializer, initargs))
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            raise UsageError(f"cannot send {initargs!r} to worker processes: {err}") from None
        self.workers = workers
        self._executor: ProcessPoolExecutor | None = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker, initargs=(initializer, initargs))

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            # On an error, queued items are dropped rather than computed for nothing.
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            raise RuntimeError("the worker pool is closed")
        return self._executor

    def submit(self, fn: Callable[..., _R], *args: Any) -> Future[_R]:
        return self._pool().submit(fn, *args)

    def ordered_map(self, fn: Callable[[_T], _R], items: Iterable[_T], window: int | None = None) -> Iterator[_R]:
        """`fn(item)` for each item, yielded in input order. At most `window` items (default 4 per worker) are
        taken from `items` and not yet yielded, so a slow item holds back at most that many finished results;
        the other workers stay busy while it runs as long as it is no slower than about `window / workers` items.

        The first `window` items are submitted now, not at the first `next()`: the workers start while the
        caller still prepares to consume (imports, opening files)."""
        window = window or 4 * self.workers
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        pool = self._pool()
        source = iter(items)
        pending: deque[Future[_R]] = deque(pool.submit(fn, item) for item in itertools.islice(source, window))
        return self._drain(pool, fn, source, pending, window)

    @staticmethod
    def _drain(pool: ProcessPoolExecutor, fn: Callable[[_T], _R], source: Iterator[_T],
               pending: deque[Future[_R]], window: int) -> Iterator[_R]:
        try:
            while pending:
                yield pending.popleft().result()
                for item in itertools.islice(source, window - len(pending)):
                    pending.append(pool.submit(fn, item))
        finally:
            for future in pending:  # the consumer stopped early or an item failed
                future.cancel()
