"""The facts a model reports, passed on to the harness, with the store's changes among them written in the trace.

Much of what changes the store has no request to show for it: the reaper removes a lease, a sweep cancels a
run, a restart loses what lived in process memory. The trace shows every change as the server's ``store``
event (:data:`~dst.sim.trace.STORED`, ``RENEWED``, ``REMOVED``, ``RUN_STATE``: what the asyncio mode's observer
writes too), written here from the fact the model reports as it makes the change. So a finding's story has no
gap where the server acted on its own, and every model that reports its facts has it, with no line of its own.
"""

from __future__ import annotations

from typing import Any

from ..sut import Facts, LeaseId, LeaseView
from .kernel import Kernel
from .trace import REMOVED, RENEWED, RUN_STATE, STORED, lease_event


class TracedFacts:
    """``env.facts`` of the coroutine seam: each event is written before the harness hears the fact, so a
    violation the fact reveals has it in its trace."""

    __slots__ = ("facts", "kernel", "trace", "view", "taken", "held")

    def __init__(self, facts: Facts, kernel: Kernel, trace: list[Any]) -> None:
        self.facts = facts  # the harness's side: looked up at every call (the asyncio mode may gate it later)
        self.kernel = kernel
        self.trace = trace
        self.view: LeaseView | None = None  # the model's lease view, once built: without one, leases go untraced
        self.taken: dict[LeaseId, int] = {}  # lease -> the slots taken for it so far (reported before it is stored)
        self.held: dict[LeaseId, tuple[str, int, str]] = {}  # stored lease -> (holder, slots, limit)

    def slots_taken(self, lease: LeaseId, limit: str, n: int) -> None:
        self.taken[lease] = self.taken.get(lease, 0) + n
        self.facts.slots_taken(lease, limit, n)

    def lease_stored(self, lease: LeaseId, holder: str, limit: str, token: int | None = None,
                     target: str | None = None) -> None:
        slots = self.taken.pop(lease, 0)
        expiry = None if self.view is None else self.view.expiry(lease)
        if expiry is not None:
            self.held[lease] = (holder, slots, limit)
            self.trace.append((self.kernel.now, "server", "store",
                               lease_event(STORED, lease, holder, slots, limit, expiry)))
        self.facts.lease_stored(lease, holder, limit, token, target)

    def lease_renewed(self, lease: LeaseId, limit: str) -> None:
        view = self.view
        if view is not None and lease in self.held:
            self.trace.append((self.kernel.now, "server", "store", lease_event(RENEWED, lease, view.expiry(lease))))
        self.facts.lease_renewed(lease, limit)

    def lease_removed(self, lease: LeaseId) -> None:
        held = self.held.pop(lease, None)
        if held is not None:  # not a removal reported twice
            self.trace.append((self.kernel.now, "server", "store", lease_event(REMOVED, lease, *held)))
        self.facts.lease_removed(lease)

    def run_state(self, run: int, state: str) -> None:
        self.trace.append((self.kernel.now, "server", "store", (RUN_STATE, run, state)))
        self.facts.run_state(run, state)

    # The facts that change no store, passed on as they are (methods, not ``__getattr__``: a write or a release
    # would pay for a failed lookup and its exception each time).
    def slots_returned(self, lease: LeaseId | None, limit: str, n: int) -> None:
        self.facts.slots_returned(lease, limit, n)

    def write_accepted(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        self.facts.write_accepted(holder, lease, token, target)

    def write_refused(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        self.facts.write_refused(holder, lease, token, target)

    def claimed(self, run: int, token: int) -> None:
        self.facts.claimed(run, token)

    def update_accepted(self, run: int, token: int, what: str) -> None:
        self.facts.update_accepted(run, token, what)

    def heartbeat_accepted(self, run: int, token: int) -> None:
        self.facts.heartbeat_accepted(run, token)

    def reached(self, situation: str) -> None:
        self.facts.reached(situation)
