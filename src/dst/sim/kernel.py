"""The event loop: integer virtual time, a heap of plain tuples, cancellable timers.

Queue entries are ``(time, seq, fn, arg)``. ``seq`` comes from a counter, so
ties break first-scheduled-first and the comparison never reaches ``fn`` (SimPy's
layout; never ``id()``, never payload comparison). Cancelling is lazy deletion: the
handle goes into a set and the entry is skipped when it surfaces (Trio's way),
which keeps ``cancel`` O(1) and the hot loop to one extra truth test.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush
from itertools import count
from typing import Any, Callable


class StopRun(Exception):
    """Raised from inside an event to end the run at once (a violation, a stop)."""


class Pause(StopRun):
    """Raised from inside an event to stop :meth:`Kernel.run` for a moment: the caller notes where the run is,
    and calls ``run`` again, which goes on from the next event."""


NEVER = 1 << 62  # what :meth:`Kernel.peek` says when nothing is scheduled


class Kernel:
    """``checkpoint(events)``, if given, is called once ``events`` reaches ``next_checkpoint``: it may raise
    to end the run (an event budget spent, a wall-clock deadline passed) or return the next count at which
    to be called. It costs the loop one integer comparison per event."""

    __slots__ = ("now", "events", "next_checkpoint", "checkpoint", "_queue", "_counter", "_cancelled", "_ready", "_firsts")

    def __init__(self, checkpoint: Callable[[int], int] | None = None, first_checkpoint: int = NEVER) -> None:
        self.now = 0
        self.events = 0
        self.checkpoint = checkpoint
        self.next_checkpoint = first_checkpoint if checkpoint is not None else NEVER
        self._queue: list[tuple[int, int, Callable[[Any], object], Any]] = []
        self._counter = count()
        self._cancelled: set[int] = set()
        # Events due now, ranked (the asyncio mode's ready callbacks): they run before the clock moves again, and
        # skip the main queue, whose tuples are longer and whose heap is deeper.
        self._ready: list[tuple[int, Callable[[Any], object], Any]] = []
        self._firsts = -(1 << 62)  # the seqs of first_at: below every other

    def at(self, time: int, fn: Callable[[Any], object], arg: Any = None) -> int:
        """Call ``fn(arg)`` at virtual time ``time``; returns a handle for :meth:`cancel`."""
        if time < self.now:
            raise ValueError(f"cannot schedule at {time}: the clock is at {self.now}")
        seq = next(self._counter)
        heappush(self._queue, (time, seq, fn, arg))
        return seq

    def after(self, delay: int, fn: Callable[[Any], object], arg: Any = None) -> int:
        seq = next(self._counter)
        heappush(self._queue, (self.now + delay, seq, fn, arg))
        return seq

    def after_ranked(self, delay: int, rank: int, fn: Callable[[Any], object], arg: Any = None) -> int:
        """Like :meth:`after`, but among events due at the same time this one runs after every unranked
        event and in ``rank`` order (0 <= rank < 2**20) among ranked ones: a seeded choice of who goes first."""
        seq = (rank << 40) | next(self._counter)
        heappush(self._queue, (self.now + delay, seq, fn, arg))
        return seq

    def reserve(self) -> int:
        """A seq for an event that may be scheduled later with :meth:`put` (a plan's next step, once there is one),
        in the order it would have had if scheduled now."""
        return next(self._counter)

    def put(self, seq: int, time: int | None, fn: Callable[[Any], object], arg: Any = None) -> None:
        """The event ``seq`` (scheduled, or reserved) at ``time`` calling ``fn(arg)`` from now on; None: none at all.
        It keeps its place among events due at the same time: a run that goes on with another plan (a minimizer's
        candidate, from a snapshot) has the event where a run of that plan from the start has it."""
        queue = self._queue
        for i, entry in enumerate(queue):
            if entry[1] == seq:
                queue[i] = queue[-1]
                queue.pop()
                heapify(queue)
                break
        if time is not None:
            if time < self.now:
                raise ValueError(f"cannot schedule at {time}: the clock is at {self.now}")
            heappush(queue, (time, seq, fn, arg))

    def first_at(self, time: int, fn: Callable[[Any], object], arg: Any = None) -> None:
        """Call ``fn(arg)`` at ``time`` before anything else due then (what is due now this way runs first, as the
        clock has not moved yet), in the order so scheduled: the moment a run branches. Not cancellable."""
        if time <= self.now:
            raise ValueError(f"cannot schedule first at {time}: the clock is at {self.now}")
        self._firsts += 1
        heappush(self._queue, (time, self._firsts, fn, arg))

    def soon(self, rank: int, fn: Callable[[Any], object], arg: Any = None) -> None:
        """Call ``fn(arg)`` now, before the clock moves, in ``rank`` order (0 <= rank < 2**20) among what is
        due now this way (ties: first scheduled first). Not cancellable: the caller skips what it no longer wants."""
        heappush(self._ready, ((rank << 40) | next(self._counter), fn, arg))

    def cancel(self, handle: int) -> None:
        self._cancelled.add(handle)

    def pending(self) -> int:
        return len(self._queue) + len(self._ready) - len(self._cancelled)

    def peek(self) -> int:
        """The time of the next event (the clock's, for one due now), or :data:`NEVER` when none is scheduled.
        A cancelled event still counts until it surfaces."""
        if self._ready:
            return self.now
        return self._queue[0][0] if self._queue else NEVER

    def step(self) -> bool:
        """Process the next event, moving the clock to its time; False when none is left. :meth:`run` is this
        in a loop, inlined (SimPy's ``step``/``run``): a caller that stops between events (to snapshot a run at
        a moment, to branch from it) steps."""
        ready, queue, cancelled = self._ready, self._queue, self._cancelled
        while True:
            if ready:
                _, fn, arg = heappop(ready)
            elif queue:
                time, seq, fn, arg = heappop(queue)
                if cancelled and seq in cancelled:
                    cancelled.discard(seq)
                    continue
                self.now = time
            else:
                return False
            self.events += 1
            fn(arg)
            if self.events >= self.next_checkpoint:
                self.next_checkpoint = self.checkpoint(self.events)  # type: ignore[misc]  # set with the limit
            return True

    def run(self, until: int) -> None:
        """Process every event with time <= ``until``; the clock ends at ``until``.

        A :class:`StopRun` raised by an event propagates to the caller with the
        clock at that event's time.
        """
        queue = self._queue
        ready = self._ready
        cancelled = self._cancelled
        pop = heappop
        n = self.events
        limit = self.next_checkpoint
        try:
            while True:
                if ready:
                    _, fn, arg = pop(ready)
                elif queue and queue[0][0] <= until:
                    time, seq, fn, arg = pop(queue)
                    if cancelled and seq in cancelled:
                        cancelled.discard(seq)
                        continue
                    self.now = time
                else:
                    break
                n += 1
                fn(arg)
                if n >= limit:
                    self.events = n
                    limit = self.next_checkpoint = self.checkpoint(n)  # type: ignore[misc]  # set with the limit
        finally:
            self.events = n
        self.now = until
