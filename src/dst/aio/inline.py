"""Work a service hands to a thread pool, run inline on the loop instead (``dst.aio.System(inline_threads=True)``).

FastAPI runs every plain ``def`` dependency and endpoint through ``anyio.to_thread.run_sync``, and libraries
hand blocking calls to ``loop.run_in_executor`` or ``asyncio.to_thread``: real threads, which a simulated run
refuses. A service that does so can run unmodified with this switch: the function runs on the loop's own
thread, at the same virtual instant, after one yield (so other ready callbacks may run first, as they
would while a worker thread picked it up). It is deterministic; what it gives up is the parallelism, and
a function that blocks (``time.sleep``) blocks the whole simulated world, as it should not in production.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Callable


async def _inline(func: Callable[..., Any], *args: Any) -> Any:
    await asyncio.sleep(0)
    return func(*args)


class InlineThreads:
    """While entered: ``anyio.to_thread.run_sync`` (when anyio is imported) runs its function inline, and the loop's
    ``run_in_executor`` does too (the loop asks :attr:`active`)."""

    def __init__(self) -> None:
        self.active = False
        self._saved: Any = None

    def __enter__(self) -> InlineThreads:
        self.active = True
        to_thread = sys.modules.get("anyio.to_thread")
        if to_thread is not None:
            self._saved = (to_thread, to_thread.run_sync)

            async def run_sync(func: Callable[..., Any], *args: Any, abandon_on_cancel: bool = False,
                               cancellable: bool | None = None, limiter: Any = None) -> Any:
                return await _inline(func, *args)

            setattr(to_thread, "run_sync", run_sync)
        return self

    def __exit__(self, *exc: object) -> None:
        self.active = False
        if self._saved is not None:
            module, original = self._saved
            setattr(module, "run_sync", original)
            self._saved = None


def inline(func: Callable[..., Any], *args: Any) -> Any:
    """A coroutine that runs ``func(*args)`` inline after one yield (the loop's run_in_executor, inlined)."""
    return _inline(func, *args)
