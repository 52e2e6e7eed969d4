"""Each invariant flags a hand-built violating situation, and stays quiet on a clean one.

The ghost is driven directly, the way a model's store reports to it, over a
minimal view of the authority's state.
"""

from __future__ import annotations

import pytest

from dst.invariants import INVARIANT_IDS, RUN_INVARIANTS, Ghost, Violation
from dst.invariants.leases import NoForeignRelease
from dst.reference.runs import Claim
from dst.sim.kernel import Kernel
from dst.sim.trace import background_key, message_key
from dst.sut import Bounds, Cancel, RunClaim


class FakeView:
    """The authority's state as a model would expose it."""

    def __init__(self) -> None:
        self.counts = {"db": 0}
        self.expiries: dict[int, int] = {}

    def count(self, limit: str) -> int:
        return self.counts[limit]

    def expiry(self, lease: int) -> int | None:
        return self.expiries.get(lease)

    def lease_ids(self) -> list[int]:
        return sorted(self.expiries)


class FakeResource:
    """A resource that shows what it keeps per target (a dst.sut.ResourceView): set it, then report the write."""

    def __init__(self) -> None:
        self.fences: dict[str, int] = {}
        self.data: dict[str, str] = {}

    def write(self, request: object) -> None:
        return None

    def fence(self, target: str) -> int | None:
        return self.fences.get(target)

    def contents(self, target: str) -> str | None:
        return self.data.get(target)


class World:
    """A store that reports to the ghost as the reference store does (and a resource that shows its state,
    unless ``resource`` is False)."""

    def __init__(self, capacity: int = 1, token_and_lease: bool = False, enabled=INVARIANT_IDS,
                 resource: bool = True) -> None:
        self.kernel = Kernel()
        self.view = FakeView()
        self.resource = FakeResource()
        self.ghost = Ghost(self.kernel, {"db": capacity})
        self.ghost.watch(enabled, leases=self.view, runs=None, resource=self.resource if resource else None,
                         bounds=Bounds(reclaim_within=75_000, write_checks_lease=token_and_lease))

    def write(self, holder: str, token: int, accepted: bool, fence: int | None, data: str | None,
              target: str = "db/0") -> None:
        """The resource handles ``holder``'s write with ``token`` (under lease ``token``), leaving ``fence`` and
        ``data`` on ``target``, and reports it ``accepted`` or refused."""
        for table, value in ((self.resource.fences, fence), (self.resource.data, data)):
            if value is None:
                table.pop(target, None)
            else:
                table[target] = value
        report = self.ghost.write_accepted if accepted else self.ghost.write_refused
        report(holder, token, token, target)

    def acquire(self, lease: int, holder: str, expiry: int = 60_000, slots: int = 1, token: int | None = None,
                seat: int = 0) -> None:
        """Store ``lease``; with a ``token`` it is reported as fencing seat ``db/<seat>``."""
        self.view.counts["db"] += slots
        self.ghost.slots_taken(lease, "db", slots)
        self.view.expiries[lease] = expiry
        if token is None:
            self.ghost.lease_stored(lease, holder, "db")
        else:
            self.ghost.lease_stored(lease, holder, "db", token, f"db/{seat}")
        self.ghost.settle()

    def release(self, lease: int, slots: int = 1, named: int | None = None) -> None:
        """Drop ``lease`` and give its slots back on behalf of ``named`` (default: itself)."""
        self.view.expiries.pop(lease, None)
        if lease in self.ghost.live:
            self.ghost.lease_removed(lease)
        self.view.counts["db"] -= slots
        self.ghost.slots_returned(lease if named is None else named, "db", slots)
        self.ghost.settle()

    def at(self, time: int) -> None:
        self.kernel.run(time)


def flagged(invariant: str, action) -> Violation:
    with pytest.raises(Violation) as info:
        action()
    assert info.value.invariant == invariant
    assert info.value.message and "\n" not in info.value.message
    return info.value


# --- slot-accounting ------------------------------------------------------------------------------

def test_slot_accounting_clean_acquire_and_release():
    w = World(capacity=2)
    w.acquire(1, "c1")
    w.acquire(2, "c2")
    w.release(1)
    w.release(2)
    assert w.ghost.checks > 0


def test_slot_accounting_flags_a_lease_lost_while_its_count_stays():
    w = World()
    w.acquire(1, "c1")
    # A restart loses the lease (kept in memory) but the durable count stays at 1.
    del w.view.expiries[1]
    w.ghost.lease_removed(1)
    v = flagged("slot-accounting", w.ghost.settle)
    assert "count(db)=1" in v.message and "own 0" in v.message


def test_slot_accounting_flags_an_increment_without_a_lease():
    w = World(capacity=3)
    w.view.counts["db"] += 1
    w.ghost.slots_taken(7, "db", 1)  # the lease is never stored
    flagged("slot-accounting", w.ghost.settle)


# --- capacity ---------------------------------------------------------------------------------------

def test_capacity_flags_two_holders_of_a_limit_of_one():
    w = World(capacity=1)
    w.acquire(1, "c1")
    v = flagged("capacity", lambda: w.acquire(2, "c2"))
    assert "capacity 1" in v.message and "L1(c1)" in v.message and "L2(c2)" in v.message


def test_capacity_allows_up_to_the_limit():
    w = World(capacity=2)
    w.acquire(1, "c1")
    w.acquire(2, "c2")
    w.release(2)
    w.acquire(3, "c3")


# --- no-foreign-release ----------------------------------------------------------------------------

def test_no_foreign_release_flags_a_second_release_of_one_lease():
    w = World(capacity=2)
    w.acquire(1, "c1")
    w.acquire(2, "c2")
    w.release(1)
    # The retried release decrements again: the slot it frees is c2's.
    w.view.counts["db"] -= 1
    v = flagged("no-foreign-release", lambda: w.ghost.slots_returned(1, "db", 1))
    assert "L1 owned 0" in v.message


def test_no_foreign_release_flags_an_anonymous_decrement():
    w = World()
    w.acquire(1, "c1")
    w.view.counts["db"] -= 1
    v = flagged("no-foreign-release", lambda: w.ghost.slots_returned(None, "db", 1))
    assert "no lease" in v.message


def test_no_foreign_release_says_one_thing_of_a_release_naming_no_lease():
    # Code after Invariant.fail runs on (a run notes the failure and goes on), so a hook that has said what went
    # wrong returns: each failure is handed on as it is made, and a second says the release named L None.
    class Books:
        def __init__(self):
            self.failures = []

        def failed(self, unit, message):
            self.failures.append(message)

    books = Books()
    NoForeignRelease(books).foreign_release(None, "db", 1, 0)
    assert books.failures == ["a release naming no lease gave back 1 slot(s) of 'db': they belonged to another holder"]


def test_no_foreign_release_allows_the_owner_to_release():
    w = World()
    w.acquire(1, "c1")
    w.release(1)


# --- fenced-writes ------------------------------------------------------------------------------------

def test_fenced_writes_flags_a_token_below_one_accepted():
    w = World()
    w.ghost.write_accepted("c2", 2, 2, "db/0")
    v = flagged("fenced-writes", lambda: w.ghost.write_accepted("c1", 1, 1, "db/0"))
    assert "token 1" in v.message and "token 2" in v.message


def test_fenced_writes_accepts_rising_and_equal_tokens_and_other_seats():
    w = World(capacity=2)
    w.ghost.write_accepted("c1", 1, 1, "db/0")
    w.ghost.write_accepted("c1", 1, 1, "db/0")
    w.ghost.write_accepted("c3", 3, 3, "db/0")
    w.ghost.write_accepted("c2", 2, 2, "db/1")  # another seat is fenced on its own


def test_fenced_writes_under_token_and_lease_flags_an_expired_writer():
    w = World(token_and_lease=True)
    w.acquire(1, "c1", expiry=60_000)
    w.at(59_999)
    w.ghost.write_accepted("c1", 1, 1, "db/0")
    w.at(60_000)
    v = flagged("fenced-writes", lambda: w.ghost.write_accepted("c1", 1, 1, "db/0"))
    assert "no longer recognises" in v.message


def test_fenced_writes_under_token_only_allows_an_expired_writer_with_a_current_token():
    w = World(token_and_lease=False)
    w.acquire(1, "c1", expiry=60_000)
    w.at(70_000)
    w.ghost.write_accepted("c1", 1, 1, "db/0")


# --- single-executor -------------------------------------------------------------------------------

def test_single_executor_flags_work_on_an_expired_lease():
    w = World()
    w.acquire(1, "c1", expiry=60_000)
    w.at(60_000)
    v = flagged("single-executor", lambda: w.ghost.work_started("c1", 1))
    assert "expired at t=60000" in v.message


def test_single_executor_flags_work_that_outlives_its_lease():
    w = World()
    w.acquire(1, "c1", expiry=60_000)
    w.ghost.work_started("c1", 1)
    w.at(60_001)
    flagged("single-executor", lambda: w.ghost.work_stopped("c1", 1))


def test_single_executor_allows_work_that_ends_at_expiry():
    w = World()
    w.acquire(1, "c1", expiry=60_000)
    w.ghost.work_started("c1", 1)
    w.at(60_000)
    w.ghost.work_stopped("c1", 1)


def test_single_executor_flags_a_lease_removed_under_a_working_client():
    w = World()
    w.acquire(1, "c1")
    w.ghost.work_started("c1", 1)
    v = flagged("single-executor", lambda: w.release(1))
    assert "removed while c1 works" in v.message


def test_single_executor_flags_more_workers_than_the_limit():
    w = World(capacity=1, enabled=("single-executor",))  # capacity checks off: only the worker count
    w.acquire(1, "c1")
    w.acquire(2, "c2")
    w.ghost.work_started("c1", 1)
    v = flagged("single-executor", lambda: w.ghost.work_started("c2", 2))
    assert "2 clients work" in v.message


def test_single_executor_a_paused_client_is_not_working():
    w = World()
    w.acquire(1, "c1", expiry=60_000)
    w.ghost.work_started("c1", 1)
    w.at(30_000)
    w.ghost.work_stopped("c1", 1)  # paused
    w.at(90_000)
    w.release(1)  # the lease is reaped while it sleeps: no violation


# --- stranded-slot ----------------------------------------------------------------------------------

def test_stranded_slot_flags_a_count_left_after_the_quiet_period():
    w = World()
    w.acquire(1, "c1")
    v = flagged("stranded-slot", lambda: w.ghost.quiet_period_over(0))
    assert "count(db)=1" in v.message


def test_stranded_slot_clean_after_everything_is_released():
    w = World()
    w.acquire(1, "c1")
    w.release(1)
    w.ghost.quiet_period_over(0)


def test_stranded_slot_flags_a_dead_holders_lease_not_reclaimed_in_time():
    w = World()
    w.acquire(1, "c1")
    w.ghost.client_died("c1")
    v = flagged("stranded-slot", lambda: w.at(75_000))
    assert "L1 of c1" in v.message


def test_stranded_slot_allows_reclaim_within_the_window():
    w = World()
    w.acquire(1, "c1")
    w.ghost.client_died("c1")
    w.at(74_000)
    w.release(1)  # the reaper got it
    w.at(200_000)


def test_stranded_slot_window_restarts_when_the_server_was_down():
    w = World()
    w.acquire(1, "c1")
    w.ghost.client_died("c1")
    w.at(10_000)
    w.ghost.server_down()
    w.at(20_000)
    w.ghost.server_up()
    w.at(94_000)  # past the first window, within a full window from the boot
    w.release(1)
    w.at(300_000)


# --- switching invariants off ---------------------------------------------------------------------

LEASE_INVARIANTS = tuple(i for i in INVARIANT_IDS if i not in RUN_INVARIANTS)


@pytest.mark.parametrize("invariant", LEASE_INVARIANTS)
def test_a_disabled_invariant_is_not_checked(invariant):
    w = World(capacity=1, enabled=tuple(i for i in INVARIANT_IDS if i != invariant))
    situations = {
        "slot-accounting": lambda: (w.acquire(1, "c1"), w.view.expiries.pop(1), w.ghost.lease_removed(1), w.ghost.settle()),
        "capacity": lambda: (w.acquire(1, "c1"), w.acquire(2, "c2")),
        "no-foreign-release": lambda: w.ghost.slots_returned(None, "db", 1),
        "fenced-writes": lambda: (w.ghost.write_accepted("c2", 2, 2, "db/0"),
                                  w.ghost.write_accepted("c1", 1, 1, "db/0")),
        "single-executor": lambda: (w.acquire(1, "c1", expiry=10), w.at(10), w.ghost.work_started("c1", 1)),
        "stranded-slot": lambda: (w.acquire(1, "c1"), w.ghost.quiet_period_over(0)),
        "unique-tokens": lambda: (w.acquire(1, "c1", expiry=10, token=5), w.at(10), w.release(1),
                                  w.acquire(2, "c2", token=5)),
        "exclusive-seats": lambda: (w.acquire(1, "c1", token=1, seat=0), w.view.counts.update(db=0),
                                    w.ghost.slots_returned(1, "db", 1), w.acquire(2, "c2", token=2, seat=0)),
        "write-progress": lambda: (w.acquire(1, "c1", token=1), w.ghost.write_refused("c1", 1, 1, "db/0")),
        "expiry-only-forward": lambda: (w.acquire(1, "c1", expiry=100), w.view.expiries.update({1: 50}),
                                        w.ghost.lease_renewed(1, "db")),
        "fence-only-up": lambda: (w.write("c2", 2, True, 2, "c2"), w.write("c3", 3, True, 1, "c3")),
        "refused-changes-nothing": lambda: (w.write("c2", 2, True, 2, "c2"), w.write("c1", 1, False, 2, "c1")),
        "removed-before-expiry": lambda: (w.acquire(1, "c1"), setattr(w.ghost, "handling", lambda: REAPER),
                                          w.release(1)),
    }
    situations[invariant]()


# --- removed before expiry -------------------------------------------------------------------------------

REAPER = background_key("reaper", 3, 0)


def test_a_lease_the_server_removes_before_its_expiry_is_flagged_but_not_its_holders_release():
    w = World(capacity=3)
    w.ghost.senders = {7: "c1", 8: "c2"}  # plan step 7 is c1's job, step 8 c2's
    handler: list[int | None] = [None]
    w.ghost.handling = lambda: handler[0]
    w.acquire(1, "c1", expiry=60_000)
    w.acquire(2, "c1", expiry=60_000)
    w.acquire(3, "c1", expiry=10_000)
    handler[0] = message_key(7, 2, 0)  # c1's own release: its to make, at any time
    w.release(1)
    w.at(10_000)
    handler[0] = REAPER  # the reaper takes a lease whose expiry has come: as it should
    w.release(3)
    handler[0] = None  # no handler's step: nobody to blame
    w.acquire(4, "c1", expiry=60_000)
    w.release(4)
    handler[0] = REAPER
    v = flagged("removed-before-expiry", lambda: w.release(2))
    assert v.message == ("L2 of c1 was removed at t=10000 by the server's own work (reaper.3.0), while its stored "
                         "expiry was t=60000: the authority took a lease it still recognised")
    other = World()
    other.ghost.senders, other.ghost.handling = {8: "c2"}, lambda: message_key(8, 6, 0)
    other.acquire(1, "c1")
    v = flagged("removed-before-expiry", lambda: other.release(1))  # c2's request took c1's valid lease
    assert "by a request of c2's (8.6.0)" in v.message


# --- expiry only forward ---------------------------------------------------------------------------------

def test_a_renewal_that_moves_the_expiry_back_is_flagged_and_one_that_extends_or_keeps_it_is_not():
    w = World()
    w.acquire(1, "c1", expiry=60_000)
    w.at(10_000)
    for expiry in (70_000, 70_000, 90_000):  # extended, kept (a duplicate answered alike), extended again
        w.view.expiries[1] = expiry
        w.ghost.lease_renewed(1, "db")
    w.view.expiries[1] = 89_998
    v = flagged("expiry-only-forward", lambda: w.ghost.lease_renewed(1, "db"))
    assert v.message.startswith("L1's expiry moved back from t=90000 to t=89998 at a renewal")


def test_a_new_lease_under_a_reused_id_starts_its_expiry_afresh():
    w = World()
    w.acquire(1, "c1", expiry=60_000)
    w.release(1)
    w.acquire(1, "c2", expiry=20_000)  # an id handed out again: its expiry is its own, not the old lease's
    w.view.expiries[1] = 30_000
    w.ghost.lease_renewed(1, "db")


# --- the resource's fence only goes up, and a refused write changes nothing -----------------------------

def test_a_write_that_lowers_the_resources_fence_is_flagged_accepted_or_refused():
    w = World(enabled=("fence-only-up",))
    w.write("c1", 1, True, 1, "c1")
    w.write("c2", 2, True, 2, "c2")  # raised
    w.write("c2", 2, True, 2, "c2")  # kept
    w.write("c1", 1, False, 2, "c2")  # a stale write refused, the fence left alone
    v = flagged("fence-only-up", lambda: w.write("c1", 1, False, 1, "c1"))
    assert v.message == ("the resource's fence on db/0 was token 2 after the last write there and is token 1 after "
                         "c1's write with token 1 (refused)")
    w = World(enabled=("fence-only-up",))
    w.write("c2", 2, True, 2, "c2")
    v = flagged("fence-only-up", lambda: w.write("c3", 3, True, None, "c3"))  # a fence lost
    assert "is gone after c3's write with token 3 (accepted)" in v.message


def test_the_fence_is_judged_per_target_from_the_first_write_seen_there():
    w = World(capacity=2, enabled=("fence-only-up",))
    w.write("c2", 5, True, 5, "c2", target="db/0")
    w.write("c1", 1, True, 1, "c1", target="db/1")  # another seat: its own fence, unknown before this write
    w.write("c3", 4, True, 4, "c3", target="db/1")
    flagged("fence-only-up", lambda: w.write("c1", 3, True, 3, "c1", target="db/1"))


def test_a_refused_write_that_changes_the_resource_is_flagged_and_one_that_changes_nothing_is_not():
    w = World(capacity=2, enabled=("refused-changes-nothing",))
    w.write("c9", 9, False, None, "c9 wrote", target="db/1")  # the first write seen there: what it found is unknown
    w.write("c2", 2, True, 2, "c2 wrote")
    w.write("c1", 1, False, 2, "c2 wrote")  # refused, nothing changed
    w.write("c2", 2, True, 2, "c2 wrote again")  # accepted: it may change what it likes
    v = flagged("refused-changes-nothing", lambda: w.write("c1", 1, False, 2, "c1 wrote"))
    assert v.message == ("the resource refused c1's write to db/0 with token 1, yet changed its contents from "
                         "'c2 wrote again' to 'c1 wrote'")
    v = flagged("refused-changes-nothing", lambda: w.write("c1", 1, False, 1, "c1 wrote"))
    assert v.message.endswith("yet changed its fence from 2 to 1")


def test_a_resource_that_shows_no_state_has_neither_checked():
    w = World(resource=False)
    w.ghost.write_accepted("c2", 2, 2, "db/0")
    w.ghost.write_refused("c1", 1, 1, "db/0")
    units = {u.id: u for u in w.ghost.units}
    assert units["fence-only-up"].checks == units["refused-changes-nothing"].checks == 0


# --- fencing: unique tokens, exclusive seats, write progress -----------------------------------------

def test_unique_tokens_flags_a_token_handed_out_twice():
    w = World(capacity=2)
    w.acquire(1, "c1", token=5, seat=0)
    v = flagged("unique-tokens", lambda: w.acquire(2, "c2", token=5, seat=1))
    assert "token 5 was handed to L2, and to L1 before it" in v.message


def test_unique_tokens_flags_tokens_that_go_back_on_a_seat_and_allows_rising_ones():
    w = World(capacity=2)
    w.acquire(1, "c1", expiry=10, token=3, seat=0)
    w.acquire(2, "c2", token=4, seat=1)  # another seat: its own sequence
    w.at(10)
    w.release(1)
    w.acquire(3, "c3", token=7, seat=0)  # rising on seat 0: fine
    w.at(100_000)
    for lease in (2, 3):
        w.release(lease)
    v = flagged("unique-tokens", lambda: w.acquire(4, "c1", token=6, seat=0))
    assert "token 6 for db/0, where token 7 was handed out before" in v.message


def test_exclusive_seats_flags_two_recognised_leases_on_one_seat_and_allows_a_takeover():
    w = World(capacity=2)
    w.acquire(1, "c1", expiry=10_000, token=1, seat=0)
    w.at(10_000)
    w.acquire(2, "c2", expiry=70_000, token=2, seat=0)  # takes over an expired holder's seat: fine
    # The expired lease is renewed back to life while its successor holds the seat.
    w.view.expiries[1] = 75_000
    v = flagged("exclusive-seats", lambda: w.ghost.lease_renewed(1, "db"))
    assert "L1 and L2 both hold db/0" in v.message


def test_write_progress_flags_a_refused_write_of_a_current_holder_only():
    w = World(capacity=2)
    w.acquire(1, "c1", expiry=10_000, token=1, seat=0)
    w.ghost.write_refused("c9", 1, 1, "db/0")  # not the holder: a fine refusal
    w.at(10_000)
    w.ghost.write_refused("c1", 1, 1, "db/0")  # expired: a fine refusal
    w.acquire(2, "c2", token=2, seat=0)
    w.ghost.write_refused("c2", 2, 1, "db/0")  # not its token: a fine refusal
    v = flagged("write-progress", lambda: w.ghost.write_refused("c2", 2, 2, "db/0"))
    assert "refused c2's write to db/0 with token 2" in v.message


# --- the runs part: a hand-built run store ------------------------------------------------------------

class FakeRuns:
    def __init__(self) -> None:
        self.pending: dict[int, Claim] = {}
        self.runs: dict[int, object] = {}

    def claim_of(self, run: int) -> Claim | None:
        return self.pending.get(run)

    def entered(self, run: int) -> int | None:
        r = self.runs.get(run)
        return None if r is None else r.entered  # type: ignore[attr-defined]


class RunWorld:
    def __init__(self, enabled=INVARIANT_IDS) -> None:
        self.kernel = Kernel()
        self.view = FakeRuns()
        self.ghost = Ghost(self.kernel, {})
        self.ghost.watch(enabled, leases=None, runs=self.view,
                         bounds=Bounds(transition_within=140_000, claim_timeout=120_000))
        self.server = self.ghost.server

    def state(self, run: int, state: str) -> None:
        entered = self.kernel.now
        self.view.runs[run] = type("R", (), {"entered": entered, "state": state})()
        self.ghost.run_state(run, state)

    def claim(self, run: int, token: int, consumer: str = "c1#1") -> None:
        self.view.pending[run] = Claim(run, consumer, token, self.kernel.now)
        self.ghost.claimed(run, token)


def test_bounded_transition_flags_a_run_stuck_in_cancelling():
    w = RunWorld()
    w.state(1, "RUNNING")
    w.state(1, "CANCELLING")
    v = flagged("bounded-transition", lambda: w.kernel.run(200_000))
    assert "run 1 entered CANCELLING at t=0" in v.message


def test_bounded_transition_allows_a_cancel_confirmed_in_time_and_waits_out_downtime():
    w = RunWorld()
    w.state(1, "CANCELLING")
    w.kernel.run(100_000)
    w.state(1, "CANCELLED")
    w.state(2, "CANCELLING")
    w.kernel.run(110_000)
    w.server.up_since = None  # down: the window starts again when it is back
    w.kernel.run(160_000)
    w.server.up_since = 160_000
    w.kernel.run(290_000)
    w.state(2, "CANCELLED")
    w.kernel.run(600_000)


def test_at_least_once_flags_a_run_never_acknowledged_unless_no_worker_could_serve_it():
    w = RunWorld()
    w.state(1, "SCHEDULED")
    w.state(1, "RUNNING")
    w.state(2, "COMPLETED")
    w.ghost.quiet_period_over(served_until=-1)  # no worker left alive
    w.ghost.quiet_period_over(served_until=None)  # a worker paused: a drain that ran out
    v = flagged("at-least-once", lambda: w.ghost.quiet_period_over(served_until=w.kernel.now))
    assert "run 1 is still RUNNING" in v.message


def test_at_least_once_excuses_a_run_that_arrived_after_the_last_worker_stopped_serving():
    w = RunWorld()
    w.kernel.run(10_000)
    w.state(3, "SCHEDULED")  # a submission the network delayed past the workers' shift
    w.ghost.quiet_period_over(served_until=9_000)
    v = flagged("at-least-once", lambda: w.ghost.quiet_period_over(served_until=10_000))
    assert "run 3 is still SCHEDULED" in v.message


def test_cancelled_never_starts_flags_a_run_started_after_an_early_cancel():
    w = RunWorld()
    w.ghost.handled(Cancel(7))  # the cancel came first: the run did not exist
    w.state(7, "RUNNING")
    w.claim(7, 1)
    v = flagged("cancelled-never-starts", lambda: w.ghost.work_started("c1", RunClaim(7, 1)))
    assert "run 7" in v.message


def test_a_cancel_of_a_running_run_does_not_forbid_it():
    w = RunWorld()
    w.state(7, "RUNNING")
    w.claim(7, 1)
    w.ghost.handled(Cancel(7))
    w.ghost.work_started("c1", RunClaim(7, 1))


def test_owner_only_update_flags_an_ack_from_a_former_claim():
    w = RunWorld()
    w.claim(3, 1)
    w.claim(3, 2)  # redelivered
    w.ghost.update_accepted(3, 2, "completed")
    v = flagged("owner-only-update", lambda: w.ghost.update_accepted(3, 1, "completed"))
    assert "claim 1" in v.message and "current claim is 2" in v.message


def test_owner_only_update_flags_a_heartbeat_accepted_from_a_former_claim():
    w = RunWorld()
    w.claim(3, 1)
    w.ghost.heartbeat_accepted(3, 1)  # the owner's own beat
    w.claim(3, 2)  # redelivered
    w.ghost.heartbeat_accepted(3, 2)
    v = flagged("owner-only-update", lambda: w.ghost.heartbeat_accepted(3, 1))
    assert v.message.startswith("run 3's heartbeat under claim 1 was accepted, but its current claim is 2")


def test_claim_token_changes_flags_a_run_handed_over_under_a_token_it_had_before():
    w = RunWorld()
    w.claim(3, 1, "c1#1")
    w.claim(3, 4, "c2#1")  # redelivered under a new, higher token: fine
    w.claim(5, 2, "c1#1")  # another run: its own tokens
    v = flagged("claim-token-changes", lambda: w.claim(3, 4, "c3#1"))
    assert v.message == ("run 3 was handed to c3#1 under claim 4, where c2#1 had claim 4 before it: c2#1's late ack "
                         "or heartbeat would pass for c3#1's")
    flagged("claim-token-changes", lambda: w.claim(5, 1, "c2#1"))  # a token below an earlier one


def test_single_executor_flags_two_workers_on_one_run():
    w = RunWorld()
    w.claim(4, 1, "c1#1")
    w.ghost.work_started("c1", RunClaim(4, 1))
    w.claim(4, 2, "c2#1")
    v = flagged("single-executor", lambda: w.ghost.work_started("c2", RunClaim(4, 2)))
    assert "two executions" in v.message


def test_single_executor_flags_work_past_the_claim_and_allows_work_within_it():
    w = RunWorld()
    w.claim(5, 1)
    w.ghost.work_started("c1", RunClaim(5, 1))
    w.kernel.run(120_000)
    w.ghost.work_stopped("c1", RunClaim(5, 1))  # ends exactly at the claim's deadline: fine
    w.claim(6, 1)
    w.ghost.work_started("c1", RunClaim(6, 1))
    w.kernel.run(240_001)
    flagged("single-executor", lambda: w.ghost.work_stopped("c1", RunClaim(6, 1)))


# --- the incremental count of recognised slots matches a recount ----------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=150)
@given(st.lists(st.tuples(st.sampled_from(["acquire", "renew", "release", "tick"]), st.integers(0, 7),
                          st.integers(1, 90_000)), max_size=60))
def test_recognised_slots_are_counted_incrementally_as_a_recount_would(actions):
    # Renewals here may set any expiry, earlier ones too: the books' counting is under test, not that rule.
    w = World(capacity=100, enabled=tuple(i for i in INVARIANT_IDS if i != "expiry-only-forward"))
    next_id = 1
    for op, n, amount in actions:
        ids = sorted(w.view.expiries)
        if op == "acquire":
            w.acquire(next_id, f"c{n}", expiry=w.kernel.now + amount, slots=1 + n % 3)
            next_id += 1
        elif op == "renew" and ids:
            lease = ids[n % len(ids)]
            w.view.expiries[lease] = w.kernel.now + amount
            w.ghost.lease_renewed(lease, "db")
        elif op == "release" and ids:
            lease = ids[n % len(ids)]
            w.release(lease, slots=w.ghost.owned[lease])
        elif op == "tick":
            w.kernel.run(w.kernel.now + amount)
        recount = sum(w.ghost.owned.get(lease, 0) for lease, e in w.view.expiries.items() if e > w.kernel.now)
        assert w.ghost.recognised_slots("db") == recount
