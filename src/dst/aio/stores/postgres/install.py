"""The drop-in in the loop's place: while :class:`installed` is active, a connection a simulated run's code opens
(asyncpg's ``loop.create_connection``) to a host and port that name a :class:`~.server.Server` is dst's link to it;
any other is refused, as the loop refuses every socket."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any, Callable

from ...loop import Loop

_refused_tcp: Any = Loop.create_connection  # the loop's own: a refusal


async def _create_connection(self: Loop, protocol_factory: Callable[[], Any], host: Any = None, port: Any = None,
                             **kwargs: Any) -> tuple[Any, Any]:
    from .server import _registered

    server = _registered(host, port if port is not None else 5432)
    if server is None:
        refused: tuple[Any, Any] = await _refused_tcp(self, protocol_factory, host, port, **kwargs)
        return refused  # never reached: the loop's refusal raises
    if kwargs.get("ssl"):
        raise ConnectionRefusedError(111, f"the dst PostgreSQL server {host}:{port} speaks no TLS")
    return server._open(protocol_factory)


def _statement_number(statement: Any) -> tuple[int, str]:
    name = str(getattr(statement, "name", ""))
    digits = "".join(c for c in name if c.isdigit())
    return (int(digits) if digits else 0, name)


def _in_order(cleanup: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """asyncpg closes the statements its cache let go in the order of a set of them (their addresses): in the order
    they were made instead, so their Close messages go in the same order at every run."""
    async def cleanup_in_order(self: Any) -> Any:
        if self._stmts_to_close:
            self._stmts_to_close = sorted(self._stmts_to_close, key=_statement_number)
        return await cleanup(self)

    return cleanup_in_order


class installed:
    """While active, the loop's ``create_connection`` to a registered server's host and port opens dst's link (the
    service's asyncpg, SQLAlchemy's ``postgresql+asyncpg``), and asyncpg closes statements in a seeded run's order;
    put back on exit, also when the body raised."""

    __slots__ = ("_saved", "_cleanup")

    def __init__(self) -> None:
        self._saved: Any = None
        self._cleanup: Any = None

    def __enter__(self) -> installed:
        self._saved = Loop.__dict__["create_connection"]
        setattr(Loop, "create_connection", _create_connection)
        connection = sys.modules.get("asyncpg.connection")  # imported by the service, before its first run
        if connection is not None:
            self._cleanup = connection.Connection.__dict__["_cleanup_stmts"]
            connection.Connection._cleanup_stmts = _in_order(self._cleanup)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        saved, self._saved = self._saved, None
        if saved is not None:
            setattr(Loop, "create_connection", saved)
        cleanup, self._cleanup = self._cleanup, None
        if cleanup is not None:
            sys.modules["asyncpg.connection"].Connection._cleanup_stmts = cleanup
