"""Plans from a seed: each client's jobs, and the faults, as timed steps.

Each client draws its jobs from its own ``workload`` sequence and each fault kind
from its own ``faults`` sequence, so adding a client or a fault kind leaves the
others' draws as they were. Faults arrive as a Poisson process at the scenario's
rate (per virtual minute) and pick their target from the fault kind's own stream.
"""

from __future__ import annotations

import random

from ..plan import Step, make_step, sort_steps
from ..scenario import Scenario
from ..sim.rng import Streams

_MINUTE = 60_000


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

    for kind, fault in scenario.faults.kinds():
        if fault.rate <= 0:
            continue
        rnd = streams.sequence("faults", kind)
        t = 0.0
        while True:
            t += rnd.expovariate(fault.rate / _MINUTE)
            if t >= duration:
                break
            at = int(t) - int(t) % grain
            length = pick(rnd, fault.duration)
            if kind == "server_restart":
                raw.append((at, "server", "restart", {"down": length}))
                continue
            actor = f"c{rnd.randint(1, wl.clients)}"
            if kind in ("pause", "partition"):
                raw.append((at, actor, kind, {"for": length}))
            else:
                raw.append((at, actor, kind, {}))

    # Ids in time order; ties by actor and action so the numbering is a pure function of the draws.
    raw.sort(key=lambda r: (r[0], r[1], r[2]))
    return sort_steps(make_step(i, at, actor, action, **args) for i, (at, actor, action, args) in enumerate(raw, 1))
