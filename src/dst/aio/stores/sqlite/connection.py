"""aiosqlite's API over the statements of :mod:`.statements`: ``Connection`` and ``Cursor``, and what their
methods return (awaitable, and an async context manager)."""

from __future__ import annotations

import asyncio
import collections.abc
import sqlite3
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Generator, Iterable, TypeVar

from .locks import _COMMIT, _NONE, _READ, _kind
from .statements import _close, _replayable, _Statements

T = TypeVar("T")


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


class Connection(_Statements):
    """aiosqlite's ``Connection``, its statements run in the loop (one store round trip each)."""

    def __init__(self, database: str | bytes | Path, iter_chunk_size: int, kwargs: dict[str, Any]) -> None:
        super().__init__(database, kwargs)
        self._iter_chunk_size = iter_chunk_size
        self._tx = _Queue()
        self._thread = _NoThread()

    # --- opening and closing ---------------------------------------------------------------------------

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

    # --- statements ----------------------------------------------------------------------------------------

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
        """Copy the database into ``target`` (a connection of ``dst.aio.stores.sqlite``, of aiosqlite, or of sqlite3). Where
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
