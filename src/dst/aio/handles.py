"""The loop's handles: asyncio's, each with the process whose code scheduled it (:class:`Process`), made without
asyncio's ``__init__`` (its debug lookup, and a class's Python ``__init__`` costs a call through C for every ready
callback)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any, Callable, TypeVar

_H = TypeVar("_H", "Handle", "Timer")


class Process:
    """What the loop needs to know of a process: whether it is alive (its ``epoch``: a handle made in an older
    one belongs to a process that died), whether it is paused, and where its frozen handles wait."""

    __slots__ = ("name", "epoch", "paused_until", "frozen", "tasks", "on_crash", "settle", "at_await")

    def __init__(self, name: str) -> None:
        self.name = name
        # A fault aimed at the moment "await" strikes as the process next resumes from an await (its next
        # callback): set while one is armed, so the loop pays one test per callback otherwise.
        self.at_await: Callable[[], None] | None = None
        self.epoch = 0
        self.paused_until = -1
        self.frozen: list[Any] = []  # handles due while paused, in the order they fell due
        self.tasks: list[asyncio.Task[Any]] = []  # every task it started (kept: a dead one's code must not run at GC)
        self.on_crash: list[Callable[[], None]] = []  # what dies with the process: open connections
        self.settle: Callable[[], None] | None = None  # called after each of its callbacks (the server's checks)

    async def round_trip(self) -> None:
        """One store round trip: here, a plain yield (the server process draws a latency for it)."""
        await asyncio.sleep(0)


class Handle(asyncio.Handle):
    """A ready callback and the process whose code scheduled it (asyncio's fields, made by :func:`make`)."""

    __slots__ = ("_process", "_epoch")
    _process: Process
    _epoch: int


class Timer(asyncio.TimerHandle):
    __slots__ = ("_process", "_epoch", "_seq")
    _process: Process
    _epoch: int
    _seq: int  # its entry on the kernel's queue: -1 once it fired (a cancel then has nothing to take off)

    def cancel(self) -> None:
        # asyncio's TimerHandle.cancel and Handle.cancel in one frame (every asyncio.sleep cancels its timer as it
        # returns, fired or not), and never in debug mode: this loop's get_debug() is False.
        if not self._cancelled:
            self._cancelled = True
            self._callback = self._args = None  # type: ignore[assignment]  # what asyncio's cancel lets go of
            if self._seq >= 0:
                self._loop._kernel.cancel(self._seq)  # type: ignore[attr-defined]  # always a Loop's


_new = object.__new__


def make(kind: type[_H], callback: Callable[..., object], args: tuple[Any, ...], loop: Any,
            context: contextvars.Context | None, process: Process) -> _H:
    """asyncio's Handle.__init__ without its debug lookup, plus the owner: a plain function, as a class's Python
    ``__init__`` costs a call through C for every ready callback."""
    handle: Any = _new(kind)  # asyncio's private fields, which its stubs do not declare
    handle._context = context if context is not None else contextvars.copy_context()
    handle._loop = loop
    handle._callback = callback
    handle._args = args
    handle._cancelled = False
    handle._repr = None
    handle._source_traceback = None
    handle._process = process
    handle._epoch = process.epoch
    return handle  # type: ignore[no-any-return]  # of kind: a cast would cost a call per callback
