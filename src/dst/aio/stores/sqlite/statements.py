"""The statements of one sqlite3 connection, run on the loop's thread in virtual time: one store round trip
each, in the order they were issued; a lock held elsewhere waited out in virtual time; the connection closed
when the server process crashes."""

from __future__ import annotations

import asyncio
import sqlite3
import weakref
from asyncio import events
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from ... import on_crash, round_trip
from ...loop import Loop
from . import clock
from .locks import _COMMIT, _NONE, _READ, _WRITE, _is_busy, _split

T = TypeVar("T")


class _Statements:
    """A sqlite3 connection whose statements run in the loop: the part of :class:`~dst.aio.stores.sqlite.Connection`
    below aiosqlite's API."""

    def __init__(self, database: str | bytes | Path, kwargs: dict[str, Any]) -> None:
        timeout = kwargs.pop("timeout", 5.0)
        self._timeout_ms = max(0, round(float(timeout) * 1000))  # how long a statement waits for a lock (virtual)
        self._database = (database.decode("utf-8") if isinstance(database, bytes) else str(database))
        self._kwargs = kwargs
        self._running = True
        self._connection: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()  # the statements of one connection run in the order they were issued
        self._state = _NONE  # the lock this connection holds in its transaction: _NONE, _READ or _WRITE
        self._cursors: weakref.WeakValueDictionary[int, sqlite3.Cursor] = weakref.WeakValueDictionary()
        self._made = 0  # cursors made (their keys: closed in the order they were made)
        self._crash_list: list[Callable[[], None]] | None = None
        self._clock = clock._wall_ms

    # --- opening and closing ---------------------------------------------------------------------------

    def _open(self) -> None:
        loop = events._get_running_loop()
        if not isinstance(loop, Loop):
            raise RuntimeError("dst.aio.stores.sqlite: a connection opens only in a simulated run (a dst loop is running)")
        # timeout=0: a lock held elsewhere fails at once, and the wait happens in virtual time (_retrying).
        conn = sqlite3.connect(self._database, timeout=0, **self._kwargs)
        clock._Clock(self._clock, clock._the_reference()).install(conn)
        self._connection = conn
        on_crash(self._die)
        self._crash_list = loop.process.on_crash

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
