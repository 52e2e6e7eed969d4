"""One client connection to the :class:`~.server.Server`: the asyncio transport asyncpg's protocol writes to, a real
socket to the PostgreSQL server behind it, and what the client is owed: which replies its messages still await.

What the client writes leaves after a store round trip, all of it together (asyncpg writes a whole exchange at once:
Parse, Describe, Flush, or Bind, Execute, Sync); the server's replies are read at once, in real time, and handed to
the protocol at the virtual moment they are complete (:meth:`.server.Server.settle`)."""

from __future__ import annotations

import _socket
import asyncio
import contextvars
import struct
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from ..servers import forget_crash
from . import wire
from .clockwords import virtual_time

if TYPE_CHECKING:
    from ...handles import Process
    from ...loop import Loop

# What a reply ends with, by the client's message: each ends one entry of the queue of what the client is owed.
_ENDS = {ord("P"): b"1", ord("B"): b"2", ord("C"): b"3", ord("E"): b"CIs", ord("S"): b"Z", ord("F"): b"Z"}


class Server(Protocol):
    """What a connection asks of the server it belongs to (:class:`~dst.aio.stores.postgres.server.Server`): the
    server's module uses this one, not the other way round."""

    name: str
    port: int
    postmaster: Any

    def _transmit(self, link: Any) -> None: ...

    def _end(self, link: Any, lost: bool | None) -> None: ...

    def _cancel_asked(self, pid: int, secret: int) -> None: ...

    def _startup(self, packet: bytes) -> bytes: ...

    def _cancelled_error(self, link: Any, fields: dict[str, str]) -> dict[str, str]: ...

    def _failed(self, link: Any, fields: dict[str, str]) -> None: ...

_RAW, _EOF = b"raw", b"eof"  # an SSLRequest's one-byte answer; a connection the server closes (a cancel, Terminate)
_ERROR, _READY, _KEY, _ROW = ord("E"), ord("Z"), ord("K"), ord("D")
# What PostgreSQL answers a statement a session's timeout ends: the SQLSTATE and the message, by setting
TIMEOUT_ERRORS = {"lock_timeout": ("55P03", "canceling statement due to lock timeout"),
                  "statement_timeout": ("57014", "canceling statement due to statement timeout")}
_REAL_TIMEOUTS = tuple(message for _, message in TIMEOUT_ERRORS.values())  # the server's own timers struck
_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_OPEN, _GONE = 0, 2


class _Owed:
    """One reply the client is owed: the message types that end it; hidden: dst's own (the clock), not delivered;
    extended: part of an extended-protocol exchange (after an error, the server skips to the Sync)."""

    __slots__ = ("ends", "hidden", "extended")

    def __init__(self, ends: bytes, hidden: bool = False, extended: bool = False) -> None:
        self.ends = ends
        self.hidden = hidden
        self.extended = extended


class Link(asyncio.Transport):
    """dst's transport for one asyncpg connection: asyncpg's protocol above it, a real socket to the server below."""

    def __init__(self, server: Server, serial: int, loop: Loop, owner: Process, protocol: asyncio.BaseProtocol) -> None:
        super().__init__()
        self.server = server
        self.serial = serial
        self.loop = loop
        self.owner = owner
        self.protocol = protocol
        self.sock: _socket.socket | None = wire.unix_socket(server.postmaster.path)
        self.sock.setblocking(False)
        self.context = contextvars.copy_context()
        self.state = _OPEN
        self.outbox = bytearray()
        self.leaving = False  # a departure is scheduled
        self.carry = bytearray()  # what was written of a message not yet whole (parsed when it is)
        self.started = False  # the StartupMessage went
        self.owed: deque[_Owed] = deque()
        self.inbox = bytearray()  # what the server sent, not yet framed
        self.ready = bytearray()  # whole messages for the client, not yet handed over
        self.eof = False  # the server closed
        self.pid = 0  # the backend's, from BackendKeyData
        self.status = b"I"  # the last ReadyForQuery's transaction status
        self.xact = 0  # dst's number of the transaction it is in (the youngest is a deadlock's victim)
        self.cancelling = False  # dst cancelled its statement (a deadlock's victim, a timeout) or the client asked to
        # Why dst cancelled it ("deadlock", "lock_timeout", "statement_timeout"): the cancel's error is answered as
        # PostgreSQL answers that
        self.cancelled_for = ""
        # The session's lock_timeout and statement_timeout in ms (0: none), as dst last read them on the session;
        # read again before the next exchange when one may have set them
        self.timeouts = (0, 0)
        self.timeouts_unread = True
        self.timeouts_asked = False  # dst's query on its way asks for them
        self.sent_at = 0  # the virtual ms its last exchange reached the server (a statement_timeout counts from it)
        self.waits = 0  # lock waits begun (a timeout armed for one does not strike the next)
        self.statements: dict[str, str] = {}  # prepared statement name -> its text (for the trace)
        self.text = ""  # the statement sent last (for the trace)
        self.blocked_at = -1  # the virtual ms it began to wait for a lock (-1: it does not)
        self.clock: tuple[str, str] | None = None  # the moments dst last set on the session (in a transaction)
        self.clock_xact = ""  # the moment its transaction began
        self.cycle: list[str] = []  # the deadlock it was cancelled to break
        self.crash_list: list[Any] | None = owner.on_crash
        owner.on_crash.append(self.die)

    def __repr__(self) -> str:
        return f"<postgres link {self.serial} of {self.owner.name}>"

    @property
    def name(self) -> str:
        return f"{self.owner.name}'s connection {self.serial}"

    @property
    def waiting(self) -> bool:
        """A reply is owed: the backend is working on what the client sent, or waits for a lock."""
        return bool(self.owed) and not self.eof

    # --- asyncio's transport ------------------------------------------------------------------------------

    def write(self, data: Any) -> None:
        if self.state != _OPEN:
            return
        self.outbox += data
        if not self.leaving:
            self.leaving = True
            self.server._transmit(self)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return self.state != _OPEN

    def close(self) -> None:
        """The client closes: what it wrote still goes (asyncpg's Terminate), then the server forgets it."""
        if self.state != _OPEN:
            return
        if self.leaving:
            self.closing_after = True
            return
        self.abort()

    closing_after = False

    def abort(self) -> None:
        if self.state != _OPEN:
            return
        self._forget_crash()
        self.server._end(self, lost=None)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return (self.server.name, self.server.port)
        return default  # no socket (asyncpg sets TCP_NODELAY on one), no SSL

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.protocol

    def pause_reading(self) -> None:
        pass  # replies are handed over whole, as they complete

    def resume_reading(self) -> None:
        pass

    def is_reading(self) -> bool:
        return self.state == _OPEN

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    # --- what the client sent -----------------------------------------------------------------------------

    def outgoing(self) -> bytes:
        """What leaves now, with what it owes noted; the StartupMessage gets dst's clock on its search path."""
        data, self.outbox = bytes(self.outbox), bytearray()
        self.leaving = False
        carry = self.carry
        carry += data
        out = bytearray()
        at = 0
        while True:
            if not self.started:
                if len(carry) - at < 8:
                    break
                (length, code) = struct.unpack_from("!II", carry, at)
                if len(carry) - at < length:
                    break
                packet = bytes(carry[at:at + length])
                at += length
                if code in (wire.SSL_REQUEST, wire.GSSENC_REQUEST):
                    self.owed.append(_Owed(_RAW))
                elif code == wire.CANCEL_REQUEST:
                    self.owed.append(_Owed(_EOF))
                    self.server._cancel_asked(*struct.unpack_from("!II", packet, 8))
                else:
                    self.started = True
                    packet = self.server._startup(packet)
                    self.owed.append(_Owed(b"Z"))
                out += packet
                continue
            if len(carry) - at < 5:
                break
            kind = carry[at]
            (length,) = struct.unpack_from("!I", carry, at + 1)
            end = at + 1 + length
            if len(carry) < end:
                break
            self._sent(kind, carry, at + 5, end)
            if kind in (0x51, 0x50) and ("timeout" in self.text or "TIMEOUT" in self.text):
                self.timeouts_unread = True  # it may set one: dst reads them again before the next exchange
            if kind in (0x51, 0x50) and virtual_time(self.text) != self.text:  # the text _sent just read
                out += _clocked(kind, carry[at:end])
            else:
                out += carry[at:end]
            at = end
        del carry[:at]
        return bytes(out)

    def _sent(self, kind: int, buf: bytearray, start: int, end: int) -> None:
        owed = self.owed
        if kind == 0x51:  # Q: a simple query, to its ReadyForQuery (or its CopyInResponse)
            self.text = bytes(buf[start:end - 1]).decode("utf-8", "replace")
            owed.append(_Owed(b"ZG"))
        elif kind == 0x50:  # P: Parse (name, text, ...)
            name_end = buf.index(0, start)
            text_end = buf.index(0, name_end + 1)
            self.text = bytes(buf[name_end + 1:text_end]).decode("utf-8", "replace")
            self.statements[bytes(buf[start:name_end]).decode()] = self.text
            owed.append(_Owed(b"1", extended=True))
        elif kind == 0x42:  # B: Bind (portal, statement, ...)
            portal_end = buf.index(0, start)
            statement = bytes(buf[portal_end + 1:buf.index(0, portal_end + 1)]).decode()
            self.text = self.statements.get(statement, self.text)
            owed.append(_Owed(b"2", extended=True))
        elif kind == 0x44:  # D: Describe a statement (its parameters, then its rows) or a portal (its rows)
            if buf[start] == 0x53:
                owed.append(_Owed(b"t", extended=True))
            owed.append(_Owed(b"Tn", extended=True))
        elif kind == 0x58:  # X: Terminate
            owed.append(_Owed(_EOF))
        elif kind in (0x63, 0x66):  # CopyDone, CopyFail: the COPY's end, then ReadyForQuery
            owed.append(_Owed(b"Z"))
        elif kind in _ENDS:
            # After an error the server skips what follows to the Sync, and answers the Sync: the Sync (and a
            # FunctionCall, no part of an exchange) is still owed its ReadyForQuery.
            owed.append(_Owed(_ENDS[kind], extended=kind not in (0x46, 0x53)))
        # H (Flush), d (CopyData): nothing more is owed

    def hide(self, sql: str) -> bytes:
        """dst's own query on the session, ahead of the client's: its replies are not the client's."""
        self.owed.appendleft(_Owed(b"Z", hidden=True))
        return wire.message(b"Q", sql.encode() + b"\0")

    # --- what the server sent -----------------------------------------------------------------------------

    def pump(self) -> bool:
        """Read what the server sent so far (without waiting); True when anything came."""
        sock = self.sock
        if sock is None or self.eof:
            return False
        got = False
        while True:
            try:
                data = sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                data = b""
            if not data:
                self.eof = True
                self.owed.clear()
                got = True
                break
            self.inbox += data
            got = True
        if got:
            self._frame()
        return got

    def _frame(self) -> None:
        inbox, owed = self.inbox, self.owed
        at, n = 0, len(inbox)
        while at < n:
            head = owed[0] if owed else None
            if head is not None and head.ends is _RAW:
                owed.popleft()
                self.ready += inbox[at:at + 1]
                at += 1
                continue
            if n - at < 5:
                break
            kind = inbox[at]
            end = at + 1 + struct.unpack_from("!I", inbox, at + 1)[0]
            if end > n:
                break
            hidden = head is not None and head.hidden
            if kind == _KEY:
                self.pid = struct.unpack_from("!I", inbox, at + 5)[0]
            elif kind == _READY:
                if not hidden:
                    status = bytes(inbox[at + 5:at + 6])
                    if status == b"I" and self.status != b"I" and self.timeouts != (0, 0):
                        self.timeouts_unread = True  # a SET LOCAL ends with its transaction, a rolled-back SET too
                    self.status = status
            elif kind == _ROW and hidden and self.timeouts_asked:  # dst's query: the timeouts are its last columns
                *_, lock, statement = wire.row_values(inbox, at + 5)
                self.timeouts = (_ms(lock), _ms(statement))
                self.timeouts_asked = False
            elif kind == _ERROR and not hidden:
                fields = wire.error_fields(inbox[at + 5:end])
                if self.cancelled_for and fields.get("C") == "57014":
                    # the cancel dst sent: answered as the server answers a deadlock's victim, or a timeout
                    fields = self.server._cancelled_error(self, fields)
                    self.ready += wire.error_message(fields)
                    self.cancelled_for = ""
                    self.server._failed(self, fields)
                    at = end
                    self._ended(kind, head)
                    continue
                self.server._failed(self, fields)
                if fields.get("M", "").startswith(_REAL_TIMEOUTS):  # the run ends with it: not the seed's doing
                    what = fields["M"].removeprefix("canceling statement due to ")
                    self.loop.stop_with(RuntimeError(
                        f"dst.aio.stores.postgres: the server's own {what} struck {self.name} in real time, before "
                        f"virtual time reached it (a statement ran longer in the server than the session's "
                        f"timeout): {' '.join(self.text.split())[:80]}"))
            if not hidden:
                self.ready += inbox[at:end]
            at = end
            self._ended(kind, head)
        del inbox[:at]

    def _ended(self, kind: int, head: _Owed | None) -> None:
        owed = self.owed
        if head is None:
            return
        if kind in head.ends:
            owed.popleft()
            if kind == _READY and not head.hidden:
                self.cancelling = False
                self.cancelled_for = ""
        elif kind == _ERROR and head.extended:
            # The server skips what the client sent after the error, to its Sync (or all of it, without one).
            while owed and owed[0].extended:
                owed.popleft()

    # --- handing over -------------------------------------------------------------------------------------

    def hand_over(self) -> None:
        """What is whole reaches the protocol, in the client's process (whose tasks it wakes), then the end of the
        stream if the server closed."""
        data, self.ready = bytes(self.ready), bytearray()
        loop = self.loop
        if data and self.state == _OPEN:
            running, loop.process = loop.process, self.owner
            try:
                self.context.run(self.protocol.data_received, data)  # type: ignore[attr-defined]
            finally:
                loop.process = running
        if self.eof and self.state == _OPEN:
            self._forget_crash()
            self.server._end(self, lost=None)

    def lost(self, error: Exception | None) -> None:
        """The connection is gone: the protocol hears so (its pending query fails)."""
        loop = self.loop
        running, loop.process = loop.process, self.owner
        try:
            self.context.run(self.protocol.connection_lost, error)
        finally:
            loop.process = running

    def shut(self) -> None:
        self.state = _GONE
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    # --- its process ---------------------------------------------------------------------------------------

    def die(self) -> None:
        """The process that opened it died: its backend is ended (what it had not committed rolls back)."""
        self.crash_list = None  # the process is walking that list now
        if self.state == _OPEN:
            self.server._end(self, lost=False)

    def _forget_crash(self) -> None:
        crash_list, self.crash_list = self.crash_list, None
        forget_crash(crash_list, self.die)


def _clocked(kind: int, message: bytearray) -> bytes:
    """A Query or Parse message whose SQL has its clock keywords calling dst's clock (the trace keeps the text
    the client sent)."""
    body = bytes(message[5:])
    start = 0 if kind == 0x51 else body.index(0) + 1  # Parse: the statement's name first
    end = body.index(0, start)
    try:
        sql = body[start:end].decode()
    except UnicodeDecodeError:  # the server will say what is wrong with it
        return bytes(message)
    return wire.message(bytes((kind,)), body[:start] + virtual_time(sql).encode() + body[end:])


def _ms(setting: str | None) -> int:
    """A timeout as ``current_setting`` shows it (``0``, ``1500ms``, ``2s``, ``1min``) in ms; 0: none."""
    text = (setting or "0").strip()
    number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(float(number or 0) * _UNITS.get(text[len(number):], 1))
