"""The reference model's store: what survives a restart, and what does not.

Durable: the slot counts, the lease-id counter and, unless the model keeps them in
process memory, the leases with their expiry index and the fencing state (the token
counter and the resource's highest accepted token per seat, kept together as one
table, the way docket keeps a generation in the hash it guards).
:meth:`Store.lose_memory` is a process restart.

Every change to counts and leases is reported to the observer as it happens, with
the lease it is attributed to: a slot count can only move on behalf of a named lease
(or visibly on behalf of none), which is what lets the harness keep the truth.
"""

from __future__ import annotations

from heapq import heappop, heappush

import attrs
from sortedcontainers import SortedList

from ..sut import Facts


@attrs.define(slots=True)
class Lease:
    id: int
    holder: str
    limit: str
    slots: int
    expiry: int
    token: int
    seat: int  # which of the limit's seats it occupies: the resource fences writes per seat


class _LeaseTable:
    """Leases by id, with an expiry index for the reaper (O(log n) per change), the seats in use, and
    the slots of expired-but-unrevoked leases per limit, kept up to date as time passes (admission asks
    for them on every acquire, so they are not recounted)."""

    __slots__ = ("rows", "by_expiry", "seats", "due", "lapsed", "lapsed_slots")

    def __init__(self) -> None:
        self.rows: dict[int, Lease] = {}
        self.by_expiry: SortedList = SortedList()
        self.seats: dict[tuple[str, int], int] = {}  # (limit, seat) -> lease id
        self.due: list[tuple[int, int]] = []  # heap of (expiry, lease id); entries go stale on renew or delete
        self.lapsed: set[int] = set()  # leases past their expiry, not yet revoked
        self.lapsed_slots: dict[str, int] = {}  # limit -> their slots


class Store:
    __slots__ = ("observer", "counts", "lease_seq", "fence", "highest", "_durable_leases", "_durable_fence",
                 "_leases")

    def __init__(self, limits: dict[str, int], observer: Facts, *, durable_leases: bool = True,
                 durable_fence: bool = True) -> None:
        self.observer = observer
        self.counts: dict[str, int] = {name: 0 for name in sorted(limits)}  # durable
        self.lease_seq = 0  # durable
        self._durable_leases = durable_leases
        self._durable_fence = durable_fence
        self._leases = _LeaseTable()  # durable or process memory, per the model
        self.fence = 0  # the last fencing token issued
        self.highest: dict[tuple[str, int], int] = {}  # (limit, seat) -> highest token the resource accepted

    # --- restarts ---------------------------------------------------------------------------

    def lose_memory(self) -> None:
        """A process restart: everything not durable is gone."""
        if not self._durable_leases:
            for lease_id in sorted(self._leases.rows):
                self.observer.lease_removed(lease_id)
            self._leases = _LeaseTable()
        if not self._durable_fence:
            self.fence = 0
            self.highest.clear()

    # --- counts -----------------------------------------------------------------------------

    def take_slots(self, limit: str, n: int, lease: int) -> None:
        self.counts[limit] += n
        self.observer.slots_taken(lease, limit, n)

    def return_slots(self, limit: str, n: int, lease: int | None) -> None:
        self.counts[limit] -= n
        self.observer.slots_returned(lease, limit, n)

    # --- leases -----------------------------------------------------------------------------

    def new_lease_id(self) -> int:
        self.lease_seq += 1
        return self.lease_seq

    def next_fence(self) -> int:
        self.fence += 1
        return self.fence

    def free_seat(self, limit: str, now: int) -> int:
        """The lowest seat of ``limit`` that no unexpired lease occupies (a successor takes over an
        expired holder's seat, so the resource's fence for that seat stops the old holder)."""
        table, seat = self._leases, 0
        while (occupant := table.seats.get((limit, seat))) is not None and table.rows[occupant].expiry > now:
            seat += 1
        return seat

    def occupant(self, limit: str, seat: int) -> int | None:
        """The id of the lease occupying a seat, if any."""
        return self._leases.seats.get((limit, seat))

    def get_lease(self, lease_id: int) -> Lease | None:
        return self._leases.rows.get(lease_id)

    def put_lease(self, lease: Lease) -> None:
        table = self._leases
        table.rows[lease.id] = lease
        table.by_expiry.add((lease.expiry, lease.id))
        table.seats[(lease.limit, lease.seat)] = lease.id
        heappush(table.due, (lease.expiry, lease.id))
        self.observer.lease_stored(lease.id, lease.holder, lease.limit, lease.token, f"{lease.limit}/{lease.seat}")

    def set_expiry(self, lease: Lease, expiry: int) -> None:
        table = self._leases
        table.by_expiry.remove((lease.expiry, lease.id))
        lease.expiry = expiry
        table.by_expiry.add((expiry, lease.id))
        self._unlapse(lease)  # only a buggy renew revives an expired lease, but the books must follow it
        heappush(table.due, (expiry, lease.id))
        self.observer.lease_renewed(lease.id, lease.limit)

    def drop_lease(self, lease_id: int) -> Lease | None:
        """Delete the lease; returns it if this call removed it (the claim), else None."""
        table = self._leases
        lease = table.rows.pop(lease_id, None)
        if lease is not None:
            table.by_expiry.remove((lease.expiry, lease.id))
            self._unlapse(lease)
            if table.seats.get((lease.limit, lease.seat)) == lease_id:
                del table.seats[(lease.limit, lease.seat)]
            self.observer.lease_removed(lease_id)
        return lease

    def expired(self, now: int) -> list[int]:
        """Ids of leases whose expiry is at or before ``now``, oldest first."""
        index = self._leases.by_expiry
        if not index or index[0][0] > now:
            return []  # the common case, in O(1): nothing has expired
        return [lease_id for _, lease_id in index.irange(maximum=(now, float("inf")))]

    def next_expiry(self, now: int, default: int) -> int:
        """When the next lease runs out after ``now`` (``default`` if none will)."""
        index = self._leases.by_expiry
        i = index.bisect_right((now, float("inf")))
        return index[i][0] if i < len(index) else default

    def expired_slots(self, limit: str, now: int) -> int:
        """Slots of ``limit`` held by leases expired at ``now`` that nobody has revoked yet (amortised O(log n))."""
        table = self._leases
        due, rows = table.due, table.rows
        while due and due[0][0] <= now:
            expiry, lease_id = heappop(due)
            lease = rows.get(lease_id)
            if lease is not None and lease.expiry == expiry and lease_id not in table.lapsed:
                table.lapsed.add(lease_id)
                table.lapsed_slots[lease.limit] = table.lapsed_slots.get(lease.limit, 0) + lease.slots
        return table.lapsed_slots.get(limit, 0)

    def _unlapse(self, lease: Lease) -> None:
        table = self._leases
        if lease.id in table.lapsed:
            table.lapsed.discard(lease.id)
            table.lapsed_slots[lease.limit] -= lease.slots

    # --- the read-only view for invariants ----------------------------------------------------

    def count(self, limit: str) -> int:
        return self.counts[limit]

    def expiry(self, lease_id: int) -> int | None:
        lease = self._leases.rows.get(lease_id)
        return None if lease is None else lease.expiry

    def lease_ids(self) -> list[int]:
        return sorted(self._leases.rows)

    def _check(self) -> None:
        """Assert the store's own structure (sortedcontainers' habit): index matches rows."""
        table = self._leases
        assert sorted((l.expiry, l.id) for l in table.rows.values()) == list(table.by_expiry)
        assert all(table.rows[i].seat == seat and table.rows[i].limit == limit for (limit, seat), i in table.seats.items())
        assert table.lapsed <= set(table.rows)
        for limit in {l.limit for l in table.rows.values()} | set(table.lapsed_slots):
            assert table.lapsed_slots.get(limit, 0) == sum(table.rows[i].slots for i in table.lapsed
                                                           if table.rows[i].limit == limit)
