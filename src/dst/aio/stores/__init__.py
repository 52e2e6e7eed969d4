"""Store drop-ins: the client libraries of real stores, run in dst's loop so every call is a store round trip in
virtual time, one package each (``sqlite``: aiosqlite over sqlite3 on the loop's thread; ``redis``: redis-py's
asyncio client over fakeredis's commands).

Each package offers ``installed()``, a context manager that puts its drop-in in the library's place while a
simulated run is in it and takes it out after (a library the service does not have installed is left alone).
The asyncio mode enters :func:`installed` with its loop: a new drop-in is one package here and its name in
:data:`STORES`.
"""

from __future__ import annotations

import contextlib
from importlib import import_module
from typing import Any

STORES = ("sqlite", "redis", "postgres")


def __getattr__(name: str) -> Any:
    # stores.redis.Server(...) in an adapter's build(), before any run has imported the drop-in
    if name in STORES:
        return import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class installed:
    """Every drop-in in place while the ``with`` block runs (taken out in reverse order, also when it raised)."""

    __slots__ = ("_stack",)

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> installed:
        with contextlib.ExitStack() as stack:
            for name in STORES:
                stack.enter_context(import_module(f"{__name__}.{name}").installed())
            self._stack = stack.pop_all()  # all in: they stay in until __exit__
        return self

    def __exit__(self, *exc: Any) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()
