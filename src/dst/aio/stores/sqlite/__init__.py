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

The parts: :mod:`.locks` (what a statement locks), :mod:`.clock` (SQLite's clock), :mod:`.statements` (a
connection's statements in virtual time), :mod:`.connection` (aiosqlite's ``Connection`` and ``Cursor`` over
them), :mod:`.install` (``connect`` and :class:`installed`).
"""

from .connection import Connection, Cursor
from .install import connect, installed

__all__ = ["connect", "Connection", "Cursor", "installed"]
