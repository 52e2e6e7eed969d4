"""The invariants of fencing: what a token is (a monotonic version the resource compares), and what a
seat is (the one thing a token fences) (``docs/catalogue.md``). Checked when a model reports each
lease's token and target, and the writes its resource refuses."""

from __future__ import annotations


from ..sut import LeaseId, lease_name, lease_order
from .books import Books
from .base import CAUSE, SYMPTOM, Invariant, invariant
from .leases import LEASES


@invariant
class UniqueTokens(Invariant):
    id = "unique-tokens"
    title = "token-handed-out-twice"
    statement = ("a fencing token is handed to at most one lease, and the tokens handed out for one target "
                 "(a seat) grow strictly: a lease id or a counter that restarts is not a token")
    parts = LEASES
    names = CAUSE
    because = "checked at the grant that hands a token out again"

    def __init__(self, ghost: Books) -> None:
        super().__init__(ghost)
        self.owner: dict[int, LeaseId] = {}  # token -> the lease it was handed to

    def lease_stored(self, lease: LeaseId, token: int, target: str) -> None:
        self.checks += 1
        first = self.owner.setdefault(token, lease)
        if first != lease:
            self.fail(f"token {token} was handed to {lease_name(lease)}, and to {lease_name(first)} before it")
        newest = self.g.newest_token.get(target)
        if newest is not None and token <= newest:
            self.fail(f"{lease_name(lease)} was handed token {token} for {target}, where token {newest} was handed out "
                      f"before")


@invariant
class ExclusiveSeats(Invariant):
    id = "exclusive-seats"
    title = "two-leases-on-one-seat"
    statement = "no two leases the authority recognises hold one target (a seat its fence guards)"
    parts = LEASES
    names = SYMPTOM
    because = ("two recognised leases on one seat is where a renewal of an expired lease and a disagreement on expiry "
               "both end")

    def lease_stored(self, lease: LeaseId, token: int, target: str) -> None:
        self._alone(lease, target)

    def lease_renewed(self, lease: LeaseId) -> None:
        target = self.g.target_of.get(lease)
        if target is not None:
            self._alone(lease, target)

    def _alone(self, lease: LeaseId, target: str) -> None:
        self.checks += 1
        g, now = self.g, self.g.kernel.now
        others = sorted((other for other in g.on_target.get(target, ()) if other != lease
                         and (g.view.expiry(other) or 0) > now), key=lease_order)
        if others and (g.view.expiry(lease) or 0) > now:
            self.fail(f"{lease_name(lease)} and {lease_name(others[0])} both hold {target}, and the authority "
                      f"recognises both ({g.lease_state(lease)}; {g.lease_state(others[0])})")


@invariant
class WriteProgress(Invariant):
    id = "write-progress"
    title = "current-holders-write-refused"
    statement = ("the resource accepts a write from a holder whose lease the authority recognises, made with the "
                 "newest token handed out for its target: work done under a current lease is not lost")
    parts = LEASES
    names = CAUSE
    because = ("checked as the resource refuses the write: refusing the newest token of a current lease is the "
               "fence's own slip")

    def write_refused(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        self.checks += 1
        g = self.g
        if g.recognised_lease(lease, holder) and g.token_of.get(lease) == token == g.newest_token.get(target):
            self.fail(f"the resource refused {holder}'s write to {target} with token {token}, the newest handed out "
                      f"for it, while the authority recognises {lease_name(lease)} ({g.lease_state(lease)})")


@invariant
class FenceOnlyUp(Invariant):
    id = "fence-only-up"
    title = "resource-fence-lowered"
    statement = ("the fence the resource keeps for a target (the token it compares the next write's with) never goes "
                 "down: a write, accepted or refused, leaves it where it was or raises it (checked when the resource "
                 "shows its state)")
    parts = LEASES
    names = CAUSE
    because = "checked at the write that lowered the fence: a resource that applies before it compares is the slip"

    def write_accepted(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        self._not_lowered(holder, token, target, "accepted")

    def write_refused(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        self._not_lowered(holder, token, target, "refused")

    def _not_lowered(self, holder: str, token: int, target: str, answer: str) -> None:
        g = self.g
        before = g.stored_before
        if before is None:
            return  # no resource view, or the first write seen there
        self.checks += 1
        was, now = before[0], g.stored[target][0]
        if was is not None and (now is None or now < was):
            lowered = "gone" if now is None else f"token {now}"
            self.fail(f"the resource's fence on {target} was token {was} after the last write there and is {lowered} "
                      f"after {holder}'s write with token {token} ({answer})")


@invariant
class RefusedChangesNothing(Invariant):
    id = "refused-changes-nothing"
    title = "refused-write-changed-the-resource"
    statement = ("a write the resource refuses changes nothing there: the target's fence and contents are what they "
                 "were before it (checked when the resource shows its state)")
    parts = LEASES
    names = CAUSE
    because = "checked at the refused write itself: applying a write it then refuses is the slip"

    def write_refused(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        g = self.g
        before = g.stored_before
        if before is None:
            return  # no resource view, or the first write seen there
        self.checks += 1
        after = g.stored[target]
        if after != before:
            changed = [f"its {what} from {was!r} to {now!r}"
                       for what, was, now in zip(("fence", "contents"), before, after) if was != now]
            self.fail(f"the resource refused {holder}'s write to {target} with token {token}, yet changed "
                      f"{' and '.join(changed)}")
