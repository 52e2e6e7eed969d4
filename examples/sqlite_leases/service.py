"""The lease/slot service: Prefect's concurrency limits, version 2, on SQLite.

A ``limits`` table keeps each limit's capacity and its active slot count; a ``leases`` table keeps
each lease's holder, limit, slots, expiry and seat; a one-row ``counters`` table hands out lease
ids and fencing tokens. Admission is one conditional increment,
``UPDATE limits SET active = active + n WHERE ... AND active + n <= capacity``, and the lease is
inserted in the same transaction. Renewal moves a lease's expiry if the lease still exists. Release
deletes the lease and gives its slots back in one transaction, and only if the delete found it:
the delete is the claim. A reaper, every ``reaper_interval``, deletes the leases past their expiry
in one transaction, re-checking the expiry in the delete itself. Transactions queue for SQLite's
write lock (:mod:`.database`); the reaper's go to the front, and an acquire that waits longer than
``retry_after`` is denied, so a storm of retries can neither starve the reaper nor grow the queue.

Each wrong behaviour a bug switch turns on is at one place, marked ``# wrong:``.
"""

from __future__ import annotations

from typing import Any, Callable, Coroutine

from dst import sut
from dst.reference.protocol import Acquire, Denied, Done, Exit, Granted, Refused, Release, Renew, Renewed, Write

from .database import Busy, Database, Transaction, connect

SCHEMA = """
PRAGMA journal_mode=WAL;
CREATE TABLE limits (name TEXT PRIMARY KEY, capacity INTEGER NOT NULL, active INTEGER NOT NULL DEFAULT 0);
CREATE TABLE leases (id INTEGER PRIMARY KEY, holder TEXT NOT NULL, limit_name TEXT NOT NULL,
                     slots INTEGER NOT NULL, expiry INTEGER NOT NULL, seat INTEGER NOT NULL);
CREATE TABLE counters (lease INTEGER NOT NULL, token INTEGER NOT NULL);
INSERT INTO counters VALUES (0, 0);
"""

Handler = Coroutine[Any, Any, Any]


def create(path: str, limits: dict[str, int]) -> None:
    """A new database file with its tables and limits."""
    conn = connect(path)
    conn.executescript(SCHEMA)
    conn.executemany("INSERT INTO limits (name, capacity) VALUES (?, ?)", sorted(limits.items()))
    conn.close()


class LeaseService(sut.Service):
    def __init__(self, db: Database, env: sut.Env[Any], *, ttl: int, reaper_interval: int, retry_after: int) -> None:
        self.db, self.clock, self.facts, self.bugs = db, env.clock, env.facts, env.bugs
        self.ttl, self.reaper_interval, self.retry_after = ttl, reaper_interval, retry_after

    def handlers(self) -> dict[type, Callable[[Any], Handler]]:
        return {Acquire: self.acquire, Renew: self.renew, Release: self.release, Exit: self.exit}

    def loops(self) -> list[tuple[str, int]]:
        return [("reaper", self.reaper_interval)]

    def tick(self, loop: str, now: int) -> list[Handler]:
        return [self.reap()]

    def crash(self) -> None:
        self.db.crash()
        if "leases-in-memory" in self.bugs:
            # wrong: the leases lived in process memory (Prefect's default lease storage, PR #20090); the
            # counts in the database survive the restart, the leases do not
            conn = connect(self.db.path)
            for (lease,) in conn.execute("DELETE FROM leases RETURNING id").fetchall():
                self.facts.lease_removed(lease)
            conn.close()

    # --- requests -----------------------------------------------------------------------------

    async def acquire(self, req: Acquire) -> Granted | Denied:
        if "check-then-increment" in self.bugs:
            # wrong: the capacity check is a read of its own, and the increment comes later, unconditionally:
            # two admissions that both read a free slot both take it (Prefect discussion #20520)
            [(active, capacity)] = await self.db.read("SELECT active, capacity FROM limits WHERE name = ?",
                                                      (req.limit,))
            if active + req.slots > capacity:
                return Denied(self.retry_after)
        try:  # an acquire that cannot begin within retry_after is told to come back then, as if the limit were full
            return await self.db.transaction(lambda tx: self._admit(tx, req), lock_timeout=self.retry_after)
        except Busy:
            return Denied(self.retry_after)

    async def _admit(self, tx: Transaction, req: Acquire) -> Granted | Denied:
        if "check-then-increment" in self.bugs:
            await tx.execute("UPDATE limits SET active = active + ? WHERE name = ?", (req.slots, req.limit))
        elif not await tx.execute("UPDATE limits SET active = active + :n WHERE name = :limit AND active + :n <= capacity "
                                  "RETURNING active", {"n": req.slots, "limit": req.limit}):
            return Denied(self.retry_after)
        [(lease, token)] = await tx.execute("UPDATE counters SET lease = lease + 1, token = token + 1 RETURNING lease, token")
        taken = {seat for (seat,) in await tx.execute("SELECT seat FROM leases WHERE limit_name = ?", (req.limit,))}
        seat = min(set(range(len(taken) + 1)) - taken)  # the resource fences each seat on its own
        expiry = self.clock.now + self.ttl
        await tx.execute("INSERT INTO leases VALUES (?, ?, ?, ?, ?, ?)",
                         (lease, req.holder, req.limit, req.slots, expiry, seat))
        tx.report(self.facts.slots_taken, lease, req.limit, req.slots)
        tx.report(self.facts.lease_stored, lease, req.holder, req.limit, token, f"{req.limit}/{seat}")
        return Granted(lease, expiry, token, seat)

    async def renew(self, req: Renew) -> Renewed | Refused:
        expiry = self.clock.now + self.ttl

        async def body(tx: Transaction) -> Renewed | Refused:
            # Renewal asks only that the lease still exist: a slot is never given away before the reaper
            # has deleted its lease, so a late renewal that finds its lease still holds a slot no one else has.
            # MAX: renewals commit in the order they queued for the write lock, which is the order of their
            # stamps; were it ever not (a second process on the file), the expiry still would not move back.
            found = await tx.execute("UPDATE leases SET expiry = MAX(expiry, ?) WHERE id = ? AND holder = ? "
                                     "RETURNING limit_name, expiry", (expiry, req.lease, req.holder))
            if not found:
                return Refused("no such lease")
            tx.report(self.facts.lease_renewed, req.lease, found[0][0])
            return Renewed(int(found[0][1]))

        return await self.db.transaction(body)

    async def release(self, req: Release) -> Done | Refused:
        if "read-then-delete-release" in self.bugs:
            # wrong: read the lease, then delete it and give its slots back in a second transaction: two
            # releases (a retry, a duplicate) that both read it both give back (TLA+ ReadPresentRelease)
            found = await self.db.read("SELECT limit_name, slots FROM leases WHERE id = ? AND holder = ?",
                                       (req.lease, req.holder))
            if not found:
                return Refused("no such lease")
            return await self.db.transaction(lambda tx: self._delete_then_give_back(tx, req.lease, *found[0]))
        return await self.db.transaction(lambda tx: self._revoke(tx, "id = ? AND holder = ?", (req.lease, req.holder)))

    async def exit(self, req: Exit) -> Done:
        return Done("held nothing")  # a job that gave up waiting never took a slot

    # --- the reaper ---------------------------------------------------------------------------

    async def reap(self) -> None:
        """Delete the leases past their expiry, in one transaction that goes to the front of the queue for the
        write lock (a reaper that waited behind the requests its slots are wanted by would strand them)."""
        expired = [lease for (lease,) in await self.db.read("SELECT id FROM leases WHERE expiry <= ? ORDER BY id",
                                                            (self.clock.now,))]
        if not expired:
            return  # no transaction, no wait for the lock
        if "reaper-without-recheck" in self.bugs:
            # wrong: delete by id what the read found: a lease renewed since the read goes too (TLA+ StaleReap)
            await self.db.transaction(lambda tx: self._revoke(tx, f"id IN ({', '.join('?' * len(expired))})",
                                                              tuple(expired)), first=True)
        else:
            await self.db.transaction(lambda tx: self._revoke(tx, "expiry <= ?", (self.clock.now,)), first=True)

    # --- what release and the reaper share ----------------------------------------------------

    async def _revoke(self, tx: Transaction, where: str, params: tuple[Any, ...]) -> Done | Refused:
        """Delete the leases ``where`` still holds; only what the delete removed gives its slots back."""
        found = sorted(await tx.execute(f"DELETE FROM leases WHERE {where} RETURNING id, limit_name, slots", params))
        if not found:
            return Refused("no such lease")
        for lease, _, _ in found:
            tx.report(self.facts.lease_removed, lease)
        for limit in sorted({limit for _, limit, _ in found}):
            await self._give_back(tx, limit, [(lease, slots) for lease, name, slots in found if name == limit])
        return Done("released")

    async def _delete_then_give_back(self, tx: Transaction, lease: int, limit: str, slots: int) -> Done:
        if await tx.execute("DELETE FROM leases WHERE id = ? RETURNING id", (lease,)):
            tx.report(self.facts.lease_removed, lease)
        await self._give_back(tx, limit, [(lease, slots)])  # whether or not the delete found the lease
        return Done("released")

    async def _give_back(self, tx: Transaction, limit: str, leases: list[tuple[int, int]]) -> None:
        """One decrement for the slots of ``leases`` (lease, slots), all of ``limit``."""
        await tx.execute("UPDATE limits SET active = active - ? WHERE name = ?", (sum(n for _, n in leases), limit))
        for lease, slots in leases:
            tx.report(self.facts.slots_returned, lease, limit, slots)


class LeaseView:
    """The authority's committed state, as the invariants read it (the harness's own connection)."""

    def __init__(self, path: str) -> None:
        self.conn = connect(path)

    def count(self, limit: str) -> int:
        return int(self.conn.execute("SELECT active FROM limits WHERE name = ?", (limit,)).fetchone()[0])

    def expiry(self, lease: int) -> int | None:
        row = self.conn.execute("SELECT expiry FROM leases WHERE id = ?", (lease,)).fetchone()
        return None if row is None else int(row[0])

    def lease_ids(self) -> list[int]:
        return [lease for (lease,) in self.conn.execute("SELECT id FROM leases ORDER BY id")]


class FencedTable:
    """The protected resource, a database of its own: a write goes in only if its token is at least the
    highest written to that seat, compared and written in one statement (one atomic boundary). It is also a
    :class:`dst.sut.ResourceView` (``fence``, ``contents``), so the harness checks that a seat's fence never goes
    down and that a refused write changed nothing."""

    def __init__(self, path: str, facts: sut.Facts) -> None:
        self.conn = connect(path)
        self.conn.execute("CREATE TABLE IF NOT EXISTS fence (seat TEXT PRIMARY KEY, token INTEGER NOT NULL, "
                          "writer TEXT NOT NULL)")
        self.facts = facts

    def write(self, req: Write) -> Done | Refused:
        seat = f"{req.limit}/{req.seat}"
        accepted = self.conn.execute(
            "INSERT INTO fence VALUES (:seat, :token, :writer) ON CONFLICT (seat) DO UPDATE SET "
            "token = excluded.token, writer = excluded.writer WHERE excluded.token >= fence.token RETURNING token",
            {"seat": seat, "token": req.token, "writer": req.holder}).fetchall()
        if not accepted:
            self.facts.write_refused(req.holder, req.lease, req.token, seat)
            return Refused(f"stale token {req.token}")
        self.facts.write_accepted(req.holder, req.lease, req.token, seat)
        return Done("accepted")

    # --- the read-only view for invariants (dst.sut.ResourceView) ----------------------------------------

    def fence(self, target: str) -> int | None:
        row = self.conn.execute("SELECT token FROM fence WHERE seat = ?", (target,)).fetchone()
        return None if row is None else int(row[0])

    def contents(self, target: str) -> str | None:
        row = self.conn.execute("SELECT writer, token FROM fence WHERE seat = ?", (target,)).fetchone()
        return None if row is None else f"written by {row[0]} with token {row[1]}"
