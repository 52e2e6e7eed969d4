"""What one statement costs through the asyncio mode's aiosqlite drop-in: ``python bench/aio_store.py``.

A primary-key lookup, 20,000 times: on a plain ``sqlite3`` connection, and through ``aiosqlite`` (the
drop-in, ``dst.aio.stores.sqlite``) in a coroutine on dst's loop (``dst.aio.run``, where a store round trip is
a bare yield: this is the drop-in's own cost, not a latency). Also entering and leaving ``installed()``,
which a simulated run does once. Median of 5 rounds, CPU time.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from statistics import median

import aiosqlite

import dst.aio
from dst.aio.stores.sqlite import installed

N, ROUNDS, SQL = 20_000, 5, "SELECT v FROM t WHERE id = ?"


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="dst-bench-store-"), "b.db")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, str(i)) for i in range(1000)])
    conn.commit()

    def plain() -> float:
        began = time.process_time()
        for i in range(N):
            conn.execute(SQL, (i % 1000,)).fetchone()
        return (time.process_time() - began) / N

    async def through_the_drop_in() -> float:
        async with aiosqlite.connect(path) as db:
            began = time.process_time()
            for i in range(N):
                async with db.execute(SQL, (i % 1000,)) as cursor:
                    await cursor.fetchone()
            return (time.process_time() - began) / N

    def drop_in() -> float:
        with installed():
            return dst.aio.run(through_the_drop_in(), seed=1, folder=os.path.dirname(path))

    def enter_exit() -> float:
        began = time.process_time()
        for _ in range(N):
            with installed():
                pass
        return (time.process_time() - began) / N

    rows = {"plain sqlite3, one lookup": [], "aiosqlite drop-in on dst's loop, one lookup": [],
            "installed() entered and left": []}
    for _ in range(ROUNDS):
        for (name, figures), measure in zip(rows.items(), (plain, drop_in, enter_exit)):
            figures.append(measure())
    for name, figures in rows.items():
        print(f"{name:<46} {median(figures) * 1e6:8.2f} us")


if __name__ == "__main__":
    main()
