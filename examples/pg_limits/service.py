"""A concurrency-limit service on PostgreSQL, done the way Prefect's global concurrency limits do it: a slot is taken
by one conditional UPDATE (``active + n <= lim``) that READ COMMITTED makes safe, since a writer that waited for the
row's lock re-reads the committed row and re-evaluates its predicate. Plain asyncpg; it knows nothing of dst.

``isolation`` is the transactions' level (Prefect's server uses the database's default; a connection at REPEATABLE
READ was where the production race came from). ``locked_read`` takes a slot the other correct way: the row is read
``FOR UPDATE`` (locked until the transaction ends), checked in Python and written back. ``read_then_write`` is the
classic slip: the same without ``FOR UPDATE``, a lost update at READ COMMITTED."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

SCHEMA = """
CREATE TABLE limits (name text PRIMARY KEY, active int NOT NULL DEFAULT 0, lim int NOT NULL);
CREATE TABLE leases (id bigserial PRIMARY KEY, holder text NOT NULL, limit_name text NOT NULL REFERENCES limits,
                     slots int NOT NULL, expires timestamptz NOT NULL);
"""


class Busy(Exception):
    """The database could not serialize the transaction: the caller may try again."""


class Limits:
    def __init__(self, pool: Any, *, isolation: str = "read_committed", ttl: float = 600.0,
                 locked_read: bool = False, read_then_write: bool = False) -> None:
        self.pool = pool
        self.isolation = isolation
        self.ttl = ttl
        self.read_then_write = read_then_write
        self.locked_read = locked_read and not read_then_write  # the slip is the same read without its lock

    async def define(self, limits: dict[str, int]) -> None:
        async with self.pool.acquire() as con:
            await con.executemany("INSERT INTO limits (name, lim) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                                  sorted(limits.items()))

    async def acquire(self, limit: str, holder: str, slots: int) -> int | None:
        """A lease id, or None when the limit is full."""
        try:
            async with self.pool.acquire() as con, con.transaction(isolation=self.isolation):
                if self.read_then_write or self.locked_read:
                    lock = " FOR UPDATE" if self.locked_read else ""
                    active, lim = await con.fetchrow(f"SELECT active, lim FROM limits WHERE name = $1{lock}", limit)
                    if active + slots > lim:
                        return None
                    await con.execute("UPDATE limits SET active = $2 WHERE name = $1", limit, active + slots)
                else:
                    done = await con.execute("UPDATE limits SET active = active + $2 WHERE name = $1 "
                                             "AND active + $2 <= lim", limit, slots)
                    if done != "UPDATE 1":
                        return None
                lease: int = await con.fetchval(
                    "INSERT INTO leases (holder, limit_name, slots, expires) "
                    "VALUES ($1, $2, $3, now() + make_interval(secs => $4)) RETURNING id", holder, limit, slots,
                    self.ttl)
                return lease
        except asyncpg.SerializationError as e:
            raise Busy(str(e)) from None

    async def release(self, lease: int) -> bool:
        try:
            async with self.pool.acquire() as con, con.transaction(isolation=self.isolation):
                row = await con.fetchrow("DELETE FROM leases WHERE id = $1 RETURNING limit_name, slots", lease)
                if row is None:
                    return False
                await con.execute("UPDATE limits SET active = active - $2 WHERE name = $1", row[0], row[1])
                return True
        except asyncpg.SerializationError as e:
            raise Busy(str(e)) from None

    async def reap_forever(self, every: float) -> None:
        """Expired leases give their slots back (the database's clock decides what has expired)."""
        while True:
            await asyncio.sleep(every)
            try:
                async with self.pool.acquire() as con, con.transaction():
                    for name, slots in await con.fetch(
                            "WITH gone AS (DELETE FROM leases WHERE expires < now() RETURNING limit_name, slots) "
                            "SELECT limit_name, sum(slots)::int FROM gone GROUP BY limit_name ORDER BY 1"):
                        await con.execute("UPDATE limits SET active = active - $2 WHERE name = $1", name, slots)
            except asyncpg.PostgresError:
                pass  # the next pass tries again
