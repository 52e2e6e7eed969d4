"""The reference lease/slot service, correct by default.

Seed 000 ("lease design details", "slot counts and owners"), seed 001 and seed 004:

* acquire is one atomic check-and-increment that also stores the lease and takes
  a fencing token from a durable counter, or a denial with a retry-after; slots
  of leases that have expired but not yet been reaped count as free (lazy expiry),
  since no holder may act on them any more;
* a lease is expired when ``expiry <= now``, in every place that asks;
* renew extends only the current, unexpired lease, and only for its holder;
* release is revoke-as-claim: only the release whose delete removed the lease
  gives its slots back, in the same transaction;
* the reaper revokes expired leases, re-checking expiry when it acts;
* leases and counts live in the same durable store.

Each handler yields once before each store transaction (a point where another
request may run); the code between yields is one transaction. Every wrong
behaviour a bug flag switches on sits at one line marked ``# wrong:``.
"""

from __future__ import annotations

from typing import Callable, ClassVar, Generator, Protocol

from .bugs import Bugs
from .interface import (Acquire, Denied, Done, Evict, Exit, Granted, Handler, Occupant, Owner, Refused, Release, Renew,
                        Renewed)
from .store import Lease, Store

# Keys for background handlers' draws live above every client message key; the reaper's are tagged 1.
BACKGROUND_KEY = (1 << 62) | (1 << 56)
# Prefect v1 tag limits: leases with a 100-year TTL (V1_LEASE_TTL).
IMMORTAL_TTL = 100 * 365 * 24 * 3600 * 1000


class Clock(Protocol):
    """What the model may know of time: ``now``, read-only (the kernel satisfies it)."""

    @property
    def now(self) -> int: ...


class LeaseService:
    def __init__(self, store: Store, clock: Clock, *, limits: dict[str, int], ttl: int, retry_after: int,
                 reaper_interval: int, bugs: Bugs) -> None:
        self.store = store
        self.clock = clock
        self.limits = limits
        # wrong (immortal-lease): a TTL that is effectively infinite is never reclaimed (Prefect #9895).
        self.ttl = IMMORTAL_TTL if bugs.immortal_lease else ttl
        self.retry_after = retry_after
        self.reaper_interval = reaper_interval
        self.bugs = bugs
        self._tick = 0

    # --- requests ---------------------------------------------------------------------------

    # Request type -> handler; the server process routes each request through it.
    _handlers: ClassVar[dict[type, Callable[..., Handler]]]

    def _acquire(self, req: Acquire) -> Handler:
        yield
        store = self.store
        in_use = store.counts[req.limit] - store.expired_slots(req.limit, self.clock.now)
        if self.bugs.stale_check_increment:
            yield  # wrong: the capacity check used a read from an earlier transaction (seed 001; Prefect #20520)
        if in_use + req.slots > self.limits[req.limit]:
            return Denied(self.retry_after)
        now = self.clock.now
        lease = Lease(store.new_lease_id(), req.holder, req.limit, req.slots, now + self.ttl,
                      store.next_fence(), store.free_seat(req.limit, now))
        store.take_slots(req.limit, req.slots, lease.id)
        store.put_lease(lease)
        return Granted(lease.id, lease.expiry, lease.token, lease.seat)

    def _renew(self, req: Renew) -> Handler:
        yield
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
        self.store.set_expiry(lease, now + self.ttl)
        return Renewed(lease.expiry)

    def _release(self, req: Release) -> Handler:
        yield
        store = self.store
        lease = store.get_lease(req.lease)
        if lease is None or lease.holder != req.holder:
            if self.bugs.fallback_release:
                # wrong: lease not found, so decrement the limit anyway (Prefect #21797, TLA+ FallbackRelease)
                store.return_slots(req.limit, req.slots, req.lease)
                return Done("released (fallback)")
            return Refused("no such lease")
        if not (yield from self._revoke(lease)):
            return Refused("no such lease")
        return Done("released")

    def _exit(self, req: Exit) -> Handler:
        yield
        if self.bugs.anonymous_release:
            # wrong: any exit from an active state decrements the limit by name, slot or no slot
            # (Prefect POST /decrement; PR #19845; docket #223)
            self.store.return_slots(req.limit, req.slots, None)
            return Done("decremented")
        return Done("held nothing")

    def _owner(self, req: Owner) -> Handler:
        yield
        return Occupant(self.store.occupant(req.limit, req.seat))

    def _evict(self, req: Evict) -> Handler:
        """Delete by key: whatever occupies the seat goes (Redis DEL; only safe behind a compare in one step)."""
        yield
        store = self.store
        found = store.occupant(req.limit, req.seat)
        lease = None if found is None else store.drop_lease(found)
        if lease is None:
            return Refused("seat is free")
        store.return_slots(lease.limit, lease.slots, req.lease)
        return Done("evicted")
    def _revoke(self, lease: Lease) -> Generator[None, None, bool]:
        """Remove the lease and give its slots back; True if this call did it (the claim)."""
        store = self.store
        if self.bugs.double_release:
            # wrong: decrement, then revoke, as separate steps: two releases that both read the
            # lease both decrement (Prefect /decrement-with-lease; TLA+ ReadPresentRelease, DuplicateReap)
            yield
            store.return_slots(lease.limit, lease.slots, lease.id)
            yield
            store.drop_lease(lease.id)
            return True
        if store.drop_lease(lease.id) is None:
            return False
        store.return_slots(lease.limit, lease.slots, lease.id)
        return True

    # --- background -------------------------------------------------------------------------

    def loops(self) -> list[tuple[str, int]]:
        return [("reaper", self.reaper_interval)]

    def background(self, loop: str, now: int) -> list[tuple[int, Handler]]:
        """One reaper tick: a reap job per lease expired at ``now``."""
        self._tick += 1
        return [(BACKGROUND_KEY | (self._tick << 24) | i, self._reap(lease_id))
                for i, lease_id in enumerate(self.store.expired(now))]

    def _reap(self, lease_id: int) -> Handler:
        yield
        lease = self.store.get_lease(lease_id)
        # Re-check expiry when acting: the holder may have renewed since the tick.
        if lease is None or lease.expiry > self.clock.now:
            return None
        yield from self._revoke(lease)
        return None

    # --- restarts ---------------------------------------------------------------------------

    def crash(self) -> None:
        self.store.lose_memory()

    def boot(self) -> list[tuple[int, Handler]]:
        return []

    _handlers = {Acquire: _acquire, Renew: _renew, Release: _release, Exit: _exit, Owner: _owner, Evict: _evict}
