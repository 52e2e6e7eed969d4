"""aiosqlite, run in the simulation's loop: a drop-in that runs every statement on the loop's own thread.

**What is replaced.** ``aiosqlite.connect`` (and ``aiosqlite.core.connect``), ``aiosqlite.Connection`` and
``aiosqlite.Cursor``, while :class:`installed` is active. The service's code, and SQLAlchemy's
``sqlite+aiosqlite://`` dialect, which holds the ``aiosqlite`` module object and looks ``connect`` up on it at
every new connection, get this module's :class:`Connection` instead of aiosqlite's.

**Why.** aiosqlite runs each connection on a real thread and hands results back with
``call_soon_threadsafe``: real concurrency, outside virtual time, which dst's loop refuses. Here nothing
runs on another thread: each statement is plain :mod:`sqlite3` on the loop's thread, so its outcome and the
order of statements follow from the seed alone.

**How.**

* **One store round trip per statement.** ``execute``, ``executemany``, ``executescript``,
  ``execute_fetchall``, ``execute_insert``, ``commit`` and ``rollback`` first ``await dst.aio.round_trip()``
  (on the server: a latency drawn from the seed, plus the scenario's slow-store faults), then run at once.
  Fetching from a cursor that has run is free. The statements of one connection run one at a time in the
  order they were issued (aiosqlite's queue to its thread is FIFO); those of different connections
  interleave, so the transactions of different requests really do.
* **Locks wait in virtual time.** sqlite3 connections are opened with ``timeout=0``, so a statement that
  finds the database locked fails at once; where SQLite's busy handler would have waited, the statement
  waits one more round trip and tries again, until the connection's ``timeout`` (default 5 s) of virtual
  time has passed, then raises sqlite's own ``OperationalError('database is locked')``. Where SQLite would
  *not* call its busy handler (a connection that holds a read transaction asks to write: SQLite fails it at
  once rather than deadlock), it fails at once here too; a small per-connection tracker of the lock it holds
  (none, read, write) stands in for SQLite's, which Python does not expose.
* **SQLite's clock is virtual.** ``julianday``, ``date``, ``time``, ``datetime``, ``strftime``,
  ``unixepoch`` (and ``timediff`` where SQLite has it) are overridden on every connection by deterministic
  functions that put the virtual wall clock in place of ``'now'`` and hand the call to SQLite's own
  implementation (a private in-memory connection). ``CURRENT_TIMESTAMP``, ``CURRENT_DATE`` and
  ``CURRENT_TIME`` are, to SQLite, calls of functions of those names, so they are overridden the same way;
  that covers them in column defaults and triggers too, which a rewrite of the SQL text could not reach.
* **A crash closes.** Every connection registers :func:`dst.aio.on_crash`: when the server process dies,
  its sqlite3 connection is closed (its cursors first: SQLite keeps the locks of a closed connection while
  any of its statements lives), so SQLite rolls back what had not committed, as when a process dies;
  what committed stays in the file for the restarted server.
* **Outside a simulated run** (no dst loop running), ``connect`` hands over to the real aiosqlite, so the
  service still runs under plain asyncio while :class:`installed` is active.
"""

from __future__ import annotations

import asyncio
import collections.abc
import re
import sqlite3
import time
import weakref
from asyncio import events
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Generator, Iterable, TypeVar

from . import on_crash, round_trip
from .loop import Loop

__all__ = ["connect", "Connection", "Cursor", "installed"]

T = TypeVar("T")
WallMs = Callable[[], int]


def _system_wall_ms() -> int:
    # Read at each call: dst's sandbox patches time.time during a simulated run (round: ms/1000*1000 may not be whole).
    return round(time.time() * 1000)


_wall_ms: WallMs = _system_wall_ms  # the clock of the connections opened now (installed() sets it)


# --- what a statement locks -------------------------------------------------------------------------------

# The lock a statement takes, as far as the busy handler cares: none (BEGIN DEFERRED, SELECT 1), SQLite's read
# lock, its write lock, or a COMMIT (which may wait for readers to leave whatever the connection held).
_NONE, _READ, _WRITE, _COMMIT = 0, 1, 2, 3
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`(?:[^`]|``)*`|\[[^\]]*\]|--[^\n]*|/\*.*?(?:\*/|\Z)", re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9$]*")
_WRITES = frozenset(("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER", "REINDEX", "ANALYZE",
                     "VACUUM"))
_KINDS: dict[str, int] = {}  # SQL text -> its kind (apps issue few distinct texts; cleared if one keeps making new ones)
_CACHE_MAX = 4096


def _kind(sql: str) -> int:
    kind = _KINDS.get(sql)
    if kind is None:
        kind = _classify(sql)
        if len(_KINDS) >= _CACHE_MAX:
            _KINDS.clear()
        _KINDS[sql] = kind
    return kind


def _classify(sql: str) -> int:
    bare = _QUOTED.sub(" ", sql)  # literals, quoted names and comments say nothing of what the statement locks
    words = [w.upper() for w in _WORD.findall(bare)]
    if not words:
        return _NONE
    first = words[0]
    if first == "BEGIN":
        return _WRITE if len(words) > 1 and words[1] in ("IMMEDIATE", "EXCLUSIVE") else _NONE
    if first in ("COMMIT", "END", "RELEASE"):
        return _COMMIT
    if first in ("ROLLBACK", "SAVEPOINT", "ATTACH", "DETACH"):
        return _NONE
    if first == "WITH" and any(w in ("INSERT", "UPDATE", "DELETE") or (w == "REPLACE" and nxt == "INTO")
                               for w, nxt in zip(words, words[1:] + [""])):
        return _WRITE
    if first in ("SELECT", "VALUES", "WITH"):
        return _READ if "FROM" in words else _NONE  # SELECT 1 reads no table: it takes no lock
    if first == "PRAGMA":
        return _WRITE if "=" in bare else _READ
    return _WRITE if first in _WRITES else _READ


def _is_busy(error: sqlite3.OperationalError) -> bool:
    """The database is locked (SQLITE_BUSY), and waiting may help (not BUSY_SNAPSHOT: a stale WAL snapshot
    never gets fresh by waiting, so SQLite does not wait for it either)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:
        return "database is locked" in str(error)
    return code & 0xFF == 5 and code != 517  # SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT


def _split(script: str) -> tuple[tuple[str, int], ...]:
    """The statements of a script with their kinds (cached): each waits for a lock on its own, as in SQLite."""
    statements = _SCRIPTS.get(script)
    if statements is None:
        found: list[tuple[str, int]] = []
        start = 0
        end = script.find(";")
        while end >= 0:
            text = script[start:end + 1]
            if sqlite3.complete_statement(text):  # not a ';' inside a literal, a comment or a trigger's body
                if _WORD.search(_QUOTED.sub(" ", text)):
                    found.append((text, _kind(text)))
                start = end + 1
            end = script.find(";", end + 1)
        rest = script[start:]
        if _WORD.search(_QUOTED.sub(" ", rest)):
            found.append((rest, _kind(rest)))
        statements = tuple(found)
        if len(_SCRIPTS) >= 256:
            _SCRIPTS.clear()
        _SCRIPTS[script] = statements
    return statements


_SCRIPTS: dict[str, tuple[tuple[str, int], ...]] = {}


# --- SQLite's clock --------------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# name -> the positions of its time values ('now' counts there only, as in SQLite).
_DATE_FUNCTIONS: dict[str, tuple[int, ...]] = {
    "julianday": (0,), "date": (0,), "time": (0,), "datetime": (0,), "unixepoch": (0,), "strftime": (1,),
    "timediff": (0, 1)}


class _Reference:
    """SQLite's own date functions, on a private in-memory connection: the overrides hand every call to them,
    with the virtual time written in place of 'now'."""

    def __init__(self) -> None:
        # check_same_thread off: one per process, and each call is a single synchronous query.
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.names = tuple(name for name in _DATE_FUNCTIONS if self._has(name))
        self.sql: dict[tuple[str, int], str] = {}
        # How to write 'now' so the modifiers treat it as this SQLite treats 'now': newer ones know 'now' is UTC
        # (the 'utc' modifier leaves it as it is), as they know a time written with 'Z' is; older ones take it as a
        # time without a zone. Compared in one statement: the outcome does not depend on the
        # time it reads, only on the time zone (and where that is UTC, the two ways agree).
        real, plain, zulu = self.conn.execute(
            "SELECT datetime('now', 'utc'), datetime(strftime('%Y-%m-%d %H:%M:%f', 'now'), 'utc'), "
            "datetime(strftime('%Y-%m-%d %H:%M:%fZ', 'now'), 'utc')").fetchone()
        self.zone = "Z" if real != plain and real == zulu else ""

    def _has(self, name: str) -> bool:
        try:
            self.conn.execute(f"SELECT {name}(?, ?)", ("%Y" if name == "strftime" else "2000-01-01", "2000-01-01"))
        except sqlite3.OperationalError:  # an older SQLite than the function (timediff is 3.43's)
            return False
        return True

    def call(self, name: str, args: tuple[Any, ...]) -> Any:
        key = (name, len(args))
        sql = self.sql.get(key)
        if sql is None:
            sql = self.sql[key] = f"SELECT {name}({', '.join('?' * len(args))})"
        return self.conn.execute(sql, args).fetchone()[0]


_reference: _Reference | None = None


def _the_reference() -> _Reference:
    global _reference
    if _reference is None:
        _reference = _Reference()
    return _reference


class _Clock:
    """The virtual wall clock as SQLite reads 'now': 'YYYY-MM-DD HH:MM:SS.SSS' (milliseconds, as SQLite's own)."""

    __slots__ = ("wall_ms", "reference", "ms", "text")

    def __init__(self, wall_ms: WallMs, reference: _Reference) -> None:
        self.wall_ms = wall_ms
        self.reference = reference
        self.ms: int | None = None
        self.text = ""

    def now(self) -> str:
        ms = int(self.wall_ms())
        if ms != self.ms:
            moment = _EPOCH + timedelta(milliseconds=ms)
            self.ms, self.text = ms, f"{moment:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d}{self.reference.zone}"
        return self.text

    def function(self, name: str, positions: tuple[int, ...]) -> Callable[..., Any]:
        call = self.reference.call
        now = self.now
        leading = 1 if name == "strftime" else 0  # strftime(format) alone, like date() alone, means 'now'

        def dated(*args: Any) -> Any:
            n = len(args)
            if n == leading and (n > 0 or name != "timediff"):
                args = args + (now(),)
            else:
                for i in positions:
                    if i < n:
                        value = args[i]
                        if value.__class__ is str and len(value) == 3 and value.lower() == "now":
                            args = args[:i] + (now(),) + args[i + 1:]
            return call(name, args)

        return dated

    def install(self, conn: sqlite3.Connection) -> None:
        for name in self.reference.names:
            # deterministic: SQLite allows the built-ins it overrides in indexes and generated columns. The same
            # number of arguments as the built-in (timediff takes two), so a wrong call fails as it does there.
            conn.create_function(name, 2 if name == "timediff" else -1, self.function(name, _DATE_FUNCTIONS[name]),
                                 deterministic=True)
        now = self.now
        conn.create_function("current_timestamp", 0, lambda: now()[:19], deterministic=True)
        conn.create_function("current_date", 0, lambda: now()[:10], deterministic=True)
        conn.create_function("current_time", 0, lambda: now()[11:19], deterministic=True)


# --- the drop-in ------------------------------------------------------------------------------------------


class _Result(collections.abc.Coroutine[Any, Any, T], AbstractAsyncContextManager[T]):
    """What aiosqlite's methods return: awaitable (a coroutine, so ``create_task`` takes it), and an async context
    manager that closes the cursor it gave."""

    __slots__ = ("_coro", "_obj")

    def __init__(self, coro: collections.abc.Coroutine[Any, Any, T]) -> None:
        self._coro = coro

    def send(self, value: Any) -> Any:
        return self._coro.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        if val is None:
            return self._coro.throw(typ)
        if tb is None:
            return self._coro.throw(typ, val)
        return self._coro.throw(typ, val, tb)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        return self._coro.__await__()

    async def __aenter__(self) -> T:
        self._obj = await self._coro
        return self._obj

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if isinstance(self._obj, Cursor):
            await self._obj.close()


class _NoThread:
    """aiosqlite's worker thread, as SQLAlchemy sees it (it sets ``daemon`` on it): none runs here."""

    __slots__ = ("daemon",)

    def __init__(self) -> None:
        self.daemon = True

    def is_alive(self) -> bool:
        return False


class _Queue:
    """aiosqlite's queue to its thread, which SQLAlchemy's isolation-level setter writes to directly: the call
    runs at once (it only sets an attribute of the sqlite3 connection)."""

    __slots__ = ()

    def put_nowait(self, item: tuple[asyncio.Future[Any] | None, Callable[[], Any]]) -> None:
        future, function = item
        try:
            result = function()
        except Exception as e:  # noqa: BLE001 - handed to whoever awaits the future, as aiosqlite's thread does
            if future is not None and not future.done():
                future.set_exception(e)
        else:
            if future is not None and not future.done():
                future.set_result(result)


class Connection:
    """aiosqlite's ``Connection``, its statements run in the loop (one store round trip each)."""

    def __init__(self, database: str | bytes | Path, iter_chunk_size: int, kwargs: dict[str, Any]) -> None:
        timeout = kwargs.pop("timeout", 5.0)
        self._timeout_ms = max(0, round(float(timeout) * 1000))  # how long a statement waits for a lock (virtual)
        self._database = (database.decode("utf-8") if isinstance(database, bytes) else str(database))
        self._kwargs = kwargs
        self._iter_chunk_size = iter_chunk_size
        self._running = True
        self._connection: sqlite3.Connection | None = None
        self._tx = _Queue()
        self._thread = _NoThread()
        self._lock = asyncio.Lock()  # the statements of one connection run in the order they were issued
        self._state = _NONE  # the lock this connection holds in its transaction: _NONE, _READ or _WRITE
        self._cursors: weakref.WeakValueDictionary[int, sqlite3.Cursor] = weakref.WeakValueDictionary()
        self._made = 0  # cursors made (their keys: closed in the order they were made)
        self._crash_list: list[Callable[[], None]] | None = None
        self._clock = _wall_ms

    # --- opening and closing ---------------------------------------------------------------------------

    def _open(self) -> None:
        loop = events._get_running_loop()
        if not isinstance(loop, Loop):
            raise RuntimeError("dst.aio.sqlite: a connection opens only in a simulated run (a dst loop is running)")
        # timeout=0: a lock held elsewhere fails at once, and the wait happens in virtual time (_retrying).
        conn = sqlite3.connect(self._database, timeout=0, **self._kwargs)
        _Clock(self._clock, _the_reference()).install(conn)
        self._connection = conn
        on_crash(self._die)
        self._crash_list = loop.process.on_crash

    async def _connect(self) -> Connection:
        if not self._running:
            raise ValueError("Connection closed")
        if self._connection is None:
            self._open()
        return self

    def __await__(self) -> Generator[Any, None, Connection]:
        return self._connect().__await__()

    async def __aenter__(self) -> Connection:
        return await self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def _shutdown(self) -> None:
        self._running = False
        conn, self._connection = self._connection, None
        if conn is None:
            return
        # Cursors first: SQLite keeps a closed connection's locks (and its transaction) while a statement of it lives.
        for cursor in list(self._cursors.values()):
            _close(cursor)
        self._cursors.clear()
        conn.close()  # what had not committed rolls back

    def _die(self) -> None:
        """The process died: close, and SQLite rolls back what had not committed."""
        self._crash_list = None  # the server is walking that list now: leave it as it is
        self._shutdown()

    def _forget_crash(self) -> None:
        crash_list, self._crash_list = self._crash_list, None
        if crash_list is not None:
            try:
                crash_list.remove(self._die)
            except ValueError:
                pass

    async def close(self) -> None:
        """Close, after the statements issued before (aiosqlite's order); what had not committed rolls back."""
        if self._connection is None:
            return
        async with self._lock:
            self._forget_crash()
            self._shutdown()

    def stop(self) -> asyncio.Future[Any] | None:
        """Close at once (aiosqlite's way to stop its thread, which SQLAlchemy's terminate calls)."""
        self._forget_crash()
        self._shutdown()
        return None

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            raise ValueError("no active connection")
        return self._connection

    # --- statements ----------------------------------------------------------------------------------------

    def _cursor(self) -> sqlite3.Cursor:
        cursor = self._conn.cursor()
        self._made += 1
        self._cursors[self._made] = cursor
        return cursor

    async def _statement(self, kind: int, fn: Callable[..., T], *args: Any) -> T:
        """One store round trip, then ``fn(*args)`` (waiting out locks in virtual time)."""
        if not self._running or self._connection is None:
            raise ValueError("Connection closed")
        async with self._lock:
            await round_trip()
            result = await self._retrying(kind, fn, *args)
            if args and args[0].__class__ is str and "busy_timeout" in args[0]:
                self._virtual_busy_timeout()
            return result

    def _virtual_busy_timeout(self) -> None:
        """``PRAGMA busy_timeout = N`` (SQLAlchemy's and Prefect's setup set one) would make SQLite's own busy
        handler sleep for real: take N as this connection's virtual wait, and put SQLite's back to 0."""
        conn = self._conn
        (ms,) = conn.execute("PRAGMA busy_timeout").fetchone()
        if ms:
            self._timeout_ms = int(ms)
            conn.execute("PRAGMA busy_timeout = 0")

    async def _retrying(self, kind: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` now; if the database is locked where SQLite's busy handler would wait, wait a round trip
        and try again, for up to ``timeout`` of virtual time."""
        deadline = -1
        while True:
            conn = self._conn
            if not conn.in_transaction:
                self._state = _NONE
            held = self._state
            changes = conn.total_changes
            try:
                result = fn(*args)
            except sqlite3.IntegrityError:
                if kind <= _WRITE and kind > held and conn.in_transaction:
                    self._state = kind  # a constraint fails after the statement took its lock, which the transaction keeps
                raise
            except sqlite3.OperationalError as e:
                # SQLite does not wait when a connection in a read transaction asks for more (it could deadlock),
                # nor after part of an executemany had applied (trying again would apply it twice).
                if not _is_busy(e) or (held == _READ and kind != _COMMIT) or conn.total_changes != changes:
                    raise
                loop = asyncio.get_running_loop()
                assert isinstance(loop, Loop)
                now = loop.now_ms
                if deadline < 0:
                    deadline = now + self._timeout_ms
                if now >= deadline:
                    raise
                await round_trip()
                if loop.now_ms == now:  # a plain yield (the root process's round trip): wait as SQLite's first sleep
                    await asyncio.sleep(0.001)
                continue
            if conn.in_transaction:
                if kind <= _WRITE and kind > held:
                    self._state = kind
            else:
                self._state = _NONE
            return result

    @staticmethod
    def _params(parameters: Any) -> Any:
        return [] if parameters is None else parameters

    async def _run_cursor(self, sql: str, parameters: Any) -> Cursor:
        cursor = self._cursor()
        await self._statement(_kind(sql), cursor.execute, sql, self._params(parameters))
        return Cursor(self, cursor)

    def cursor(self) -> _Result[Cursor]:
        """A cursor (free: it runs nothing)."""
        return _Result(self._new_cursor())

    async def _new_cursor(self) -> Cursor:
        return Cursor(self, self._cursor())

    def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> _Result[Cursor]:
        """Run one statement on a new cursor."""
        return _Result(self._run_cursor(sql, parameters))

    def execute_insert(self, sql: str, parameters: Iterable[Any] | None = None) -> _Result[Any]:
        """Run an insert and return the row of its ``last_insert_rowid()``."""
        return _Result(self._insert(sql, parameters))

    async def _insert(self, sql: str, parameters: Iterable[Any] | None) -> Any:
        cursor = self._cursor()

        def insert() -> Any:
            cursor.execute(sql, self._params(parameters))
            cursor.execute("SELECT last_insert_rowid()")
            return cursor.fetchone()

        try:
            return await self._statement(_kind(sql), insert)
        finally:
            _close(cursor)

    def execute_fetchall(self, sql: str, parameters: Iterable[Any] | None = None) -> _Result[Iterable[Any]]:
        """Run a query and return all its rows."""
        return _Result(self._fetchall(sql, parameters))

    async def _fetchall(self, sql: str, parameters: Iterable[Any] | None) -> list[Any]:
        cursor = self._cursor()

        def fetchall() -> list[Any]:
            cursor.execute(sql, self._params(parameters))
            return cursor.fetchall()

        try:
            return await self._statement(_kind(sql), fetchall)
        finally:
            _close(cursor)

    def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> _Result[Cursor]:
        """Run one statement for each set of parameters (one round trip for all)."""
        return _Result(self._run_many(sql, parameters))

    async def _run_many(self, sql: str, parameters: Iterable[Any]) -> Cursor:
        cursor = self._cursor()
        await self._statement(_kind(sql), cursor.executemany, sql, _replayable(parameters))
        return Cursor(self, cursor)

    def executescript(self, sql_script: str) -> _Result[Cursor]:
        """Run a script (one round trip for all of it)."""
        return _Result(self._run_script(sql_script))

    async def _run_script(self, script: str) -> Cursor:
        cursor = self._cursor()
        await self._script(cursor, script)
        return Cursor(self, cursor)

    async def _script(self, cursor: sqlite3.Cursor, script: str) -> None:
        """sqlite3's executescript, a statement at a time, so each waits for its lock on its own as SQLite's busy
        handler would (the whole script again would run its first statements twice)."""
        if not isinstance(script, str):
            raise TypeError("script argument must be unicode.")
        if not self._running or self._connection is None:
            raise ValueError("Connection closed")
        statements = _split(script)
        async with self._lock:
            await round_trip()
            conn = self._conn
            legacy = getattr(conn, "autocommit", -1) == -1  # Python < 3.12, or autocommit=LEGACY_TRANSACTION_CONTROL
            if legacy and conn.in_transaction:
                await self._retrying(_COMMIT, conn.commit)  # executescript commits first
            level = conn.isolation_level
            if legacy:
                conn.isolation_level = None  # the script's statements as written: no implicit BEGIN before them
            try:
                for text, kind in statements:
                    await self._retrying(kind, _run_all, cursor, text)
            finally:
                if legacy and self._connection is conn:
                    conn.isolation_level = level

    async def commit(self) -> None:
        """Commit the transaction."""
        await self._statement(_COMMIT, self._commit)

    def _commit(self) -> None:
        self._conn.commit()

    async def rollback(self) -> None:
        """Roll the transaction back."""
        await self._statement(_NONE, self._rollback)

    def _rollback(self) -> None:
        self._conn.rollback()

    async def _execute(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """aiosqlite's internal "run this on the connection's thread", which some libraries call: a statement."""
        kind = _kind(args[0]) if args and isinstance(args[0], str) else _READ
        return await self._statement(kind, partial(fn, *args, **kwargs))

    # --- the rest of aiosqlite's API ----------------------------------------------------------------------

    async def interrupt(self) -> None:
        self._conn.interrupt()

    async def create_function(self, name: str, num_params: int, func: Callable[..., Any],
                              deterministic: bool = False) -> None:
        self._conn.create_function(name, num_params, func, deterministic=deterministic)

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: str | None) -> None:
        conn: Any = self._conn  # typeshed allows only the three levels' names; sqlite3 takes any case of them
        conn.isolation_level = value

    @property
    def row_factory(self) -> Any:
        return self._conn.row_factory

    @row_factory.setter
    def row_factory(self, factory: Any) -> None:
        self._conn.row_factory = factory

    @property
    def text_factory(self) -> Any:
        return self._conn.text_factory

    @text_factory.setter
    def text_factory(self, factory: Any) -> None:
        self._conn.text_factory = factory

    @property
    def total_changes(self) -> int:
        return self._conn.total_changes

    async def enable_load_extension(self, value: bool) -> None:
        self._conn.enable_load_extension(value)

    async def load_extension(self, path: str) -> None:
        self._conn.load_extension(path)

    async def set_progress_handler(self, handler: Callable[[], int | None], n: int) -> None:
        self._conn.set_progress_handler(handler, n)

    async def set_trace_callback(self, handler: Callable[[str], object] | None) -> None:
        self._conn.set_trace_callback(handler)

    async def set_authorizer(self, authorizer_callback: Callable[[int, str | None, str | None, str | None,
                                                                  str | None], int] | None) -> None:
        self._conn.set_authorizer(authorizer_callback)

    async def iterdump(self) -> AsyncIterator[str]:
        """The database as SQL text, line by line (one round trip: it is read at once)."""
        lines = await self._statement(_READ, self._dump)
        for line in lines:
            yield line

    def _dump(self) -> list[str]:
        return list(self._conn.iterdump())

    async def backup(self, target: Any, *, pages: int = 0,
                     progress: Callable[[int, int, int], object] | None = None, name: str = "main",
                     sleep: float = 0.250) -> None:
        """Copy the database into ``target`` (a connection of this module, of aiosqlite, or of sqlite3). Where
        sqlite3 would sleep ``sleep`` seconds for a lock, this waits in virtual time and starts over."""
        destination = target if isinstance(target, sqlite3.Connection) else target._conn

        def step(status: int, remaining: int, total: int) -> None:
            if progress is not None:
                progress(status, remaining, total)
            if status in (5, 6):  # SQLITE_BUSY, SQLITE_LOCKED: never sleep in real time
                raise sqlite3.OperationalError("database is locked")

        def copy() -> None:
            self._conn.backup(destination, pages=pages, progress=step, name=name, sleep=0)

        await self._statement(_READ, copy)


def _close(cursor: sqlite3.Cursor) -> None:
    try:
        cursor.close()
    except sqlite3.ProgrammingError:  # its connection closed first (and closed it)
        pass


def _run_all(cursor: sqlite3.Cursor, text: str) -> None:
    cursor.execute(text)
    if cursor.description is not None:
        cursor.fetchall()  # a script's SELECT runs to its end: its read lock goes with it


def _replayable(parameters: Iterable[Any]) -> Iterable[Any]:
    # An iterator is read once: kept as a list, so a statement that waited for a lock can run with it again.
    return parameters if isinstance(parameters, (list, tuple)) else list(parameters)


class Cursor:
    """aiosqlite's ``Cursor``: ``execute`` is a store round trip; fetching what ran is free."""

    def __init__(self, conn: Connection, cursor: sqlite3.Cursor) -> None:
        self.iter_chunk_size = conn._iter_chunk_size
        self._conn = conn
        self._cursor = cursor

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._fetch_chunked()

    async def _fetch_chunked(self) -> AsyncIterator[Any]:
        while True:
            rows = self._open().fetchmany(self.iter_chunk_size)
            if not rows:
                return
            for row in rows:
                yield row

    async def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> Cursor:
        await self._conn._statement(_kind(sql), self._cursor.execute, sql, [] if parameters is None else parameters)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> Cursor:
        await self._conn._statement(_kind(sql), self._cursor.executemany, sql, _replayable(parameters))
        return self

    async def executescript(self, sql_script: str) -> Cursor:
        await self._conn._script(self._cursor, sql_script)
        return self

    def _open(self) -> sqlite3.Cursor:
        if not self._conn._running:
            raise ValueError("Connection closed")  # what aiosqlite raises for any call after its close
        return self._cursor

    async def fetchone(self) -> Any:
        return self._open().fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._open().fetchmany() if size is None else self._open().fetchmany(size)

    async def fetchall(self) -> list[Any]:
        return self._open().fetchall()

    async def close(self) -> None:
        self._open().close()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def row_factory(self) -> Any:
        return self._cursor.row_factory

    @row_factory.setter
    def row_factory(self, factory: Any) -> None:
        self._cursor.row_factory = factory

    @property
    def connection(self) -> sqlite3.Connection:
        return self._cursor.connection

    async def __aenter__(self) -> Cursor:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


def connect(database: str | bytes | Path, *, iter_chunk_size: int = 64, loop: Any = None,
            **kwargs: Any) -> Any:
    """aiosqlite's ``connect``: in a simulated run, a :class:`Connection` of this module (await it, or use it
    with ``async with``); anywhere else, the real aiosqlite's."""
    if isinstance(events._get_running_loop(), Loop):
        return Connection(database, iter_chunk_size, kwargs)
    _aiosqlite()
    if _real_connect is None:
        raise RuntimeError("dst.aio.sqlite.connect: not in a simulated run, and aiosqlite is not installed to run it")
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
    ``import aiosqlite``, SQLAlchemy's dialect) opens this module's connections, whose SQLite reads ``'now'``
    from ``wall_ms`` (epoch milliseconds; by default ``time.time()``, which dst's sandbox makes virtual).
    Everything is put back on exit, also when the body raised. Without aiosqlite installed, it patches nothing.

    Names bound before (``from aiosqlite import connect``) keep the real one: import the module instead."""

    __slots__ = ("_wall_ms", "_previous", "_saved")

    def __init__(self, wall_ms: WallMs | None = None) -> None:
        self._wall_ms = _system_wall_ms if wall_ms is None else wall_ms
        self._previous: WallMs = _system_wall_ms
        self._saved: tuple[Any, Any, Any, Any] | None = None

    def __enter__(self) -> installed:
        global _wall_ms
        self._previous, _wall_ms = _wall_ms, self._wall_ms
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
        global _wall_ms
        _wall_ms = self._previous
        saved, self._saved = self._saved, None
        if saved is not None:
            module = _module
            module.connect, module.Connection, module.Cursor, module.core.connect = saved
