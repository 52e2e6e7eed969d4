"""The protected resource: accepts a write only with a current fencing token.

"A fencing token is a monotonic version whose comparison is performed by the protected
resource, together with the necessary update in the same atomic boundary." Under the
``token-and-lease`` contract it also asks the authority whether the writer's lease is still
valid ("if the contract requires current validity, authority and deadline are also checked").
"""

from __future__ import annotations

from ..sut import Clock, Facts
from .bugs import Bugs
from .protocol import Done, Refused, Write
from .store import Store


class FencedResource:
    def __init__(self, authority: Store, clock: Clock, facts: Facts, *, check_lease: bool, bugs: Bugs) -> None:
        self.authority = authority
        self.clock = clock
        self.facts = facts
        self.check_lease = check_lease
        self.bugs = bugs

    def write(self, req: Write) -> Done | Refused:
        if self.bugs.unfenced_resource:
            # wrong: the resource checks no token (Kleppmann's fencing argument; etcd docs)
            self._accepted(req)
            return Done("accepted")
        table = self.authority.highest  # the highest token accepted per seat, kept with the token counter
        highest = table.get((req.limit, req.seat), 0)
        if req.token < highest:
            return Refused(f"stale token {req.token} < {highest}")
        if self.check_lease:
            lease = self.authority.get_lease(req.lease)
            if lease is None or lease.holder != req.holder or lease.expiry <= self.clock.now:
                return Refused("lease not valid")
        table[(req.limit, req.seat)] = req.token
        self._accepted(req)
        return Done("accepted")

    def _accepted(self, req: Write) -> None:
        self.facts.write_accepted(req.holder, req.lease, req.token, f"{req.limit}/{req.seat}")
