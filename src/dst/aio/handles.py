"""The loop's handles: asyncio's, each with the process whose code scheduled it (:class:`~dst.aio.loop.Process`),
made without asyncio's ``__init__`` (its debug lookup, and a class's Python ``__init__`` costs a call through C for
every ready callback)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    from .loop import Process

_H = TypeVar("_H", "Handle", "Timer")


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
