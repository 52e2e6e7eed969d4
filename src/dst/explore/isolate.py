"""A seed in a process of its own, forked from a warm one: whatever the model does to its process (exits, dies of
a signal, runs out of memory, blocks in C where the watchdog cannot reach it), the campaign goes on, and the seed
is that model's error.

The process that forks is warm: it has imported the model, built and run it once (what a model caches per
process, a database template, stays), and frozen its heap for the cycle collector (:func:`gc.freeze`), so a
fork shares those pages copy-on-write and pays only for its own run. A forked seed gives the bytes a seed run in
this process gives: the child runs the same code on the same state.

The child reports back through a pipe (a pickled result), and beats a shared clock (its run's virtual time, from
the watchdog's thread) so that the parent can tell a run that moves from one blocked in C: one whose clock stood
still past the watchdog's limit is killed, as is one past the campaign's deadline. Ctrl-C ends the child at once.
"""

from __future__ import annotations

import gc
import mmap
import os
import pickle
import select
import signal
import struct
import sys
import time
import warnings
from typing import Any, Callable, NoReturn, TypeVar

from ..runner import watchdog

T = TypeVar("T")

_BEAT = struct.Struct("<qq")  # (beats so far, the run's virtual time): written by the child, read by the parent
_LOOK = 0.25  # seconds between the parent's looks at a child that has not answered
_KILLED_AFTER = 5.0  # seconds past the watchdog's own limit before a child that will not move is killed

CAN_FORK = hasattr(os, "fork") and sys.platform.startswith("linux")


class Died(Exception):
    """The seed's process ended before it reported (the model exited, or a signal, or the OOM killer, ended it),
    or was killed for standing still in C. ``str()`` is one line, for the seed's model error."""


class Late(Exception):
    """The campaign's deadline passed while the seed's process still ran: it was stopped, and has no result."""


_beats: mmap.mmap | None = None


def _beat(clock: int) -> None:
    """In the child, from the watchdog's thread: the run's clock, and one more beat."""
    if _beats is not None:
        count, _ = _BEAT.unpack_from(_beats)
        _BEAT.pack_into(_beats, 0, count + 1, clock)


_frozen = False


def warm() -> None:
    """This process is warm: what it holds now is shared with every fork, not scanned by the cycle collector again."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True


def forked(work: Callable[[], T], *, deadline: float | None = None) -> T:
    """``work()`` in a forked child of this process, and what it returned (it must pickle). Raises :class:`Died`
    when the child ended without a result, :class:`Late` past ``deadline`` (on ``time.monotonic``), and what
    ``work`` raised, raised again here."""
    child = fork()
    if isinstance(child, Child):  # the child: the work, its answer, and out
        try:
            answer: tuple[str, Any] = ("returned", work())
        except BaseException as e:  # noqa: BLE001 - handed to the parent, which raises it
            answer = ("raised", e)
        child.answer(answer)
    return answer_of(child, deadline)  # type: ignore[no-any-return]  # what work() returned


class Child:
    """A forked child's side: where its answer goes. Ctrl-C is the parent's (it ends this process), a stall in C
    is the parent's to kill, and the watchdog's thread beats the run's clock to it."""

    def __init__(self, write: int, beats: mmap.mmap) -> None:
        global _beats
        self.write = write
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the campaign's: it ends this process
        _beats = beats
        watchdog.on_look = _beat
        watchdog.exit_when_wedged = False  # wedged in C, this process is killed by its parent, which says why

    def answer(self, answer: tuple[str, Any]) -> NoReturn:
        """Hand ``("returned", value)`` or ``("raised", error)`` to the parent and end this process, with no cleanup
        of the parent's state to pay for (nor to do to what the parent still uses: its files, its connections)."""
        try:
            try:
                data = pickle.dumps(answer)
            except Exception as e:  # noqa: BLE001 - an unpicklable error is said in its words
                data = pickle.dumps(("raised", RuntimeError(f"{type(e).__name__}: {e}")))
            view = memoryview(data)
            while view:
                view = view[os.write(self.write, view):]
        finally:
            os._exit(0)


Parent = tuple[int, int, mmap.mmap]  # the child's pid, the pipe's end its answer comes from, its beats


def fork() -> Child | Parent:
    """Fork: in the child, its :class:`Child` (it goes on from here, and ends with :meth:`Child.answer`); in this
    process, what :func:`answer_of` waits on."""
    beats = mmap.mmap(-1, _BEAT.size)
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns of a fork with threads: ours (the watchdog's) is
        warnings.simplefilter("ignore", DeprecationWarning)  # made fork-safe (watchdog.py registers at fork)
        pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            return Child(write, beats)
        except BaseException:
            os._exit(70)
    os.close(write)
    return pid, read, beats


def answer_of(parent: Parent, deadline: float | None) -> Any:
    """What the child answered: the value it returned, or what it raised raised here; :class:`Died` when it ended
    without an answer, :class:`Late` past ``deadline``."""
    kind, value = pickle.loads(raw_answer(parent, deadline))
    if kind == "raised":
        raise value
    return value


def raw_answer(parent: Parent, deadline: float | None) -> bytes:
    """The child's answer as it sent it, pickled (to be handed on as it is); raises as :func:`answer_of` does."""
    pid, read, beats = parent
    try:
        return _wait(pid, read, beats, deadline)
    finally:
        os.close(read)
        beats.close()


def _wait(pid: int, read: int, beats: mmap.mmap, deadline: float | None) -> bytes:
    """The child's answer, once it has exited; :class:`Died` or :class:`Late` otherwise (the child then killed)."""
    if _beats is not None:  # a forked child waiting on its own (a seed on its branches): to its parent, it is busy
        _BEAT.pack_into(_beats, 0, 0, 0)  # as while it was building; a stall of the branch is this process's to end
    chunks: list[bytes] = []
    seen, since = -1, time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([read], [], [], _LOOK)
            if ready:
                chunk = os.read(read, 1 << 16)
                if not chunk:
                    break  # the child closed its end: it has exited, or is about to
                chunks.append(chunk)
                continue
            now = time.monotonic()
            count, clock = _BEAT.unpack_from(beats)
            if count == 0 or clock != seen:
                seen, since = clock, now  # not running yet (building), or moving: the stall starts over
            elif now - since >= watchdog.stall_seconds() + _KILLED_AFTER:
                _kill(pid)
                raise Died(f"Stalled: the run's virtual time stood at t={clock}ms for {now - since:.0f} s of real "
                           f"time and its code could not be interrupted (a blocking call in C, or a loop that "
                           f"holds the interpreter): its process was killed")
            if deadline is not None and now >= deadline + watchdog.STALL_PAST_DEADLINE:
                _kill(pid)
                raise Late()
    except BaseException:  # Ctrl-C, SIGTERM, or one of ours: the child goes now
        _kill(pid)
        raise
    _, status = os.waitpid(pid, 0)
    if chunks:
        return b"".join(chunks)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        why = " (the kernel's out-of-memory killer, or another process)" if sig == signal.SIGKILL else ""
        raise Died(f"the model's process died of signal {sig} ({signal.Signals(sig).name}){why} during the run")
    raise Died(f"the model ended its process (exit status {os.WEXITSTATUS(status)}) during the run: a model must "
               f"not exit (os._exit, sys.exit in a thread, a C library's abort)")


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
