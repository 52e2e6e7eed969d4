"""The drop-in in the loop's place: while :class:`installed` is active, a connection a simulated run's code opens
(asyncpg's ``loop.create_connection``) to a host and port that name a :class:`~.server.Server` is dst's link to it;
any other is refused, as the loop refuses every socket."""

from __future__ import annotations

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


class installed:
    """While active, the loop's ``create_connection`` to a registered server's host and port opens dst's link (the
    service's asyncpg, SQLAlchemy's ``postgresql+asyncpg``); put back on exit, also when the body raised."""

    __slots__ = ("_saved",)

    def __init__(self) -> None:
        self._saved: Any = None

    def __enter__(self) -> installed:
        self._saved = Loop.__dict__["create_connection"]
        setattr(Loop, "create_connection", _create_connection)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        saved, self._saved = self._saved, None
        if saved is not None:
            setattr(Loop, "create_connection", saved)
