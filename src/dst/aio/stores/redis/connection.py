"""redis-py's asyncio connection, its socket replaced by a connection to a :class:`~dst.aio.stores.redis.Server`:
everything above the socket (the handshake, the parser, timeouts, retries, pub/sub, pipelines) is redis-py's own."""

from __future__ import annotations

from typing import Any

from redis.asyncio.connection import Connection as _TcpConnection

from .server import _registered


class Connection(_TcpConnection):
    """redis-py's TCP connection, less the TCP: its reader and writer are the two ends of a connection to the
    registered server its host and port name."""

    async def _connect(self) -> None:
        server = _registered(self.host, self.port)
        if server is None:  # unregistered since the pool chose this class
            raise ConnectionRefusedError(111, f"no dst Redis server is named {self.host}:{self.port}")
        reader, writer = server._open()
        self._reader: Any = reader
        self._writer: Any = writer

    def get_resolved_ip(self) -> str | None:
        return str(self.host)  # a server's name, not a machine's: nothing to resolve
