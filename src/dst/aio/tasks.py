"""The loop's tasks and futures, numbered: a set of them iterates in an order the seed decides.

asyncio and anyio keep tasks and futures in sets (``asyncio.wait``; a cancel scope cancels ``for task in
self._tasks``). An object's default hash is its memory address, which depends on what the process allocated
before (another seed, another finding), so such a loop would visit them in an order no seed decides. These
hash by their number in the run instead.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any


class NumberedTask(asyncio.Task):  # type: ignore[type-arg]
    """A task that hashes by its number in the run."""

    __slots__ = ("_number",)
    _number: int

    def __init__(self, coro: Any, *, loop: Any, name: str, context: contextvars.Context | None, number: int) -> None:
        self._number = number  # before asyncio's own init, which adds the task to a (weak) set
        super().__init__(coro, loop=loop, name=name, context=context)

    def __hash__(self) -> int:
        return self._number


class NumberedFuture(asyncio.Future):  # type: ignore[type-arg]
    """A future that hashes by its number in the run (set by the loop that makes it)."""

    __slots__ = ("_number",)
    _number: int

    def __hash__(self) -> int:
        return self._number


def name_of(coro: Any) -> str:
    """A task's name: its coroutine's (asyncio's Task-N counts every task the process ever made)."""
    return str(getattr(coro, "__qualname__", None) or type(coro).__name__)
