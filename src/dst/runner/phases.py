"""A run's phases, after its plan's steps: the *active* phase (jobs and faults), the *drain* (no new steps; wait
until every client has finished its jobs and the server has answered every request it is handling, up to
``run.drain_limit``), and the *quiet* period, after which the liveness invariants judge what is left
(``stranded-slot``: nothing held; ``at-least-once``: every run that was not cancelled acknowledged).

What the checks after the quiet period need to know of the processes is asked of them (who is busy, when the
server last answered a worker), not read back from the trace.
"""

from __future__ import annotations

from typing import Callable

from ..scenario import Scenario
from ..sim.trace import format_time
from ..text import format_duration
from .result import Unjudged
from .world import World

_DRAIN_POLL = 1_000  # ms between looks at whether the run has drained


class Phases:
    """The phases of one run in ``world``: ``go(until)`` runs the kernel to ``until``; ``workers`` are the clients
    that serve the runs stream (their last answer from the server bounds when they served it)."""

    def __init__(self, world: World, scenario: Scenario, active_until: int, go: Callable[[int], None],
                 workers: list[str], judge: Callable[[], None] = lambda: None) -> None:
        self.world = world
        self.judge = judge  # what else is judged after the quiet period of a drained run (the user's eventually)
        self.run = scenario.run
        self.active_until = active_until
        self.go = go
        self.workers = workers
        if workers:
            world.server.replied = {}  # the server notes when it answered whom, for served_until

    def course(self) -> Unjudged | None:
        """The run's phases, to its natural end: the active phase, the drain, the quiet period and the checks
        after it. Returns why the run could not be judged in full, if it could not."""
        world, run = self.world, self.run
        kernel = world.kernel
        self.go(self.active_until)
        drain_end = self.active_until + run.drain_limit
        # Drained: every client finished its jobs and the server answered what it was handling (a backlog
        # of retried requests can still grant leases; the quiet period starts after them).
        while kernel.now < drain_end and world.busy():
            self.go(min(kernel.now + _DRAIN_POLL, drain_end))
        # A drain that runs out leaves the quiet period not quiet: what was still moving (a late grant, a
        # backlog of runs) is live, not stranded, and the checks pass over it; the run says so.
        busy = world.busy()
        quiet_from = world.ghost.quiet_from = kernel.now
        self.go(quiet_from + run.quiet)
        up = world.ghost.server.up_since
        if up is None or up > quiet_from:
            # The reaper and the deadlines could not run for the whole quiet period: nothing is judged.
            return Unjudged("undrained", f"the server was down or paused during the quiet period (from "
                                         f"t={format_time(quiet_from)}): nothing was judged after it "
                                         f"(a longer drain_limit, or shorter server faults)")
        world.ghost.quiet_period_over(self.served_until(), frozenset(busy))
        if not busy:
            self.judge()
            return None
        shown = ", ".join(busy[:5]) + (f" and {len(busy) - 5} more" if len(busy) > 5 else "")
        return Unjudged("undrained", f"{shown} still busy when run.drain_limit "
                                     f"({format_duration(run.drain_limit)}) ran out at "
                                     f"t={format_time(quiet_from)}: what was still moving was not "
                                     f"judged after the quiet period (a longer drain_limit, or "
                                     f"shorter jobs)")

    def served_until(self) -> int | None:
        """The last moment a worker served the runs stream: now while one still does; after they all stopped, just
        before the last time the server answered one before its serve job ended (or its client died); -1 when
        no worker is left alive to serve; None when one is paused (it may owe a run it could not get to: not
        judged)."""
        world = self.world
        workers = [world.clients[name] for name in self.workers]
        if not any(w.alive for w in workers):
            return -1
        if any(w.alive and w.paused for w in workers):
            return None
        if any(not w.idle for w in workers):
            return world.kernel.now
        # A worker that stopped acted on what the server last told it: it served the stream only until that
        # answer, and not in its instant (what came before the answer in that instant, the answer counted, and
        # a worker told of a run would not have stopped).
        told = [(world.server.last_reply(w.name, w.last_active), w.last_active) for w in workers]
        return max(last if answer is None else answer - 1 for answer, last in told)
