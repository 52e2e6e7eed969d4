"""The ``dst`` program runs in a child of a small supervising process, so that nothing a model's code does to the
process it runs in (``os._exit`` at import or in a handler, a signal that kills it, an interrupt it swallows) ends
dst without a word.

The supervisor forks before any of dst (or the model) is imported, passes the child's exit status on, and speaks
only when the child did not end as dst ends: one line, exit 3 (the model's error). A child that dst itself ends
says so first (:func:`done`: ``sys.exit`` through ``atexit``, or dst's own ``os._exit`` after it); a model's
``os._exit`` skips both. Ctrl-C reaches both processes (one process group); SIGTERM sent to the supervisor is
passed on. Either way, a child that has not ended within :data:`GRACE` seconds is killed: a model that swallows
every interrupt cannot keep dst running. A child whose own code has taken the signal says so (:func:`stopping`: a
campaign stopping its workers or its cluster, with no model code left to run) and gets :data:`STOPPING_GRACE`. The
child dies with the supervisor, however the supervisor dies.

Only on Linux (``fork``, ``prctl``); elsewhere ``dst`` runs unsupervised, as it always did.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import select
import signal
import sys
import time
from typing import Callable

GRACE = 2.0  # seconds a child has to end after Ctrl-C or SIGTERM while a model's code may hold it
STOPPING_GRACE = 20.0  # seconds, once dst's own code is stopping (a cluster's scheduler may be slow to let go)
_UNSUPERVISED = "DST_UNSUPERVISED"  # set in the child: a dst it starts (a fresh-process replay) runs as it is
_EXIT_MODEL_ERROR, _EXIT_INTERRUPTED, _EXIT_TERMINATED = 3, 130, 143

_marker: int | None = None  # in the child: where it says that dst itself is ending it


def done() -> None:
    """In the supervised child: dst itself ends this process now (its exit status is dst's answer)."""
    global _marker
    if _marker is not None:
        _tell(b"done")
        _marker = None


def stopping() -> None:
    """In the supervised child: dst's own code has taken Ctrl-C or SIGTERM and is stopping (no model code runs
    in this process any more): the supervisor waits :data:`STOPPING_GRACE` for it, not :data:`GRACE`."""
    _tell(b"stop")


def _tell(what: bytes) -> None:
    if _marker is not None:
        try:
            os.write(_marker, what)
        except OSError:
            pass


def supervised(program: Callable[[], object]) -> None:
    """Run ``program`` (which exits the process) in a supervised child, and exit as it did."""
    if not sys.platform.startswith("linux") or os.environ.get(_UNSUPERVISED):
        program()
        return
    global _marker
    read, write = os.pipe()
    held = (signal.SIGINT, signal.SIGTERM)
    signal.pthread_sigmask(signal.SIG_BLOCK, held)  # until the supervisor's handlers are in: a signal sent to it
    pid = os.fork()  # at once (the child already running dst) is passed on, not the supervisor's sudden death
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        os.close(read)
        os.environ[_UNSUPERVISED] = "1"
        _marker = write
        atexit.register(done)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: die with the supervisor
        except (OSError, AttributeError):
            pass
        program()
        return
    os.close(write)
    asked: list[int] = []  # the signals the supervisor got, first first
    for sig in held:
        signal.signal(sig, _noting(asked, pid))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
    sys.exit(_watch(pid, read, asked))


def _noting(asked: list[int], child: int) -> Callable[[int, object], None]:
    """The supervisor's handler of Ctrl-C and SIGTERM: note the first (its number, then when), pass SIGTERM on."""

    def noted(signum: int, frame: object) -> None:
        if signum == signal.SIGTERM:
            os.kill(child, signal.SIGTERM)  # Ctrl-C reaches the child by itself; a SIGTERM to this process does not
        if not asked:
            asked.append(signum)
            asked.append(int(time.monotonic() * 1000))

    return noted


def _watch(pid: int, read: int, asked: list[int]) -> int:
    """The child's exit status, as dst's; a line and exit 3 when the model's code ended the process."""
    said = b""
    while True:
        try:
            ready, _, _ = select.select([read], [], [], 0.1)
            if ready:
                said += os.read(read, 16)
            ended, status = os.waitpid(pid, os.WNOHANG)
        except InterruptedError:
            continue
        if ended:
            break
        grace = STOPPING_GRACE if b"stop" in said else GRACE
        if asked and time.monotonic() * 1000 - asked[1] >= grace * 1000:
            os.kill(pid, signal.SIGKILL)  # it would not stop: a model that swallows every interrupt
            os.waitpid(pid, 0)
            stopped = "terminated" if asked[0] == signal.SIGTERM else "interrupted"
            who = "dst did not finish stopping" if b"stop" in said else "the model's code did not stop"
            _say(f"dst: {stopped}; {who} within {grace:.0f} s, and its process was killed")
            return _EXIT_TERMINATED if asked[0] == signal.SIGTERM else _EXIT_INTERRUPTED
    try:
        said += os.read(read, 16)
    except OSError:
        pass
    if b"done" in said:
        return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGINT, signal.SIGTERM) and asked:
            _say(f"dst: {'terminated' if sig == signal.SIGTERM else 'interrupted'}")
            return 128 + sig
        name = signal.Signals(sig).name
        why = " (the kernel's out-of-memory killer, or another process)" if sig == signal.SIGKILL else ""
        _say(f"dst: the process running the model died of signal {sig} ({name}){why} before dst had finished")
        return _EXIT_MODEL_ERROR
    _say(f"dst: the model's code ended dst's process (exit status {os.WEXITSTATUS(status)}) before dst had "
         f"finished: a model must not exit (os._exit, or a C library's exit)")
    return _EXIT_MODEL_ERROR


def _say(line: str) -> None:
    try:
        os.write(2, (line + "\n").encode("utf-8", "backslashreplace"))
    except OSError:
        pass
