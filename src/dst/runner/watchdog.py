"""The watchdog: a model's code that holds a run without ever returning to dst (a loop that never yields, a
livelock at one instant) is interrupted, and the run ends as that model's error, naming the function it was in.

One daemon thread per process looks at the running simulation's virtual clock a few times a second. When a
run's clock has stood still for :data:`STALL_SECONDS` of real time (or, past the run's wall-clock deadline, for
:data:`STALL_PAST_DEADLINE`), it notes the function of the user's code the run's thread is in and raises
:class:`~dst.errors.Stalled` there, as Ctrl-C would be, and again at each look until the run has ended. The
run ends as a model error naming that function, even if the model's code catches the exception (a run whose
code caught it goes on a moment first, so its trace may differ from one run of the seed to the next). Code in
C that never returns to Python (a blocking call) is not interrupted.

Per run it costs a lock and a few attribute writes; the thread only reads the clock."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable, Iterator

from ..errors import Stalled
from ..frames import USER, short, whose
from ..sandbox import own_work
from ..sim.kernel import Kernel
from ..sim.trace import format_time

STALL_SECONDS = 10.0  # real seconds a run's virtual clock may stand still before its code is interrupted
STALL_KNOWN = 1.0  # the same, for runs of a seed known to stall (minimizing it, replaying its finding)
STALL_PAST_DEADLINE = 2.0  # the same, once the run's wall-clock deadline (a campaign's --time-budget) has passed
_LOOK_EVERY = 0.25  # seconds between the thread's looks


class watching:
    """``with watching(kernel, deadline, who):`` around a run: the watchdog interrupts it if its clock stands
    still. ``deadline`` is on ``time.monotonic``'s clock, as a run's is; ``who(frame)`` names the process whose
    code runs at ``frame``; ``stop()``, if given, ends the run once the interrupted code returns (a loop that
    would catch the exception in a task). :attr:`stalled` is then the process and the model error's line."""

    __slots__ = ("kernel", "thread_id", "deadline", "who", "stop", "stalled", "stalled_at", "struck_at", "_raised",
                 "_entered_in")

    def __init__(self, kernel: Any, deadline: float | None, who: Callable[[FrameType | None], str],
                 stop: Callable[[], None] | None = None) -> None:
        self.kernel = kernel
        self.thread_id = threading.get_ident()
        self.deadline = deadline
        self.who = who
        self.stop = stop
        self.stalled: tuple[str, str] | None = None  # the process and the model error, once its code was stopped
        self.stalled_at = 0  # the virtual time it stood at
        self.struck_at = 0.0  # when (time.monotonic) the stall was first struck
        self._raised = False
        self._entered_in: FrameType | None = None  # the frame that runs the simulation, below the model's code

    def __enter__(self) -> watching:
        self._entered_in = sys._getframe(1)
        self.adopt()
        return self

    def adopt(self) -> None:
        """Watch this run from this process's thread: at its start, and in a process forked in its middle (a branch
        of it: the thread of the process it was forked from did not come along)."""
        global _watched, _started_in
        if _started_in != os.getpid():  # first run in this process: the thread (dst's own, so the sandbox lets it)
            _started_in = os.getpid()
            with own_work():
                threading.Thread(target=_look, name="dst-watchdog", daemon=True).start()
        with _lock:
            _watched = self

    @contextlib.contextmanager
    def aside(self) -> Iterator[None]:
        """The run waits on something of dst's own (its branches, running in forked children): its clock stands
        still, and that is no stall of its code."""
        global _watched
        with _lock:
            _watched = None
        try:
            yield
        finally:
            with _lock:
                _watched = self

    def __exit__(self, *exc: object) -> None:
        global _watched
        with _lock:
            _watched = None
            self._entered_in = None  # the frame holds the simulation, which holds this: no cycle left behind
            if self._raised:
                _raise_in(self.thread_id, None)  # raised already, or never: it must not strike after the run

    def _in_guest_code(self) -> bool:
        """The user's code runs now, called by the simulation (a handler that caught Stalled and went on, a dead
        task's ``finally``), not dst's own code ending the run after a stall."""
        frame = sys._current_frames().get(self.thread_id)
        while frame is not None and frame is not self._entered_in:
            if whose(frame.f_code.co_filename) == USER:
                return True
            frame = frame.f_back
        return False

    def _interrupt(self, stood: float) -> None:
        """Called by the thread, with the lock held: note where the code is, and raise :class:`Stalled` there."""
        if self.stalled is None:
            # Named for the function dst called (the handler, the job), not the line the interrupt fell on: that
            # varies from one run of the seed to the next, and the trace must not.
            frame = sys._current_frames().get(self.thread_id)
            called = _called_by_dst(frame)
            at = "" if called is None else f" of {called[1]} ({called[0]})"
            self.stalled_at = self.kernel.now
            self.struck_at = time.monotonic()
            self.stalled = (self.who(frame),
                            f"Stalled: the code{at} did not return to dst within the watchdog's limit, virtual time "
                            f"standing at t={format_time(self.kernel.now)} (a loop that never awaits, or callbacks "
                            f"that schedule each other at one instant without end)")
            if self.stop is not None:
                self.stop()
        self._raised = True
        _raise_in(self.thread_id, Stalled)


@contextlib.contextmanager
def known_stall(message: str | None) -> Iterator[None]:
    """Around runs of a seed whose model error (``message``) was a stall: they are stopped after
    :data:`STALL_KNOWN` of standing still, not the whole limit each (the minimizer's candidates, a replay)."""
    global _stall_seconds
    before = _stall_seconds
    if message is not None and "Stalled: " in message:
        _stall_seconds = STALL_KNOWN
    try:
        yield
    finally:
        _stall_seconds = before


_lock = threading.Lock()
_stall_seconds = STALL_SECONDS
_watched: watching | None = None
_started_in: int | None = None  # the process the thread runs in (a forked worker starts its own)
# Called by the thread at each look with the watched run's virtual clock (a forked seed tells its parent so).
on_look: Callable[[int], None] | None = None
# A campaign's worker may end its own process when a run's code stays in C after it was struck (see _look).
exit_when_wedged = False


def stall_seconds() -> float:
    """The real seconds a run's clock may stand still before its code is interrupted, as they are set now."""
    return _stall_seconds


def _reinit_after_fork() -> None:
    global _lock, _watched
    _lock = threading.Lock()  # a fork while the thread held it would leave the child's copy locked for good
    _watched = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_after_fork)


def _look() -> None:
    """The thread: interrupt a run whose clock stood still too long."""
    if hasattr(signal, "pthread_sigmask"):
        # Ctrl-C and SIGTERM are the main thread's: delivered here while a run's build or close holds them there,
        # they could wait unseen (this thread runs no Python handler), and the campaign would go on.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    seen: tuple[watching, int] | None = None
    since = 0.0
    while True:
        time.sleep(_LOOK_EVERY)
        with _lock:
            watch = _watched
            if watch is None:
                seen = None
                continue
            if on_look is not None:
                on_look(watch.kernel.now)
            if watch.stalled is not None:
                if watch._in_guest_code():  # caught by the model's code, which went on: again, until the run ends
                    watch._interrupt(0.0)  # (never into dst's own code closing the run: it would escape from there)
                late = watch.deadline is not None and time.monotonic() >= watch.deadline
                if exit_when_wedged and time.monotonic() - watch.struck_at >= (STALL_PAST_DEADLINE if late
                                                                               else _stall_seconds):
                    # Struck, and still not back after as long again: its code is in C, where nothing reaches it.
                    # In a campaign's worker, the process goes: the campaign runs the seed again in a process of
                    # its own, whose parent kills it and reports the stall.
                    os._exit(70)
                continue
            now, clock = time.monotonic(), watch.kernel.now
            if seen is None or seen[0] is not watch or seen[1] != clock:
                seen, since = (watch, clock), now  # the clock moved (or another run): the stall starts over
                continue
            stood = now - since
            late = watch.deadline is not None and now >= watch.deadline
            if stood >= _stall_seconds or (late and stood >= STALL_PAST_DEADLINE):
                watch._interrupt(stood)


def _called_by_dst(frame: FrameType | None) -> tuple[str, str] | None:
    """The file and name of the outermost function of the user's code that the running simulation called, from
    ``frame`` (the innermost) outwards: the handler or job that holds the run."""
    called = None
    while frame is not None and frame.f_code is not _KERNEL_RUN:
        if whose(frame.f_code.co_filename) == USER:
            called = (short(frame.f_code.co_filename), frame.f_code.co_qualname)
        frame = frame.f_back
    return called


_KERNEL_RUN = Kernel.run.__code__


def _raise_in(thread_id: int, error: type[BaseException] | None) -> None:
    """Raise ``error`` in thread ``thread_id`` at its next Python instruction (None: take back one not yet raised)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(error) if error is not None else None)
