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
    a write's lease is still valid."""

    def __init__(self, facts: Facts, *, highest: dict[tuple[str, int], int] | None = None,
                 valid: Callable[[Write], bool] | None = None, bugs: Bugs | None = None) -> None:
        self.facts = facts
        self.highest = {} if highest is None else highest
        self.valid = valid
        self.bugs = bugs or Bugs()

    def write(self, req: Write) -> Done | Refused:
        if self.bugs.unfenced_resource:
            # wrong: the resource checks no token (Kleppmann's fencing argument; etcd docs)
            self._accepted(req)
            return Done("accepted")
        highest = self.highest.get((req.limit, req.seat), 0)
        # wrong (strict-fence): a token equal to the highest accepted is refused too, so a holder's second write
        # under its own token is turned away (an off-by-one in the fence's comparison)
        if req.token < highest or (self.bugs.strict_fence and req.token == highest):
            return self._refused(req, f"stale token {req.token} < {highest}" if req.token < highest
                                 else f"token {req.token} is not above {highest}")
        if self.valid is not None and not self.valid(req):
            return self._refused(req, "lease not valid")
        self.highest[(req.limit, req.seat)] = req.token
        self._accepted(req)
        return Done("accepted")

    def _refused(self, req: Write, reason: str) -> Refused:
        self.facts.write_refused(req.holder, req.lease, req.token, f"{req.limit}/{req.seat}")
        return Refused(reason)

    def _accepted(self, req: Write) -> None:
        self.facts.write_accepted(req.holder, req.lease, req.token, f"{req.limit}/{req.seat}")
