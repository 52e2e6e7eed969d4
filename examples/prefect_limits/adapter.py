"""Prefect's global concurrency limits (v2) with leases, installed from the package index, under dst.

The server is Prefect's own (``server.py``): its FastAPI app, its SQLAlchemy models on SQLite through
aiosqlite or (the ``database`` option) on a real PostgreSQL server through asyncpg, its lease storage (the ``storage`` option: in memory, or files under the run's own ``PREFECT_HOME``),
its repossessor step. The clients behave as Prefect's do, through Prefect's own client code where it runs on an
event loop:

* **acquire**: ``ConcurrencySlotAcquisitionWithLeaseService.acquire`` (``prefect/concurrency/services.py``):
  ``increment-with-lease``, and on a 423 (the limit is full) a sleep of the ``Retry-After`` it was told, until
  the acquire timeout; through ``PrefectClient`` with its retries of timed-out requests;
* **renew**: Prefect's renewal loop (``prefect/concurrency/_leases.py``) with its own constants (renew at 0.75 of
  the lease duration, three attempts with jittered backoff). Prefect runs it on a thread with its sync client;
  here it is the same loop as a task with the async client (a thread has no place in a simulated run). When it
  gives up, a ``strict`` holder stops working, as ``raise_on_lease_renewal_failure`` makes Prefect's flow
  engine do; by default, as Prefect's ``concurrency()``, it works on;
* **release**: ``release_concurrency_slots_with_lease`` (``decrement-with-lease``).

What the store holds (the invariants' books) is read on the adapter's own connection (dst's, on PostgreSQL) and from the lease
storage after every step of the server: the limit's ``active_slots`` and the leases with their holders,
slots and expiries.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import tempfile
import uuid
from datetime import datetime
from typing import Any, Callable, Hashable, Iterable

from . import settings  # noqa: I001  # first: Prefect's settings before Prefect is imported

import attrs
import httpx
import sqlalchemy.orm
from prefect._internal.retries import exponential_backoff_with_jitter
from prefect.client.orchestration import PrefectClient
from prefect.concurrency import _leases as renewal
from prefect.concurrency.services import ConcurrencySlotAcquisitionWithLeaseService
from prefect.server.concurrency.lease_storage import memory as memory_storage
from prefect.server.concurrency.lease_storage.filesystem import ConcurrencyLeaseStorage as FileLeases
from prefect.types._concurrency import ConcurrencyLeaseHolder

import prefect.server.database.orm_models  # noqa: F401  # the mappers, configured below

from dst import aio, sut
from dst.aio import stores

from . import server

# SQLAlchemy configures its mappers on first use and names anonymous aliases with os.urandom: inside the
# first run of a process that would draw from the run's seeded entropy, and the first run of a seed would
# differ from the next (dst run --check-determinism says so). Configured here, outside any run.
sqlalchemy.orm.configure_mappers()

ISOLATIONS = ("read committed", "repeatable read", "serializable")
HOLDERS = uuid.UUID("5d1e0000-0000-4000-8000-000000000000")  # a client's holder id: uuid5(HOLDERS, "c1")


@attrs.frozen
class DatabaseOptions:
    """Which database Prefect's server runs on (both examples' options)."""

    database: str = sut.option("sqlite", "choice", choices=settings.DATABASES,
                               help="PREFECT_API_DATABASE_CONNECTION_URL: SQLite (aiosqlite), or a real PostgreSQL "
                                    "server (asyncpg) under dst")
    isolation: str = sut.option("read committed", "choice", choices=ISOLATIONS,
                                help="PostgreSQL: the database's default isolation; other than read committed, Prefect's "
                                     "engine is made as before Prefect 3.8, which forces read committed since")

    def __attrs_post_init__(self) -> None:
        if self.isolation != "read committed" and self.database != "postgres":
            raise sut.OptionError("isolation", "only with database = \"postgres\" (SQLite has one writer)")


@attrs.frozen
class Options(DatabaseOptions):
    ttl: int = sut.option(300_000, "positive-duration",
                          help="the lease_duration clients ask for (Prefect's default: 300s; at least 60s)")
    repossessor_interval: int = sut.option(15_000, "positive-duration",
                                           help="PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS")
    strict: bool = sut.option(False, "flag", help="a holder stops working when its renewal gives up "
                                                  "(raise_on_lease_renewal_failure); Prefect's default works on")
    storage: str = sut.option("memory", "choice", choices=settings.STORAGES,
                              help="PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE: the leases in memory, in files under the "
                                   "run's PREFECT_HOME, or in Redis (prefect-redis, on a Redis server under dst)")

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.ttl < 60_000:
            raise sut.OptionError("ttl", "at least 60s (Prefect refuses a shorter lease_duration)")


class RunDatabase:
    """A run's database: on PostgreSQL, a database of its own on dst's server, made from the template Prefect's
    migrations built (Prefect's engine made without its forced READ COMMITTED when ``isolation`` is stricter); on
    SQLite, a copy in ``folder`` of the file they built. :attr:`url` is Prefect's setting (None: the file)."""

    def __init__(self, options: DatabaseOptions, folder: str) -> None:
        self.server: Any = None
        self.url: str | None = None
        if options.database == "postgres":
            isolation = None if options.isolation == "read committed" else options.isolation
            self.server = stores.postgres.Server("prefect-db", setup=settings.migrate_postgres,
                                                 setup_key=settings.schema_key("postgresql"),
                                                 isolation=isolation)  # type: ignore[arg-type]
            self.url = settings.postgres(self.server.dsn)
            server.force_read_committed(isolation is None)
        else:
            shutil.copy(settings.template(), settings.database(folder))  # the template: built once per machine

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            server.force_read_committed(True)


class Ids:
    """Prefect's lease ids are UUIDs; dst's books speak small ints, in the order the leases were first seen."""

    def __init__(self) -> None:
        self.ints: dict[uuid.UUID, int] = {}

    def of(self, lease: uuid.UUID) -> int:
        return self.ints.setdefault(lease, len(self.ints) + 1)


def holder(client: str) -> ConcurrencyLeaseHolder:
    return ConcurrencyLeaseHolder(type="task_run", id=uuid.uuid5(HOLDERS, client))


class Table(aio.LeaseTable):
    """What Prefect's store holds: the counts in its database (``concurrency_limit_v2.active_slots``), the leases in
    its lease storage (the in-memory singleton, or the files the filesystem storage writes)."""

    def __init__(self, ids: Ids, clients: Iterable[str], folder: str, storage: str, db: Any = None,
                 redis: Any = None) -> None:
        self.ids = ids
        self.database, self.storage, self.db, self.redis = settings.database(folder), storage, db, redis
        self.files = os.path.join(folder, "home", "concurrency_leases")  # the filesystem storage's
        self.conn: sqlite3.Connection | None = None
        self.names = {uuid.uuid5(HOLDERS, c): c for c in clients}
        self.limit_names: dict[str, str] = {}

    def _sqlite(self) -> sqlite3.Connection:
        if self.conn is None:
            self.conn = sqlite3.connect(self.database, timeout=0, isolation_level=None)
        return self.conn

    def _one(self, sql: str, value: str) -> Any:
        """The first column of the first row of ``sql`` (one ``?``, for ``value``), as committed; None: no row."""
        if self.db is not None:  # PostgreSQL, on dst's own connection
            rows = self.db.rows(sql.replace("?", "'" + value.replace("'", "''") + "'"))
            return rows[0][0] if rows else None
        row = self._sqlite().execute(sql, (value,)).fetchone()
        return row[0] if row else None

    def _leases(self) -> list[tuple[Any, datetime]]:
        """The leases with the expiry the storage acts on: in memory, its expirations index (which the scan for
        expired leases reads; Prefect 3.8's renewal moves only that), on files, the lease file's."""
        if self.redis is not None:  # prefect-redis: a JSON string per lease, the expiries in a sorted set
            from prefect_redis.lease_storage import ConcurrencyLeaseStorage as RedisLeases

            prefix = "prefect:concurrency:"
            expiries = {member: score for member, score in self.redis.zset(prefix + "expirations")}
            found = []
            for key in sorted(k for k in self.redis.keys() if k.startswith(prefix.encode() + b"lease:")):
                data = self.redis.string(key)
                if data is not None:
                    lease = RedisLeases.__new__(RedisLeases)._deserialize_lease(data.decode())
                    at = expiries.get(str(lease.id).encode())
                    found.append((lease, lease.expiration if at is None else
                                  datetime.fromtimestamp(at, tz=lease.expiration.tzinfo)))
            return found
        if self.storage == "memory":
            store = memory_storage.ConcurrencyLeaseStorage._instance
            if store is None:
                return []
            return [(lease, store.expirations.get(lease.id, lease.expiration)) for lease in store.leases.values()]
        folder, found = self.files, []
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
            if name.endswith(".json") and name != "expirations.json":
                try:
                    with open(os.path.join(folder, name)) as f:
                        lease = FileLeases()._deserialize_lease(json.load(f))
                    found.append((lease, lease.expiration))
                except (OSError, ValueError):
                    pass  # a file being written: its rename makes it whole
        return found

    def version(self) -> Hashable:
        if self.db is not None:
            data = self.db.statements  # every change is an exchange with the server
        else:
            data = self._sqlite().execute("PRAGMA data_version").fetchone()[0]
        if self.redis is not None:
            data = (data, self.redis.version)
        return data, tuple((lease.id, expiration) for lease, expiration in self._leases())

    def _limit(self, limit_id: Any) -> str:
        key = str(limit_id)
        if key not in self.limit_names:
            name = self._one("SELECT name FROM concurrency_limit_v2 WHERE id = ?", key)
            self.limit_names[key] = name if name is not None else key
        return self.limit_names[key]

    def leases(self) -> Iterable[aio.LeaseRow]:
        rows = []
        for lease, expiration in self._leases():
            meta = lease.metadata
            owner = "?"
            if meta and meta.holder:  # prefect-redis gives the holder back as the JSON's dict
                held = meta.holder
                who = uuid.UUID(str(held["id"])) if isinstance(held, dict) else held.id
                owner = self.names.get(who, str(who))
            for limit_id in lease.resource_ids[:1]:  # one limit per lease here
                rows.append(aio.LeaseRow(self.ids.of(lease.id), owner, self._limit(limit_id), meta.slots if meta else 0,
                                         aio.virtual_ms(expiration.timestamp())))
        return rows

    def count(self, limit: str) -> int:
        slots = self._one("SELECT active_slots FROM concurrency_limit_v2 WHERE name = ?", limit)
        return int(slots) if slots is not None else 0


async def renew_until_it_fails(client: PrefectClient, lease_id: uuid.UUID, ttl: float, failed: asyncio.Event,
                               renewed: Callable[[float], None] | None = None) -> None:
    """Prefect's lease renewal loop (``_leases.py``: ``_lease_renewal_loop`` with
    ``_renew_concurrency_lease_with_retries``), with its own constants, as a task: its thread's
    ``stop_event.wait(d)`` is ``asyncio.sleep(d)``. It renews at once, then every 0.75 of the duration; after its
    last attempt fails it sets ``failed`` (Prefect's ``_handle_lease_renewal_failure``) and stops. ``renewed`` is
    told, after each renewal the server answered, when (loop time) its request was sent."""
    while True:
        for attempt in range(renewal._RENEWAL_MAX_ATTEMPTS):
            try:
                sent = asyncio.get_running_loop().time()
                await client.renew_concurrency_lease(lease_id=lease_id, lease_duration=ttl)
                if renewed is not None:
                    renewed(sent)
                break
            except Exception:  # what Prefect's loop catches: any failure of the call
                if attempt == renewal._RENEWAL_MAX_ATTEMPTS - 1:
                    failed.set()
                    return
                await asyncio.sleep(exponential_backoff_with_jitter(
                    attempt, renewal._RENEWAL_RETRY_BASE_DELAY, renewal._RENEWAL_RETRY_MAX_DELAY))
        await asyncio.sleep(ttl * renewal._RENEWAL_FRACTION)


def lease_redis(storage: str) -> Any:
    """The Redis server prefect-redis's lease storage keeps the leases on, for ``storage = "redis"`` (else None): a
    process of its own beside Prefect's server, whose data outlives the server's restarts (appendfsync always, as
    a deployment that keeps leases would run it)."""
    if storage != "redis":
        return None
    import prefect_redis.lease_storage  # noqa: F401  # imported here, not in the run: an import's draws are no run's

    return stores.redis.Server(name="redis", persistence="aof")


def build(env: sut.Env[Options]) -> aio.System:
    o = env.options
    folder = tempfile.mkdtemp(prefix="run-", dir=settings.FOLDER)  # this run's, whatever process it runs in
    database = RunDatabase(o, folder)
    restore = settings.use(folder, o.storage, database.url)
    ids = Ids()
    redis = lease_redis(o.storage)
    table = Table(ids, (f"c{i}" for i in range(1, 257)), folder, o.storage, database.server, redis)
    limits, ttl = dict(env.limits), o.ttl / 1000

    async def start() -> Any:
        return await server.start(limits, o.repossessor_interval / 1000)

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        limit, slots, work = order.arg("limit"), order.arg("slots"), order.arg("work")
        async with PrefectClient(api="http://server/api", httpx_settings={"transport": aio.transport()}) as prefect:
            service = ConcurrencySlotAcquisitionWithLeaseService(frozenset([limit]))
            service._client = prefect  # the service's own acquire loop, on this task (it runs on a thread in Prefect)
            try:
                response = await service.acquire(slots, "concurrency", timeout_seconds=env.workload.acquire_patience / 1000,
                                                 lease_duration=ttl, strict=True, holder=holder(client))
            except (TimeoutError, httpx.HTTPError) as e:
                return f"gave up acquiring ({type(e).__name__})"
            lease_id = uuid.UUID(response.json()["lease_id"])
            await aio.moment("granted")
            failed = asyncio.Event()
            renewing = asyncio.create_task(renew_until_it_fails(prefect, lease_id, ttl, failed))
            outcome, left = "done", work
            while left > 0:
                if o.strict and failed.is_set():
                    outcome = "lease lost"
                    break
                piece = min(left, 1_000)
                left -= piece - await aio.work(ids.of(lease_id), piece)
            renewing.cancel()
            await aio.moment("before-release")
            try:
                await prefect.release_concurrency_slots_with_lease(lease_id=lease_id)
            except httpx.HTTPError as e:
                return f"{outcome}; release failed ({type(e).__name__})"
            return outcome if not failed.is_set() else f"{outcome}; renewal had failed"

    def close() -> None:
        if table.conn is not None:
            table.conn.close()
        database.close()
        restore()
        shutil.rmtree(folder, ignore_errors=True)

    # settled: Prefect keeps the counts in its database and the leases in its lease storage, and every operation
    # changes one, then the other; the two are compared when no request is in flight and no revoke is mid-way.
    return aio.System(server=start, job=job, leases=table, observe=True, settled=server.settled, folder=folder,
                      close=close, reset=server.reset,
                      inline_threads=True,  # FastAPI runs Prefect's plain-def dependencies so
                      bounds=sut.Bounds(reclaim_within=o.ttl + o.repossessor_interval,
                                        renew_every=int(o.ttl * renewal._RENEWAL_FRACTION)))


model = sut.Model(build, options=Options, scenarios="examples.prefect_limits:scenarios",
                  description="Prefect's global concurrency limits (v2) with leases: its own server and client code, "
                              "from the package index",
                  client_moments=("granted", "before-release", "await"), server_moments=("await",))
