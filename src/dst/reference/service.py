"""The reference lease/slot service, correct by default.

* acquire is one atomic check-and-increment that also stores the lease and takes
  a fencing token from a durable counter, or a denial with a retry-after; slots
  of leases that have expired but not yet been reaped count as free (lazy expiry),
  since no holder may act on them any more; an acquire that asks to wait is held open
  (a long poll) until slots are given back or a lease runs out, and checked again;
* a lease is expired when ``expiry <= now``, in every place that asks;
* renew extends only the current, unexpired lease, and only for its holder;
* release is revoke-as-claim: only the release whose delete removed the lease
  gives its slots back, in the same transaction;
* the reaper revokes expired leases, re-checking expiry when it acts;
* leases and counts live in the same durable store.

Each handler awaits one store round trip before each transaction (a point where another
request may run); the code between two awaits is one transaction. Every wrong behaviour a
bug flag switches on sits at one line marked ``# wrong:``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Coroutine

from ..sut import Clock, Facts, Situation, Waiters, moment, store_step
from .bugs import Bugs
from .protocol import (Acquire, Denied, Done, Evict, Exit, Granted, Occupant, Owner, Refused, Release, Renew,
                       Renewed)
from .store import Lease, Store

# Prefect v1 tag limits: leases with a 100-year TTL (V1_LEASE_TTL).
IMMORTAL_TTL = 100 * 365 * 24 * 3600 * 1000

Handler = Coroutine[Any, Any, Any]

RELEASE_REPEATED = Situation(
    "release-repeated", "a release named a lease the service had already been asked to release (a retry or a "
    "duplicate)", tests=("no-foreign-release", "slot-accounting"), never="no release was ever repeated",
    parts=frozenset({"leases"}))


class LeaseService:
    def __init__(self, store: Store, clock: Clock, *, limits: dict[str, int], ttl: int, retry_after: int,
                 reaper_interval: int, bugs: Bugs, facts: Facts) -> None:
        self.store = store
        self.facts = facts
        self.asked_to_release: set[int] = set()  # for coverage only (RELEASE_REPEATED), not service state
        self.clock = clock
        self.limits = limits
        # wrong (immortal-lease): a TTL that is effectively infinite is never reclaimed (Prefect #9895).
        self.ttl = IMMORTAL_TTL if bugs.immortal_lease else ttl
        self.retry_after = retry_after
        self.reaper_interval = reaper_interval
        self.bugs = bugs
        self.freed: defaultdict[str, Waiters] = defaultdict(Waiters)  # limit -> acquires held open for its slots

    # --- requests ---------------------------------------------------------------------------

    def handlers(self) -> dict[type, Callable[[Any], Handler]]:
        return {Acquire: self._acquire, Renew: self._renew, Release: self._release, Exit: self._exit,
                Owner: self._owner, Evict: self._evict}

    async def _acquire(self, req: Acquire) -> Any:
        until = self.clock.now + req.wait
        await store_step()
        store = self.store
        while True:
            in_use = store.counts[req.limit] - store.expired_slots(req.limit, self.clock.now)
            if self.bugs.stale_check_increment:
                await store_step()  # wrong: the capacity check used a read from an earlier transaction (Prefect #20520)
            if in_use + req.slots <= self.limits[req.limit]:
                break
            now = self.clock.now
            if now >= until:
                return Denied(self.retry_after)
            # A long poll: held open until slots are given back or a lease runs out, then checked again.
            await self.freed[req.limit].wait(min(until, store.next_expiry(now, until)) - now)
        await moment("checked")  # the capacity check is done; the increment follows
        now = self.clock.now
        lease = Lease(store.new_lease_id(), req.holder, req.limit, req.slots, now + self.ttl,
                      store.next_fence(), store.free_seat(req.limit, now))
        store.take_slots(req.limit, req.slots, lease.id)
        store.put_lease(lease)
        return Granted(lease.id, lease.expiry, lease.token, lease.seat)

    async def _renew(self, req: Renew) -> Any:
        arrived = self.clock.now
        await store_step()
        now = self.clock.now
        lease = self.store.get_lease(req.lease)
        if lease is None or lease.holder != req.holder:
            return Refused("no such lease")
        if self.bugs.renew_expired_lease:
            pass  # wrong: renew checks only that the lease exists, not that it is unexpired (Prefect #22983)
        elif self.bugs.expiry_boundary:
            if lease.expiry < now:  # wrong: here expiry == now still counts as live; admission says expired
                return Refused("expired")
        elif lease.expiry <= now:
            return Refused("expired")
        if self.bugs.renew_stale_stamp:
            # wrong: the expiry is stamped with the time the request arrived and written a round trip after the
            # read, so of two copies of one renewal the one that arrived first can write last, and move it back
            await store_step()
            if self.store.get_lease(lease.id) is None:  # released or reaped in between: the UPDATE matched no row
                return Refused("no such lease")
            self.store.set_expiry(lease, arrived + self.ttl)
            return Renewed(lease.expiry)
        self.store.set_expiry(lease, now + self.ttl)
        return Renewed(lease.expiry)

    async def _release(self, req: Release) -> Any:
        if req.lease in self.asked_to_release:  # a retry after a timeout, or a duplicate on the wire
            self.facts.reached(RELEASE_REPEATED.id)
        self.asked_to_release.add(req.lease)
        await store_step()
        store = self.store
        lease = store.get_lease(req.lease)
        if lease is None or lease.holder != req.holder:
            if self.bugs.fallback_release:
                # wrong: lease not found, so decrement the limit anyway (Prefect #21797, TLA+ FallbackRelease)
                self._give_back(req.limit, req.slots, req.lease)
                return Done("released (fallback)")
            return Refused("no such lease")
        await moment("checked")  # the lease was read; its revoke follows
        if not await self._revoke(lease):
            return Refused("no such lease")
        return Done("released")

    async def _exit(self, req: Exit) -> Any:
        await store_step()
        if self.bugs.anonymous_release:
            # wrong: any exit from an active state decrements the limit by name, slot or no slot
            # (Prefect POST /decrement; PR #19845; docket #223)
            self._give_back(req.limit, req.slots, None)
            return Done("decremented")
        return Done("held nothing")

    async def _owner(self, req: Owner) -> Any:
        await store_step()
        return Occupant(self.store.occupant(req.limit, req.seat))

    async def _evict(self, req: Evict) -> Any:
        """Delete by key: whatever occupies the seat goes (Redis DEL; only safe behind a compare in one step)."""
        await store_step()
        store = self.store
        found = store.occupant(req.limit, req.seat)
        lease = None if found is None else store.drop_lease(found)
        if lease is None:
            return Refused("seat is free")
        self._give_back(lease.limit, lease.slots, req.lease)
        return Done("evicted")

    async def _revoke(self, lease: Lease) -> bool:
        """Remove the lease and give its slots back; True if this call did it (the claim)."""
        store = self.store
        if self.bugs.double_release:
            # wrong: decrement, then revoke, as separate steps: two releases that both read the
            # lease both decrement (Prefect /decrement-with-lease; TLA+ ReadPresentRelease, DuplicateReap)
            await store_step()
            self._give_back(lease.limit, lease.slots, lease.id)
            await store_step()
            store.drop_lease(lease.id)
            return True
        if store.drop_lease(lease.id) is None:
            return False
        self._give_back(lease.limit, lease.slots, lease.id)
        return True

    def _give_back(self, limit: str, slots: int, lease: int | None) -> None:
        self.store.return_slots(limit, slots, lease)
        self.freed[limit].notify_all()

    # --- background -------------------------------------------------------------------------

    def loops(self) -> list[tuple[str, int]]:
        return [("reaper", self.reaper_interval)]

    def tick(self, loop: str, now: int) -> list[Handler]:
        """One reaper tick: a reap job per lease expired at ``now``."""
        return [self._reap(lease_id) for lease_id in self.store.expired(now)]

    async def _reap(self, lease_id: int) -> Any:
        await store_step()
        lease = self.store.get_lease(lease_id)
        # Re-check expiry when acting: the holder may have renewed since the tick.
        if lease is None or lease.expiry > self.clock.now:
            return None
        await moment("reaping")  # the expiry is re-checked; the revoke follows
        await self._revoke(lease)
        return None

    # --- restarts ---------------------------------------------------------------------------

    def crash(self) -> None:
        self.store.lose_memory()
        self.freed.clear()  # with the handlers parked there

    def boot(self) -> list[Handler]:
        return []
