"""PostgreSQL's wire protocol, as much as dst itself speaks: messages framed and read, errors parsed and written,
and :class:`Control`, a blocking connection speaking the simple query protocol (dst's own questions to the server:
which backend waits on which lock, a database made from a template), never the service's."""

from __future__ import annotations

import _socket
import select
import struct
import time
from typing import Iterator

from ....sandbox import real

_HEADER = struct.Struct("!cI")
_INT = struct.Struct("!I")
PROTOCOL = 196608  # 3.0
SSL_REQUEST = 80877103
CANCEL_REQUEST = 80877102
GSSENC_REQUEST = 80877104

_monotonic = real(time.monotonic)  # the host's clock: dst waits for the real server in real time


class PgError(Exception):
    """An ErrorResponse on dst's own connection: its SQLSTATE and message."""

    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields
        self.sqlstate = fields.get("C", "")
        super().__init__(f"{fields.get('M', 'error')} ({self.sqlstate})")


def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + _INT.pack(len(body) + 4) + body


def startup(params: dict[str, str]) -> bytes:
    body = _INT.pack(PROTOCOL) + b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items()) + b"\0"
    return _INT.pack(len(body) + 4) + body


def startup_params(packet: bytes) -> dict[str, str]:
    """The parameters of a StartupMessage (its length and version stripped)."""
    parts = packet[8:].split(b"\0")
    out: dict[str, str] = {}
    for key, value in zip(parts[0::2], parts[1::2]):
        if not key:
            break
        out[key.decode()] = value.decode()
    return out


def frames(buffer: bytearray, start: int = 0) -> Iterator[tuple[int, int, int]]:
    """The whole messages in ``buffer`` from ``start``: (type byte, where its body begins, where it ends)."""
    at, n = start, len(buffer)
    while at + 5 <= n:
        length = _INT.unpack_from(buffer, at + 1)[0]
        end = at + 1 + length
        if end > n:
            return
        yield buffer[at], at + 5, end
        at = end


def error_fields(body: bytes | bytearray | memoryview) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in bytes(body).split(b"\0"):
        if part:
            out[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return out


def error_message(fields: dict[str, str]) -> bytes:
    """An ErrorResponse with these fields (S, V, C, M, D, ...)."""
    return message(b"E", b"".join(k.encode() + v.encode() + b"\0" for k, v in fields.items()) + b"\0")


def literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def unix_socket(path: str) -> _socket.socket:
    """A blocking socket connected to ``path``. The C socket type: dst's own connection to its server, which the
    sandbox's refusal of the service's sockets does not stand in the way of."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def read_some(sock: _socket.socket, into: bytearray, wait: float) -> bool:
    """Append what arrived within ``wait`` seconds to ``into``; False when the peer closed."""
    ready, _, _ = select.select([sock], [], [], wait)
    if not ready:
        return True
    data = sock.recv(1 << 16)
    if not data:
        return False
    into += data
    return True


class Control:
    """dst's own connection to the server, blocking, the simple query protocol: a question and its rows, as text."""

    def __init__(self, path: str, database: str = "postgres", user: str = "postgres") -> None:
        self.sock = unix_socket(path)
        self.buffer = bytearray()
        self.sock.sendall(startup({"user": user, "database": database, "application_name": "dst",
                                   "lock_timeout": "0", "statement_timeout": "0"}))
        self._until_ready()

    def query(self, sql: str, timeout: float = 60.0) -> list[tuple[str | None, ...]]:
        """Run ``sql`` (one or more statements); the rows of the last that returned some. Raises :class:`PgError`."""
        self.sock.sendall(message(b"Q", sql.encode() + b"\0"))
        return self._until_ready(timeout)

    def _until_ready(self, timeout: float = 60.0) -> list[tuple[str | None, ...]]:
        rows: list[tuple[str | None, ...]] = []
        error: PgError | None = None
        deadline = _monotonic() + timeout
        buffer = self.buffer
        while True:
            consumed = 0
            for kind, start, end in frames(buffer):
                consumed = end
                if kind == 0x44:  # D: a row
                    rows.append(row_values(buffer, start))
                elif kind == 0x54:  # T: a new result
                    rows = []
                elif kind == 0x45:  # E
                    error = PgError(error_fields(buffer[start:end]))
                elif kind == 0x5A:  # Z
                    del buffer[:end]
                    if error is not None:
                        raise error
                    return rows
            del buffer[:consumed]
            if _monotonic() > deadline:
                raise TimeoutError("the PostgreSQL server did not answer dst's own query in time")
            if not read_some(self.sock, buffer, 1.0):
                raise ConnectionError("the PostgreSQL server closed dst's own connection")

    def close(self) -> None:
        try:
            self.sock.sendall(message(b"X"))
        except OSError:
            pass
        self.sock.close()


def row_values(buffer: bytearray, at: int) -> tuple[str | None, ...]:
    (n,) = struct.unpack_from("!H", buffer, at)
    at += 2
    out: list[str | None] = []
    for _ in range(n):
        (size,) = struct.unpack_from("!i", buffer, at)
        at += 4
        if size < 0:
            out.append(None)
        else:
            out.append(bytes(buffer[at:at + size]).decode())
            at += size
    return tuple(out)
