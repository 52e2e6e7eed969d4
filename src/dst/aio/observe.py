"""Facts from what the store holds: the invariants' books kept for a service that reports nothing.

An unmodified service does not call ``env.facts``. Its adapter instead gives a :class:`LeaseTable`: the
leases the store holds and a version that moves when the store may have changed (SQLite's
``PRAGMA data_version`` read on the adapter's own connection, say). After every step of the server process,
:class:`Observer` asks for the version and, only when it moved, reads the leases and reports what changed
as the facts a service would have reported: a lease gone (its slots given back), a lease new (its slots
taken, its token and what it fences), a lease whose expiry moved (renewed). Every lease invariant then
works on the service as it is, checked after every step as with the coroutine seam.

What a diff cannot see is whom a release was for: a release that frees another holder's slot shows as
that lease's slots gone, and ``slot-accounting`` or ``capacity`` catch what follows from it.
"""

from __future__ import annotations

from typing import Hashable, Iterable, Protocol

import attrs

from ..sim.trace import REMOVED, RENEWED, RUN_STATE, STORED, Event, lease_event
from ..sut import Clock, Facts, LeaseId, LeaseView, lease_order


@attrs.frozen
class LeaseRow:
    """One lease as the store holds it. ``expiry`` is in virtual ms (see :func:`dst.aio.virtual_ms`)."""

    id: LeaseId  # the lease's id, of the service's own kind: an int, a UUID or its text (hashable; ordered by its text)
    holder: str  # the client that holds it
    limit: str  # the limit it holds slots of
    slots: int  # how many
    expiry: int  # when the service stops recognising it, in virtual ms
    token: int | None = None  # the fencing token it was handed, and what that token fences
    target: str | None = None  # ... (None: the service hands out no tokens, and the fencing checks are off)


class LeaseTable(LeaseView, Protocol):
    """A :class:`~dst.sut.LeaseView` that can also list its leases whole, and say when it may have changed."""

    def version(self) -> Hashable:
        """Moves whenever the leases or counts may have changed (a cheap read: it is asked after every step)."""

    def leases(self) -> Iterable[LeaseRow]:
        """Every lease the store holds now."""

    def expiry(self, lease: LeaseId) -> int | None:
        """The lease's expiry, read from :meth:`leases` (a table that subclasses this one has it; one that can ask
        its store for a single lease may answer faster)."""
        return next((row.expiry for row in self.leases() if row.id == lease), None)

    def lease_ids(self) -> list[LeaseId]:
        """Every lease in :meth:`leases`, sorted (a table that subclasses this one has it)."""
        return sorted((row.id for row in self.leases()), key=lease_order)


class Books(Facts, Protocol):
    """The harness's side of the facts: it can also be told to check every count again."""

    def recount(self) -> None: ...


class Observer:
    """Reports what changed in the store as facts, and writes it in the trace as the server's own doing (a lease
    the reaper removed shows there, not only its consequences)."""

    __slots__ = ("table", "facts", "seen", "rows", "clock", "trace", "recount")

    def __init__(self, table: LeaseTable, facts: Books, clock: Clock, trace: list[Event], recount: bool = True) -> None:
        self.recount = recount
        self.table = table
        self.facts = facts
        self.clock = clock
        self.trace = trace
        self.seen: Hashable = object()
        self.rows: dict[LeaseId, LeaseRow] = {}

    def step(self) -> None:
        version = self.table.version()
        if version == self.seen:
            return
        self.seen = version
        facts, before = self.facts, self.rows
        if self.recount:
            facts.recount()  # a count may have moved with no lease changing (a release given back twice)
        now = {row.id: row for row in self.table.leases()}
        self.rows = now
        at, trace = self.clock.now, self.trace
        # Gone first: a slot given back may be taken again at once.
        for lease in sorted(before.keys() - now.keys(), key=lease_order):
            row = before[lease]
            trace.append((at, "server", "store", lease_event(REMOVED, lease, row.holder, row.slots, row.limit)))
            facts.lease_removed(lease)
            facts.slots_returned(lease, row.limit, row.slots)
        for lease in sorted(now.keys() - before.keys(), key=lease_order):
            row = now[lease]
            trace.append((at, "server", "store",
                          lease_event(STORED, lease, row.holder, row.slots, row.limit, row.expiry)))
            facts.slots_taken(lease, row.limit, row.slots)
            facts.lease_stored(lease, row.holder, row.limit, row.token, row.target)
        for lease in sorted(now.keys() & before.keys(), key=lease_order):
            if now[lease].expiry != before[lease].expiry:
                trace.append((at, "server", "store", lease_event(RENEWED, lease, now[lease].expiry)))
                facts.lease_renewed(lease, now[lease].limit)


# --- runs: a queue's messages and who holds them ------------------------------------------------------------------

@attrs.frozen
class RunRow:
    """One run (a queue's message, a task) as the store holds it. ``token`` is the current delivery's number
    (a stream's delivery count: it rises with every hand-over), ``consumer`` the client it was handed to."""

    run: int  # the run's id: the plan's (a Submit step's ``run``)
    state: str  # "SCHEDULED" (waiting), "RUNNING" (handed to a worker), "COMPLETED" (acknowledged), "CANCELLED"
    token: int | None = None  # the current claim (None: never handed out)
    consumer: str | None = None  # the client holding it (None: nobody)
    idle_since: int = 0  # when the holder last showed life (handed it, or renewed its claim), in virtual ms


@attrs.frozen
class _Claim:
    token: int
    consumer: str
    idle_since: int


class RunTable(Protocol):
    """What the store holds of the runs, and when it may have changed: facts from it for a queue that reports
    none, and the :class:`~dst.sut.RunView` the run invariants read (:meth:`claim_of`, :meth:`entered`)."""

    def version(self) -> Hashable:
        """Moves whenever a run may have changed (a cheap read: it is asked after every step of every process)."""

    def runs(self) -> Iterable[RunRow]:
        """Every run the store holds now."""

    def claim_of(self, run: int) -> _Claim | None:
        """The run's current claim, from :meth:`runs` (a table that subclasses this one has it)."""
        row = next((r for r in self.runs() if r.run == run), None)
        if row is None or row.token is None or row.consumer is None or row.state != "RUNNING":
            return None
        return _Claim(row.token, row.consumer, row.idle_since)

    def entered(self, run: int) -> int | None:
        """When the run entered its state: not kept by a store that keeps no history (None)."""
        return None


class RunObserver:
    """Reports what changed of the runs in the store as facts (a run new, handed to a worker under a new claim,
    acknowledged), and writes the states it entered in the trace, as :class:`Observer` does for leases. A claim is
    what the store says: an acknowledgement's author is not in it, so ``owner-only-update`` needs the service's
    own ``update_accepted`` facts; a hand-over under a token not above the last, and two executions, are seen."""

    __slots__ = ("table", "facts", "seen", "rows", "clock", "trace")

    def __init__(self, table: RunTable, facts: Facts, clock: Clock, trace: list[Event]) -> None:
        self.table = table
        self.facts = facts
        self.clock = clock
        self.trace = trace
        self.seen: Hashable = object()
        self.rows: dict[int, RunRow] = {}

    def step(self) -> None:
        version = self.table.version()
        if version == self.seen:
            return
        self.seen = version
        before, now = self.rows, {row.run: row for row in self.table.runs()}
        self.rows = now
        at, facts = self.clock.now, self.facts
        for run in sorted(now):
            row, was = now[run], before.get(run)
            if row.token is not None and (was is None or was.token != row.token):
                facts.claimed(run, row.token)
            if was is None or was.state != row.state:
                self.trace.append((at, "server", "store", (RUN_STATE, run, row.state)))
                facts.run_state(run, row.state)
