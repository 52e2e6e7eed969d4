"""The invariants of server-owned deadlines: runs, a stream with claims, cancellation (``docs/catalogue.md``)."""

from __future__ import annotations

from typing import Any

from ..sut import RunClaim
from .books import Books
from .base import CAUSE, SYMPTOM, Invariant, invariant

RUNS = frozenset({"runs"})
TERMINAL = ("COMPLETED", "CANCELLED")


@invariant
class BoundedTransition(Invariant):
    id = "bounded-transition"
    title = "run-stuck-in-cancelling"
    settles_within = "transition_within"
    statement = ("a run in CANCELLING reaches a terminal state within its deadline + the sweep interval (a full "
                 "window again after any downtime)")
    parts = RUNS
    names = SYMPTOM
    because = "a run stuck in CANCELLING is where a lost deadline and a dead worker end, long after the slip"

    def run_state(self, run: int, state: str) -> None:
        if state == "CANCELLING":
            now = self.g.kernel.now
            self.g.kernel.after(self.g.bounds.transition_within, self._check, (run, now, now))

    def _check(self, arg: tuple[int, int, int]) -> None:
        run, entered, window_start = arg
        g = self.g
        if g.server.rearmed(window_start, g.bounds.transition_within, self._check,
                            lambda start: (run, entered, start)):
            return  # the deadline loops did not run for the whole window
        self.checks += 1
        if g.run_states.get(run) == "CANCELLING" and g.runs_view is not None and g.runs_view.entered(run) == entered:
            self.fail(f"run {run} entered CANCELLING at t={entered} and is still there {g.kernel.now - entered}ms "
                      f"later, past its deadline plus the sweep interval")


@invariant
class AtLeastOnce(Invariant):
    id = "at-least-once"
    title = "run-never-acknowledged"
    settles_within = "redeliver_within"
    statement = "every run that was not cancelled is acknowledged (checked after the quiet period)"
    parts = RUNS
    names = SYMPTOM
    because = "a run never acknowledged is where a lost delivery and a lost ack end, seen only after the quiet period"

    def quiet_period_over(self, served_until: int | None, busy: frozenset[str]) -> None:
        if served_until is None:
            return  # a worker is paused (a drain that ran out): what it owes is not judged (the run says so)
        if busy and self.g.run_moved > self.g.quiet_from:
            return  # a drain that ran out, with runs still moving: a backlog, not a loss (the run says so)
        self.checks += 1
        for run, state in sorted(self.g.run_states.items()):
            # A run that reached the server, or was handed to a worker, after the last worker stopped serving
            # (a submission the network delayed, a reply to a read its worker had given up on) had nobody to
            # finish it; with every worker dead for good (-1) nothing could have.
            if state not in TERMINAL and self.g.due_since.get(run, 0) <= served_until:
                self.fail(f"after the quiet period run {run} is still {state} ({self.g.claim_state(run)}): "
                          f"it was never acknowledged")


@invariant
class CancelledNeverStarts(Invariant):
    id = "cancelled-never-starts"
    title = "cancelled-run-starts"
    statement = "work cancelled before it was created (or started) never starts"
    parts = RUNS
    names = CAUSE
    because = "checked as the cancelled work starts: it was handed out though it was cancelled (a forgotten cancel)"

    def __init__(self, ghost: Books) -> None:
        super().__init__(ghost)
        self.never: set[int] = set()  # runs cancelled before they started

    def cancel_handled(self, run: int) -> None:
        if self.g.run_states.get(run, "SCHEDULED") == "SCHEDULED":
            self.never.add(run)

    def work_started(self, client: str, handle: Any, other: str | None) -> None:
        if handle.__class__ is not RunClaim:
            return  # lease work
        self.checks += 1
        if handle.run in self.never:
            self.fail(f"{client} starts run {handle.run}, which was cancelled before it started")


@invariant
class OwnerOnlyUpdate(Invariant):
    id = "owner-only-update"
    title = "former-owner-overwrites-successor"
    statement = "an ack, terminal write or heartbeat is accepted only from the run's current claim"
    parts = RUNS
    names = CAUSE
    because = "checked at the accepted update itself: taking a former owner's ack or heartbeat is the slip"

    def update_accepted(self, run: int, token: int, what: str) -> None:
        self.checks += 1
        current = self.g.current_claim.get(run)
        if current != token:
            self.fail(f"run {run} was marked {what} by claim {token}, but its current claim is {current}: "
                      f"a former owner overwrote its successor")

    def heartbeat_accepted(self, run: int, token: int) -> None:
        self.checks += 1
        current = self.g.current_claim.get(run)
        if current != token:
            self.fail(f"run {run}'s heartbeat under claim {token} was accepted, but its current claim is {current}: "
                      f"a former owner works on as if it still owned the run, beside its successor")


@invariant
class ClaimTokenChanges(Invariant):
    id = "claim-token-changes"
    title = "run-handed-over-under-an-old-token"
    statement = ("every delivery of a run is a new claim whose token is above those of the run's earlier claims, so a "
                 "former owner's late ack or heartbeat, under its old token, never passes for the current owner's "
                 "(owner-only-update compares by token)")
    parts = RUNS
    names = CAUSE
    because = "checked at the hand-over that reused a token: the executions and late acks it allows come after"

    def __init__(self, ghost: Books) -> None:
        super().__init__(ghost)
        self.consumer: dict[int, str] = {}  # run -> the consumer its current claim was handed to, as the view said

    def claimed(self, run: int, token: int) -> None:
        self.checks += 1
        g = self.g
        held = g.runs_view.claim_of(run) if g.runs_view is not None else None
        consumer = held.consumer if held is not None and held.token == token else "a worker"
        before = g.current_claim.get(run)  # the highest so far: each claim before it was checked to rise
        if before is not None and token <= before:
            former = self.consumer.get(run, "a worker")
            self.fail(f"run {run} was handed to {consumer} under claim {token}, where {former} had claim {before} "
                      f"before it: {former}'s late ack or heartbeat would pass for {consumer}'s")
        self.consumer[run] = consumer
