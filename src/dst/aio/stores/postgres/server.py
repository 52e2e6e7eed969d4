"""A PostgreSQL database of the simulated world: a real server's database, reached through connections whose every
exchange is a store round trip in virtual time, whose lock waits last in virtual time, and whose clients' processes,
and the database itself, can die.

**Settling.** After every exchange leaves, dst waits, in real time, until the server is settled: every backend that
owes its client a reply has either answered it whole (its ReadyForQuery, or what it owes of an exchange that ends in
a Flush) or waits for a lock that only a client's next message can free: held by a backend that waits for its client,
or by one so stuck itself (a deadlock, which dst breaks). Only then does the run go on, so which backend waits, in
which order the lock's queue serves them, and what a READ COMMITTED writer re-reads once its lock is granted are the
server's own, and the same at every run of the seed."""

from __future__ import annotations

import hashlib
import itertools
import select
import time
from asyncio import events
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Literal

from ....sandbox import VIRTUAL_EPOCH_MS, real, run_seed
from ...host import Server as _HostServer
from ...handles import Process
from ...loop import Loop
from . import embedded, wire
from ..servers import Servers
from .link import TIMEOUT_ERRORS, Link

Isolation = Literal["read committed", "repeatable read", "serializable"]
_ISOLATIONS = ("read committed", "repeatable read", "serializable")
_monotonic = real(time.monotonic)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_SETTLE_WITHIN = 60.0  # s of real time a statement may run in the server before dst gives up on it
_TRUST_CLIENT_READ = 2.0  # s of real time after which a backend waiting for its client has answered all it will

_SERVERS: Servers[Server] = Servers()
_registered = _SERVERS.find


class Server:
    """A PostgreSQL database beside the service, made by an adapter's ``build(env)``: a fresh copy, for this run, of
    a template holding ``schema`` (SQL run once per worker process) and what ``setup`` makes there (a callable given
    the template's DSN, run once per worker process: a migration tool's upgrade, say; it must close what it opens).
    ``setup_key``: what ``setup``'s result depends on (the migrations' head revision, the versions of the tools
    that run them); given, the template is made once per machine, kept in dst's cache folder (a ``pg_dump`` of it),
    and restored in every process after the first instead of running ``setup``.
    The service is configured with :attr:`dsn`;
    asyncpg connections (SQLAlchemy's ``postgresql+asyncpg``, Prefect's) to its host reach it through dst's links.

    ``isolation``: the database's default transaction isolation (None: PostgreSQL's, READ COMMITTED); a connection
    or a transaction may still ask for its own. :meth:`rows` reads for views (no round trip, committed data only);
    :meth:`restart` ends every connection and keeps what committed; :meth:`close` drops the database."""

    def __init__(self, name: str = "postgres", *, schema: str = "", setup: Callable[[str], None] | None = None,
                 setup_key: str | None = None, isolation: Isolation | None = None, port: int = 5432) -> None:
        if isolation is not None and isolation not in _ISOLATIONS:
            raise ValueError(f"dst.aio.stores.postgres.Server: isolation is one of {', '.join(_ISOLATIONS)}, "
                             f"not {isolation!r}")
        self.name = name
        self.port = port
        self.isolation = isolation
        self.postmaster = embedded.postmaster()
        try:  # asyncpg's own module, imported before the first run: installed() puts its statements in order
            import asyncpg.connection  # type: ignore[import-untyped]  # noqa: F401
        except ImportError:
            pass
        self.database = self.postmaster.database(schema, isolation, setup, setup_key)
        self._process = Process(name)  # the database's own: what reaches it runs there, whoever sent it
        self._links: dict[int, Link] = {}
        self._serials = itertools.count(1)
        self._xacts = itertools.count(1)
        self._reader: wire.Control | None = None
        self._roles = {"postgres"}
        self.events: list[tuple[int, str]] = []  # what dst saw the database do: lock waits, deadlocks broken
        self.statements = 0  # exchanges that reached the server
        self._settling = False
        _SERVERS.add(name, port, self)

    @property
    def dsn(self) -> str:
        """What the service is configured with: ``postgresql://postgres@<name>:<port>/<database>``."""
        return f"postgresql://postgres@{self.name}:{self.port}/{self.database}"

    # --- readers --------------------------------------------------------------------------------------------

    def rows(self, sql: str) -> list[tuple[str | None, ...]]:
        """The rows of ``sql`` as text, read now on dst's own connection (what has committed; no round trip)."""
        if self._reader is None:
            self._reader = wire.Control(self.postmaster.path, self.database)
        return self._reader.query(sql)

    # --- connections ----------------------------------------------------------------------------------------

    def _open(self, protocol_factory: Callable[[], Any]) -> tuple[Link, Any]:
        loop = events._get_running_loop()
        if not isinstance(loop, Loop):
            raise RuntimeError("dst.aio.stores.postgres: a connection opens only in a simulated run")
        protocol = protocol_factory()
        link = Link(self, next(self._serials), loop, loop.process, protocol)
        self._links[link.serial] = link
        protocol.connection_made(link)
        return link, protocol

    def _transmit(self, link: Link) -> None:
        """What the client wrote leaves: it reaches the server after a store round trip of the process that wrote it
        (the service's draws its latency from the seed, with the scenario's slow round trips; a client's is a yield)."""
        loop = link.loop
        sender = loop.process
        loop.process = self._process
        try:
            if isinstance(sender, _HostServer):
                ms, rank = sender.trip()
                loop.call_after_ms(ms, rank, self._arrive, link)
            else:
                loop.call_soon(self._arrive, link)
        finally:
            loop.process = sender

    def _arrive(self, link: Link) -> None:
        if link.state != 0 or link.sock is None:
            return
        prefix = b""
        if link.started and link.pid and not link.owed and not link.outbox.startswith(b"X"):
            prefix = self._clock(link)
        data = prefix + link.outgoing()
        if not data:
            return
        self.statements += 1
        link.sent_at = link.loop.now_ms
        self._send(link, data)
        self.settle()
        if link.closing_after and link.state == 0:
            link.abort()

    def _clock(self, link: Link) -> bytes:
        """The session's moments for the exchange about to run (see :mod:`.clock`): its statement's, and its
        transaction's (the moment one began: with this exchange, when none was open)."""
        now = _moment(link.loop.now_ms)
        if link.status == b"I":
            link.xact = next(self._xacts)
            link.clock_xact = now
        moments = (link.clock_xact, now)
        if link.status == b"T" and link.clock == moments and not link.timeouts_unread:
            return b""
        link.clock = moments
        sql = f"SELECT set_config('dst.xact', '{moments[0]}', false), set_config('dst.stmt', '{moments[1]}', false)"
        if link.timeouts_unread:  # read once, then again only when they may have changed
            link.timeouts_unread, link.timeouts_asked = False, True
            sql += ", current_setting('lock_timeout'), current_setting('statement_timeout')"
        return link.hide(sql)

    def _send(self, link: Link, data: bytes) -> None:
        sock = link.sock
        assert sock is not None
        view = memoryview(data)
        while view:
            try:
                sent = sock.send(view)
            except (BlockingIOError, InterruptedError):
                readable, _, _ = select.select([sock], [sock], [], 1.0)
                if readable:
                    link.pump()  # the server writes as it reads: take what it sent, so it can go on
                continue
            except OSError:
                link.eof = True
                link.owed.clear()
                return
            view = view[sent:]

    def _startup(self, packet: bytes) -> bytes:
        """The client's StartupMessage, for this database: its role made if missing, dst's clock on its path."""
        params = wire.startup_params(packet)
        params["database"] = self.database
        seed = run_seed()
        params["dst.seed"] = "" if seed is None else hashlib.sha256(f"dst.postgres:{seed}".encode()).hexdigest()[:16]
        role = params.get("user", "postgres")
        if role not in self._roles:
            exists = self.postmaster.control.query(f"SELECT 1 FROM pg_roles WHERE rolname = {wire.literal(role)}")
            if not exists:
                self.postmaster.control.query(f"CREATE ROLE \"{role.replace(chr(34), '')}\" SUPERUSER LOGIN")
            self._roles.add(role)
        if "search_path" in params:
            params["search_path"] = f"{embedded.SEARCH_PATH}, {params['search_path']}"
        return wire.startup(params)

    def _cancel_asked(self, pid: int, secret: int) -> None:
        """A client asked the server to cancel a backend's statement (asyncpg's timeout): dst waits for its answer."""
        for link in self._links.values():
            if link.pid == pid and link.waiting:
                link.cancelling = True

    def _end(self, link: Link, lost: bool | None) -> None:
        """A connection ends: its backend first (what it had not committed rolls back), then the link; the protocol
        hears of it unless its process is dead (``lost`` False)."""
        if link.state != 0:
            return
        if link.pid and not link.eof:
            self.postmaster.control.query(f"SELECT pg_terminate_backend({link.pid}, 10000)")
        link.shut()
        self._links.pop(link.serial, None)
        loop = link.loop
        if lost is None:
            running, loop.process = loop.process, link.owner
            try:
                loop.call_soon(link.lost, None)
            finally:
                loop.process = running
        if any(other.waiting for other in self._links.values()):
            running, loop.process = loop.process, self._process
            try:
                loop.call_soon(self.settle)  # its locks went with it: who waited for them goes on
            finally:
                loop.process = running

    def restart(self) -> None:
        """The database server restarts: every connection ends (its client reads the server's FATAL error, then the
        end of the stream), what had not committed rolls back, and what committed is kept."""
        self._process.epoch += 1  # what was on its way never arrives
        links = [self._links[serial] for serial in sorted(self._links)]
        for link in links:
            if link.pid and not link.eof:
                self.postmaster.control.query(f"SELECT pg_terminate_backend({link.pid}, 10000)")
        for link in links:
            deadline = _monotonic() + 10
            while not link.eof and _monotonic() < deadline:
                if link.sock is not None:
                    select.select([link.sock], [], [], 0.05)
                link.pump()
            link.owed.clear()
            link.eof = True
        for link in links:
            link.hand_over()

    def close(self) -> None:
        """The run is over: every connection ends and the database is dropped."""
        for serial in sorted(self._links):
            link = self._links[serial]
            link._forget_crash()
            link.shut()
        self._links.clear()
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        _SERVERS.remove(self.name, self.port, self)
        self.postmaster.drop(self.database)

    # --- settling --------------------------------------------------------------------------------------------

    def settle(self) -> None:
        """Wait, in real time, until every backend that owes a reply has answered or is stuck on a lock (breaking a
        deadlock when there is one); then hand the replies over, in the order the connections were opened."""
        if self._settling:
            return
        self._settling = True
        try:
            links = [self._links[serial] for serial in sorted(self._links)]
            stuck = self._wait([link for link in links if link.waiting])
            now = links[0].loop.now_ms if links else 0
            for link in links:
                if link in stuck:
                    if link.blocked_at < 0:
                        link.blocked_at = now
                        link.waits += 1
                        holders = ", ".join(sorted(stuck[link]))
                        self._note(link, f"{link.name} waits for a lock held by {holders}: {_short(link.text)}")
                        self._arm_timeout(link)
                elif link.blocked_at >= 0 and not link.waiting:
                    self._note(link, f"{link.name} got its lock after {now - link.blocked_at} ms")
                    link.blocked_at = -1
        finally:
            self._settling = False
        for link in links:
            if link.ready or link.eof:
                link.hand_over()

    def _wait(self, busy: list[Link]) -> dict[Link, list[str]]:
        """The links of ``busy`` still owed a reply once the server settled, each with who holds what it waits for."""
        deadline = _monotonic() + _SETTLE_WITHIN
        pause = 0.0005
        while True:
            for link in busy:
                link.pump()
            busy = [link for link in busy if link.waiting]
            if not busy:
                return {}
            socks = [link.sock for link in busy if link.sock is not None]
            readable, _, _ = select.select(socks, [], [], pause)
            if readable:
                continue
            stuck = self._stuck(busy, _monotonic() > deadline - _SETTLE_WITHIN + _TRUST_CLIENT_READ)
            if stuck is not None and len(stuck) == len(busy):
                victim = self._deadlock(stuck)
                if victim is None:
                    return {link: [b.name for b in holders] for link, holders in stuck.items()}
                continue
            if _monotonic() > deadline:
                names = ", ".join(f"{link.name} ({_short(link.text)})" for link in busy)
                raise RuntimeError(f"dst.aio.stores.postgres: the server did not answer within {_SETTLE_WITHIN:.0f} s "
                                   f"of real time: {names}")
            pause = min(pause * 2, 0.02)

    def _stuck(self, busy: list[Link], late: bool) -> dict[Link, list[Link]] | None:
        """Which of ``busy`` wait for a lock that only a client can free, each with the links holding it; None when
        one was found waiting for its client (its reply is whole: look again). The replies are counted by what the
        client sent (:mod:`.link`); a backend seen waiting for its client is taken at its word only when ``late``
        (its reply has not come for a while): just after an exchange is sent, the backend may not have read it yet,
        and after an exchange that ended in a Flush it shows the same wait."""
        pids = ",".join(str(link.pid) for link in busy if link.pid)
        if not pids:
            return {}
        rows = self.postmaster.control.query(
            f"SELECT pid, state, wait_event_type, wait_event, pg_blocking_pids(pid)::text FROM pg_stat_activity "
            f"WHERE pid IN ({pids})")
        by_pid = {link.pid: link for link in self._links.values() if link.pid}
        found: dict[Link, list[Link]] = {}
        again = False
        for pid, state, kind, event, blockers in rows:
            link = by_pid.get(int(pid or 0))
            if link is None or link not in busy:
                continue
            if late and kind == "Client" and event == "ClientRead" and state == "active":
                # Between two messages of an exchange, waiting for more than the client sent (what the count of
                # replies did not foresee): it sent all it had before it began to wait.
                link.pump()
                link.owed.clear()
                again = True
                continue
            if kind != "Lock" or link.cancelling or not blockers or blockers == "{}":
                continue
            holders = [by_pid.get(int(p)) for p in blockers.strip("{}").split(",")]
            if all(h is not None for h in holders):
                found[link] = [h for h in holders if h is not None]
        if again:
            return None
        # Stuck: every holder waits for its client, or is stuck itself (a cycle of such is a deadlock).
        changed = True
        while changed:
            changed = False
            for link in list(found):
                if any(h.waiting and h not in found for h in found[link]):
                    del found[link]
                    changed = True
        return found

    def _deadlock(self, stuck: dict[Link, list[Link]]) -> Link | None:
        """A cycle among the stuck: its youngest transaction (by dst's count) is cancelled, and answered as
        PostgreSQL answers a deadlock's victim. None when there is no cycle."""
        for start in sorted(stuck, key=lambda link: link.serial):
            path: list[Link] = []
            at: Link | None = start
            while at is not None and at not in path:
                path.append(at)
                at = next((h for h in sorted(stuck.get(at, ()), key=lambda h: h.serial) if h in stuck), None)
            if at is None:
                continue
            cycle = path[path.index(at):]
            victim = max(cycle, key=lambda link: link.xact)
            victim.cycle = [link.name for link in cycle]
            self._cancel(victim, "deadlock", f"deadlock among {', '.join(victim.cycle)}: {victim.name}'s "
                                             f"transaction, the youngest, is cancelled")
            return victim
        return None

    def _arm_timeout(self, link: Link) -> None:
        """A link began to wait for a lock: its session's lock_timeout (from now) or statement_timeout (from when
        its exchange arrived), whichever ends first, ends the wait in virtual time."""
        link.pump()  # what the server flushed before it began to wait (dst's reading of the timeouts) first
        lock, statement = link.timeouts
        ends = [(link.blocked_at + lock, "lock_timeout")] if lock else []
        if statement:
            ends.append((link.sent_at + statement, "statement_timeout"))
        if not ends:
            return
        at, why = min(ends)
        loop = link.loop
        running, loop.process = loop.process, self._process
        try:
            loop.call_later(max(0, at - loop.now_ms) / 1000, self._time_out, link, link.waits, why)
        finally:
            loop.process = running

    def _time_out(self, link: Link, wait: int, why: str) -> None:
        """A lock wait's timeout came in virtual time: its statement is cancelled, and answered as PostgreSQL
        answers that timeout."""
        if link.state != 0 or link.waits != wait or link.blocked_at < 0 or not link.waiting or link.cancelling:
            return  # it got its lock, or ended, first
        lock, statement = link.timeouts
        ms = lock if why == "lock_timeout" else statement
        self._cancel(link, why, f"{link.name}'s {why.replace('_', ' ')} ({ms} ms) ends its wait for a lock after "
                                f"{link.loop.now_ms - link.blocked_at} ms")
        link.blocked_at = -1
        self.settle()

    def _cancel(self, link: Link, why: str, note: str) -> None:
        """dst cancels the statement of ``link`` (``why``: a deadlock, a timeout), whose client will read the error
        PostgreSQL gives for that (:meth:`_cancelled_error`)."""
        link.cancelling = True
        link.cancelled_for = why
        self.postmaster.control.query(f"SELECT pg_cancel_backend({link.pid})")
        self._note(link, note)

    def _cancelled_error(self, link: Link, fields: dict[str, str]) -> dict[str, str]:
        """The error the client of ``link`` reads for the statement dst cancelled (``fields``: the cancel's)."""
        if link.cancelled_for in TIMEOUT_ERRORS:
            # A timeout: the cancel's error as it is (its context: the tuple or relation it waited for), named so.
            code, message = TIMEOUT_ERRORS[link.cancelled_for]
            return {**fields, "C": code, "M": message}
        cycle = link.cycle or [link.name]
        return {"S": "ERROR", "V": "ERROR", "C": "40P01", "M": "deadlock detected",
                "D": f"{' waits for '.join(cycle)} waits for {cycle[0]} (dst found the cycle and cancelled "
                     f"{link.name}'s statement)",
                "H": "See server log for query details."}

    def _failed(self, link: Link, fields: dict[str, str]) -> None:
        """The server answered a client's statement with an error: the trace says which, and why (and, when the
        statement was waiting for a lock, that the error, not the lock, ended its wait)."""
        waited = ""
        if link.blocked_at >= 0:
            waited = f" after waiting {link.loop.now_ms - link.blocked_at} ms for a lock"
            link.blocked_at = -1
        self._note(link, f"{link.name}{waited}: {fields.get('C', '')} {fields.get('M', '')}: {_short(link.text)}",
                   "failed")

    def _note(self, link: Link, text: str, kind: str = "lock") -> None:
        at = link.loop.now_ms
        self.events.append((at, text))
        trace = getattr(link.owner, "trace", None)
        if trace is not None:
            trace.append((at, self.name, kind, text))


def _moment(now_ms: int) -> str:
    """The database's wall clock at ``now_ms`` (virtual), as PostgreSQL reads a timestamptz: never a client's skew."""
    ms = VIRTUAL_EPOCH_MS + now_ms
    at = _EPOCH + timedelta(milliseconds=ms)
    return f"{at:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d}+00"


def _short(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit - 3] + "..."
