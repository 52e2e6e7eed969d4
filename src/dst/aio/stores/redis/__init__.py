"""Redis as a real store under simulation: fakeredis's commands behind redis-py's own asyncio client.

**What is replaced.** The socket of redis-py's asyncio TCP connection, while :class:`installed` is active and a
simulated run is up: a pool (``Redis(...)``, ``Redis.from_url(...)``, a ``ConnectionPool`` of the service's own)
whose host and port name a :class:`Server` opens dst's :class:`~.connection.Connection` instead. redis-py does the
rest as it does over TCP: the handshake (``HELLO``, ``CLIENT SETINFO``), the RESP2 and RESP3 parsers, timeouts,
retries, pipelines, pub/sub, ``Script``. Every other use of redis-py is left alone, and so is everything outside a
run.

**Why.** A Redis server is a process of its own beside the service: its data outlives the service's restarts, it
serves several processes, and a worker waits on it (``XREADGROUP ... BLOCK``). fakeredis has the commands (Lua
scripts too, through lupa), but it answers a blocking command on a task that wakes through
``loop.call_soon_threadsafe`` (which dst's loop refuses) and fans pub/sub out over sets ordered by memory address.

**How.**

* **A write is a store round trip.** What the client writes between two drains (a command, or a pipeline's
  commands with ``MULTI``/``EXEC`` among them: one write, one read) reaches Redis after a round trip of the process
  that wrote it (``dst.aio.round_trip()``'s: in the server process a latency drawn from the seed, with the
  scenario's slow round trips; in a client's a yield), and runs there at once, synchronously, on the loop's thread.
  Its reply is in the client's stream at that instant. A connection's writes run in the order they were written.
* **Blocking commands wait in virtual time.** ``XREAD``/``XREADGROUP`` with ``BLOCK``, ``BLPOP``, ``BRPOP``,
  ``BLMOVE``, ``BRPOPLPUSH``, ``BLMPOP``, ``BZPOPMIN``, ``BZPOPMAX``, ``BZMPOP`` are tried at once; if nothing is
  there, they park until a command writes one of their keys (then they run again, not blocking, right after it, in
  the order they blocked) or until their timeout on dst's clock (``BLOCK 0``: for ever). What the client sent after
  one waits behind it, as in Redis.
* **Pub/sub** messages are pushed to the subscribed connections' streams as the ``PUBLISH`` runs, in the order the
  connections were opened.
* **Redis's clock** is the virtual wall clock (what the sandbox makes ``time.time()``), never skewed: TTLs, stream
  ids, idle times. Its random choices (``SPOP``, ``RANDOMKEY``) draw from ``random``, which the sandbox seeds.
* **Connections die with their process**: what the process sent and Redis had not yet run is lost, and what it had
  parked never answers. A closed connection's last writes still run.
* **Restarts.** :meth:`Server.restart` resets every connection (its client reads the end of the stream:
  ``ConnectionError``) and keeps the data (``persistence="aof"``) or loses it (``"none"``).
* **A reset connection.** A server round trip's write can meet a reset of its connection (``model.store_reset``, a
  pinned ``store-reset``): before Redis ran it, or after it ran, its reply lost. The client reads the end of the
  stream, and redis-py's retry (where the client has one) sends the command again: after a reset after it ran, an
  ``INCR`` runs twice, as over TCP. A client process's writes are never reset.

The parts: :mod:`.resp` (replies as RESP bytes), :mod:`.commands` (fakeredis's socket, its parking, its writes
noted), :mod:`.server` (:class:`Server`: connections, round trips, parked reads, restarts, the readers),
:mod:`.connection` (redis-py's connection over it), :mod:`.install` (:class:`installed`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .install import installed

if TYPE_CHECKING:
    from .server import Pending as Pending, Server as Server

__all__ = ["Server", "Pending", "installed"]


def __getattr__(name: str) -> Any:
    # fakeredis (and redis-py) are imported only by an adapter that makes a Server: the asyncio mode enters
    # installed() at every run, with or without them.
    if name in ("Server", "Pending"):
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
