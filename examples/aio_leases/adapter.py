"""The dst adapter of the asyncio lease service: how dst builds it, drives its clients and reads its state.

The service (``service/``) is plain asyncio: FastAPI, aiosqlite, a reaper task, an httpx client library.
It knows nothing of dst. This file is the whole of what dst needs:

* ``server``: the service's own app, built by its own ``create_app`` over the run's database file, with
  its lifespan started (which starts the reaper). dst calls it at every boot, after a restart too: the file
  keeps what was committed, the process memory is new.
* ``job``: one client's work for a plan step, through the service's own client library on an httpx client
  whose transport is dst's network: acquire, work while a task renews the lease, release.
* ``Table``: what the store holds, read on the adapter's own SQLite connection after every step of the
  server. The service reports nothing, so dst derives the lease facts from it (``observe=True``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import tempfile
from typing import Any, Hashable, Iterable

import attrs

import dst
from dst import aio, sut

from .service import LeaseClient, Settings, create_app

CLIENT_BUGS = frozenset({"ignore-lost-renewal"})


@attrs.frozen
class Options:
    ttl: int = sut.option(60_000, "positive-duration", help="lease time-to-live, from the server's receipt")
    reaper_interval: int = sut.option(15_000, "positive-duration", help="how often the reaper revokes expired leases")
    retry_after: int = sut.option(1_000, "positive-duration", help="the wait a denied acquire is told to take")
    call_timeout: int = sut.option(2_000, "positive-duration", help="the client library's timeout per HTTP call")


BUGS = (
    sut.Bug("check-then-act", ("capacity", "slot-accounting"), 2,
            "the capacity check reads in a transaction of its own; the increment follows unconditionally",
            "Two acquires both read a free slot, then both increment: two holders on a limit of 1. The "
            "READ COMMITTED check-then-act race (Prefect discussion #20520)."),
    sut.Bug("release-not-idempotent", ("slot-accounting", "capacity"), 2,
            "release gives the slots back whether or not its delete found the lease",
            "A release is delivered twice (or retried after a lost reply): the second gives back a slot it no "
            "longer holds, and the count goes below the live leases' slots. TLA+ ReadPresentRelease."),
    sut.Bug("reaper-no-recheck", ("removed-before-expiry", "single-executor", "capacity"), 4,
            "the reaper deletes what it read as expired by id alone",
            "A holder paused past its expiry wakes and renews between the reaper's read and its delete; the "
            "delete takes the renewed lease while the holder works under it. TLA+ StaleReap."),
    sut.Bug("leases-in-memory", ("slot-accounting", "stranded-slot"), 2,
            "the leases live in the process's memory, the counts in the database",
            "A acquires; the server restarts: the count in the database says 1 and no lease holds it, for "
            "good. Prefect's in-memory lease storage (PR #20090)."),
    sut.Bug("ignore-lost-renewal", ("single-executor",), 2,
            "the client library ignores a failed renewal and trusts the lease on",
            "A's renewals are cut off by a partition; the server reaps the lease and A works on without one. "
            "Prefect concurrency/_leases.py: \"Execution will continue, but concurrency limits may be exceeded\"."),
)


class Table(aio.LeaseTable):
    """The store's leases and counts, on the adapter's own connection (the invariants read them, as a
    :class:`dst.aio.LeaseTable`)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.conn: sqlite3.Connection | None = None
        self.app: Any = None  # the running app: a lease it keeps in memory (a bug) is held too

    def _db(self) -> sqlite3.Connection | None:
        """The adapter's connection, once the service has created its tables (its first boot's lifespan)."""
        if self.conn is None and os.path.exists(self.path):
            conn = sqlite3.connect(self.path, timeout=0, isolation_level=None)
            if conn.execute("SELECT count(*) FROM sqlite_master WHERE name IN ('leases', 'limits')").fetchone()[0] < 2:
                conn.close()
                return None
            self.conn = conn
        return self.conn

    def _memory(self) -> dict[int, dict[str, Any]]:
        return self.app.state.store.memory if self.app is not None else {}

    def version(self) -> Hashable:
        db = self._db()
        memory = self._memory()
        data = db.execute("PRAGMA data_version").fetchone()[0] if db is not None else None
        return data, self.app, tuple((lease, row["expires_at"]) for lease, row in sorted(memory.items()))

    def leases(self) -> Iterable[aio.LeaseRow]:
        db = self._db()
        rows = db.execute("SELECT id, holder, limit_name, slots, expires_at FROM leases").fetchall() if db else []
        memory = [(r["id"], r["holder"], r["limit"], r["slots"], r["expires_at"]) for r in self._memory().values()]
        return [aio.LeaseRow(lease, holder, limit, slots, aio.virtual_ms(expires_at))
                for lease, holder, limit, slots, expires_at in rows + memory]

    def count(self, limit: str) -> int:
        db = self._db()
        row = db.execute("SELECT active FROM limits WHERE name = ?", (limit,)).fetchone() if db else None
        return int(row[0]) if row else 0


def build(env: sut.Env[Options]) -> aio.System:
    o = env.options
    folder = tempfile.mkdtemp(prefix="dst-aio-leases-")
    path = os.path.join(folder, "leases.db")
    settings = Settings(limits=dict(env.limits), ttl=o.ttl / 1000, reaper_interval=o.reaper_interval / 1000,
                        retry_after=o.retry_after / 1000, bugs=frozenset(env.bugs) - CLIENT_BUGS)
    table = Table(path)

    async def server() -> Any:
        table.app = app = create_app(path, settings)
        await aio.lifespan(app)  # creates the tables on the first boot, and starts the reaper
        return app

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        limit, slots, work, writes = order.arg("limit"), order.arg("slots"), order.arg("work"), order.arg("writes")
        async with aio.http() as http:
            leases = LeaseClient(http, client, ttl=settings.ttl, timeout=o.call_timeout / 1000,
                                 retries=env.workload.retries, bugs=frozenset(env.bugs) & CLIENT_BUGS)
            loop = asyncio.get_running_loop()
            asked = loop.time()
            lease = await leases.acquire(limit, slots, patience=env.workload.acquire_patience / 1000)
            # Coverage goals (dst.sometimes): a campaign in which no holder ever waits behind another, or no release
            # goes unconfirmed, never put the limit or a repeated release to the test; it says so.
            dst.sometimes("waited-for-a-slot", loop.time() - asked >= settings.retry_after)
            if lease is None:
                return "gave up acquiring"
            await aio.moment("granted")
            renewing = asyncio.create_task(leases.keep_renewing(lease))
            outcome, left = "done", work
            while left > 0:
                if not await leases.still_held(lease):
                    outcome = "lease lost"
                    break
                piece = int(min(left, max(1.0, (lease.deadline - loop.time()) * 1000)))  # not past the deadline
                left -= piece - await aio.work(lease.id, piece)
            renewing.cancel()
            await aio.moment("before-release")
            released = await leases.release(lease)
            dst.sometimes("release-unconfirmed", not released)
            return outcome if released or outcome != "done" else "release not confirmed"

    def close() -> None:
        if table.conn is not None:
            table.conn.close()
        shutil.rmtree(folder, ignore_errors=True)

    return aio.System(server=server, job=job, leases=table, observe=True, folder=folder, close=close,
                      bounds=sut.Bounds(reclaim_within=o.ttl + o.reaper_interval, renew_every=o.ttl // 2))


model = sut.Model(build, options=Options, bugs=BUGS, scenarios="examples.aio_leases:scenarios",
                  description="an unmodified asyncio lease service: FastAPI, aiosqlite, a reaper task, httpx",
                  client_moments=("granted", "before-release", "await"),  # "await": any await of the client's
                  server_moments=("await",))  # any await of the server's code: its next resumption
