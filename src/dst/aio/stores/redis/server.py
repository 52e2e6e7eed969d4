"""A Redis server of the simulated world: fakeredis's data and commands, reached through connections whose every
write is a store round trip in virtual time, and whose clients' processes, and the server itself, can die."""

from __future__ import annotations

import asyncio
import itertools
import time
from asyncio import events
from collections import deque
from typing import Any, Literal

import attrs

from ....sandbox import VIRTUAL_EPOCH_MS
from ...host import Server as _HostServer
from ...handles import Process
from ...loop import Loop
from ..servers import Servers, forget_crash
from .commands import _FakeServer, _Parked, _Socket

Persistence = Literal["aof", "none"]

_SERVERS: Servers[Server] = Servers()
_registered = _SERVERS.find


@attrs.frozen
class Pending:
    """A stream entry delivered to a consumer group's consumer and not yet acknowledged (XPENDING's row)."""

    id: bytes
    consumer: bytes
    idle: int  # ms since it was last delivered
    deliveries: int


class Server:
    """A Redis server beside the service, made by an adapter's ``build(env)``: its data outlives the service's
    restarts. The service is configured with :attr:`url`; redis-py's asyncio clients whose host names it reach it
    through dst's connections (:func:`dst.aio.stores.redis.installed`).

    ``persistence``: ``"aof"``, every write survives :meth:`restart` (``appendfsync always``); ``"none"``, a restart
    loses everything. The readers (:meth:`keys`, :meth:`hash`, :meth:`stream`, :meth:`pending`, ...) read the data
    as it stands, for the adapter's views: no round trip, and nothing changes by reading (a key past its TTL reads as
    gone, as Redis would answer, but is not deleted)."""

    def __init__(self, name: str = "redis", *, persistence: Persistence = "aof", port: int = 6379,
                 version: tuple[int, ...] = (7, 4)) -> None:
        if persistence not in ("aof", "none"):
            raise ValueError(f"dst.aio.stores.redis.Server: persistence is 'aof' or 'none', not {persistence!r}")
        self.name = name
        self.port = port
        self.persistence: Persistence = persistence
        self._version = version
        self._fake = _FakeServer(version)
        # Redis's own process: its commands run as it (its clock is not a client's skewed one), and what reaches it
        # later (a command after its round trip, a blocking read's timeout) is its to run, whoever sent it.
        self._process = Process(name)
        self._links: dict[int, _Link] = {}
        self._serials = itertools.count(1)
        self._parked: list[_Parked] = []  # in the order they blocked, as Redis serves them
        self._outbox: dict[int, list[bytes]] = {}  # link serial -> what Redis sent it during the event running now
        self._serving = False
        _SERVERS.add(name, port, self)

    @property
    def url(self) -> str:
        """What the service is configured with: ``redis://<name>:<port>/0``."""
        return f"redis://{self.name}:{self.port}/0"

    @property
    def busy(self) -> bool:
        """Whether a command is in flight (sent, its round trip not over) on any connection. A blocking read parked
        on its keys is not: a worker waiting in ``XREADGROUP ... BLOCK`` is idle."""
        return any(link.in_transit for link in self._links.values())

    @property
    def version(self) -> tuple[int, int]:
        """Moves whenever a key was written (or Redis restarted): a view's cheap question of whether to read again."""
        return self._process.epoch, self._fake.writes

    def restart(self) -> None:
        """Redis restarts: every connection is reset (a command in flight, and the next use of the connection, see
        ``ConnectionError``), what was parked never answers, and the data is kept (``aof``) or lost (``none``).
        Scripts loaded with ``SCRIPT LOAD`` are gone either way, as in Redis."""
        self._process.epoch += 1  # what was on its way to the old process (a command, a timeout) never arrives
        links, self._links = self._links, {}
        self._parked = []
        self._outbox = {}
        for serial in sorted(links):
            links[serial].reset()
        old, self._fake = self._fake, _FakeServer(self._version)
        if self.persistence == "aof":
            for index, db in old.dbs.items():
                self._fake.dbs[index].swap(db)

    # --- readers ------------------------------------------------------------------------------------------

    def keys(self, *, db: int = 0) -> dict[bytes, int | None]:
        """Every live key, with its time to live in ms (None: it does not expire)."""
        now = self._now()
        out: dict[bytes, int | None] = {}
        found = self._fake.dbs.get(db)
        for key, item in (found._dict.items() if found is not None else ()):
            if item.expireat is None:
                out[key] = None
            elif item.expireat >= now:
                out[key] = int(round((item.expireat - now) * 1000))
        return out

    def string(self, key: str | bytes, *, db: int = 0) -> bytes | None:
        """A string's value (None: no such key)."""
        value = self._value(key, db)
        return value if isinstance(value, bytes) else None

    def hash(self, key: str | bytes, *, db: int = 0) -> dict[bytes, bytes]:
        """A hash's live fields (a field past its own TTL is gone)."""
        value = self._value(key, db)
        if value is None or not hasattr(value, "_expirations"):
            return {}
        now = int(self._now() * 1000)
        return {field: v for field, v in value._values.items()
                if (expiry := value._expirations.get(field)) is None or expiry >= now}

    def members(self, key: str | bytes, *, db: int = 0) -> list[bytes]:
        """A set's live members, in the order they were added."""
        value = self._value(key, db)
        if value is None or not hasattr(value, "_may_expire"):
            return []
        now = int(self._now() * 1000)
        return [member for member, expiry in value._values.items() if expiry is None or expiry >= now]

    def elements(self, key: str | bytes, *, db: int = 0) -> list[bytes]:
        """A list's elements, head first."""
        value = self._value(key, db)
        return list(value) if isinstance(value, list) else []

    def zset(self, key: str | bytes, *, db: int = 0) -> list[tuple[bytes, float]]:
        """A sorted set's members with their scores, lowest score first."""
        value = self._value(key, db)
        if value is None or not hasattr(value, "_byscore"):
            return []
        return [(member, score) for score, member in value._byscore]

    def stream(self, key: str | bytes, *, db: int = 0) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """A stream's entries, oldest first: (id, fields)."""
        value = self._value(key, db)
        if value is None or not hasattr(value, "_groups"):
            return []
        out = []
        for entry in value._ids:
            fields = value._values_dict[entry]
            out.append((entry.encode(), dict(zip(fields[::2], fields[1::2]))))
        return out

    def groups(self, key: str | bytes, *, db: int = 0) -> dict[bytes, bytes]:
        """A stream's consumer groups, each with the id it last delivered."""
        value = self._value(key, db)
        if value is None or not hasattr(value, "_groups"):
            return {}
        return {name: group.last_delivered_key.encode() for name, group in value._groups.items()}

    def pending(self, key: str | bytes, group: str | bytes, *, db: int = 0) -> list[Pending]:
        """A consumer group's pending entries, by id."""
        value = self._value(key, db)
        found = value._groups.get(_bytes(group)) if value is not None and hasattr(value, "_groups") else None
        if found is None:
            return []
        now = int(self._now() * 1000)
        return [Pending(entry.encode(), pel.consumer_name, now - pel.time_read, pel.times_delivered)
                for entry, pel in sorted(found.pel.items())]

    def _value(self, key: str | bytes, db: int) -> Any:
        found = self._fake.dbs.get(db)  # not dbs[db]: that would make the database
        item = None if found is None else found._dict.get(_bytes(key))
        if item is None or (item.expireat is not None and item.expireat < self._now()):
            return None  # past its TTL: gone for a client, though Redis has not deleted it yet
        return item.value

    def now_ms(self) -> int:
        """Redis's clock in the run's virtual ms (what a view's times are in: an idle time subtracted from it)."""
        return int(round(self._now() * 1000)) - VIRTUAL_EPOCH_MS

    def _now(self) -> float:
        """Redis's clock, in seconds: what fakeredis reads (``time.time()``, virtual in a run) as Redis's process."""
        loop = events._get_running_loop()
        if not isinstance(loop, Loop):
            return time.time()
        running, loop.process = loop.process, self._process
        try:
            return time.time()
        finally:
            loop.process = running

    # --- connections --------------------------------------------------------------------------------------

    def _open(self) -> tuple[asyncio.StreamReader, _Writer]:
        """A new connection from the process running now: its two ends."""
        loop = events._get_running_loop()
        if not isinstance(loop, Loop):
            raise RuntimeError("dst.aio.stores.redis: a connection opens only in a simulated run")
        link = _Link(self, next(self._serials), loop.process)
        self._links[link.serial] = link
        return link.reader, _Writer(link)

    def _send(self, link: _Link, data: bytes) -> None:
        """What Redis sends the client of ``link`` while it runs a command: delivered when the command is over."""
        sent = self._outbox.get(link.serial)
        if sent is None:
            self._outbox[link.serial] = [data]
        else:
            sent.append(data)

    def _flush(self) -> None:
        """Hand each connection what Redis sent it, in the order the connections were opened (pub/sub's fan-out, in
        fakeredis's sets, would go in the order of their memory addresses)."""
        if not self._outbox:
            return
        outbox, self._outbox = self._outbox, {}
        for serial in sorted(outbox):
            link = self._links.get(serial)
            if link is not None:
                link.receive(b"".join(outbox[serial]))

    def _transmit(self, link: _Link, packet: list[Any]) -> None:
        """A write leaves the client: it reaches Redis after a store round trip of the process that sent it (the
        server's draws its latency from the seed, and whether the connection is reset at it; any other process's is
        a yield)."""
        loop = link.loop
        sender = loop.process
        loop.process = self._process
        try:
            if isinstance(sender, _HostServer):
                ms, rank, reset = sender.connection_trip()
                loop.call_after_ms(ms, rank, self._arrive, link, packet, reset)
            else:
                loop.call_soon(self._arrive, link, packet)
        finally:
            loop.process = sender

    def _arrive(self, link: _Link, packet: list[Any], reset: str = "") -> None:
        """A write reaches Redis; what came before it on the connection runs first (TCP keeps them in order). Reset
        (``reset``) at the round trip, the connection closes under its client, who reads the end of the stream:
        ``"before"`` the write reached Redis (it never runs), or ``"after"`` it ran (its reply goes with it)."""
        if reset == "before":
            link.reset()
            return
        packet[1] = True
        try:
            link.deliver()
        finally:
            if reset:
                link.reset()
            self._flush()

    def _after_command(self) -> None:
        """A command ran: the parked reads on what it wrote are tried again, in the order they blocked, until none
        can go on (one that goes on may write, and what its connection sent after it runs)."""
        fake = self._fake
        if not self._parked:
            fake.touched.clear()
            fake.woken = False
            return
        if self._serving:
            return  # the loop below sees what this command wrote
        self._serving = True
        try:
            while fake.touched or fake.woken:
                touched, woken = fake.touched, fake.woken
                fake.touched, fake.woken = set(), False
                for parked in list(self._parked):
                    if parked not in self._parked:
                        continue  # its connection went while another was served
                    sock = parked.sock
                    if not (parked.wants(touched) or (woken and sock._unblock_reason is not None)):
                        continue
                    if sock.try_again(parked):
                        self._unpark(parked)
        finally:
            self._serving = False

    def _park(self, parked: _Parked, timeout: float | None) -> None:
        self._parked.append(parked)
        link = parked.sock._link
        link.parked = parked
        if timeout:
            loop = link.loop
            running, loop.process = loop.process, self._process
            try:
                parked.timer = loop.call_later(timeout, self._time_out, parked)
            finally:
                loop.process = running

    def _unpark(self, parked: _Parked) -> None:
        self._parked.remove(parked)
        parked.sock._link.parked = None
        if parked.timer is not None:
            parked.timer.cancel()
        parked.sock.go_on()

    def _time_out(self, parked: _Parked) -> None:
        if parked not in self._parked:
            return
        try:
            parked.sock.time_out(parked)
            self._unpark(parked)
        finally:
            self._flush()

    def _drop(self, link: _Link) -> None:
        """A connection is gone: what it had parked never answers."""
        if self._links.get(link.serial) is link:
            del self._links[link.serial]
        parked = link.parked
        if parked is not None and parked in self._parked:
            self._parked.remove(parked)
            if parked.timer is not None:
                parked.timer.cancel()
        self._outbox.pop(link.serial, None)

    def _killed(self, link: _Link) -> None:
        """CLIENT KILL: Redis closes the connection (its client reads the end of the stream)."""
        link.reset()


def _bytes(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


# --- a connection's two ends -------------------------------------------------------------------------------

_OPEN, _CLOSING, _GONE = 0, 1, 2


class _Link:
    """One client connection: the stream its client reads, what it wrote on the way to Redis, and Redis's socket.
    It dies with the process that opened it (that process's ``on_crash``)."""

    __slots__ = ("server", "serial", "owner", "loop", "reader", "sock", "sent", "in_transit", "parked", "state",
                 "crash_list")

    def __init__(self, server: Server, serial: int, owner: Process) -> None:
        self.server = server
        self.serial = serial
        self.owner = owner
        loop = events._get_running_loop()
        assert isinstance(loop, Loop)
        self.loop = loop
        self.reader = asyncio.StreamReader(limit=2**16)  # asyncio.open_connection's, as redis-py's TCP connection has
        self.sock = _Socket(server._fake, server, self)
        self.sent: deque[list[Any]] = deque()  # [bytes, or None for the client's close; arrived at Redis]
        self.in_transit = 0
        self.parked: _Parked | None = None
        self.state = _OPEN
        self.crash_list: list[Any] | None = owner.on_crash
        owner.on_crash.append(self.die)

    def write(self, data: bytes) -> None:
        if self.state != _OPEN:
            return  # as over TCP: the write goes out, the answer is the reset (the client reads the stream's end)
        packet = [data, False]
        self.sent.append(packet)
        self.in_transit += 1
        self.server._transmit(self, packet)

    def deliver(self) -> None:
        """Redis runs what has reached it, in the order it was written."""
        sent = self.sent
        while sent and sent[0][1] and self.state != _GONE:
            data = sent.popleft()[0]
            if data is None:  # the client closed: Redis reads the end of the stream after the last command
                self._gone()
                return
            self.in_transit -= 1
            try:
                self.sock.sendall(data)
            except BaseException:
                self.reset()  # fakeredis failed: the connection closes under its client, and the run hears why
                raise

    def receive(self, data: bytes) -> None:
        """What Redis sent reaches the client's stream, in the client's process (whose task it wakes)."""
        if self.state == _GONE:
            return
        loop = self.loop
        running, loop.process = loop.process, self.owner
        try:
            self.reader.feed_data(data)
        finally:
            loop.process = running

    def close(self) -> None:
        """The client closes: what it wrote still reaches Redis, which then forgets the connection."""
        if self.state != _OPEN:
            return
        self.state = _CLOSING
        self._forget_crash()
        if self.sent:
            self.sent.append([None, True])
        else:
            self._gone()

    def reset(self) -> None:
        """Redis closes the connection (a restart, CLIENT KILL, a reset round trip): the client reads the end of its
        stream at once, and what it had not yet delivered is lost."""
        if self.state == _GONE:
            return
        loop = self.loop
        running, loop.process = loop.process, self.owner
        try:
            self.reader.feed_eof()
        finally:
            loop.process = running
        self._forget_crash()
        self._gone()

    def die(self) -> None:
        """The process that opened the connection died: nothing it sent and Redis had not yet run arrives, and what
        it had parked never answers."""
        self.crash_list = None  # the process is walking that list now
        self._gone()

    def _gone(self) -> None:
        self.state = _GONE
        self.sent.clear()
        self.in_transit = 0
        self.server._drop(self)
        self.sock.close()

    def _forget_crash(self) -> None:
        crash_list, self.crash_list = self.crash_list, None
        forget_crash(crash_list, self.die)


class _Writer:
    """The client's end, as redis-py writes to an ``asyncio.StreamWriter``: each drain sends what was written since
    the last one, one write (a command, or a pipeline's commands together)."""

    __slots__ = ("link", "buffer", "transport")

    def __init__(self, link: _Link) -> None:
        self.link = link
        self.buffer: list[bytes] = []
        self.transport = self  # redis-py asks the transport whether it is closing

    def write(self, data: bytes) -> None:
        if self.link.state == _OPEN:
            self.buffer.append(bytes(data))

    def writelines(self, data: Any) -> None:
        for chunk in data:
            self.write(chunk)

    async def drain(self) -> None:
        if self.buffer:
            data = b"".join(self.buffer)
            self.buffer.clear()
            self.link.write(data)

    def is_closing(self) -> bool:
        return self.link.state != _OPEN

    def close(self) -> None:
        self.link.close()

    async def wait_closed(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return (self.link.server.name, self.link.server.port)
        return default
