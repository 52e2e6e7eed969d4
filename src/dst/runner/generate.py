"""Plans from a seed: each client's jobs, and the faults, as timed steps.

Each client draws its jobs from its own ``workload`` sequence and each fault kind
from its own ``faults`` sequence, so adding a client or a fault kind leaves the
others' draws as they were. Faults arrive as a Poisson process at the scenario's
rate (per virtual minute) and pick their target from the fault kind's own stream.
"""

from __future__ import annotations

import random
from typing import Any

from ..faults import BY_NAME, FAULTS
from ..plan import Step, make_step, sort_steps
from ..scenario import Scenario
from ..sim.rng import Streams

_MINUTE = 60_000

# Client faults after which a new incarnation starts: a worker struck by one serves again (``then = "serve"``).
REBORN = frozenset(kind.action for kind in FAULTS if kind.new_incarnation and kind.target == "client")


def workers(scenario: Scenario) -> tuple[str, ...]:
    """The clients that serve the runs stream: numbered after the ones that run lease jobs (none without runs)."""
    first = scenario.workload.clients + 1
    return tuple(f"c{w}" for w in range(first, first + scenario.runs.workers)) if scenario.runs.enabled else ()


def generate_plan(scenario: Scenario, streams: Streams) -> tuple[Step, ...]:
    wl, duration, grain = scenario.workload, scenario.run.duration, scenario.run.granularity
    raw: list[tuple[int, str, str, dict[str, object]]] = []

    def pick(rnd: random.Random, bounds: tuple[int, int]) -> int:
        """A duration in ``bounds``, in whole multiples of the scenario's granularity."""
        value = rnd.randint(*bounds)
        return max(value - value % grain, bounds[0])

    for c in range(1, wl.clients + 1):
        rnd = streams.sequence("workload", c)
        t = pick(rnd, wl.think)
        for _ in range(wl.jobs):
            if t >= duration:
                break
            work = pick(rnd, wl.work)
            raw.append((t, f"c{c}", "acquire", {"limit": wl.limit, "slots": wl.slots, "work": work,
                                                 "writes": rnd.randint(*wl.writes)}))
            t += work + pick(rnd, wl.think)

    # Workers serving the runs stream are clients of their own, after the ones that run lease jobs; faults
    # strike them all alike.
    runs, serving = scenario.runs, workers(scenario)
    clients = wl.clients + len(serving)
    model = scenario.model.resolve()
    moments = {"client": model.client_moments, "server": model.server_moments}
    for name, fault in scenario.faults.kinds():
        per_ms = fault.rate / _MINUTE
        if per_ms <= 0:  # a rate so small (5e-324) that per millisecond it is none at all
            continue
        kind = BY_NAME[name]
        rnd = streams.sequence("faults", name)
        # A stream of its own for how long past a deadline an aimed fault lasts: the other draws stay as they were.
        past = streams.sequence("faults", name, "past") if fault.past[1] > 0 and kind.lasts_past else None
        clock = 0.0
        while True:
            clock += rnd.expovariate(per_ms)
            if clock >= duration:
                break
            at = int(clock) - int(clock) % grain
            length = pick(rnd, fault.duration)
            actor = "server" if kind.target == "server" else f"c{rnd.randint(1, clients)}"
            args: dict[str, object] = {kind.duration_arg: length} if kind.duration_arg else {}
            aims = moments[kind.target]
            if fault.targeted > 0 and aims and rnd.random() < fault.targeted:
                args["moment"] = aims[rnd.randrange(len(aims))]  # aimed at the actor's next such moment
                if past is not None:
                    args["past"] = pick(past, fault.past)
            raw.append((at, actor, kind.action, args))

    if runs.enabled:
        # Workers serve the stream from the start, and again after each restart (a new incarnation).
        raw += [(0, w, "serve", {}) for w in serving]
        for _, actor, action, args in raw:
            if action in REBORN and actor in serving:
                args["then"] = "serve"  # the new incarnation serves again, whenever the restart strikes
        rnd = streams.sequence("workload", "runs")
        drawn = []
        for _ in range(runs.submissions):
            at, work = pick(rnd, (0, duration * 4 // 5)), pick(rnd, runs.work)
            cancel_at = None
            if rnd.random() < runs.cancel:
                early = rnd.random() < runs.cancel_early
                cancel_at = max(0, at - pick(rnd, (1, 10_000))) if early else at + pick(rnd, (0, work + 30_000))
            drawn.append((at, work, cancel_at))
        # Runs numbered in submission order (a run never cancelled sorts after a tie that is: None has no order).
        drawn.sort(key=lambda d: (d[0], d[1], d[2] is None, d[2] or 0))
        for run, (at, work, cancel_at) in enumerate(drawn, 1):
            raw.append((at, "user", "submit", {"run": run, "work": work}))
            if cancel_at is not None:
                raw.append((cancel_at, "user", "cancel", {"run": run}))

    # Ids in time order; ties by actor and action so the numbering is a pure function of the draws.
    raw.sort(key=lambda r: (r[0], r[1], r[2]))
    return sort_steps(make_step(i, at, actor, action, **args) for i, (at, actor, action, args) in enumerate(raw, 1))


class Order:
    """A plan step as its client program sees it: a step's missing job arguments take the workload's defaults."""

    __slots__ = ("step", "defaults", "wall_clock")

    def __init__(self, step: Step, defaults: dict[str, object], wall_clock: Any) -> None:
        self.step = step
        self.defaults = defaults
        self.wall_clock = wall_clock

    @property
    def action(self) -> str:
        return self.step.action

    @property
    def id(self) -> int:
        return self.step.id

    def arg(self, name: str, default: Any = None) -> Any:
        return self.step.arg(name, self.defaults.get(name, default))
