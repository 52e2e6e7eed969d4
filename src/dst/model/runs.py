"""Server-owned deadlines: runs, a stream with a consumer group, claims, cancellation.

A separate part of the reference model that a scenario switches on (``[runs]``), so the
lease/slot core stays small. Seed 000, "three server-owned deadlines":

* runs go SCHEDULED -> RUNNING -> COMPLETED, or RUNNING -> CANCELLING -> CANCELLED. CANCELLING
  waits on a worker that may be dead, so the server owns a deadline for it: a keyed timer
  ``cancelling-timeout:<run_id>`` (re-entering the state arms nothing new; it fires only if the
  run is still in the state it was armed for, Prefect's guard on the state id it wrote), and a
  sweep, on startup and every sweep interval, for CANCELLING runs past their deadline (#22238);
* each submitted run is a stream message. A worker reads it (XREADGROUP) and it stays pending
  until acknowledged; the next reader reclaims entries idle longer than the redelivery timeout
  (XAUTOCLAIM with min_idle_time: pydocket's ``get_redeliveries``);
* every delivery is a claim with a fresh token. Heartbeats, acks and the confirmation of a
  cancel are accepted only from the current, unexpired claim (seed 004's outbox);
* a cancel that arrives before its run exists leaves a tombstone, so a delayed admission creates
  the run already cancelled.

Workers keep working through failed heartbeats until their own claim deadline (a missed
heartbeat is suspicion, not proof the work stopped), and the server reclaims only after the
redelivery timeout, which no worker outlives.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Callable, ClassVar, Generator, Protocol

import attrs

from .bugs import Bugs
from .interface import SLEEP, WORK, Done, Handler, Refused, call, message
from .service import Clock

SCHEDULED, RUNNING, CANCELLING, CANCELLED, COMPLETED = "SCHEDULED", "RUNNING", "CANCELLING", "CANCELLED", "COMPLETED"
TERMINAL = (CANCELLED, COMPLETED)

# Background keys: tag 2 for deadline timers, 3 for sweeps (the reaper is 1).
_DEADLINE_KEY = (1 << 62) | (2 << 56)
_SWEEP_KEY = (1 << 62) | (3 << 56)
_DEADLINE_TICK = 1_000  # the timer wheel's resolution


# --- requests and responses ---------------------------------------------------------------------

@message
class Submit:
    kind = 8  # its message kind, for keyed draws (not a field)
    run: int
    work: int

    def describe(self) -> str:
        return f"submit run {self.run}"


@message
class Cancel:
    kind = 9  # its message kind, for keyed draws (not a field)
    run: int

    def describe(self) -> str:
        return f"cancel run {self.run}"


@message
class Read:
    kind = 10  # its message kind, for keyed draws (not a field)
    consumer: str

    def describe(self) -> str:
        return f"read as {self.consumer}"


@message
class Heartbeat:
    kind = 11  # its message kind, for keyed draws (not a field)
    run: int
    token: int

    def describe(self) -> str:
        return f"heartbeat run {self.run} claim {self.token}"


@message
class Ack:
    """The run's terminal write: COMPLETED, or CANCELLED when ``cancelled`` (the worker confirms a cancel)."""

    kind = 12  # its message kind, for keyed draws (not a field)
    run: int
    token: int
    cancelled: bool = False

    def describe(self) -> str:
        return f"{'confirm cancel of' if self.cancelled else 'ack'} run {self.run} claim {self.token}"


@message
class Delivery:
    run: int
    token: int
    work: int
    redelivered: bool

    def describe(self) -> str:
        return f"{'redelivered' if self.redelivered else 'delivered'} run {self.run} claim {self.token}"


@message
class Empty:
    unfinished: int  # runs queued or pending: something may still come

    def describe(self) -> str:
        return f"empty ({self.unfinished} unfinished)"


@message
class Beat:
    cancel: bool

    def describe(self) -> str:
        return "beat: cancel requested" if self.cancel else "beat"


@message
class RunClaim:
    """What a worker works under (the WORK command's handle for runs)."""

    run: int
    token: int


# --- state ------------------------------------------------------------------------------------------

@attrs.define(slots=True)
class Run:
    id: int
    work: int
    state: str
    state_id: int  # bumped by every state write: what a deadline is guarded by
    entered: int  # when it entered its state


@attrs.define(slots=True)
class Claim:
    """A pending stream entry: delivered to ``consumer`` under ``token``, idle since ``idle_since``."""

    run: int
    consumer: str
    token: int
    idle_since: int


class RunObserver(Protocol):
    def run_state(self, run: int, state: str) -> None: ...

    def claimed(self, run: int, token: int) -> None: ...

    def update_accepted(self, run: int, token: int, what: str) -> None: ...


class RunStore:
    """Runs, the stream and its pending entries, tombstones: all durable."""

    def __init__(self, observer: RunObserver) -> None:
        self.observer = observer
        self.runs: dict[int, Run] = {}
        self.queue: list[int] = []  # unread messages, oldest first
        self.pending: dict[int, Claim] = {}  # run -> its claim, in delivery order
        self.tombstones: set[int] = set()
        self.claim_seq = 0

    def set_state(self, run: Run, state: str, now: int) -> None:
        run.state, run.state_id, run.entered = state, run.state_id + 1, now
        self.observer.run_state(run.id, state)

    def claim(self, run: int, consumer: str, now: int) -> Claim:
        self.claim_seq += 1
        claim = self.pending[run] = Claim(run, consumer, self.claim_seq, now)
        self.observer.claimed(run, claim.token)
        return claim

    # the read-only view for invariants
    def claim_of(self, run: int) -> Claim | None:
        return self.pending.get(run)

    def state_of(self, run: int) -> str | None:
        r = self.runs.get(run)
        return None if r is None else r.state


# --- the service -------------------------------------------------------------------------------------

class RunService:
    def __init__(self, store: RunStore, clock: Clock, config: "RunsConfigLike", bugs: Bugs) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.bugs = bugs
        # wrong (no-cancelling-deadline): nothing owns CANCELLING's deadline, neither timer nor sweep (Prefect #17563)
        self.owns_deadlines = not bugs.no_cancelling_deadline
        # wrong (no-startup-sweep): the deadline is only an in-memory timer; a restart loses it (#22238's sweep)
        self.sweeps = self.owns_deadlines and not bugs.no_startup_sweep
        # wrong (reclaim-while-running): reclaim on a missed heartbeat, while the work may still run (docket #250)
        self.reclaim_after = 2 * config.heartbeat_interval if bugs.reclaim_while_running else config.redelivery_timeout
        self.timers: list[tuple[int, int, int]] = []  # process memory: (due, run, state id armed for)
        self._ticks = 0

    # Request type -> handler; the server process routes each request through it.
    _handlers: ClassVar[dict[type, Callable[..., Handler]]]

    def _submit(self, req: Submit) -> Handler:
        yield
        store, now = self.store, self.clock.now
        if req.run in store.runs:
            return Done("already submitted")
        run = store.runs[req.run] = Run(req.run, req.work, SCHEDULED, 0, now)
        if req.run in store.tombstones:
            store.set_state(run, CANCELLED, now)  # cancelled before it was created: it never starts
            return Done("cancelled before it was created")
        store.observer.run_state(run.id, SCHEDULED)
        store.queue.append(req.run)
        return Done("queued")

    def _cancel(self, req: Cancel) -> Handler:
        yield
        store, now = self.store, self.clock.now
        run = store.runs.get(req.run)
        if run is None:
            if self.bugs.no_cancel_tombstone:
                return Done("nothing to cancel")  # wrong: a cancel before the admission is forgotten (seed 000)
            store.tombstones.add(req.run)
            return Done("tombstone")
        if run.state == SCHEDULED:
            store.queue.remove(run.id)
            store.set_state(run, CANCELLED, now)
            return Done("cancelled")
        if run.state != RUNNING:
            return Done(f"already {run.state.lower()}")  # re-entering CANCELLING arms nothing new
        store.set_state(run, CANCELLING, now)
        if self.owns_deadlines:
            heappush(self.timers, (now + self.config.cancelling_timeout, run.id, run.state_id))
        return Done("cancelling")

    def _read(self, req: Read) -> Handler:
        yield
        store, now = self.store, self.clock.now
        if not self.bugs.no_redelivery:
            for claim in store.pending.values():
                # XAUTOCLAIM: the oldest entry idle past the timeout goes to this reader under a new claim.
                if now - claim.idle_since >= self.reclaim_after and store.runs[claim.run].state == RUNNING:
                    run = store.runs[claim.run]
                    del store.pending[claim.run]  # re-insert: pending stays in delivery order
                    fresh = store.claim(run.id, req.consumer, now)
                    return Delivery(run.id, fresh.token, run.work, True)
        # wrong (no-redelivery) is the missing branch above: a crashed reader's entry is never seen again.
        while store.queue:
            run = store.runs[store.queue.pop(0)]
            if run.state == SCHEDULED:
                store.set_state(run, RUNNING, now)
                claim = store.claim(run.id, req.consumer, now)
                return Delivery(run.id, claim.token, run.work, False)
        return Empty(len(store.queue) + len(store.pending))

    def _current(self, run: int, token: int) -> Claim | None:
        """The claim if ``token`` is the run's current, unexpired one."""
        claim = self.store.pending.get(run)
        if claim is None or claim.token != token or self.clock.now - claim.idle_since >= self.config.redelivery_timeout:
            return None
        return claim

    def _heartbeat(self, req: Heartbeat) -> Handler:
        yield
        claim = self._current(req.run, req.token)
        if claim is None:
            return Refused("claim lost")
        claim.idle_since = self.clock.now
        return Beat(self.store.runs[req.run].state == CANCELLING)

    def _ack(self, req: Ack) -> Handler:
        yield
        store, now = self.store, self.clock.now
        run = store.runs.get(req.run)
        if self.bugs.unconditional_ack:
            pass  # wrong: the terminal write is not conditioned on the current claim (docket #335 _mark_as_terminal)
        elif self._current(req.run, req.token) is None:
            return Refused("claim lost")
        if run is None or run.state in TERMINAL or (req.cancelled and run.state != CANCELLING):
            return Refused(f"run is {run.state.lower() if run else 'unknown'}")
        store.pending.pop(req.run, None)
        store.observer.update_accepted(req.run, req.token, "cancelled" if req.cancelled else "completed")
        store.set_state(run, CANCELLED if req.cancelled else COMPLETED, now)
        return Done("cancelled" if req.cancelled else "completed")

    # --- background -------------------------------------------------------------------------------

    def loops(self) -> list[tuple[str, int]]:
        loops = [("deadlines", _DEADLINE_TICK)] if self.owns_deadlines else []
        return loops + ([("sweep", self.config.sweep_interval)] if self.sweeps else [])

    def background(self, loop: str, now: int) -> list[tuple[int, Handler]]:
        self._ticks += 1
        if loop == "sweep":
            return [(_SWEEP_KEY | self._ticks, self._sweep())]
        due = []
        while self.timers and self.timers[0][0] <= now:
            due.append(heappop(self.timers))
        return [(_DEADLINE_KEY | (self._ticks << 24) | i, self._expire(run, state_id))
                for i, (_, run, state_id) in enumerate(due)]

    def _expire(self, run_id: int, state_id: int) -> Handler:
        """``cancelling-timeout:<run_id>`` fires: the server writes CANCELLED itself."""
        yield
        run = self.store.runs[run_id]
        if run.state == CANCELLING and run.state_id == state_id:  # guarded by the state it was armed for
            self._force_cancel(run)
        return None

    def _sweep(self) -> Handler:
        """Every CANCELLING run past its deadline, whether or not a timer survived."""
        yield
        now, timeout = self.clock.now, self.config.cancelling_timeout
        for run in list(self.store.runs.values()):
            if run.state == CANCELLING and run.entered + timeout <= now:
                self._force_cancel(run)
        return None

    def _force_cancel(self, run: Run) -> None:
        self.store.pending.pop(run.id, None)
        self.store.set_state(run, CANCELLED, self.clock.now)

    def crash(self) -> None:
        self.timers = []  # in-memory timers are gone; the sweep finds what they guarded

    def boot(self) -> list[tuple[int, Handler]]:
        self._ticks += 1
        return [(_SWEEP_KEY | self._ticks, self._sweep())] if self.sweeps else []

    _handlers = {Submit: _submit, Cancel: _cancel, Read: _read, Heartbeat: _heartbeat, Ack: _ack}


class RunsConfigLike(Protocol):
    cancelling_timeout: int
    sweep_interval: int
    redelivery_timeout: int
    heartbeat_interval: int
    poll_interval: int


# --- the worker ---------------------------------------------------------------------------------------

class Worker:
    """Serves the stream: read, work while heartbeating, ack; stops when its shift is over and nothing is left."""

    def __init__(self, consumer: str, clock: Clock, config: RunsConfigLike, *, shift_end: int, write_time: int,
                 retries: int) -> None:
        self.consumer = consumer
        self.clock = clock
        self.config = config
        self.shift_end = shift_end
        self.write_time = write_time
        self.attempts = retries + 1


    def serve(self) -> Generator[tuple, object, str]:
        while True:
            response, sent = yield from call(self.clock, Read(self.consumer), self.attempts)
            if isinstance(response, Delivery):
                yield from self._process(response, sent)
            elif isinstance(response, Empty) and response.unfinished == 0 and self.clock.now >= self.shift_end:
                return "drained"
            else:
                yield (SLEEP, self.config.poll_interval)

    def _process(self, delivery: Delivery, sent: int) -> Generator[tuple, object, None]:
        clock, cfg = self.clock, self.config
        run, token, handle = delivery.run, delivery.token, RunClaim(delivery.run, delivery.token)
        deadline, beat_at = sent + cfg.redelivery_timeout, sent + cfg.heartbeat_interval
        left = delivery.work
        while left > 0:
            if clock.now >= deadline:
                return  # the claim may have been reclaimed: stop, and do not ack
            if clock.now >= beat_at:
                response, beat_sent = yield from call(self.clock, Heartbeat(run, token), self.attempts)
                if isinstance(response, Beat):
                    deadline, beat_at = beat_sent + cfg.redelivery_timeout, beat_sent + cfg.heartbeat_interval
                    if response.cancel:
                        yield from call(self.clock, Ack(run, token, cancelled=True), self.attempts)
                        return
                elif response is None:
                    beat_at = clock.now + cfg.heartbeat_interval  # suspicion, not proof: work on to the deadline
                else:
                    return  # refused: the claim is gone
                continue  # a reply that came back late (after a pause) may leave a beat due already
            piece = min(left, beat_at - clock.now, deadline - clock.now)
            not_done = yield (WORK, handle, piece)
            left -= piece - not_done  # type: ignore[operator]
        if clock.now >= deadline:
            return
        yield (SLEEP, self.write_time)  # producing the result: a pause here acks late
        yield from call(self.clock, Ack(run, token), self.attempts)
