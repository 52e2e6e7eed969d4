"""What one statement costs through the asyncio mode's PostgreSQL drop-in: ``python bench/aio_postgres.py``.

A primary-key lookup (``fetchval``, a prepared statement: one Bind/Execute/Sync exchange) on the same server: with
plain asyncpg on asyncio's own loop (the server over its unix socket), and through the drop-in
(``dst.aio.stores.postgres``) in a coroutine on dst's loop (``dst.aio.run``, a round trip a bare yield: the drop-in's
own cost, the clock set before each exchange and the wait for the whole reply included). Beside them, the aiosqlite
drop-in on the same lookup. Wall time (the server is another process), median of 5 rounds of 2,000 statements.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
import time
from statistics import median

import aiosqlite
import asyncpg

import dst.aio
from dst.aio import stores

N, ROUNDS = 2_000, 5
SCHEMA = "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT i, i::text FROM generate_series(0, 999) i;"


async def lookups(con: asyncpg.Connection) -> None:
    for i in range(N):
        await con.fetchval("SELECT v FROM t WHERE id = $1", i % 1000)


def main() -> None:
    db = stores.postgres.Server("bench", schema=SCHEMA)
    real = f"postgresql://postgres@/{db.database}?host={db.postmaster.socket_dir}"

    async def plain() -> float:
        con = await asyncpg.connect(real)
        started = time.perf_counter()
        await lookups(con)
        took = time.perf_counter() - started
        await con.close()
        return took

    async def dropped() -> float:
        con = await asyncpg.connect(db.dsn)
        started = dst.sandbox.real(time.perf_counter)()
        await lookups(con)
        return float(dst.sandbox.real(time.perf_counter)() - started)

    path = os.path.join(tempfile.mkdtemp(prefix="dst-bench-pg-"), "b.db")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(1000)])
    conn.commit()
    conn.close()

    async def sqlite_dropped() -> float:
        async with aiosqlite.connect(path) as c:
            started = dst.sandbox.real(time.perf_counter)()
            for i in range(N):
                async with c.execute("SELECT v FROM t WHERE id = ?", (i % 1000,)) as cur:
                    await cur.fetchone()
            return float(dst.sandbox.real(time.perf_counter)() - started)

    rows = {"asyncpg on asyncio's loop": [], "asyncpg through dst.aio.stores.postgres": [],
            "aiosqlite through dst.aio.stores.sqlite": []}
    for _ in range(ROUNDS):
        rows["asyncpg on asyncio's loop"].append(asyncio.run(plain()))
        with stores.installed():
            rows["asyncpg through dst.aio.stores.postgres"].append(dst.aio.run(dropped(), seed=1))
            rows["aiosqlite through dst.aio.stores.sqlite"].append(
                dst.aio.run(sqlite_dropped(), seed=1, folder=os.path.dirname(path)))
    print(f"{N} primary-key lookups, median of {ROUNDS} rounds (wall time)")
    for name, times in rows.items():
        t = median(times)
        print(f"  {name:42s} {N / t:9,.0f} statements/s  {t / N * 1e6:7.1f} us each")
    db.close()


if __name__ == "__main__":
    import dst.sandbox

    main()
