"""Risky situations: the cases the invariants exist for, counted so a campaign can say what it exercised.

A campaign that never pauses a holder past its lease's expiry cannot find a stale write, however
long it runs. Each situation here is one unit the ghost hands facts to, as it does invariants:
it never fails a run, it only counts how often the case came up. ``tests`` names the invariants
that exist for the case; ``never`` says, in a line, what a campaign that did not reach it did not do.

A model can declare situations of its own (``Model.situations``) and report them with
``env.facts.reached(id)``: the reference model reports a release repeated, which only it can see.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable

from ..sut import LeaseId, RunClaim, Situation as Declared
from .books import Books
from .base import Unit, register

LEASES = frozenset({"leases"})
RUNS = frozenset({"runs"})


class Situation(Unit):
    tests: ClassVar[tuple[str, ...]]
    never: ClassVar[str]

    def __init__(self, ghost: Books) -> None:
        super().__init__(ghost)
        self._count = 0

    @property
    def count(self) -> int:
        """How often the run reached it; the first time is the run's moment for it (``Books.moments``)."""
        return self._count

    @count.setter
    def count(self, n: int) -> None:
        first, self._count = not self._count, n
        if first:
            self.g.first_time(self.id)

    @classmethod
    def declared(cls) -> Declared:
        return Declared(cls.id, cls.statement, cls.tests, cls.never, cls.parts)


SITUATIONS: list[type[Situation]] = []


def situation(cls: type[Situation]) -> type[Situation]:
    """Register a situation unit (a class decorator)."""
    register(cls, SITUATIONS, allowed=("declared",))
    return cls


@situation
class PausedPastExpiry(Situation):
    id = "paused-past-expiry"
    statement = "a client holding a lease was paused until after the lease expired"
    parts = LEASES
    tests = ("single-executor", "fenced-writes", "exclusive-seats", "write-progress")
    never = "no holder was ever paused past its lease's expiry"

    def client_paused(self, client: str, until: int) -> None:
        g = self.g
        for lease, holder in g.live.items():
            if holder == client and (g.view.expiry(lease) or 0) < until:
                self.count += 1


@situation
class CutOffHolding(Situation):
    id = "cut-off-holding"
    statement = "a client holding a lease was partitioned from the server (its renewals cannot get through)"
    parts = LEASES
    tests = ("single-executor", "exclusive-seats", "fenced-writes")
    never = "no holder was ever cut off from the server"

    def client_cut_off(self, client: str, until: int) -> None:
        if client in self.g.live.values():
            self.count += 1


@situation
class DiedHolding(Situation):
    id = "died-holding-leases"
    statement = "a client crashed or restarted while it held leases"
    parts = LEASES
    tests = ("stranded-slot", "slot-accounting", "capacity")
    never = "no client ever died while holding a lease"

    def client_died(self, client: str, held: list[LeaseId]) -> None:
        if held:
            self.count += 1


@situation
class ServerDownWithLeases(Situation):
    id = "server-down-with-leases"
    statement = "the server restarted or froze while leases were stored"
    parts = LEASES
    tests = ("slot-accounting", "unique-tokens", "exclusive-seats", "stranded-slot", "fence-only-up")
    never = "the server never went down while leases were held"

    def server_down(self) -> None:
        if self.g.live:
            self.count += 1


@situation
class ReclaimedWhileWorking(Situation):
    id = "reclaimed-while-working"
    statement = ("a lease was removed (reaped, evicted) or expired while its holder still worked under it, or its "
                 "holder began work under one the authority no longer recognised")
    parts = LEASES
    tests = ("single-executor", "fenced-writes")
    never = "no lease was ever reclaimed or expired while its holder worked"

    def removed_while_working(self, client: str, lease: LeaseId) -> None:
        self.count += 1

    def work_started(self, client: str, handle: Any, other: str | None) -> None:
        if handle.__class__ is not RunClaim and not self.g.recognised_lease(handle, client):
            self.count += 1

    def work_stopped(self, client: str, handle: Any) -> None:
        if handle.__class__ is not RunClaim:
            expiry = self.g.view.expiry(handle)
            if expiry is None or expiry < self.g.kernel.now:
                self.count += 1


@situation
class StaleWrite(Situation):
    id = "stale-write"
    statement = "a holder wrote with a token older than the newest one handed out for that target"
    parts = LEASES
    tests = ("fenced-writes", "fence-only-up", "refused-changes-nothing")
    never = "no write ever came with a superseded token"

    def write_accepted(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        if token < self.g.newest_token.get(target, token):
            self.count += 1

    write_refused = write_accepted  # refused (as it should be) or accepted, the case came up


@situation
class RedeliveredWhileWorking(Situation):
    id = "redelivered-while-working"
    statement = "a run was delivered to a worker under a new claim while another still worked on it"
    parts = RUNS
    tests = ("single-executor", "owner-only-update", "claim-token-changes")
    never = "no run was ever redelivered while a worker still worked on it"

    def claimed(self, run: int, token: int) -> None:
        if run in self.g.run_worker:
            self.count += 1


@situation
class WorkerDiedWithRun(Situation):
    id = "worker-died-with-run"
    statement = "a worker crashed or restarted while it worked on a run"
    parts = RUNS
    tests = ("at-least-once", "single-executor", "bounded-transition", "claim-token-changes")
    never = "no worker ever died in the middle of a run"

    def client_died(self, client: str, held: list[LeaseId]) -> None:
        g = self.g  # its work has stopped by now: what tells is a running run still claimed by it
        for run, state in g.run_states.items():
            claim = g.runs_view.claim_of(run) if state == "RUNNING" and g.runs_view is not None else None
            if claim is not None and claim.consumer.split("#")[0] == client:
                self.count += 1
                return


@situation
class CancelledWhileRunning(Situation):
    id = "cancelled-while-running"
    statement = "a cancel was handled for a run that was running (it went CANCELLING)"
    parts = RUNS
    tests = ("bounded-transition",)
    never = "no run was ever cancelled while it ran"

    def cancel_handled(self, run: int) -> None:
        if self.g.run_states.get(run) == "CANCELLING":
            self.count += 1


@situation
class CancelledBeforeStart(Situation):
    id = "cancelled-before-start"
    statement = "a cancel was handled for a run not yet started (queued, or not even submitted yet)"
    parts = RUNS
    tests = ("cancelled-never-starts",)
    never = "no run was ever cancelled before it started"

    def cancel_handled(self, run: int) -> None:
        if self.g.run_states.get(run) in (None, "SCHEDULED", "CANCELLED"):
            self.count += 1

def catalogue(declared_by_model: tuple[Declared, ...] = ()) -> tuple[Declared, ...]:
    """Every situation a run of a model may reach: dst's own, then the model's."""
    return (*(unit.declared() for unit in SITUATIONS), *declared_by_model)


def cases_met(reached: dict[str, int], situations: tuple[Declared, ...], invariants: tuple[str, ...],
              violated: Iterable[str] = ()) -> dict[str, int]:
    """How many times each invariant a run checked met a case it exists for: the times a situation that
    tests it came up (an invariant checks after every step, so a case that came up was checked), and at least
    once for each invariant the run ``violated`` (its cause and its consequences): it met its case there."""
    checked = set(invariants)
    met = dict.fromkeys(invariants, 0)
    for s in situations:
        n = reached.get(s.id, 0)
        if n:
            for invariant in s.tests:
                if invariant in checked:
                    met[invariant] += n
    for broken in violated:
        if broken in met and not met[broken]:
            met[broken] = 1
    return met
