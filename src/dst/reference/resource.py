"""The protected resource: accepts a write only with a current fencing token.

"A fencing token is a monotonic version whose comparison is performed by the protected
resource, together with the necessary update in the same atomic boundary." When its contract
requires current validity, it also asks the authority whether the writer's lease is still valid.
A user's model that speaks the reference protocol can use it as it is: ``FencedResource(env.facts)``.
"""

from __future__ import annotations

from typing import Callable

from ..sut import Facts
from .bugs import Bugs
from .protocol import Done, Refused, Write


class FencedResource:
    """``highest`` is the table of the highest token accepted per seat (the reference keeps it beside its
    token counter, so it is as durable as the counter); ``valid`` (optional) asks the authority whether
    a write's lease is still valid. It shows what it keeps (a :class:`dst.sut.ResourceView`): each seat's fence,
    and the last write it applied there (its data)."""

    def __init__(self, facts: Facts, *, highest: dict[tuple[str, int], int] | None = None,
                 valid: Callable[[Write], bool] | None = None, bugs: Bugs | None = None) -> None:
        self.facts = facts
        self.highest = {} if highest is None else highest
        self.valid = valid
        self.bugs = bugs or Bugs()
        self.data: dict[tuple[str, int], Write] = {}  # seat -> the last write applied there

    def write(self, req: Write) -> Done | Refused:
        seat = (req.limit, req.seat)
        if self.bugs.unfenced_resource:
            # wrong: the resource checks no token (Kleppmann's fencing argument; etcd docs)
            self.data[seat] = req
            self._accepted(req)
            return Done("accepted")
        highest = self.highest.get(seat, 0)
        if self.bugs.fence_after_write:
            self._apply(seat, req)  # wrong: applied before it is compared (below): a stale token lowers the fence
        elif self.bugs.refused_write_applied:
            self.data[seat] = req  # wrong: the data is written before the fence is compared, and kept when refused
        # wrong (strict-fence): a token equal to the highest accepted is refused too, so a holder's second write
        # under its own token is turned away (an off-by-one in the fence's comparison)
        if req.token < highest or (self.bugs.strict_fence and req.token == highest):
            return self._refused(req, f"stale token {req.token} < {highest}" if req.token < highest
                                 else f"token {req.token} is not above {highest}")
        if self.valid is not None and not self.valid(req):
            return self._refused(req, "lease not valid")
        self._apply(seat, req)
        self._accepted(req)
        return Done("accepted")

    def _apply(self, seat: tuple[str, int], req: Write) -> None:
        """The fence and the data move together, in the write's one atomic step."""
        self.highest[seat] = req.token
        self.data[seat] = req

    def _refused(self, req: Write, reason: str) -> Refused:
        self.facts.write_refused(req.holder, req.lease, req.token, f"{req.limit}/{req.seat}")
        return Refused(reason)

    def _accepted(self, req: Write) -> None:
        self.facts.write_accepted(req.holder, req.lease, req.token, f"{req.limit}/{req.seat}")

    # --- the read-only view for invariants (dst.sut.ResourceView) ----------------------------------------

    def fence(self, target: str) -> int | None:
        return self.highest.get(_seat(target))

    def contents(self, target: str) -> str | None:
        last = self.data.get(_seat(target))
        return None if last is None else f"written by {last.holder} with token {last.token}"


def _seat(target: str) -> tuple[str, int]:
    """A target as the facts name it (``db/0``) -> the seat it is (``("db", 0)``)."""
    limit, _, seat = target.rpartition("/")
    return limit, int(seat)
