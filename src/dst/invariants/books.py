"""The ghost's books: the harness's own truth, kept from the facts a model reports, and the invariants' dispatcher.

The harness, not the model, keeps the truth it checks against: which lease owns which slots
(attributed as the model reports each change), which leases the authority still has, which
client does protected work under which lease or claim, which state each run is in. It
implements :class:`dst.sut.Facts` and the hosts' hooks, keeps those books, and hands each
fact to the invariant units that watch it. Checks are incremental: a change marks what it
touched, and :meth:`Ghost.settle` (called after every handler step, write and restart) checks
only that; nothing rescans all state.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Callable, Mapping

from ..sim.kernel import Kernel, StopRun
from ..sut import Bounds, Cancel, LeaseId, LeaseView, ResourceView, RunClaim, RunView, lease_name, lease_order

# The hooks a unit may define, and what they are called with:
HOOKS = (
    "limit_changed",          # (limit): a step changed a limit's count or its leases (checked at the step's end)
    "foreign_release",        # (lease | None, limit, n, owned): a release gave back more slots than the lease owned
    "lease_stored",           # (lease, token, target): a lease was stored, handed ``token`` fencing ``target``
    "lease_renewed",          # (lease): a lease's expiry moved
    "write_accepted",         # (holder, lease, token, target): the resource accepted a write
    "write_refused",          # (holder, lease, token, target): the resource refused a write
    "work_started",           # (client, handle, other): a client starts protected work (handle: a lease id, or a
                              # RunClaim, with ``other`` the worker already working on that run, if any)
    "work_stopped",           # (client, handle): ... and stops it
    "removed_while_working",  # (client, lease): a lease was removed while its holder worked under it
    "lease_removed",          # (lease, holder, expiry, key): a lease was removed; ``expiry``: the one last seen for
                              # it; ``key``: the server handler whose step removed it (None: no handler's)
    "client_died",            # (client, leases it held): a client incarnation is gone
    "run_state",              # (run, state): a run entered a state
    "update_accepted",        # (run, token, what): an ack or terminal write was accepted
    "heartbeat_accepted",     # (run, token): a heartbeat was answered as the run's owner's
    "cancel_handled",         # (run): the server finished handling a cancel of the run
    "quiet_period_over",      # (served_until, busy): the drain and the quiet period passed; ``served_until``: when
                              # workers last served the runs stream (-1: none is left alive; None: one is paused);
                              # ``busy``: the clients still at work (a drain that ran out): what they hold is live
    "client_paused",          # (client, until): a client is frozen until ``until``
    "client_cut_off",         # (client, until): a client is partitioned from the server until ``until``
    "server_down",            # (): the server went down (a restart) or froze (a pause)
    "claimed",                # (run, token): a run was delivered under a new claim
)


class Violation(StopRun):
    """An invariant failed: ``invariant`` is its stable id, ``message`` the one line of values."""

    def __init__(self, invariant: str, time: int, message: str) -> None:
        super().__init__(f"{invariant}: {message}")
        self.invariant = invariant
        self.time = time
        self.message = message


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


class _NoLeases:
    """The lease view of a model that keeps none."""

    def count(self, limit: str) -> int:
        return 0

    def expiry(self, lease: LeaseId) -> int | None:
        return None

    def lease_ids(self) -> list[LeaseId]:
        return []


class Books:
    """The truth, kept from facts: implements :class:`dst.sut.Facts` and the hosts' hooks, and hands each fact to
    the units that watch it (:class:`~dst.invariants.ghost.Ghost` picks them)."""

    def __init__(self, kernel: Kernel, limits: dict[str, int]) -> None:
        self.kernel = kernel
        self.limits = limits
        self.view: LeaseView = _NoLeases()
        self.handling: Callable[[], int | None] = lambda: None  # the server handler whose step runs now (the mode's)
        self.senders: Mapping[int, str] = {}  # plan step id -> its actor: who sent a request of that step's key
        self.runs_view: RunView | None = None
        self.resource: ResourceView | None = None  # the resource's own state, when it shows it
        self.bounds = Bounds()
        self.server = ServerWatch(kernel)
        self.model_reached: dict[str, int] = {}
        self.moments: dict[str, int] = {}  # situation -> when the run first reached it: where a campaign branches
        self.on_moment: Callable[[str], None] | None = None  # told of each situation the run reaches a first time
        # A run's: takes the first failure of each invariant (its id, its message), and the run goes on. Unset, a
        # failure raises Violation (the books checked alone, as a test does).
        self.recorder: Callable[[str, str], None] | None = None
        self.violated: list[str] = []  # the invariants the recorder was given, in order
        self.holding = 0  # calls under way through a held gate (the asyncio mode's: see ghost.FactsGate)
        self._watchers: dict[str, tuple[Callable[..., None], ...]] = {hook: () for hook in HOOKS}
        self._bind()

        # Lease books.
        self.owned: dict[LeaseId, int] = {}  # lease -> slots it took and has not given back
        self.limit_of: dict[LeaseId, str] = {}  # lease -> its limit
        self.live: dict[LeaseId, str] = {}  # leases the store has -> holder
        # Slots owned by stored leases not yet past their expiry, kept as renewals and time move it:
        self.recognised = {name: 0 for name in limits}
        self.counted: set[LeaseId] = set()  # the leases in ``recognised``
        self.expiry_of: dict[LeaseId, int] = {}  # the expiry last seen for each stored lease
        self.expiry_before: int | None = None  # during a renewal's checks: the lease's expiry before it
        self.expiring: dict[str, list[tuple[int, LeaseId]]] = {name: [] for name in limits}  # heaps of (expiry, lease)
        self.live_owned = {name: 0 for name in limits}  # limit -> slots owned by live leases
        self.working: dict[str, LeaseId] = {}  # client -> lease it works under right now
        self.working_on = {name: 0 for name in limits}  # limit -> clients working on it
        # Every slice of protected work, for the page: [client, handle, start, end (None: under way)].
        self.work_slices: list[list[Any]] = []
        self._slice_of: dict[str, list[list[Any]]] = {}  # client -> its slices under way (a worker's tasks)
        self._dirty: list[str] = []  # limits touched since the last settle
        self._removed_while_working: list[tuple[str, LeaseId]] = []
        self.token_of: dict[LeaseId, int] = {}  # lease -> the token it was handed
        self.target_of: dict[LeaseId, str] = {}  # lease -> what its token fences
        self.newest_token: dict[str, int] = {}  # target -> the newest token handed out for it
        self.on_target: dict[str, set[LeaseId]] = {}  # target -> the stored leases that hold it
        # The resource's (fence, contents) per target, as its view showed them after the last write reported there:
        self.stored: dict[str, tuple[int | None, object]] = {}
        self.stored_before: tuple[int | None, object] | None = None  # during a write's checks: its target's, before
        # Run books.
        self.run_states: dict[int, str] = {}
        self.current_claim: dict[int, int] = {}  # run -> token of its current claim
        self.run_worker: dict[int, str] = {}  # run -> the worker working on it
        self.run_claim_worked: dict[int, int] = {}  # run -> the claim it is worked on under (one execution's)
        self.due_since: dict[int, int] = {}  # run -> when it was scheduled, or last handed to a worker
        self.run_moved = 0  # when a run last changed state, was claimed, heartbeaten or worked on
        self.quiet_from = 0  # when the quiet period began

    def _bind(self) -> None:
        # The hot hooks as plain attributes: one lookup, and a loop over nothing when nobody watches.
        w = self._watchers
        self._limit_changed = w["limit_changed"]
        self._foreign_release = w["foreign_release"]
        self._write_accepted = w["write_accepted"]
        self._work_started = w["work_started"]
        self._work_stopped = w["work_stopped"]
        self._removed = w["removed_while_working"]

    def failed(self, unit: Any, message: str) -> None:
        """An invariant unit failed. Its first failure goes to the recorder, and the unit is asked nothing more:
        the facts that follow are the model's own, unchanged by a check, and a state that keeps failing costs
        nothing more to check."""
        if self.recorder is None:
            raise Violation(unit.id, self.kernel.now, message)
        if unit.id in self.violated:
            return  # again, in a dispatch already under way when it first failed
        self.violated.append(unit.id)
        self._watchers = {hook: tuple(w for w in watchers if getattr(w, "__self__", None) is not unit)
                          for hook, watchers in self._watchers.items()}
        self._bind()
        self.recorder(unit.id, message)

    def reached(self, situation: str) -> None:
        """A situation the model declares came up (``dst.sut.Facts``)."""
        self.model_reached[situation] = self.model_reached.get(situation, 0) + 1
        self.first_time(situation)

    def first_time(self, situation: str) -> None:
        """The run reached ``situation``: the first time, it is the situation's moment, and ``on_moment`` hears it."""
        if situation not in self.moments:
            self.moments[situation] = self.kernel.now
            if self.on_moment is not None:
                self.on_moment(situation)

    # --- dst.sut.Facts: leases --------------------------------------------------------------

    def slots_taken(self, lease: LeaseId, limit: str, n: int) -> None:
        self.owned[lease] = self.owned.get(lease, 0) + n
        self.limit_of[lease] = limit
        if lease in self.live:
            self.live_owned[limit] += n
        if lease in self.counted:
            self.recognised[limit] += n
        self._dirty.append(limit)

    def slots_returned(self, lease: LeaseId | None, limit: str, n: int) -> None:
        have = self.owned.get(lease, 0) if lease is not None and self.limit_of.get(lease) == limit else 0
        if have < n:
            for check in self._foreign_release:
                check(lease, limit, n, have)
            n = have  # the books keep only what the lease owned
        if lease is not None and n:
            self.owned[lease] = have - n
            if lease in self.live:
                self.live_owned[limit] -= n
            if lease in self.counted:
                self.recognised[limit] -= n
        self._dirty.append(limit)

    def lease_stored(self, lease: LeaseId, holder: str, limit: str, token: int | None = None,
                     target: str | None = None) -> None:
        self.live[lease] = holder
        self.limit_of.setdefault(lease, limit)
        self.live_owned[self.limit_of[lease]] += self.owned.get(lease, 0)
        self._saw_expiry(lease, limit)
        self._dirty.append(limit)
        if token is not None and target is not None:
            for check in self._watchers["lease_stored"]:
                check(lease, token, target)  # before the books take it: a check compares it with what came before
            self.token_of[lease], self.target_of[lease] = token, target
            self.newest_token[target] = max(token, self.newest_token.get(target, token))
            self.on_target.setdefault(target, set()).add(lease)

    def lease_renewed(self, lease: LeaseId, limit: str) -> None:
        self.expiry_before = self.expiry_of.get(lease)  # for the checks: the expiry the renewal replaced
        self._saw_expiry(lease, limit)  # a renewal can make a lease count again
        self._dirty.append(limit)
        for check in self._watchers["lease_renewed"]:
            check(lease)

    def _saw_expiry(self, lease: LeaseId, limit: str) -> None:
        expiry = self.view.expiry(lease) or 0
        self.expiry_of[lease] = expiry
        heappush(self.expiring[limit], (expiry, lease))
        if expiry > self.kernel.now and lease not in self.counted:
            self.counted.add(lease)
            self.recognised[limit] += self.owned.get(lease, 0)

    def lease_removed(self, lease: LeaseId) -> None:
        holder = self.live.pop(lease, None)
        target = self.target_of.pop(lease, None)
        if target is not None:
            self.on_target[target].discard(lease)  # it holds its target no more
        if holder is None:
            return  # a removal reported twice: the books already have it
        limit = self.limit_of[lease]
        expiry = self.expiry_of.pop(lease, None)
        for check in self._watchers["lease_removed"]:
            check(lease, holder, expiry, self.handling())
        if lease in self.counted:
            self.counted.remove(lease)
            self.recognised[limit] -= self.owned.get(lease, 0)
        self.live_owned[limit] -= self.owned.get(lease, 0)
        self._dirty.append(limit)
        if self.working.get(holder) == lease:
            self._removed_while_working.append((holder, lease))

    def write_accepted(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        self._saw_write(target)
        for check in self._write_accepted:
            check(holder, lease, token, target)

    def write_refused(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        self._saw_write(target)
        for check in self._watchers["write_refused"]:
            check(holder, lease, token, target)

    def _saw_write(self, target: str) -> None:
        # Nothing but a write changes what the resource keeps for a target: the state the last write there left is
        # what this one found (None: the first write seen there, whose before is unknown).
        view = self.resource
        if view is not None:
            self.stored_before = self.stored.get(target)
            self.stored[target] = (view.fence(target), view.contents(target))

    # --- dst.sut.Facts: runs ----------------------------------------------------------------

    def run_state(self, run: int, state: str) -> None:
        if state == "SCHEDULED":
            self.due_since[run] = self.kernel.now
        self.run_states[run] = state
        self.run_moved = self.kernel.now
        for check in self._watchers["run_state"]:
            check(run, state)

    def claimed(self, run: int, token: int) -> None:
        for check in self._watchers["claimed"]:
            check(run, token)
        self.current_claim[run] = token
        self.due_since[run] = self.kernel.now  # handed to a worker: it is that worker's to finish from now
        self.run_moved = self.kernel.now

    def update_accepted(self, run: int, token: int, what: str) -> None:
        self.run_moved = self.kernel.now
        for check in self._watchers["update_accepted"]:
            check(run, token, what)

    def heartbeat_accepted(self, run: int, token: int) -> None:
        for check in self._watchers["heartbeat_accepted"]:  # a beat moves no run: at-least-once's backlog rule ignores it
            check(run, token)

    # --- the hosts' hooks -------------------------------------------------------------------

    def handled(self, request: Any) -> None:
        """The server finished handling a request (the harness sees every one)."""
        if request.__class__ is Cancel:
            for check in self._watchers["cancel_handled"]:
                check(request.run)

    def work_started(self, client: str, handle: Any) -> None:
        piece = [client, handle, self.kernel.now, None]
        self._slice_of.setdefault(client, []).append(piece)
        self.work_slices.append(piece)
        if handle.__class__ is not RunClaim:  # a lease id, of whatever kind the service's are
            limit = self.limit_of.get(handle)
            self.working[client] = handle
            if limit is not None:
                self.working_on[limit] += 1
            for check in self._work_started:
                check(client, handle, None)
            return
        run = handle.run  # a run's claim
        self.run_moved = self.kernel.now
        other = self.run_worker.get(run)
        if other == client and self.run_claim_worked.get(run) not in (None, handle.token):
            # The same worker, under another claim: a second execution beside its first (its own sweep took it back).
            other = f"{client}'s execution under claim {self.run_claim_worked[run]}"
        self.run_worker[run] = client
        self.run_claim_worked[run] = handle.token
        for check in self._work_started:
            check(client, handle, other)

    def work_stopped(self, client: str, handle: Any) -> None:
        pieces = self._slice_of.get(client)
        if pieces:  # its one slice, nearly always; a worker running several tasks has more
            i = 0 if pieces[0][1] == handle else next((j for j, p in enumerate(pieces) if p[1] == handle), -1)
            if i >= 0:
                pieces.pop(i)[3] = self.kernel.now
        if handle.__class__ is not RunClaim:
            del self.working[client]
            limit = self.limit_of.get(handle)
            if limit is not None:
                self.working_on[limit] -= 1
        elif self.run_worker.get(handle.run) == client and self.run_claim_worked.get(handle.run) == handle.token:
            del self.run_worker[handle.run]
            del self.run_claim_worked[handle.run]
        for check in self._work_stopped:
            check(client, handle)

    def client_died(self, client: str) -> None:
        """A client incarnation is gone: its leases must be reclaimed in time."""
        for piece in self._slice_of.pop(client, ()):
            piece[3] = self.kernel.now  # its work ends with it
        watchers = self._watchers["client_died"]
        if watchers:
            held = [lease for lease in sorted(self.live, key=lease_order) if self.live[lease] == client]
            for check in watchers:
                check(client, held)

    def server_down(self) -> None:
        self.server.up_since = None
        for check in self._watchers["server_down"]:
            check()

    def client_paused(self, client: str, until: int) -> None:
        for check in self._watchers["client_paused"]:
            check(client, until)

    def client_cut_off(self, client: str, until: int) -> None:
        for check in self._watchers["client_cut_off"]:
            check(client, until)

    def server_up(self) -> None:
        self.server.up_since = self.kernel.now

    def recount(self) -> None:
        """The store may have changed its counts without a fact to say so (the asyncio mode observes a service
        that reports none): check every limit at the end of this step."""
        self._dirty.extend(self.limits)

    def settle(self) -> None:
        """The end of a step: check what changed since the last one."""
        if self._dirty:
            dirty = self._dirty
            self._dirty = []
            checks = self._limit_changed
            for limit in dirty:
                for check in checks:
                    check(limit)
        if self._removed_while_working:
            removed = self._removed_while_working
            self._removed_while_working = []
            for client, lease in removed:
                if self.working.get(client) == lease:
                    for check in self._removed:
                        check(client, lease)

    def quiet_period_over(self, served_until: int | None, busy: frozenset[str] = frozenset()) -> None:
        for check in self._watchers["quiet_period_over"]:
            check(served_until, busy)

    def worked(self, until: int) -> tuple[tuple[str, str, int, int], ...]:
        """Every slice of protected work: (client, what it worked under, as dst names it, start, end); a slice
        still under way ends at ``until``."""
        return tuple((client, f"run {handle.run}" if handle.__class__ is RunClaim else lease_name(handle), start,
                      until if end is None else end) for client, handle, start, end in self.work_slices)

    # --- what units ask ---------------------------------------------------------------------

    def recognised_lease(self, lease: LeaseId, holder: str) -> bool:
        """The authority still has ``lease``, held by ``holder``, unexpired."""
        expiry = self.view.expiry(lease)
        return expiry is not None and self.live.get(lease) == holder and self.kernel.now < expiry

    def lease_state(self, lease: LeaseId) -> str:
        expiry = self.view.expiry(lease)
        name = lease_name(lease)
        if expiry is None:
            return f"{name} is gone"
        return f"{name} expired at t={expiry}" if expiry <= self.kernel.now else f"{name} valid until t={expiry}"

    def recognised_slots(self, limit: str) -> int:
        """Slots owned by the limit's stored, unexpired leases: leases whose expiry has passed leave the
        count as time reaches them (amortised O(log n), however many leases the limit has)."""
        heap, now = self.expiring[limit], self.kernel.now
        while heap and heap[0][0] <= now:
            expiry, lease = heappop(heap)
            if self.expiry_of.get(lease) == expiry and lease in self.counted:
                self.counted.remove(lease)
                self.recognised[limit] -= self.owned.get(lease, 0)
        return self.recognised[limit]

    def owners(self, limit: str, recognised_only: bool = False) -> str:
        now = self.kernel.now
        parts = [f"{lease_name(lease)}({self.live.get(lease, 'gone')})={n}"
                 for lease, n in sorted(self.owned.items(), key=lambda item: lease_order(item[0]))
                 if n and self.limit_of.get(lease) == limit
                 and (not recognised_only or (self.view.expiry(lease) or 0) > now)]
        return f"; owners: {', '.join(parts)}" if parts else ""

    def not_yet_due(self, lease: LeaseId) -> bool:
        """``lease`` is valid, or expired too recently for the reaper to have been due: in a run still
        moving (a drain that ran out), a lease granted or renewed late is live, not stranded."""
        return (self.view.expiry(lease) or 0) + self.bounds.reclaim_within > self.kernel.now

    def recognised_claim(self, claim: Any) -> bool:
        held = self.runs_view.claim_of(claim.run) if self.runs_view is not None else None
        return held is not None and held.token == claim.token and \
            self.kernel.now < held.idle_since + self.bounds.claim_timeout

    def claim_state(self, run: int) -> str:
        held = self.runs_view.claim_of(run) if self.runs_view is not None else None
        if held is None:
            return f"run {run} has no claim"
        return f"current claim {held.token} of {held.consumer}, idle since t={held.idle_since}"
