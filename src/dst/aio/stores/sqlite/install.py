"""The drop-in in aiosqlite's place: ``connect`` (this package's connection in a simulated run, the real
aiosqlite's anywhere else), and :class:`installed`, which puts it where aiosqlite's names lead."""

from __future__ import annotations

from asyncio import events
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from ...loop import Loop
from . import clock
from .connection import Connection, Cursor


def connect(database: str | bytes | Path, *, iter_chunk_size: int = 64, loop: Any = None,
            **kwargs: Any) -> Any:
    """aiosqlite's ``connect``: in a simulated run, a :class:`Connection` of ``dst.aio.stores.sqlite`` (await it, or use it
    with ``async with``); anywhere else, the real aiosqlite's."""
    if isinstance(events._get_running_loop(), Loop):
        return Connection(database, iter_chunk_size, kwargs)
    _aiosqlite()
    if _real_connect is None:
        raise RuntimeError("dst.aio.stores.sqlite.connect: not in a simulated run, and aiosqlite is not installed to run it")
    return _real_connect(database, iter_chunk_size=iter_chunk_size, **kwargs)


# --- installing it --------------------------------------------------------------------------------------

_UNSEEN: Any = object()
_module: Any = _UNSEEN  # the aiosqlite module, None if it is not installed (imported once)
_real_connect: Callable[..., Any] | None = None


def _aiosqlite() -> Any:
    global _module, _real_connect
    if _module is _UNSEEN:
        try:
            import aiosqlite
            import aiosqlite.core
        except ImportError:
            _module = None
        else:
            _module = aiosqlite
            _real_connect = aiosqlite.core.connect
    return _module


class installed:
    """While active, ``aiosqlite.connect`` (wherever it is looked up on the module: the service's own
    ``import aiosqlite``, SQLAlchemy's dialect) opens ``dst.aio.stores.sqlite``'s connections, whose SQLite reads ``'now'``
    from ``wall_ms`` (epoch milliseconds; by default ``time.time()``, which dst's sandbox makes virtual).
    Everything is put back on exit, also when the body raised. Without aiosqlite installed, it patches nothing.

    Names bound before (``from aiosqlite import connect``) keep the real one: import the module instead."""

    __slots__ = ("_wall_ms", "_previous", "_saved")

    def __init__(self, wall_ms: clock.WallMs | None = None) -> None:
        self._wall_ms = clock._system_wall_ms if wall_ms is None else wall_ms
        self._previous: clock.WallMs = clock._system_wall_ms
        self._saved: tuple[Any, Any, Any, Any] | None = None

    def __enter__(self) -> installed:
        self._previous, clock._wall_ms = clock._wall_ms, self._wall_ms
        module = _aiosqlite()
        if module is not None:
            core = module.core
            self._saved = (module.connect, module.Connection, module.Cursor, core.connect)
            # Only the names users reach: aiosqlite.core keeps its own Connection and Cursor for the real connect.
            module.connect = core.connect = connect
            module.Connection = Connection
            module.Cursor = Cursor
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        clock._wall_ms = self._previous
        saved, self._saved = self._saved, None
        if saved is not None:
            module = _module
            module.connect, module.Connection, module.Cursor, module.core.connect = saved
