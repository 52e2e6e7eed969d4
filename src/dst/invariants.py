"""Ghost state and the invariant checks, by stable id (``docs/catalogue.md``).

The harness, not the model, keeps the truth it checks against: which lease owns
which slots (attributed as the store reports each change), which leases the store
still has, which client is doing protected work under which lease, and the highest
token the resource accepted. Checks are incremental: a change marks what it touched,
and :meth:`Ghost.settle` (called after every handler step, write and restart) checks
only that; nothing rescans all state.

==================  ===========================================================
slot-accounting     a limit's stored count equals the slots owned by its live leases
capacity            the slots owned by leases the authority recognises (stored and
                    unexpired) never exceed the limit
no-foreign-release  a release or reap returns only slots the lease it names owns
fenced-writes       no accepted write has a token below one accepted before (and,
                    under the token-and-lease contract, none from a lease the
                    authority no longer recognises)
single-executor     a client works only while the authority recognises its lease,
                    and no more clients work on a limit at once than it allows
stranded-slot       a dead holder's lease is reclaimed within TTL + reaper interval;
                    after the quiet period every count is 0 and no lease is left
==================  ===========================================================
"""

from __future__ import annotations

import re
from heapq import heappop, heappush
from typing import Any, Iterable, cast

from .sim.kernel import Kernel, StopRun
from .sut import Cancel, LeaseView, RunView


def shape(message: str) -> str:
    """A violation message with its particulars (numbers, leases, clients, times) blanked out: what
    violations of one kind have in common, for grouping them into signatures."""
    message = re.sub(r"\bL\d+\b", "L#", message)
    message = re.sub(r"\bc\d+(#\d+)?\b", "c#", message)
    message = re.sub(r"t=\d+(\.\d+)?m?s\b", "t=#", message)
    return re.sub(r"\d+", "#", message)


class ServerWatch:
    """When the server last came up (None while it is down). A liveness window counts only time the
    server was up: after downtime the check is re-armed for a full window from the boot."""

    __slots__ = ("kernel", "up_since")

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.up_since: int | None = 0

    def rearmed(self, window_start: int, within: int, check: Any, args_from: Any) -> bool:
        """If the server was not up since ``window_start``, schedule ``check(args_from(start))`` a full
        window after it is (back) up, and say so; otherwise the window stands and the caller checks now."""
        up = self.up_since
        if up is not None and up <= window_start:
            return False
        start = self.kernel.now if up is None else up
        self.kernel.at(start + within, check, args_from(start))
        return True


class Violation(StopRun):
    """An invariant failed: ``invariant`` is its stable id, ``message`` the one line of values."""

    def __init__(self, invariant: str, time: int, message: str) -> None:
        super().__init__(f"{invariant}: {message}")
        self.invariant = invariant
        self.time = time
        self.message = message


class Ghost:
    """Implements the model's Observer protocol and the harness hooks; raises :class:`Violation`."""

    def __init__(self, view: LeaseView, kernel: Kernel, limits: dict[str, int], enabled: Iterable[str], *,
                 check_lease_on_write: bool, reclaim_within: int) -> None:
        self.view = view
        self.kernel = kernel
        self.limits = limits
        self.enable(enabled)
        self.check_lease_on_write = check_lease_on_write
        self.reclaim_within = reclaim_within
        self.checks = 0

        self.owned: dict[int, int] = {}  # lease -> slots it took and has not given back
        self.limit_of: dict[int, str] = {}  # lease -> its limit
        self.live: dict[int, str] = {}  # leases the store has -> holder
        # Slots owned by stored leases not yet past their expiry, kept as renewals and time move it:
        self.recognised = {name: 0 for name in limits}
        self.counted: set[int] = set()  # the leases in ``recognised``
        self.expiry_of: dict[int, int] = {}  # the expiry last seen for each stored lease
        self.expiring: dict[str, list[tuple[int, int]]] = {name: [] for name in limits}  # heaps of (expiry, lease)
        self.live_owned = {name: 0 for name in limits}  # limit -> slots owned by live leases
        self.working: dict[str, int] = {}  # client -> lease it works under right now
        self.working_on = {name: 0 for name in limits}  # limit -> clients working on it
        self.highest_token: dict[str, int] = {}  # write target -> highest token accepted
        self._dirty: list[str] = []  # limits touched since the last settle
        self._removed_while_working: list[tuple[str, int]] = []
        self.server = ServerWatch(kernel)
        self.runs: RunGhost | None = None  # the runs part's ghost, when the scenario has runs

    def enable(self, invariants: Iterable[str]) -> None:
        enabled = set(invariants)
        self.on_accounting = "slot-accounting" in enabled
        self.on_capacity = "capacity" in enabled
        self.on_foreign = "no-foreign-release" in enabled
        self.on_fenced = "fenced-writes" in enabled
        self.on_single = "single-executor" in enabled
        self.on_stranded = "stranded-slot" in enabled

    def fail(self, invariant: str, message: str) -> None:
        raise Violation(invariant, self.kernel.now, message)

    # --- the model's facts: runs go to the runs part's ghost ------------------------------

    def run_state(self, run: int, state: str) -> None:
        if self.runs is not None:
            self.runs.run_state(run, state)

    def claimed(self, run: int, token: int) -> None:
        if self.runs is not None:
            self.runs.claimed(run, token)

    def update_accepted(self, run: int, token: int, what: str) -> None:
        if self.runs is not None:
            self.runs.update_accepted(run, token, what)

    def slots_taken(self, lease: int, limit: str, n: int) -> None:
        self.owned[lease] = self.owned.get(lease, 0) + n
        self.limit_of[lease] = limit
        if lease in self.live:
            self.live_owned[limit] += n
        if lease in self.counted:
            self.recognised[limit] += n
        self._dirty.append(limit)

    def slots_returned(self, lease: int | None, limit: str, n: int) -> None:
        have = self.owned.get(lease, 0) if lease is not None and self.limit_of.get(lease) == limit else 0
        if have < n:
            if self.on_foreign:
                self.checks += 1
                if lease is None:
                    self.fail("no-foreign-release", f"a release naming no lease gave back {n} slot(s) of {limit!r}: "
                              f"they belonged to another holder")
                self.fail("no-foreign-release", f"a release naming L{lease} gave back {n} slot(s) of {limit!r}, "
                          f"but L{lease} owned {have}: the slot belonged to another holder")
            n = have  # with the check off, keep the ghost's books as they were
        if lease is not None and n:
            self.owned[lease] = have - n
            if lease in self.live:
                self.live_owned[limit] -= n
            if lease in self.counted:
                self.recognised[limit] -= n
        self._dirty.append(limit)

    def lease_stored(self, lease: int, holder: str, limit: str) -> None:
        self.live[lease] = holder
        self.limit_of.setdefault(lease, limit)
        self.live_owned[self.limit_of[lease]] += self.owned.get(lease, 0)
        self._saw_expiry(lease, limit)
        self._dirty.append(limit)

    def lease_renewed(self, lease: int, limit: str) -> None:
        self._saw_expiry(lease, limit)  # a renewal can make a lease count again
        self._dirty.append(limit)

    def _saw_expiry(self, lease: int, limit: str) -> None:
        expiry = self.view.expiry(lease) or 0
        self.expiry_of[lease] = expiry
        heappush(self.expiring[limit], (expiry, lease))
        if expiry > self.kernel.now and lease not in self.counted:
            self.counted.add(lease)
            self.recognised[limit] += self.owned.get(lease, 0)

    def lease_removed(self, lease: int) -> None:
        holder = self.live.pop(lease)
        limit = self.limit_of[lease]
        self.expiry_of.pop(lease, None)
        if lease in self.counted:
            self.counted.remove(lease)
            self.recognised[limit] -= self.owned.get(lease, 0)
        self.live_owned[limit] -= self.owned.get(lease, 0)
        self._dirty.append(limit)
        if self.working.get(holder) == lease:
            self._removed_while_working.append((holder, lease))

    def handled(self, request: Any) -> None:
        """The server finished handling a request (the harness sees every one)."""
        if request.__class__ is Cancel and self.runs is not None:
            self.runs.cancel_handled(request.run)

    def write_accepted(self, holder: str, lease: int, token: int, target: str) -> None:
        if not self.on_fenced:
            return
        self.checks += 1
        highest = self.highest_token.get(target, 0)
        if token < highest:
            self.fail("fenced-writes", f"the resource accepted token {token} from {holder} on "
                      f"{target} after accepting token {highest} there")
        self.highest_token[target] = token
        if self.check_lease_on_write and not self._recognised(lease, holder):
            self.fail("fenced-writes", f"the resource accepted a write from {holder} under L{lease}, "
                      f"which the authority no longer recognises ({self._lease_state(lease)})")

    # --- the hosts' hooks -----------------------------------------------------------------

    def work_started(self, client: str, lease: Any) -> None:
        if lease.__class__ is not int:
            cast(RunGhost, self.runs).work_started(client, lease)  # a run's claim, not a lease
            return
        limit = self.limit_of.get(lease)
        self.working[client] = lease
        if limit is not None:
            self.working_on[limit] += 1
        if not self.on_single:
            return
        self.checks += 1
        if not self._recognised(lease, client):
            self.fail("single-executor", f"{client} starts work under L{lease}, which the authority no longer "
                      f"recognises ({self._lease_state(lease)})")
        if limit is not None and self.working_on[limit] > self.limits[limit]:
            who = ", ".join(sorted(c for c, l in self.working.items() if self.limit_of.get(l) == limit))
            self.fail("single-executor", f"{self.working_on[limit]} clients work on limit {limit!r} "
                      f"(capacity {self.limits[limit]}) at once: {who}")

    def work_stopped(self, client: str, lease: Any) -> None:
        if lease.__class__ is not int:
            cast(RunGhost, self.runs).work_stopped(client, lease)
            return
        del self.working[client]
        limit = self.limit_of.get(lease)
        if limit is not None:
            self.working_on[limit] -= 1
        if not self.on_single:
            return
        self.checks += 1
        expiry = self.view.expiry(lease)
        if expiry is None or expiry < self.kernel.now:
            self.fail("single-executor", f"{client} worked under L{lease} until t={self.kernel.now}, past the "
                      f"moment the authority stopped recognising it ({self._lease_state(lease)})")

    def client_died(self, client: str) -> None:
        """A client incarnation is gone: its leases must be reclaimed in time."""
        if not self.on_stranded:
            return
        held = [lease for lease, holder in sorted(self.live.items()) if holder == client]
        if held:
            now = self.kernel.now
            self.kernel.after(self.reclaim_within, self._check_reclaimed, (client, held, now, now))

    def server_down(self) -> None:
        self.server.up_since = None

    def server_up(self) -> None:
        self.server.up_since = self.kernel.now

    def settle(self) -> None:
        """The end of a step: check what changed since the last one."""
        if self._dirty:
            dirty = self._dirty
            self._dirty = []
            view, live_owned = self.view, self.live_owned
            for limit in dirty:
                if self.on_accounting:
                    self.checks += 1
                    count = view.count(limit)
                    if count != live_owned[limit]:
                        self.fail("slot-accounting", f"count({limit})={count} but live leases own "
                                  f"{live_owned[limit]} slot(s){self._owners(limit)}")
                if self.on_capacity:
                    self.checks += 1
                    # Recognised leases are among the live ones, so only a full limit needs the closer look.
                    held = live_owned[limit] if live_owned[limit] <= self.limits[limit] else self._recognised_slots(limit)
                    if held > self.limits[limit]:
                        self.fail("capacity", f"leases the authority recognises hold {held} slot(s) of {limit!r}, "
                                  f"capacity {self.limits[limit]}{self._owners(limit, recognised_only=True)}")
        if self._removed_while_working:
            removed = self._removed_while_working
            self._removed_while_working = []
            for client, lease in removed:
                if self.on_single and self.working.get(client) == lease:
                    self.checks += 1
                    self.fail("single-executor", f"L{lease} was removed while {client} works under it")

    def final_check(self) -> None:
        """After the quiet period: nothing is left held."""
        if not self.on_stranded:
            return
        self.checks += 1
        for limit in self.limits:
            count = self.view.count(limit)
            if count != 0:
                self.fail("stranded-slot", f"after the quiet period count({limit})={count}{self._owners(limit)}")
        left = self.view.lease_ids()
        if left:
            shown = ", ".join(f"L{lease}({self.live.get(lease, '?')})" for lease in left[:5])
            self.fail("stranded-slot", f"after the quiet period {len(left)} lease(s) remain: {shown}")

    # --- helpers --------------------------------------------------------------------------

    def _check_reclaimed(self, arg: tuple[str, list[int], int, int]) -> None:
        client, held, died, window_start = arg
        if self.server.rearmed(window_start, self.reclaim_within, self._check_reclaimed,
                               lambda start: (client, held, died, start)):
            return  # the reaper did not run for the whole window
        self.checks += 1
        for lease in held:
            if lease in self.live:
                self.fail("stranded-slot", f"L{lease} of {client}, which died at t={died}, still holds "
                          f"{self.owned.get(lease, 0)} slot(s) of {self.limit_of[lease]!r} "
                          f"{self.reclaim_within}ms later ({self._lease_state(lease)})")

    def _recognised(self, lease: int, holder: str) -> bool:
        expiry = self.view.expiry(lease)
        return expiry is not None and self.live.get(lease) == holder and self.kernel.now < expiry

    def _lease_state(self, lease: int) -> str:
        expiry = self.view.expiry(lease)
        if expiry is None:
            return f"L{lease} is gone"
        return f"L{lease} expired at t={expiry}" if expiry <= self.kernel.now else f"L{lease} valid until t={expiry}"

    def _recognised_slots(self, limit: str) -> int:
        """Slots owned by the limit's stored, unexpired leases: leases whose expiry has passed leave the
        count as time reaches them (amortised O(log n), however many leases the limit has)."""
        heap, now = self.expiring[limit], self.kernel.now
        while heap and heap[0][0] <= now:
            expiry, lease = heappop(heap)
            if self.expiry_of.get(lease) == expiry and lease in self.counted:
                self.counted.remove(lease)
                self.recognised[limit] -= self.owned.get(lease, 0)
        return self.recognised[limit]

    def _owners(self, limit: str, recognised_only: bool = False) -> str:
        now = self.kernel.now
        parts = [f"L{lease}({self.live.get(lease, 'gone')})={n}" for lease, n in sorted(self.owned.items())
                 if n and self.limit_of.get(lease) == limit
                 and (not recognised_only or (self.view.expiry(lease) or 0) > now)]
        return f"; owners: {', '.join(parts)}" if parts else ""


class RunGhost:
    """The truth about runs, claims and cancels; the invariants of the server-owned deadlines.

    ======================  =======================================================
    bounded-transition      a CANCELLING run is terminal within its deadline plus the
                            sweep interval (a full window again after any downtime)
    at-least-once           every run that was not cancelled ends acknowledged
    cancelled-never-starts  work cancelled before it was created (or started) never starts
    owner-only-update       an ack or terminal write is accepted only from the current claim
    single-executor         a worker works on a run only under its current, unexpired
                            claim, and never two workers on one run at once
    ======================  =======================================================
    """

    def __init__(self, view: RunView, kernel: Kernel, enabled: Iterable[str], *, deadline_within: int,
                 claim_timeout: int, server: ServerWatch) -> None:
        self.view = view
        self.kernel = kernel
        enabled = set(enabled)
        self.on_bounded = "bounded-transition" in enabled
        self.on_delivery = "at-least-once" in enabled
        self.on_never = "cancelled-never-starts" in enabled
        self.on_owner = "owner-only-update" in enabled
        self.on_single = "single-executor" in enabled
        self.deadline_within = deadline_within
        self.claim_timeout = claim_timeout
        self.checks = 0
        self.state: dict[int, str] = {}
        self.current: dict[int, int] = {}  # run -> token of its current claim
        self.never: set[int] = set()  # runs cancelled before they started
        self.working: dict[int, str] = {}  # run -> the worker working on it
        self.server = server

    def fail(self, invariant: str, message: str) -> None:
        raise Violation(invariant, self.kernel.now, message)

    # --- the run store's observer ---------------------------------------------------------------

    def run_state(self, run: int, state: str) -> None:
        self.state[run] = state
        if state == "CANCELLING" and self.on_bounded:
            now = self.kernel.now
            self.kernel.after(self.deadline_within, self._check_bounded, (run, now, now))

    def claimed(self, run: int, token: int) -> None:
        self.current[run] = token

    def update_accepted(self, run: int, token: int, what: str) -> None:
        if not self.on_owner:
            return
        self.checks += 1
        if self.current.get(run) != token:
            self.fail("owner-only-update", f"run {run} was marked {what} by claim {token}, but its current "
                      f"claim is {self.current.get(run)}: a former owner overwrote its successor")

    def cancel_handled(self, run: int) -> None:
        """The server has handled a cancel: if the run did not exist yet, or had not started, it never may."""
        if self.state.get(run, "SCHEDULED") == "SCHEDULED":
            self.never.add(run)

    # --- the hosts' hooks ----------------------------------------------------------------------------

    def work_started(self, client: str, claim: Any) -> None:
        run = claim.run
        other = self.working.get(run)
        self.working[run] = client
        if self.on_never:
            self.checks += 1
            if run in self.never:
                self.fail("cancelled-never-starts", f"{client} starts run {run}, which was cancelled before it started")
        if not self.on_single:
            return
        self.checks += 1
        if other is not None and other != client:
            self.fail("single-executor", f"{client} starts run {run} while {other} still works on it: two executions")
        if not self._recognised(claim):
            self.fail("single-executor", f"{client} starts run {run} under claim {claim.token}, which is not "
                      f"current ({self._claim_state(run)})")

    def work_stopped(self, client: str, claim: Any) -> None:
        if self.working.get(claim.run) == client:
            del self.working[claim.run]
        if not self.on_single:
            return
        self.checks += 1
        held = self.view.claim_of(claim.run)
        if held is None or held.token != claim.token or held.idle_since + self.claim_timeout < self.kernel.now:
            self.fail("single-executor", f"{client} worked on run {claim.run} until t={self.kernel.now} under claim "
                      f"{claim.token}, past the moment it stopped being current ({self._claim_state(claim.run)})")

    def final_check(self, workers_alive: bool) -> None:
        """After the quiet period: every run that was not cancelled was acknowledged."""
        if not self.on_delivery or not workers_alive:
            return  # with every worker dead for good, nothing could have acknowledged it
        self.checks += 1
        for run, state in sorted(self.state.items()):
            if state not in ("COMPLETED", "CANCELLED"):
                self.fail("at-least-once", f"after the quiet period run {run} is still {state} "
                          f"({self._claim_state(run)}): it was never acknowledged")

    # --- helpers -----------------------------------------------------------------------------------

    def _check_bounded(self, arg: tuple[int, int, int]) -> None:
        run, entered, window_start = arg
        if self.server.rearmed(window_start, self.deadline_within, self._check_bounded,
                               lambda start: (run, entered, start)):
            return  # the deadline loops did not run for the whole window
        self.checks += 1
        if self.state.get(run) == "CANCELLING" and self.view.entered(run) == entered:
            self.fail("bounded-transition", f"run {run} entered CANCELLING at t={entered} and is still there "
                      f"{self.kernel.now - entered}ms later, past its deadline plus the sweep interval")

    def _recognised(self, claim: Any) -> bool:
        held = self.view.claim_of(claim.run)
        return held is not None and held.token == claim.token and self.kernel.now < held.idle_since + self.claim_timeout

    def _claim_state(self, run: int) -> str:
        held = self.view.claim_of(run)
        if held is None:
            return f"run {run} has no claim"
        return f"current claim {held.token} of {held.consumer}, idle since t={held.idle_since}"
