"""A SQLite database as the simulated server process sees it: one file, a connection per transaction.

Every statement is a round trip (``await sut.store_step()``), so other requests run between any two
statements of a handler. What keeps a transaction whole is SQLite itself:

* ``BEGIN IMMEDIATE`` takes the database's write lock, so a check made inside a transaction still
  holds when it writes. The service's transactions queue for it, first come first served, the way
  Postgres queues transactions waiting on a row lock: SQLite's own busy handler is no queue (the
  lock goes to whichever asks first once it frees), and under a storm of retries it starved the
  reaper for hundreds of round trips. Two exceptions keep the queue short under overload: the
  reaper's transactions go to its front (they free slots the others wait for), and a transaction
  may give up on its place after a time (a lock timeout: :class:`Busy`).
* ``COMMIT`` makes all of a transaction's changes visible at once. Until then the harness is told
  nothing: the facts a transaction reports are held back and reported when it commits.
* A server crash closes every connection. SQLite rolls back a transaction that had not committed,
  as it does when a process dies; what was committed stays in the file, and the restarted server
  opens it again.

With ``autocommit`` (a driver's autocommit mode) there is no ``BEGIN``: each statement commits on
its own, the moment it runs, and each fact is reported then.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from typing import Any, Awaitable, Callable, TypeVar

from dst import sut

T = TypeVar("T")
_PATIENCE = 60_000  # ms a queued transaction waits before it looks again (its turn wakes it sooner)


def connect(path: str) -> sqlite3.Connection:
    # timeout=0: a locked database answers at once, and the transaction waits in simulated time instead.
    # isolation_level=None: no transactions but the ones begun here.
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")  # a crash here is a process dying, never the machine losing power
    return conn


class Busy(Exception):
    """The write lock did not come within the transaction's lock timeout; nothing of it ran."""


class Transaction:
    def __init__(self, conn: sqlite3.Connection, autocommit: bool) -> None:
        self.conn = conn
        self.autocommit = autocommit
        self.facts: list[tuple[Callable[..., None], tuple[Any, ...]]] = []

    async def execute(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One statement, one round trip; its rows (``RETURNING`` gives a write's)."""
        await sut.store_step()
        return self.conn.execute(sql, params).fetchall()

    def report(self, fact: Callable[..., None], *args: Any) -> None:
        """A fact for the harness, reported once it is true: when the transaction commits."""
        if self.autocommit:
            fact(*args)
        else:
            self.facts.append((fact, args))


class Database:
    def __init__(self, path: str, clock: sut.Clock, *, autocommit: bool = False) -> None:
        self.path, self.clock = path, clock
        self.autocommit = autocommit
        self._idle: list[sqlite3.Connection] = []
        self._open: dict[sqlite3.Connection, None] = {}  # connections in use: a transaction or a read (ordered)
        # Transactions in the order they get the write lock (the first holds it), each with its priority.
        self._writers: deque[tuple[sut.Waiters, bool]] = deque()

    def _connection(self) -> sqlite3.Connection:
        """A connection, marked in use. One transaction at a time holds one across a round trip, so a couple
        of connections serve every request."""
        conn = self._idle.pop() if self._idle else connect(self.path)
        self._open[conn] = None
        return conn

    def _release(self, conn: sqlite3.Connection) -> None:
        if conn in self._open:  # not if the process crashed meanwhile: the connection is gone
            del self._open[conn]
            if conn.in_transaction:
                conn.execute("ROLLBACK")  # the body raised: nothing of it happened
            self._idle.append(conn)

    async def _my_turn(self, first: bool, lock_timeout: int | None) -> sut.Waiters:
        """Queue for the write lock (``first``: ahead of every other but the holder and the first before it); back
        when every transaction ahead has ended. :class:`Busy` after ``lock_timeout`` ms in the queue."""
        me, queue = sut.Waiters(), self._writers
        at = next((i for i, (_, ahead) in enumerate(queue) if i and not ahead), len(queue)) if first else len(queue)
        queue.insert(at, (me, first))
        give_up = None if lock_timeout is None else self.clock.now + lock_timeout
        while queue[0][0] is not me:
            if give_up is not None and self.clock.now >= give_up:
                self._leave(me)
                raise Busy
            await me.wait(_PATIENCE if give_up is None else min(_PATIENCE, give_up - self.clock.now))
        return me

    def _leave(self, me: sut.Waiters) -> None:
        """Out of the queue; if it held the lock, the next in line is woken to take it."""
        queue = self._writers
        if queue and queue[0][0] is me:
            queue.popleft()
            if queue:
                queue[0][0].notify_all()
        else:  # gave up its place (not if the process crashed meanwhile: the queue is gone)
            for turn in queue:
                if turn[0] is me:
                    queue.remove(turn)
                    break

    async def transaction(self, body: Callable[[Transaction], Awaitable[T]], *, first: bool = False,
                          lock_timeout: int | None = None) -> T:
        """Run ``body`` as one transaction; its facts are reported when it commits. ``first``: it goes ahead of
        the queue; ``lock_timeout``: :class:`Busy` if the lock has not come by then. (With ``autocommit`` there
        is no transaction to queue for: each statement commits on its own.)"""
        me = None if self.autocommit else await self._my_turn(first, lock_timeout)
        conn = self._connection()
        tx = Transaction(conn, self.autocommit)
        try:
            if me is not None:
                await sut.store_step()
                conn.execute("BEGIN IMMEDIATE")  # free: the transaction before ours has ended
            result = await body(tx)
            if me is not None:
                conn.execute("COMMIT")
                for fact, args in tx.facts:
                    fact(*args)
            return result
        finally:
            self._release(conn)
            if me is not None:
                self._leave(me)

    async def read(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One query outside any transaction (a round trip; it sees what is committed and takes no lock)."""
        await sut.store_step()
        conn = self._connection()
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
        self._writers.clear()  # the transactions waiting died with the process
