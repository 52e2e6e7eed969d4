"""The dst adapter of the PostgreSQL limits service: a database of dst's (``dst.aio.stores.postgres.Server``), the
service's own asyncpg pool on it, RPC handlers for acquire and release, and a view of the tables for the invariants.

The slip switch ``isolation`` runs the service's transactions at another level, and ``acquire`` takes a slot by a
locked read instead of a conditional UPDATE; ``read-then-write`` is the lost update dst finds at READ COMMITTED: the
read without its lock (``FOR UPDATE`` forgotten)."""

from __future__ import annotations

import asyncio
from typing import Any, Hashable, Iterable

import attrs

from dst import aio, sut
from dst.aio import stores

from .service import SCHEMA, Busy, Limits


@attrs.frozen
class Options:
    isolation: str = sut.option("read committed", "choice",
                                choices=("read committed", "repeatable read", "serializable"),
                                help="the isolation of the service's transactions")
    acquire: str = sut.option("conditional update", "choice", choices=("conditional update", "locked read"),
                              help="how a slot is taken: one UPDATE ... WHERE active + n <= lim, or the row read "
                                   "FOR UPDATE, checked and written back")
    ttl: int = sut.option(60_000, "positive-duration", help="a lease's time to live, by the database's clock")
    reaper_interval: int = sut.option(10_000, "positive-duration", help="how often expired leases are reaped")


BUGS = (
    sut.Bug("read-then-write", ("capacity", "slot-accounting"), 2,
            "acquire reads the count without FOR UPDATE, checks it in Python and writes the sum back",
            "Two acquires read active = 0; the second's UPDATE waits for the first's row lock and, at READ "
            "COMMITTED, overwrites its 1 with its own 1: two holders on a limit of 1 (a lost update)."),
)


@sut.message
class Acquire:
    kind = 30
    limit: str
    holder: str
    slots: int


@sut.message
class Granted:
    kind = 31
    lease: int  # 0: denied


@sut.message
class Release:
    kind = 32
    lease: int


@sut.message
class Released:
    kind = 33
    ok: bool


class Table(aio.LeaseTable):
    """The leases and counts as the database holds them (committed), read on dst's own connection."""

    def __init__(self, db: Any) -> None:
        self.db = db

    def version(self) -> Hashable:
        return self.db.statements

    def leases(self) -> Iterable[aio.LeaseRow]:
        rows = self.db.rows("SELECT id, holder, limit_name, slots, "
                            "(extract(epoch FROM expires) * 1000)::bigint FROM leases ORDER BY id")
        return [aio.LeaseRow(int(i), str(h), str(n), int(s), int(e) - aio.VIRTUAL_EPOCH_MS) for i, h, n, s, e in rows]

    def count(self, limit: str) -> int:
        rows = self.db.rows(f"SELECT active FROM limits WHERE name = '{limit}'")
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def build(env: sut.Env[Options]) -> aio.System:
    import asyncpg

    o = env.options
    db = stores.postgres.Server("postgres", schema=SCHEMA)
    isolation = o.isolation.replace(" ", "_")

    async def server() -> Any:
        pool = await asyncpg.create_pool(db.dsn, min_size=0, max_size=4)
        limits = Limits(pool, isolation=isolation, ttl=o.ttl / 1000, locked_read=o.acquire == "locked read",
                        read_then_write="read-then-write" in env.bugs)
        await limits.define(dict(env.limits))
        asyncio.get_running_loop().create_task(limits.reap_forever(o.reaper_interval / 1000))

        async def acquire(request: Acquire) -> Granted:
            try:
                lease = await limits.acquire(request.limit, request.holder, request.slots)
            except Busy:
                lease = None
            return Granted(lease or 0)

        async def release(request: Release) -> Released:
            try:
                return Released(await limits.release(request.lease))
            except Busy:
                return Released(False)

        return {Acquire: acquire, Release: release}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        limit, slots, work = order.arg("limit"), order.arg("slots"), order.arg("work")
        loop = asyncio.get_running_loop()
        give_up = loop.time() + env.workload.acquire_patience / 1000
        while True:
            try:
                granted = await aio.call(Acquire(limit, client, slots))
            except TimeoutError:
                granted = Granted(0)
            if granted.lease:
                break
            if loop.time() >= give_up:
                return "gave up acquiring"
            await asyncio.sleep(1.0)
        await aio.moment("granted")
        await aio.work(granted.lease, work)
        for _ in range(1 + env.workload.retries):
            try:
                if (await aio.call(Release(granted.lease))).ok:
                    return "done"
            except TimeoutError:
                pass
        return "release not confirmed"

    return aio.System(server=server, job=job, leases=Table(db), observe=True, close=db.close,
                      bounds=sut.Bounds(reclaim_within=o.ttl + o.reaper_interval, renew_every=o.ttl))


model = sut.Model(build, options=Options, bugs=BUGS, scenarios="examples.pg_limits:scenarios",
                  description="a concurrency-limit service on PostgreSQL (asyncpg), the slot taken Prefect's way")
