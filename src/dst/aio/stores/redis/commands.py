"""fakeredis's own commands, on a socket of dst's: what they answer goes to the connection's stream as RESP
bytes, a blocking command that finds nothing parks with the :class:`~dst.aio.stores.redis.Server` instead of
waiting on a thread or a task of fakeredis's, and every key a command writes is noted, so what is parked on it is
tried again after the command."""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable, Protocol

import redis.asyncio as redis_async
from fakeredis._command_args_parsing import Timeout
from fakeredis._commands import SUPPORTED_COMMANDS, Key, Signature
from fakeredis._core import CommandItem, Database, FakeServer
from fakeredis._helpers import NoResponse, SimpleError, SimpleString
from fakeredis._socket import FakeSocket

from ...loop import VIRTUAL_EPOCH_MS
from . import resp


class _Link(Protocol):
    """One client connection, as the server holds it (:class:`~dst.aio.stores.redis.server._Link`)."""

    serial: int
    owner: Any  # the process at its client's end
    loop: Any
    parked: _Parked | None


class _Host(Protocol):
    """What a connection's socket asks of the Redis server it belongs to
    (:class:`~dst.aio.stores.redis.Server`): the server's own module uses this one, not the other way round."""

    name: str
    port: int

    def _send(self, link: Any, data: bytes) -> None: ...

    def _after_command(self) -> None: ...

    def _park(self, parked: _Parked, timeout: float | None) -> None: ...

    def _killed(self, link: Any) -> None: ...


class _Dbs(dict[int, Database]):
    """The server's databases, made on first use as fakeredis's are, each knowing its number."""

    def __init__(self, server: _FakeServer) -> None:
        super().__init__()
        self.server = server

    def __missing__(self, index: int) -> Database:
        db = self[index] = _Db(self.server, index)
        return db


class _FakeServer(FakeServer):
    """fakeredis's server, whose databases note the keys each command writes."""

    def __init__(self, version: tuple[int, ...]) -> None:
        super().__init__(version=version)
        self.dbs = _Dbs(self)
        self.lastsave = VIRTUAL_EPOCH_MS // 1000  # made before the run: not the real clock's second
        self.touched: set[tuple[int, bytes]] = set()  # (db, key) written since the parked reads were last tried
        self.woken = False  # CLIENT UNBLOCK asked a parked read to stop waiting
        self.writes = 0  # keys written so far: what an adapter's view asks to know whether to look again
        self.running = 0  # how deep in commands (a script's, a transaction's) the server is: their sends are pushes


class _Db(Database):
    __slots__ = ("_fake", "index")

    def __init__(self, server: _FakeServer, index: int) -> None:
        super().__init__(server.lock)
        self._fake = server
        self.index = index

    def notify_watch(self, key: bytes) -> None:
        for sock in self._watches.get(key, ()):
            sock.notify_watch()  # WATCH's dirty flag: order makes no difference
        self._fake.touched.add((self.index, key))
        self._fake.writes += 1

    def wake_all(self) -> None:
        # fakeredis wakes its waiting threads and tasks here; a parked read of dst's is tried after the command
        self._fake.woken = True


# A blocking command -> where its keys are among its fields (what it waits on: a write to one of them wakes it).
def _keys(fields: list[bytes]) -> tuple[bytes, ...] | None:
    name = fields[0].lower()
    if name in (b"blpop", b"brpop", b"bzpopmin", b"bzpopmax"):
        return tuple(fields[1:-1])
    if name in (b"brpoplpush", b"blmove", b"blmovem"):
        return (fields[1],)
    if name in (b"blmpop", b"bzmpop"):
        return tuple(fields[3:3 + int(fields[2])])
    if name in (b"xread", b"xreadgroup"):
        streams = _streams_at(fields)
        return tuple(fields[streams:streams + (len(fields) - streams) // 2])
    return None  # any write to its database wakes it


def _streams_at(fields: list[bytes]) -> int:
    """Where XREAD's and XREADGROUP's keys begin: after STREAMS."""
    for i, field in enumerate(fields):
        if field.lower() == b"streams":
            return i + 1
    return len(fields)


# fakeredis answers BLMOVE on a missing source with nil at once (its signature's missing_return); Redis blocks.
_BLMOVE = Signature("blmove", "_blmove", (Key(list), Key(list), SimpleString, SimpleString, Timeout),  # type: ignore[arg-type]
                    flags="".join(sorted(SUPPORTED_COMMANDS["blmove"].flags)))


class _Parked:
    """A blocking command waiting for a write to one of its keys or for its timeout."""

    __slots__ = ("sock", "fields", "db", "keys", "shape", "timer")

    def __init__(self, sock: _Socket, fields: list[bytes], shape: Callable[[Any], Any] | None) -> None:
        self.sock = sock
        self.fields = fields
        self.db: int = sock._db_num
        self.keys = _keys(fields)
        self.shape = shape  # fakeredis's reply for what it found (the empty reply of a timeout too)
        self.timer: Any = None

    def wants(self, touched: set[tuple[int, bytes]]) -> bool:
        if self.keys is None:
            return any(db == self.db for db, _ in touched)
        return any((self.db, key) in touched for key in self.keys)

    def empty(self) -> Any:
        return None if self.shape is None else self.shape(None)


class _Socket(FakeSocket):
    """One client connection's end at the server: fakeredis's command implementations, dst's way of answering."""

    def __init__(self, server: _FakeServer, redis: _Host, link: _Link) -> None:
        self._redis = redis
        self._link = link
        self._fake = server  # fakeredis forgets its server when the socket closes, perhaps inside a command
        self._fields: list[bytes] = []
        self._trying = False  # a parked command run again: it must not park a second time
        self._still = False  # ... and found nothing again
        self._scripts = 0
        super().__init__(server, 0, client_class=redis_async.Redis,
                         client_info={"addr": f"{link.owner.name}:{link.serial}", "laddr": f"{redis.name}:{redis.port}"})

    def put_response(self, msg: Any) -> None:
        # A command's own reply comes after it ran; what is sent while one runs is a push (pub/sub's messages).
        self._redis._send(self._link, resp.encode(msg, self._client_info.protocol_version, self._fake.running > 0))

    def _decode_result(self, result: Any) -> Any:
        return result  # fakeredis turns its replies into redis-py's values here; they go as RESP instead

    def _process_command(self, fields: list[bytes]) -> None:
        self._fields = fields
        super()._process_command(fields)
        self._redis._after_command()

    def _run_command(self, func: Callable[[Any], Any] | None, sig: Any, args: list[Any], from_script: bool) -> Any:
        fake = self._fake
        fake.running += 1
        self._scripts += from_script
        try:
            return super()._run_command(func, sig, args, from_script)
        finally:
            fake.running -= 1
            self._scripts -= from_script

    def _name_to_func(self, cmd_name: str) -> tuple[Callable[[Any], Any] | None, Signature]:
        if cmd_name == "blmove":
            return self._blmove, _BLMOVE  # type: ignore[return-value]
        return super()._name_to_func(cmd_name)

    def _blmove(self, source: CommandItem, destination: CommandItem, wherefrom: bytes, whereto: bytes,
                timeout: float) -> Any:
        def attempt(first_pass: bool) -> Any:
            return self._lmove(source, destination, wherefrom, whereto, first_pass) if source.value else None

        return self._blocking(timeout, attempt)

    def _blocking(self, timeout: float | None, func: Callable[[bool], Any],
                  shape: Callable[[Any], Any] | None = None) -> Any:
        ret = func(True)
        if ret is not None or self._in_transaction or self._scripts:  # as Redis: no wait inside MULTI or a script
            return ret if shape is None else shape(ret)
        if self._trying:
            self._still = True
            return NoResponse()
        self._redis._park(_Parked(self, self._pinned(self._fields), shape), timeout)
        self._blocked = True
        self.pause()  # what the client sent after it waits, as in Redis
        return NoResponse()

    def _pinned(self, fields: list[bytes]) -> list[bytes]:
        """XREAD's ``$`` is the stream's last id when the command blocked, not when it is tried again."""
        if fields[0].lower() != b"xread" or b"$" not in fields:
            return fields
        fields = list(fields)
        at = _streams_at(fields)
        n = (len(fields) - at) // 2
        for i in range(at, at + n):
            if fields[i + n] == b"$":
                item = self._db.get(fields[i])
                fields[i + n] = b"0-0" if item is None else item.value.last_item_key()
        return fields

    def try_again(self, parked: _Parked) -> bool:
        """Run the parked command again without blocking; True when it answered (it is no longer parked)."""
        if self._unblock_reason is not None:  # CLIENT UNBLOCK: the empty reply, or an error
            try:
                self._take_unblock_reason()
                reply = parked.empty()
            except SimpleError as e:
                reply = e
            self.put_response(reply)
            return True
        self._trying, self._still = True, False
        try:
            self._process_command(parked.fields)
        finally:
            self._trying = False
        return not self._still

    def time_out(self, parked: _Parked) -> None:
        with self._server.lock:
            now = time.time()  # the replies fakeredis shapes at a timeout may read the clock (TS.READ)
            for db in self._server.dbs.values():
                db.time = now
            reply = parked.empty()
        self.put_response(reply)

    def go_on(self) -> None:
        """Unparked: what the client sent after the blocking command runs now."""
        self._blocked = False
        self._unblock_reason = None
        self._paused = False
        if inspect.getgeneratorstate(self._parser) != inspect.GEN_RUNNING:  # inside its own command (served as it returns): it goes on by itself
            self._parser.send(b"")

    def kill(self) -> None:
        super().kill()
        self._redis._killed(self._link)
