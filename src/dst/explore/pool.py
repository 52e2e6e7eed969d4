"""The worker processes of a campaign: they die with it, stop cleanly on a signal, and leave no file behind."""

from __future__ import annotations

import ctypes
import itertools
import multiprocessing
import multiprocessing.process
import os
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, Iterator

from .._supervise import stopping
from ..runner import watchdog


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the campaign is, as Ctrl-C raises KeyboardInterrupt (exit 143, not 130)."""


class StopRequest:
    """A signal handler for a campaign on a pool: it only notes the signal, and the campaign stops at its
    next safe point (raising from the handler could land inside the pool's own locking and hang it).

    It takes no lock: a second signal can run the handler again in the middle of the first (a SIGTERM comes
    twice, from the process group and from the supervisor), and a lock taken by the first would hang both."""

    def __init__(self) -> None:
        self.signum = 0
        self._calls = itertools.count()  # next() is one C call, which no handler can cut: the first call is known

    def __call__(self, signum: int, frame: object) -> None:
        if next(self._calls) == 0:
            self.signum = signum
            stopping()  # the models run in the workers: what is left here is dst's own stopping

    def is_set(self) -> bool:
        """Whether a signal has been noted."""
        return bool(self.signum)

    def interrupt(self) -> KeyboardInterrupt:
        return Terminated() if self.signum == signal.SIGTERM else KeyboardInterrupt()


_in_run = False  # in a worker: whether a chunk of seeds is running
_exiting = False  # in a worker: a SIGTERM is already unwinding the run
_partial: Any = None  # in a worker: where a chunk cut short by SIGTERM leaves what it finished


def _exit_quietly(signum: int, frame: object) -> None:
    global _exiting
    if not _in_run:
        os._exit(128 + signum)  # idle: nothing to close, and a normal exit would wait on the pool's queues
    if not _exiting:  # a second SIGTERM must not interrupt the first one's unwinding (the pool would catch it)
        _exiting = True
        raise SystemExit(128 + signum)  # unwinds: the run in progress closes what it opened (a model's files)


def _worker_setup(parent: int, scratch: str, partial: Any) -> None:
    """A worker ignores Ctrl-C (it reaches the whole process group; the campaign decides), ends cleanly on
    SIGTERM, and gets SIGTERM from the kernel the moment its parent dies, however it dies. Its temporary
    files (a model's, through ``tempfile``) go into the pool's scratch folder."""
    global _partial
    _partial = partial
    watchdog.exit_when_wedged = True  # a run wedged in C ends this process: the campaign isolates its seed
    tempfile.tempdir = os.environ["TMPDIR"] = scratch  # TMPDIR: for what a model's own processes write too
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_quietly)
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the line above: nobody will tell us
        os._exit(1)


def _processes(pool: Executor) -> list[multiprocessing.process.BaseProcess]:
    return list((getattr(pool, "_processes", None) or {}).values())  # no public way before Python 3.14


class _Pool(ProcessPoolExecutor):
    """Processes for a campaign, which die with it; their scratch folder goes when they have all ended,
    with whatever a worker stopped by force (or a model that does not close) left there."""

    def __init__(self, workers: int) -> None:
        self.scratch = tempfile.mkdtemp(prefix="dst-workers-")
        # A pipe written without a thread: a worker leaves its cut chunk's outcomes there just before it exits.
        self.partial: Any = multiprocessing.SimpleQueue()
        super().__init__(max_workers=workers, initializer=_worker_setup,
                         initargs=(os.getpid(), self.scratch, self.partial))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        processes = _processes(self)
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        if wait or not any(p.is_alive() for p in processes):
            shutil.rmtree(self.scratch, ignore_errors=True)


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """Processes for a campaign, which die with it, and leave no temporary file behind."""
    return _Pool(workers)


_GRACE = 1.0  # seconds a stopped worker has to close what its run opened (then it is killed)


def stop_workers(pool: Executor) -> None:
    """End the pool's processes now, not after the chunks they are running (a seed may take long, or never end).
    Another executor (a cluster's) has no processes here: its shutdown cancels what it has in flight."""
    processes = _processes(pool)
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + _GRACE
    for process in processes:  # a run that will not unwind (a model's close that hangs) is killed
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    pool.shutdown(wait=False, cancel_futures=True)


def leave_partial(key: object, finished: object) -> None:
    """In a worker stopped by SIGTERM in the middle of a chunk: leave what it finished for :func:`partials`."""
    if _partial is not None:
        _partial.put((key, finished))


def partials(pool: Executor) -> dict[Any, Any]:
    """What the pool's workers finished of the chunks they were stopped in, by the chunk's key (once they have
    all ended: :func:`stop_workers`). A cluster's executor has none."""
    queue = getattr(pool, "partial", None)
    found: dict[Any, Any] = {}
    while queue is not None and not queue.empty():
        key, finished = queue.get()
        found[key] = finished
    return found


@contextmanager
def running() -> Iterator[None]:
    """In a worker, around a chunk of seeds: a SIGTERM now unwinds the run (it closes what it opened), then
    ends the worker at once (the pool would catch the exit and wait)."""
    global _in_run
    _in_run = True
    try:
        yield
    except SystemExit as stop:
        os._exit(stop.code if isinstance(stop.code, int) else 1)
    finally:
        _in_run = False
