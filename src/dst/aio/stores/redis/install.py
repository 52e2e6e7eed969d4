"""The drop-in in redis-py's place: :class:`installed` makes the asyncio connection pools of a simulated run open
dst's connections to the servers their host names, and lets fakeredis's sets iterate in a seeded run's order."""

from __future__ import annotations

import sys
from asyncio import events
from types import TracebackType
from typing import Any, Callable, Iterator

from ...loop import Loop

_UNSEEN: Any = object()
_pool: Any = _UNSEEN  # redis.asyncio's ConnectionPool, None if redis-py is not installed (imported once)
_tcp: Any = None  # redis.asyncio's TCP Connection
_real_make: Callable[..., Any] | None = None


def _redis() -> Any:
    global _pool, _tcp, _real_make
    if _pool is _UNSEEN:
        try:
            from redis.asyncio.connection import Connection, ConnectionPool
        except ImportError:
            _pool = None
        else:
            _pool, _tcp, _real_make = ConnectionPool, Connection, ConnectionPool.make_connection
    return _pool


def _make_connection(pool: Any) -> Any:
    """``ConnectionPool.make_connection``: dst's connection for a TCP pool whose host names a registered server, in
    a simulated run; redis-py's own for anything else."""
    if pool.connection_class is _tcp and isinstance(events._get_running_loop(), Loop):
        kwargs = pool.connection_kwargs
        from .server import _registered

        if _registered(kwargs.get("host", "localhost"), kwargs.get("port", 6379)) is not None:
            from .connection import Connection

            return Connection(**kwargs)
    assert _real_make is not None
    return _real_make(pool)


def _members_in_order(self: Any) -> Iterator[bytes]:
    """fakeredis's sets iterate a Python set of their members, in the order of the members' string hashes, which
    ``PYTHONHASHSEED`` changes: iterated in the order the members were added instead (SMEMBERS, SINTER, ...)."""
    self._expire_members()
    now = _current_time()
    return iter([member for member, expiry in self._values.items() if expiry is None or expiry >= now])


def _current_time() -> int:
    from fakeredis._helpers import current_time

    return current_time()


class installed:
    """While active, redis-py's asyncio clients (``Redis(...)``, ``Redis.from_url(...)``, a ``ConnectionPool``
    of their own) whose host and port name a :class:`~dst.aio.stores.redis.Server` get dst's connections in a
    simulated run; every other use is redis-py's own, and so is everything outside a run. Put back on exit, also
    when the body raised. Without redis-py installed, it patches nothing."""

    __slots__ = ("_saved",)

    def __init__(self) -> None:
        self._saved: tuple[Any, Any] | None = None

    def __enter__(self) -> installed:
        pool = _redis()
        if pool is not None:
            sets = sys.modules.get("fakeredis.model._expiring_members_set")  # imported by a Server, in build()
            members = getattr(sets, "ExpiringMembersSet", None)
            self._saved = (pool.make_connection, members and members.__dict__["__iter__"])
            pool.make_connection = _make_connection
            if members is not None:
                members.__iter__ = _members_in_order
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        saved, self._saved = self._saved, None
        if saved is not None:
            make, iterate = saved
            _pool.make_connection = make
            if iterate is not None:
                sys.modules["fakeredis.model._expiring_members_set"].ExpiringMembersSet.__iter__ = iterate
