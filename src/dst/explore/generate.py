"""Plans from a seed: each client's jobs, and the faults, as timed steps.

Each client draws its jobs from its own ``workload`` sequence and each fault kind
from its own ``faults`` sequence, so adding a client or a fault kind leaves the
others' draws as they were. Faults arrive as a Poisson process at the scenario's
rate (per virtual minute) and pick their target from the fault kind's own stream.
"""

from __future__ import annotations

from ..plan import Step, make_step, sort_steps
from ..scenario import Scenario
from ..sim.rng import Streams

_MINUTE = 60_000


def generate_plan(scenario: Scenario, streams: Streams) -> tuple[Step, ...]:
    wl, duration = scenario.workload, scenario.run.duration
    raw: list[tuple[int, str, str, dict[str, object]]] = []

    for c in range(1, wl.clients + 1):
        rnd = streams.sequence("workload", c)
        t = rnd.randint(*wl.think)
        for _ in range(wl.jobs):
            if t >= duration:
                break
            work = rnd.randint(*wl.work)
            raw.append((t, f"c{c}", "acquire", {"limit": wl.limit, "slots": wl.slots, "work": work,
                                                 "writes": rnd.randint(*wl.writes)}))
            t += work + rnd.randint(*wl.think)

    for kind, fault in scenario.faults.kinds():
        if fault.rate <= 0:
            continue
        rnd = streams.sequence("faults", kind)
        t = 0.0
        while True:
            t += rnd.expovariate(fault.rate / _MINUTE)
            if t >= duration:
                break
            length = rnd.randint(*fault.duration)
            if kind == "server_restart":
                raw.append((int(t), "server", "restart", {"down": length}))
                continue
            actor = f"c{rnd.randint(1, wl.clients)}"
            if kind in ("pause", "partition"):
                raw.append((int(t), actor, kind, {"for": length}))
            else:
                raw.append((int(t), actor, kind, {}))

    # Ids in time order; ties by actor and action so the numbering is a pure function of the draws.
    raw.sort(key=lambda r: (r[0], r[1], r[2]))
    return sort_steps(make_step(i, at, actor, action, **args) for i, (at, actor, action, args) in enumerate(raw, 1))
