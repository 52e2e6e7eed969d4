"""Server-owned deadlines: runs, a stream with a consumer group, claims, cancellation.

A separate part of the reference model that a scenario switches on (``[runs]``), so the
lease/slot core stays small. Every non-terminal state that waits on an external actor needs a
deadline owned by the server:

* runs go SCHEDULED -> RUNNING -> COMPLETED, or RUNNING -> CANCELLING -> CANCELLED. CANCELLING
  waits on a worker that may be dead, so the server owns a deadline for it: a keyed timer
  ``cancelling-timeout:<run_id>`` (re-entering the state arms nothing new; it fires only if the
  run is still in the state it was armed for, Prefect's guard on the state id it wrote), and a
  sweep, on startup and every sweep interval, for CANCELLING runs past their deadline (#22238);
* each submitted run is a stream message. A worker reads it (XREADGROUP) and it stays pending
  until acknowledged; the next reader reclaims entries idle longer than the redelivery timeout
  (XAUTOCLAIM with min_idle_time: pydocket's ``get_redeliveries``);
* every delivery is a claim with a fresh token. Heartbeats, acks and the confirmation of a
  cancel are accepted only from the current, unexpired claim (an outbox's owner check);
* a cancel that arrives before its run exists leaves a tombstone, so a delayed admission creates
  the run already cancelled.

Workers keep working through failed heartbeats until their own claim deadline (a missed
heartbeat is suspicion, not proof the work stopped), and the server reclaims only after the
redelivery timeout, which no worker outlives.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Callable, Coroutine, Protocol

import attrs

from ..sut import Cancel, Clock, Facts, RunClaim, Submit, message, moment, sleep, store_step, work
from .bugs import Bugs
from .client import ask
from .protocol import Done, Refused

Handler = Coroutine[Any, Any, Any]

SCHEDULED, RUNNING, CANCELLING, CANCELLED, COMPLETED = "SCHEDULED", "RUNNING", "CANCELLING", "CANCELLED", "COMPLETED"
TERMINAL = (CANCELLED, COMPLETED)

DEADLINE_TICK = 1_000  # the timer wheel's resolution


# --- requests and responses ---------------------------------------------------------------------

@message
class Read:
    kind = 10
    consumer: str

    def describe(self) -> str:
        return f"read as {self.consumer}"


@message
class Heartbeat:
    kind = 11
    run: int
    token: int

    def describe(self) -> str:
        return f"heartbeat run {self.run} claim {self.token}"


@message
class Ack:
    """The run's terminal write: COMPLETED, or CANCELLED when ``cancelled`` (the worker confirms a cancel)."""

    kind = 12
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


class RunStore:
    """Runs, the stream and its pending entries, tombstones: all durable."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.runs: dict[int, Run] = {}
        self.queue: list[int] = []  # unread messages, oldest first
        self.pending: dict[int, Claim] = {}  # run -> its claim, in delivery order
        self.tombstones: set[int] = set()
        self.claim_seq = 0

    def set_state(self, run: Run, state: str, now: int) -> None:
        run.state, run.state_id, run.entered = state, run.state_id + 1, now
        self.facts.run_state(run.id, state)

    def claim(self, run: int, consumer: str, now: int, token: int | None = None) -> Claim:
        """Hand ``run`` to ``consumer`` under a new claim (under ``token`` only by the catalogue's bug)."""
        if token is None:
            self.claim_seq += 1
            token = self.claim_seq
        claim = self.pending[run] = Claim(run, consumer, token, now)
        self.facts.claimed(run, claim.token)
        return claim

    # the read-only view for invariants
    def claim_of(self, run: int) -> Claim | None:
        return self.pending.get(run)

    def entered(self, run: int) -> int | None:
        r = self.runs.get(run)
        return None if r is None else r.entered


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

    def handlers(self) -> dict[type, Callable[[Any], Handler]]:
        return {Submit: self._submit, Cancel: self._cancel, Read: self._read, Heartbeat: self._heartbeat,
                Ack: self._ack}

    async def _submit(self, req: Submit) -> Any:
        await store_step()
        store, now = self.store, self.clock.now
        if req.run in store.runs:
            return Done("already submitted")
        run = store.runs[req.run] = Run(req.run, req.work, SCHEDULED, 0, now)
        if req.run in store.tombstones:
            store.set_state(run, CANCELLED, now)  # cancelled before it was created: it never starts
            return Done("cancelled before it was created")
        store.facts.run_state(run.id, SCHEDULED)
        store.queue.append(req.run)
        return Done("queued")

    async def _cancel(self, req: Cancel) -> Any:
        await store_step()
        store, now = self.store, self.clock.now
        run = store.runs.get(req.run)
        if run is None:
            if self.bugs.no_cancel_tombstone:
                return Done("nothing to cancel")  # wrong: a cancel before the admission is forgotten (no tombstone)
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

    async def _read(self, req: Read) -> Any:
        await store_step()
        store, now = self.store, self.clock.now
        if not self.bugs.no_redelivery:
            for claim in store.pending.values():
                # XAUTOCLAIM: the oldest entry idle past the timeout goes to this reader under a new claim.
                if now - claim.idle_since >= self.reclaim_after and store.runs[claim.run].state == RUNNING:
                    run = store.runs[claim.run]
                    del store.pending[claim.run]  # re-insert: pending stays in delivery order
                    # wrong (redelivery-keeps-token): handed over under its old token, as XAUTOCLAIM keeps a message's
                    # id, so the former owner's late ack or heartbeat passes for the new owner's
                    kept = claim.token if self.bugs.redelivery_keeps_token else None
                    fresh = store.claim(run.id, req.consumer, now, kept)
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

    async def _heartbeat(self, req: Heartbeat) -> Any:
        await store_step()
        claim = self._current(req.run, req.token)
        if claim is None:
            return Refused("claim lost")
        claim.idle_since = self.clock.now
        self.store.facts.heartbeat_accepted(req.run, req.token)
        return Beat(self.store.runs[req.run].state == CANCELLING)

    async def _ack(self, req: Ack) -> Any:
        await store_step()
        store, now = self.store, self.clock.now
        run = store.runs.get(req.run)
        if self.bugs.unconditional_ack:
            pass  # wrong: the terminal write is not conditioned on the current claim (docket #335 _mark_as_terminal)
        elif self._current(req.run, req.token) is None:
            return Refused("claim lost")
        if run is None or run.state in TERMINAL or (req.cancelled and run.state != CANCELLING):
            return Refused(f"run is {run.state.lower() if run else 'unknown'}")
        store.pending.pop(req.run, None)
        store.facts.update_accepted(req.run, req.token, "cancelled" if req.cancelled else "completed")
        store.set_state(run, CANCELLED if req.cancelled else COMPLETED, now)
        return Done("cancelled" if req.cancelled else "completed")

    # --- background -------------------------------------------------------------------------------

    def loops(self) -> list[tuple[str, int]]:
        loops = [("deadlines", DEADLINE_TICK)] if self.owns_deadlines else []
        return loops + ([("sweep", self.config.sweep_interval)] if self.sweeps else [])

    def tick(self, loop: str, now: int) -> list[Handler]:
        if loop == "sweep":
            return [self._sweep()]
        due = []
        while self.timers and self.timers[0][0] <= now:
            due.append(heappop(self.timers))
        return [self._expire(run, state_id) for _, run, state_id in due]

    async def _expire(self, run_id: int, state_id: int) -> Any:
        """``cancelling-timeout:<run_id>`` fires: the server writes CANCELLED itself."""
        await store_step()
        run = self.store.runs[run_id]
        if run.state == CANCELLING and run.state_id == state_id:  # guarded by the state it was armed for
            self._force_cancel(run)
        return None

    async def _sweep(self) -> Any:
        """Every CANCELLING run past its deadline, whether or not a timer survived."""
        await store_step()
        await moment("sweeping")  # the sweep begins: what it reads, it reads after this
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

    def boot(self) -> list[Handler]:
        return [self._sweep()] if self.sweeps else []


class RunsConfigLike(Protocol):
    @property
    def cancelling_timeout(self) -> int: ...

    @property
    def sweep_interval(self) -> int: ...

    @property
    def redelivery_timeout(self) -> int: ...

    @property
    def heartbeat_interval(self) -> int: ...

    @property
    def poll_interval(self) -> int: ...


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


    async def serve(self) -> str:
        while True:
            response, sent = await ask(self.clock, Read(self.consumer), self.attempts)
            if isinstance(response, Delivery):
                await moment("delivered")
                await self._process(response, sent)
            elif isinstance(response, Empty) and response.unfinished == 0 and self.clock.now >= self.shift_end:
                return "drained"
            else:
                await sleep(self.config.poll_interval)

    async def _process(self, delivery: Delivery, sent: int) -> None:
        clock, cfg = self.clock, self.config
        run, token, handle = delivery.run, delivery.token, RunClaim(delivery.run, delivery.token)
        deadline, beat_at = sent + cfg.redelivery_timeout, sent + cfg.heartbeat_interval
        left = delivery.work
        while left > 0:
            if clock.now >= deadline:
                return  # the claim may have been reclaimed: stop, and do not ack
            if clock.now >= beat_at:
                await moment("before-beat")  # the deadline is checked: a pause here sends the beat after it
                response, beat_sent = await ask(clock, Heartbeat(run, token), self.attempts)
                if isinstance(response, Beat):
                    deadline, beat_at = beat_sent + cfg.redelivery_timeout, beat_sent + cfg.heartbeat_interval
                    if response.cancel:
                        await ask(clock, Ack(run, token, cancelled=True), self.attempts)
                        return
                elif response is None:
                    beat_at = clock.now + cfg.heartbeat_interval  # suspicion, not proof: work on to the deadline
                else:
                    return  # refused: the claim is gone
                continue  # a reply that came back late (after a pause) may leave a beat due already
            piece = min(left, beat_at - clock.now, deadline - clock.now)
            left -= piece - await work(handle, piece)
        if clock.now >= deadline:
            return
        await sleep(self.write_time)  # producing the result: a pause here acks late
        await moment("before-ack")
        await ask(clock, Ack(run, token), self.attempts)
