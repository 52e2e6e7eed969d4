"""The service's state in SQLite, through aiosqlite: limits with an active slot count, leases with a TTL.

Admission is one conditional increment and the lease's insert, in one ``BEGIN IMMEDIATE`` transaction.
Renewal moves a lease's expiry if the lease still exists. Release deletes the lease and gives its slots
back in one transaction, only if the delete found it. The reaper deletes leases past their expiry,
checking the expiry again in the delete itself.

Each planted bug (a name in ``Settings.bugs``) switches one wrong behaviour on, at one place marked
``# bug:``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import aiosqlite

SCHEMA = """
CREATE TABLE IF NOT EXISTS limits (name TEXT PRIMARY KEY, capacity INTEGER NOT NULL, active INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS leases (id INTEGER PRIMARY KEY AUTOINCREMENT, holder TEXT NOT NULL, limit_name TEXT NOT NULL,
                                   slots INTEGER NOT NULL, expires_at REAL NOT NULL, token INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (next INTEGER NOT NULL);
INSERT INTO tokens SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM tokens);
"""


class Full(Exception):
    """The limit has no free slot."""


class LeaseStore:
    def __init__(self, path: str, bugs: frozenset[str] = frozenset()) -> None:
        self.path = path
        self.bugs = bugs
        self.memory: dict[int, dict[str, Any]] = {}  # leases, when they are kept in memory (a bug)

    async def create(self, limits: dict[str, int]) -> None:
        async with aiosqlite.connect(self.path) as db:
            await db.executescript(SCHEMA)
            for name, capacity in sorted(limits.items()):
                await db.execute("INSERT OR IGNORE INTO limits (name, capacity) VALUES (?, ?)", (name, capacity))
            await db.commit()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        async with aiosqlite.connect(self.path, isolation_level=None) as db:
            await db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                await db.execute("ROLLBACK")
                raise
            await db.execute("COMMIT")

    async def acquire(self, limit: str, holder: str, slots: int, ttl: float) -> dict[str, Any]:
        if "check-then-act" in self.bugs:
            # bug: the capacity check reads in a transaction of its own; the increment follows unconditionally
            async with aiosqlite.connect(self.path) as db:
                async with db.execute("SELECT active, capacity FROM limits WHERE name = ?", (limit,)) as cursor:
                    active, capacity = await cursor.fetchone()  # type: ignore[misc]
            if active + slots > capacity:
                raise Full(limit)
            async with self.transaction() as db:
                await db.execute("UPDATE limits SET active = active + ? WHERE name = ?", (slots, limit))
                return await self._insert(db, limit, holder, slots, ttl)
        async with self.transaction() as db:
            cursor = await db.execute("UPDATE limits SET active = active + :n WHERE name = :limit "
                                      "AND active + :n <= capacity", {"n": slots, "limit": limit})
            if cursor.rowcount == 0:
                raise Full(limit)
            return await self._insert(db, limit, holder, slots, ttl)

    async def _insert(self, db: aiosqlite.Connection, limit: str, holder: str, slots: int, ttl: float) -> dict[str, Any]:
        async with db.execute("UPDATE tokens SET next = next + 1 RETURNING next - 1") as cursor:
            (token,) = await cursor.fetchone()  # type: ignore[misc]
        expires_at = time.time() + ttl
        cursor = await db.execute("INSERT INTO leases (holder, limit_name, slots, expires_at, token) "
                                  "VALUES (?, ?, ?, ?, ?)", (holder, limit, slots, expires_at, token))
        lease = {"id": cursor.lastrowid, "limit": limit, "holder": holder, "slots": slots, "expires_at": expires_at,
                 "token": token}
        if "leases-in-memory" in self.bugs:
            # bug: the leases live in the process's memory (a cache mistaken for the store); the counts in the
            # database survive a restart, the leases do not
            await db.execute("DELETE FROM leases WHERE id = ?", (lease["id"],))
            self.memory[lease["id"]] = lease
        return lease

    async def renew(self, lease: int, holder: str, ttl: float) -> float | None:
        if "leases-in-memory" in self.bugs:
            found = self.memory.get(lease)
            if found is None or found["holder"] != holder:
                return None
            found["expires_at"] = expires_at = time.time() + ttl
            return expires_at
        async with self.transaction() as db:
            # Stamped once the write lock is ours: of two renewals at once (a retry beside the original), the one
            # that writes last stamps last, so the expiry never moves back.
            expires_at = time.time() + ttl
            cursor = await db.execute("UPDATE leases SET expires_at = ? WHERE id = ? AND holder = ?",
                                      (expires_at, lease, holder))
            return expires_at if cursor.rowcount else None

    async def release(self, lease: int, holder: str, limit: str, slots: int) -> bool:
        if "release-not-idempotent" in self.bugs:
            # bug: the delete's result is not checked: a release retried after a lost reply, or delivered twice,
            # gives the slots back twice (the caller says which limit and how many, so it can)
            async with self.transaction() as db:
                await db.execute("DELETE FROM leases WHERE id = ? AND holder = ?", (lease, holder))
                await db.execute("UPDATE limits SET active = active - ? WHERE name = ?", (slots, limit))
            return True
        if "leases-in-memory" in self.bugs:
            found = self.memory.pop(lease, None)
            if found is None:
                return False
            async with self.transaction() as db:
                await db.execute("UPDATE limits SET active = active - ? WHERE name = ?", (found["slots"], found["limit"]))
            return True
        return await self._revoke(lease, " AND holder = ?", (holder,))

    async def _revoke(self, lease: int, condition: str, params: tuple[Any, ...]) -> bool:
        async with self.transaction() as db:
            async with db.execute(f"DELETE FROM leases WHERE id = ?{condition} RETURNING limit_name, slots",
                                  (lease, *params)) as cursor:
                found = await cursor.fetchone()
            if found is None:
                return False
            await db.execute("UPDATE limits SET active = active - ? WHERE name = ?", (found[1], found[0]))
            return True

    async def reap(self) -> int:
        """Revoke every lease past its expiry; returns how many."""
        if "leases-in-memory" in self.bugs:
            now = time.time()
            gone = [lease for lease, found in sorted(self.memory.items()) if found["expires_at"] <= now]
            for lease in gone:
                await self.release(lease, self.memory[lease]["holder"], "", 0)
            return len(gone)
        async with aiosqlite.connect(self.path) as db:
            async with db.execute("SELECT id FROM leases WHERE expires_at <= ? ORDER BY id", (time.time(),)) as cursor:
                expired = [lease for (lease,) in await cursor.fetchall()]
        reaped = 0
        for lease in expired:
            if "reaper-no-recheck" in self.bugs:
                # bug: delete what was read as expired by id alone: a lease renewed since the read goes too
                reaped += await self._revoke(lease, "", ())
            else:
                reaped += await self._revoke(lease, " AND expires_at <= ?", (time.time(),))
        return reaped

    async def reap_forever(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reap()
            except sqlite3.OperationalError:  # the database stayed locked: the next tick tries again
                continue
