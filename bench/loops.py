"""Three event loops doing the same no-op work, for the kernel benchmark.

Each starts ``pending`` callbacks at tick 1; every event reschedules its own callback one
tick later, so ``pending`` entries stay queued and a run to tick ``ticks`` processes
``pending * ticks`` events. Each function returns that count.
"""

from __future__ import annotations

from heapq import heappop, heappush
from itertools import count

import simpy

from dst.sim.kernel import Kernel


def kernel_loop(pending: int, ticks: int) -> int:
    """``dst``'s kernel: callbacks are ``fn(arg)`` and reschedule with ``kernel.after``."""
    kernel = Kernel()
    after = kernel.after

    def tick(arg: int) -> None:
        after(1, tick, arg)

    for i in range(pending):
        after(1, tick, i)
    kernel.run(ticks)
    return kernel.events


def heapq_loop(pending: int, ticks: int) -> int:
    """The floor for Python: the same ``(time, seq, fn, arg)`` tuples, no class, no checks."""
    queue: list[tuple[int, int, object, int]] = []
    push, pop, seq = heappush, heappop, count()
    now = 0

    def tick(arg: int) -> None:
        push(queue, (now + 1, next(seq), tick, arg))

    for i in range(pending):
        tick(i)
    while queue and queue[0][0] <= ticks:
        now, _, fn, arg = pop(queue)
        fn(arg)
    return pending * ticks


def simpy_loop(pending: int, ticks: int) -> int:
    """SimPy processes doing ``yield env.timeout(1)``; only the timeouts are counted."""
    env = simpy.Environment()

    def proc() -> object:
        timeout = env.timeout
        while True:
            yield timeout(1)

    for _ in range(pending):
        env.process(proc())
    env.run(until=ticks + 1)  # SimPy stops before the events at ``until``: ticks 1..ticks run
    return pending * ticks
