"""Who took and gave back each slot of the deployment's limit: the ghost claim of Prefect's TLA+ model, kept from
Prefect's own calls.

Prefect's model of deployment concurrency (``formal/tla/deployment-concurrency`` in Prefect's repository) gives
each lease a ghost ``claim``: set when the slot is counted for it, cleared by the first decrement on its behalf.
``NoForeignRelease`` says a decrement on behalf of a lease without a claim never takes a slot while another lease
holds one, and ``AccountingConsistent`` says the count equals the claims. A diff of the stores cannot tell on
whose behalf a decrement was made, so this module wraps the functions Prefect calls (without changing what they
do or adding an ``await``) and notes, for each increment and decrement of ``active_slots``, the lease it was for:

* an increment is for the lease the same task creates next (``SecureFlowConcurrencySlots`` counts the slot, then
  creates the lease; ``ValidateDeploymentConcurrencyAtRunning`` does the same when it takes a new slot);
* a decrement is for the lease ``_release_concurrency_lease`` was asked to release (a terminal transition, and a
  rule's cleanup), the lease in the state of the run ``cleanup_flow_run_concurrency_slots`` cleans up (a
  deletion), or the lease the repossessor revokes; otherwise for no lease.

They are facts only once the transaction commits (SQLAlchemy's ``after_commit``): a rolled-back decrement gave
nothing back. Then a claim is taken or given back (``slots_taken``, ``slots_returned`` of the run's books), and a
decrement for a lease without a claim while another lease holds one is reported as what it is, a slot given back
on behalf of a lease that did not own it (``no-foreign-release``).
"""

from __future__ import annotations

import contextvars
import functools
import uuid
from typing import Any, Callable, Coroutine

import attrs
import sqlalchemy.event
import sqlalchemy.orm
from prefect.server.concurrency.lease_storage import filesystem as file_storage
from prefect.server.concurrency.lease_storage import memory as memory_storage
from prefect.server.models import concurrency_limits_v2 as limits_model
from prefect.server.models import flow_runs as flow_runs_model
from prefect.server.orchestration import core_policy
from prefect.server.services import repossessor as repossessor_service

from dst import sut

NOBODY = None
# The lease a decrement made in this task is for (set around the calls that release a lease's slot), and which
# path releases it: "release" (a transition's rule), "deletion", "reap".
RELEASING: contextvars.ContextVar[uuid.UUID | None] = contextvars.ContextVar("releasing", default=NOBODY)
RELEASER: contextvars.ContextVar[str] = contextvars.ContextVar("releaser", default="unnamed")
# Whether the release in this task found its lease when it read it (else it decrements by the fallback).
RELEASE_FOUND: contextvars.ContextVar[bool] = contextvars.ContextVar("release_found", default=True)
# The flow run whose state this task orchestrates: a lease created now is that run's.
ORCHESTRATING: contextvars.ContextVar[uuid.UUID | None] = contextvars.ContextVar("orchestrating", default=None)


@attrs.define
class Change:
    """One change of ``active_slots`` made in a transaction not yet committed."""

    taken: bool  # an increment (else a decrement)
    lease: uuid.UUID | None  # the lease it is for (an increment's: set when the lease is created)
    by: str = "increment"  # a decrement's path (RELEASER)


# An increment made in this task whose lease is not created yet.
UNLEASED: contextvars.ContextVar[Change | None] = contextvars.ContextVar("unleased", default=None)


class Ledger:
    """One run's claims: what each lease took and has not given back, reported to the run's books at commit."""

    def __init__(self, facts: sut.Facts, limit: str, number: Callable[[uuid.UUID], int]) -> None:
        self.facts, self.limit, self.number = facts, limit, number
        self.claims: dict[uuid.UUID, int] = {}
        self.pending: dict[int, list[Change]] = {}  # id of a (sync) session -> its uncommitted changes
        self.run_of: dict[uuid.UUID, uuid.UUID] = {}  # lease -> the flow run it was created for
        self.given_back_by: dict[uuid.UUID, str] = {}  # lease -> the path that gave its slot back
        self.read_by_reaper: dict[uuid.UUID, Any] = {}  # lease -> the expiry a revoke task of it read
        self.revoking: dict[uuid.UUID, int] = {}  # lease -> its revoke tasks under way

    def note(self, session: Any, change: Change) -> None:
        self.pending.setdefault(id(session.sync_session), []).append(change)

    def committed(self, session: sqlalchemy.orm.Session) -> None:
        for change in self.pending.pop(id(session), ()):
            if change.taken:
                if change.lease is None:
                    self.facts.reached("slot-taken-for-no-lease")
                    continue
                self.claims[change.lease] = self.claims.get(change.lease, 0) + 1
                self.facts.slots_taken(self.number(change.lease), self.limit, 1)
            elif change.lease is not None and self.claims.get(change.lease, 0) > 0:
                self.claims[change.lease] -= 1
                self.given_back_by[change.lease] = change.by
                self.facts.slots_returned(self.number(change.lease), self.limit, 1)
            else:
                # A decrement for a lease whose slot was already given back, counted by the two paths (this one,
                # and the one that gave the slot back): a reap after a deletion, a fallback release after a reap, a
                # release and a reap that both read the lease, two reaps. With another lease's claim to take, it
                # is the model's foreign decrement.
                first = self.given_back_by.get(change.lease, "none") if change.lease is not None else "none"
                self.facts.reached(f"{change.by}-after-{first}")
                if any(self.claims.values()):  # the fallback decrements the limit by its id, naming no lease
                    named = change.lease if change.by != "fallback" else None
                    self.facts.slots_returned(None if named is None else self.number(named), self.limit, 1)

    def rolled_back(self, session: sqlalchemy.orm.Session) -> None:
        self.pending.pop(id(session), None)

    def forget_process(self) -> None:
        """The server died: its open transactions never commit, its revoke tasks never go on."""
        self.pending.clear()
        self.read_by_reaper.clear()
        self.revoking.clear()


ACTIVE: Ledger | None = None  # the ledger of the run in progress in this process (runs do not overlap in one)

Coro = Callable[..., Coroutine[Any, Any, Any]]


def _session(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return kwargs["session"] if "session" in kwargs else args[0]


def _counting_increments(original: Coro) -> Coro:
    @functools.wraps(original)
    async def bulk_increment_active_slots(*args: Any, **kwargs: Any) -> Any:
        acquired = await original(*args, **kwargs)
        if ACTIVE is not None and acquired:
            change = Change(True, None)
            ACTIVE.note(_session(args, kwargs), change)
            UNLEASED.set(change)
        return acquired
    return bulk_increment_active_slots


def _counting_decrements(original: Coro) -> Coro:
    @functools.wraps(original)
    async def bulk_decrement_active_slots(*args: Any, **kwargs: Any) -> Any:
        released = await original(*args, **kwargs)
        if ACTIVE is not None and released:
            by = RELEASER.get()
            ACTIVE.note(_session(args, kwargs), Change(False, RELEASING.get(),
                                                       "fallback" if by == "release" and not RELEASE_FOUND.get() else by))
        return released
    return bulk_decrement_active_slots


def _naming_the_lease(original: Coro) -> Coro:
    @functools.wraps(original)
    async def create_lease(self: Any, *args: Any, **kwargs: Any) -> Any:
        lease = await original(self, *args, **kwargs)
        change = UNLEASED.get()
        if ACTIVE is not None:
            if change is not None:
                change.lease = lease.id
                UNLEASED.set(None)
            run = ORCHESTRATING.get()
            if run is not None:
                ACTIVE.run_of[lease.id] = run
        return lease
    return create_lease


def _releasing(original: Coro, lease_of: Callable[..., uuid.UUID | None], by: str) -> Coro:
    @functools.wraps(original)
    async def releasing(*args: Any, **kwargs: Any) -> Any:
        token, path = RELEASING.set(lease_of(*args, **kwargs)), RELEASER.set(by)
        try:
            return await original(*args, **kwargs)
        finally:
            RELEASING.reset(token)
            RELEASER.reset(path)
    return releasing


def _reads(original: Coro) -> Coro:
    @functools.wraps(original)
    async def read_lease(self: Any, lease_id: uuid.UUID, *args: Any, **kwargs: Any) -> Any:
        lease = await original(self, lease_id, *args, **kwargs)
        if ACTIVE is not None:
            by = RELEASER.get()
            if by == "reap" and lease is not None:
                ACTIVE.read_by_reaper[lease_id] = lease.expiration
            elif by == "release":
                RELEASE_FOUND.set(lease is not None)
        return lease
    return read_lease


def _reaper_revokes(original: Coro) -> Coro:
    @functools.wraps(original)
    async def revoke_lease(self: Any, lease_id: uuid.UUID, *args: Any, **kwargs: Any) -> Any:
        if ACTIVE is not None and RELEASER.get() == "reap" and lease_id in ACTIVE.read_by_reaper:
            read = ACTIVE.read_by_reaper.pop(lease_id)
            now = self.leases.get(lease_id) if isinstance(self, memory_storage.ConcurrencyLeaseStorage) else None
            if now is not None and now.expiration != read:
                ACTIVE.facts.reached("reap-of-a-renewed-lease")  # the model's stale reap: renewed after the read
        return await original(self, lease_id, *args, **kwargs)
    return revoke_lease


def _orchestrating(original: Coro) -> Coro:
    @functools.wraps(original)
    async def set_flow_run_state(*args: Any, **kwargs: Any) -> Any:
        ORCHESTRATING.set(kwargs.get("flow_run_id"))
        return await original(*args, **kwargs)
    return set_flow_run_state


def _lease_of_run(session: Any = None, flow_run: Any = None, **_: Any) -> uuid.UUID | None:
    state = getattr(flow_run, "state", None)
    return state.state_details.deployment_concurrency_lease_id if state is not None else None


def _lease_named(session: Any = None, lease_id: uuid.UUID | None = None, **_: Any) -> uuid.UUID | None:
    return lease_id


def revoking(lease_id: uuid.UUID) -> Callable[[], None]:
    """The repossessor's revoke task for ``lease_id`` decrements on its behalf (called in that task); returns what
    ends it."""
    token, path = RELEASING.set(lease_id), RELEASER.set("reap")
    if ACTIVE is not None:
        ACTIVE.revoking[lease_id] = ACTIVE.revoking.get(lease_id, 0) + 1
        if ACTIVE.revoking[lease_id] > 1:
            ACTIVE.facts.reached("revokes-at-once")  # docket's key is free again once a task starts

    def done() -> None:
        RELEASING.reset(token)
        RELEASER.reset(path)
        if ACTIVE is not None:
            ACTIVE.revoking[lease_id] -= 1
    return done


def _install() -> None:
    """Wrap Prefect's functions once per process. The wrappers only note; with no run in progress they pass through."""
    limits_model.bulk_increment_active_slots = _counting_increments(limits_model.bulk_increment_active_slots)
    decrement = _counting_decrements(limits_model.bulk_decrement_active_slots)
    limits_model.bulk_decrement_active_slots = decrement
    setattr(repossessor_service, "bulk_decrement_active_slots", decrement)  # imported there by name
    storages: list[Any] = [memory_storage.ConcurrencyLeaseStorage, file_storage.ConcurrencyLeaseStorage]
    try:  # prefect-redis's, when it is installed (storage = "redis")
        from prefect_redis.lease_storage import ConcurrencyLeaseStorage as RedisLeases
    except ImportError:
        pass
    else:
        storages.append(RedisLeases)
    for storage in storages:
        storage.create_lease = _naming_the_lease(storage.create_lease)  # type: ignore[method-assign]
        storage.read_lease = _reads(storage.read_lease)  # type: ignore[method-assign]
        storage.revoke_lease = _reaper_revokes(storage.revoke_lease)  # type: ignore[method-assign]
    core_policy._release_concurrency_lease = _releasing(core_policy._release_concurrency_lease, _lease_named,
                                                        "release")
    flow_runs_model.cleanup_flow_run_concurrency_slots = _releasing(
        flow_runs_model.cleanup_flow_run_concurrency_slots, _lease_of_run, "deletion")
    flow_runs_model.set_flow_run_state = _orchestrating(flow_runs_model.set_flow_run_state)

    def committed(session: sqlalchemy.orm.Session) -> None:
        if ACTIVE is not None:
            ACTIVE.committed(session)

    def rolled_back(session: sqlalchemy.orm.Session) -> None:
        if ACTIVE is not None:
            ACTIVE.rolled_back(session)

    sqlalchemy.event.listen(sqlalchemy.orm.Session, "after_commit", committed)
    sqlalchemy.event.listen(sqlalchemy.orm.Session, "after_rollback", rolled_back)


_install()
