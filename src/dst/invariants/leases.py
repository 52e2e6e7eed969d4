"""The invariants of the lease/slot core (``docs/catalogue.md``)."""

from __future__ import annotations

from typing import Any

from ..sim.trace import is_background, key_name, step_of
from ..sut import LeaseId, RunClaim, lease_name
from .books import Books
from .base import CAUSE, SYMPTOM, Invariant, invariant

LEASES = frozenset({"leases"})


@invariant
class SlotAccounting(Invariant):
    id = "slot-accounting"
    title = "count-disagrees-with-live-leases"
    statement = "each limit's stored count equals the slots owned by the leases the authority still has"
    parts = LEASES
    names = CAUSE
    because = ("checked at the step that changed a count: a count its leases' slots do not add up to is the "
               "bookkeeping slip itself (a double count, a lost lease)")

    def limit_changed(self, limit: str) -> None:
        self.checks += 1
        count, owned = self.g.view.count(limit), self.g.live_owned[limit]
        if count != owned:
            self.fail(f"count({limit})={count} but live leases own {owned} slot(s){self.g.owners(limit)}")


@invariant
class Capacity(Invariant):
    id = "capacity"
    title = "more-holders-than-the-limit"
    statement = "the slots owned by leases the authority recognises (stored and unexpired) never exceed the limit"
    parts = LEASES
    names = SYMPTOM
    because = "too many holders is where a slot given away, a double count and a stale check all end"

    def limit_changed(self, limit: str) -> None:
        self.checks += 1
        g, capacity = self.g, self.g.limits[limit]
        # Recognised leases are among the live ones, so only a full limit needs the closer look.
        held = g.live_owned[limit] if g.live_owned[limit] <= capacity else g.recognised_slots(limit)
        if held > capacity:
            self.fail(f"leases the authority recognises hold {held} slot(s) of {limit!r}, capacity {capacity}"
                      f"{g.owners(limit, recognised_only=True)}")


@invariant
class NoForeignRelease(Invariant):
    id = "no-foreign-release"
    title = "release-frees-another-holders-slot"
    statement = "a release or reap gives back only slots owned by the lease it names"
    parts = LEASES
    names = CAUSE
    because = "checked at the release or reap itself: giving back slots its lease does not own is the slip"

    def foreign_release(self, lease: LeaseId | None, limit: str, n: int, owned: int) -> None:
        self.checks += 1
        if lease is None:
            self.fail(f"a release naming no lease gave back {n} slot(s) of {limit!r}: they belonged to another holder")
            return
        name = lease_name(lease)
        self.fail(f"a release naming {name} gave back {n} slot(s) of {limit!r}, but {name} owned {owned}: "
                  f"the slot belonged to another holder")


@invariant
class FencedWrites(Invariant):
    id = "fenced-writes"
    title = "stale-write-accepted"
    statement = ("the resource never accepts a token below one it accepted on that target (nor, when its contract "
                 "asks for current validity, a write from a lease the authority no longer recognises)")
    parts = LEASES
    names = CAUSE
    because = "checked as the resource accepts the write: taking a stale token is the fence's own slip"

    def __init__(self, ghost: Books) -> None:
        super().__init__(ghost)
        self.highest: dict[str, int] = {}  # write target -> highest token accepted

    def write_accepted(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        self.checks += 1
        highest = self.highest.get(target, 0)
        if token < highest:
            self.fail(f"the resource accepted token {token} from {holder} on {target} after accepting token "
                      f"{highest} there")
        self.highest[target] = token
        if self.g.bounds.write_checks_lease and not self.g.recognised_lease(lease, holder):
            self.fail(f"the resource accepted a write from {holder} under {lease_name(lease)}, which the authority no "
                      f"longer recognises ({self.g.lease_state(lease)})")


@invariant
class SingleExecutor(Invariant):
    id = "single-executor"
    title = "works-without-a-recognised-lease"
    statement = ("a client works only while the authority recognises its lease (or claim), so no more clients work "
                 "on a limit than it allows, and never two on one run")
    parts = frozenset({"leases", "runs"})
    names = SYMPTOM
    because = ("work without a current lease or claim is where a lost renewal, a lease reaped or given away and a "
               "claim handed out again all end")

    @classmethod
    def titled(cls, message: str) -> str:
        if "two executions" in message:
            return "run-executed-twice"
        return "works-under-a-lapsed-claim" if " under claim " in message else cls.title

    def work_started(self, client: str, handle: Any, other: str | None) -> None:
        self.checks += 1
        g = self.g
        if handle.__class__ is RunClaim:
            run = handle.run
            if other is not None and other != client:
                self.fail(f"{client} starts run {run} while {other} still works on it: two executions")
            if not g.recognised_claim(handle):
                self.fail(f"{client} starts run {run} under claim {handle.token}, which is not current "
                          f"({g.claim_state(run)})")
            return
        if not g.recognised_lease(handle, client):
            self.fail(f"{client} starts work under {lease_name(handle)}, which the authority no longer recognises "
                      f"({g.lease_state(handle)})")
        limit = g.limit_of.get(handle)
        if limit is not None and g.working_on[limit] > g.limits[limit]:
            who = ", ".join(sorted(c for c, lease in g.working.items() if g.limit_of.get(lease) == limit))
            self.fail(f"{g.working_on[limit]} clients work on limit {limit!r} (capacity {g.limits[limit]}) at once: "
                      f"{who}")

    def work_stopped(self, client: str, handle: Any) -> None:
        self.checks += 1
        g, now = self.g, self.g.kernel.now
        if handle.__class__ is RunClaim:
            held = g.runs_view.claim_of(handle.run) if g.runs_view is not None else None
            if held is None or held.token != handle.token or held.idle_since + g.bounds.claim_timeout < now:
                self.fail(f"{client} worked on run {handle.run} until t={now} under claim {handle.token}, past the "
                          f"moment it stopped being current ({g.claim_state(handle.run)})")
            return
        expiry = g.view.expiry(handle)
        if expiry is None or expiry < now:
            self.fail(f"{client} worked under {lease_name(handle)} until t={now}, past the moment the authority "
                      f"stopped recognising it ({g.lease_state(handle)})")

    def removed_while_working(self, client: str, lease: LeaseId) -> None:
        self.checks += 1
        self.fail(f"{lease_name(lease)} was removed while {client} works under it")


@invariant
class StrandedSlot(Invariant):
    id = "stranded-slot"
    title = "slot-never-reclaimed"
    settles_within = "reclaim_within"
    statement = ("a dead holder's lease is reclaimed within TTL + reaper interval; once the workload drains and the "
                 "quiet period passes, every count is 0 and no lease is left")
    parts = LEASES
    names = SYMPTOM
    because = ("a slot left held is where a lost lease, a count off by one and an immortal TTL all end, long after "
               "the slip")

    def client_died(self, client: str, held: list[LeaseId]) -> None:
        if held:
            now = self.g.kernel.now
            self.g.kernel.after(self.g.bounds.reclaim_within, self._check_reclaimed, (client, held, now, now))

    def _check_reclaimed(self, arg: tuple[str, list[LeaseId], int, int]) -> None:
        client, held, died, window_start = arg
        g, within = self.g, self.g.bounds.reclaim_within
        if g.server.rearmed(window_start, within, self._check_reclaimed, lambda start: (client, held, died, start)):
            return  # the reaper did not run for the whole window
        self.checks += 1
        for lease in held:
            if lease in g.live:
                self.fail(f"{lease_name(lease)} of {client}, which died at t={died}, still holds "
                          f"{g.owned.get(lease, 0)} slot(s) of {g.limit_of[lease]!r} {within}ms later "
                          f"({g.lease_state(lease)})")

    def quiet_period_over(self, served_until: int | None, busy: frozenset[str]) -> None:
        self.checks += 1
        g = self.g
        at_work = {lease for lease in g.view.lease_ids() if g.not_yet_due(lease)} if busy else set()
        for limit in g.limits:
            count = g.view.count(limit)
            live = sum(g.owned.get(lease, 0) for lease in at_work if g.limit_of.get(lease) == limit)
            if count != live:
                held = f" ({live} held by leases not yet due for reaping)" if live else ""
                self.fail(f"after the quiet period count({limit})={count}{held}{g.owners(limit)}")
        left = [lease for lease in g.view.lease_ids() if lease not in at_work]
        if left:
            shown = ", ".join(f"{lease_name(lease)}({g.live.get(lease, '?')})" for lease in left[:5])
            self.fail(f"after the quiet period {len(left)} lease(s) remain: {shown}")


@invariant
class ExpiryOnlyForward(Invariant):
    id = "expiry-only-forward"
    title = "lease-expiry-moved-back"
    statement = ("a lease's expiry, as the authority stores it, never moves backwards while the lease lives: a "
                 "renewal only extends it (a holder that renewed may count on the later one)")
    parts = LEASES
    names = CAUSE
    because = "checked at the renewal that moved the expiry back"

    def lease_renewed(self, lease: LeaseId) -> None:
        self.checks += 1
        g = self.g
        before, expiry = g.expiry_before, g.expiry_of.get(lease)
        if before and expiry is not None and expiry < before:
            self.fail(f"{lease_name(lease)}'s expiry moved back from t={before} to t={expiry} at a renewal "
                      f"({g.lease_state(lease)})")


@invariant
class RemovedBeforeExpiry(Invariant):
    id = "removed-before-expiry"
    title = "lease-removed-before-expiry"
    statement = ("the server's own work (its reaper, a sweep, a request of another client's) never removes a lease "
                 "whose stored expiry is still ahead: only its holder's release ends a lease the authority recognises")
    parts = LEASES
    names = CAUSE
    because = ("checked at the removal, from what the store shows (the expiry last seen for the lease) and whose "
               "handler made it: a reaper that deletes a lease just renewed is the slip, whether or not its holder "
               "was working then")

    def lease_removed(self, lease: LeaseId, holder: str, expiry: int | None, key: int | None) -> None:
        if key is None:
            return  # no handler's step (dst's own, a crash's roll-back): nobody to blame
        now = self.g.kernel.now
        if is_background(key):
            by = f"the server's own work ({key_name(key)})"
        else:
            sender = self.g.senders.get(step_of(key) or 0)
            if sender is None or sender == holder:
                return  # the holder's own release (or a request dst cannot place): its to end
            by = f"a request of {sender}'s ({key_name(key)})"
        self.checks += 1
        if expiry is not None and expiry > now:
            self.fail(f"{lease_name(lease)} of {holder} was removed at t={now} by {by}, while its stored expiry was "
                      f"t={expiry}: the authority took a lease it still recognised")
