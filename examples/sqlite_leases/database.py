"""A SQLite database as the simulated server process sees it: one file, a connection per transaction.

Every statement is a round trip (``await sut.store_step()``), so other requests run between any two
statements of a handler. What keeps a transaction whole is SQLite itself:

* ``BEGIN IMMEDIATE`` takes the database's write lock. A transaction that finds it taken waits a
  round trip and asks again, as a Postgres transaction waits on a row lock: transactions are
  serialized, and a check made inside one still holds when it writes.
* ``COMMIT`` makes all of a transaction's changes visible at once. Until then the harness is told
  nothing: the facts a transaction reports are held back and reported when it commits.
* Connections come from a pool of at most ``POOL``, as a real service's driver keeps them: a
  request that finds them all taken waits a round trip and asks again. (Unbounded, a storm of
  retries behind slow round trips opened one per waiting transaction until the process ran out of
  file handles.)
* A server crash closes every connection. SQLite rolls back a transaction that had not committed,
  as it does when a process dies; what was committed stays in the file, and the restarted server
  opens it again.

With ``autocommit`` (a driver's autocommit mode) there is no ``BEGIN``: each statement commits on
its own, the moment it runs, and each fact is reported then.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Awaitable, Callable, TypeVar

from dst import sut

T = TypeVar("T")
POOL = 32  # connections at most


def connect(path: str) -> sqlite3.Connection:
    # timeout=0: a locked database answers at once, and the transaction waits in simulated time instead.
    # isolation_level=None: no transactions but the ones begun here.
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")  # a crash here is a process dying, never the machine losing power
    return conn


def _locked(e: sqlite3.OperationalError) -> bool:
    return "database is locked" in str(e)


class Transaction:
    def __init__(self, conn: sqlite3.Connection, autocommit: bool) -> None:
        self.conn = conn
        self.autocommit = autocommit
        self.facts: list[tuple[Callable[..., None], tuple[Any, ...]]] = []

    async def execute(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One statement, one round trip; its rows (``RETURNING`` gives a write's)."""
        while True:
            await sut.store_step()
            try:
                return self.conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as e:
                if not (self.autocommit and _locked(e)):
                    raise  # inside a transaction the lock is already ours

    def report(self, fact: Callable[..., None], *args: Any) -> None:
        """A fact for the harness, reported once it is true: when the transaction commits."""
        if self.autocommit:
            fact(*args)
        else:
            self.facts.append((fact, args))


class Database:
    def __init__(self, path: str, *, autocommit: bool = False) -> None:
        self.path = path
        self.autocommit = autocommit
        self._idle: list[sqlite3.Connection] = []
        self._open: dict[sqlite3.Connection, None] = {}  # connections in use: a transaction or a read (ordered)

    async def _connection(self) -> sqlite3.Connection:
        """A connection of the pool, marked in use: an idle one, a new one, or, with ``POOL`` in use, the first
        to come back after a round trip or more."""
        while not self._idle and len(self._open) >= POOL:
            await sut.store_step()
        conn = self._idle.pop() if self._idle else connect(self.path)
        self._open[conn] = None
        return conn

    def _release(self, conn: sqlite3.Connection) -> None:
        if conn in self._open:  # not if the process crashed meanwhile: the connection is gone
            del self._open[conn]
            if conn.in_transaction:
                conn.execute("ROLLBACK")  # the body raised: nothing of it happened
            self._idle.append(conn)

    async def transaction(self, body: Callable[[Transaction], Awaitable[T]]) -> T:
        """Run ``body`` as one transaction; its facts are reported when it commits."""
        conn = await self._connection()
        tx = Transaction(conn, self.autocommit)
        try:
            if not self.autocommit:
                while True:
                    await sut.store_step()
                    try:
                        conn.execute("BEGIN IMMEDIATE")
                        break
                    except sqlite3.OperationalError as e:  # locked: another transaction holds the write lock
                        if not _locked(e):
                            raise
            result = await body(tx)
            if not self.autocommit:
                conn.execute("COMMIT")
                for fact, args in tx.facts:
                    fact(*args)
            return result
        finally:
            self._release(conn)

    async def read(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One query outside any transaction (a round trip; it sees what is committed and takes no lock)."""
        await sut.store_step()
        conn = await self._connection()
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            self._release(conn)

    def crash(self) -> None:
        """The server process dies: its connections close, and SQLite rolls back what had not committed."""
        for conn in [*self._open, *self._idle]:
            conn.close()
        self._open.clear()
        self._idle.clear()
