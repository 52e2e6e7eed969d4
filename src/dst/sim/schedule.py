"""Scheduling strategies: which of the steps due at one instant goes first, and how long a store round trip takes.

One class per strategy, shared by both modes, as Coyote keeps its strategies (``Interleaving/Strategies``): a
strategy answers two questions, and a mode asks the one it has.

* :meth:`~Uniform.trip`: the ``n``-th store round trip (from 1) of the request keyed ``key``: its latency in the
  scenario's range and its rank among the steps due at the same instant (for :meth:`Kernel.after_ranked`). Both
  host kinds' servers ask it (:class:`~dst.sim.store.RoundTrips`).
* :meth:`~Uniform.ranks`: the ranks of the ready callbacks the code of request ``key`` schedules (the asyncio
  mode's ``call_soon``: a task's next step, a future's callbacks), as a draw the loop calls once per callback.

Every answer is a pure function of the seed, the request's key and how many steps that request has asked for, so
deleting another plan step leaves this request's draws as they were (docs/findings.md).

Adding a strategy is a class here and its name in :data:`STRATEGIES` (the scenario schema reads the names).
"""

from __future__ import annotations

from functools import partial
from itertools import count
from random import Random
from typing import Callable, ClassVar, Protocol

from .rng import Keyed

RANKS = 1 << 20  # ranks are 20-bit: Kernel.after_ranked and Kernel.soon take 0 <= rank < RANKS
_BOTTOM = RANKS - 1


class Strategy(Protocol):
    name: ClassVar[str]

    def trip(self, key: int, n: int, lo: int, span: int) -> tuple[int, int]:
        """The ``n``-th store round trip of request ``key``: its latency in ``[lo, lo + span)`` and its rank."""

    def ranks(self, key: int) -> Callable[[], int]:
        """Request ``key``'s ready ranks: each call, the rank of its next ready callback (asked once per request)."""


class Uniform:
    """Every step draws afresh: a round trip's latency and rank from one keyed draw, a ready callback's rank from
    its request's own sequence of draws."""

    name: ClassVar[str] = "uniform"
    __slots__ = ("trips", "ready_rng")

    def __init__(self, trips: Keyed, ready: Keyed) -> None:
        self.trips = trips
        self.ready_rng = ready

    def trip(self, key: int, n: int, lo: int, span: int) -> tuple[int, int]:
        r = self.trips.bits(key, n)  # one draw: the latency, and among steps due at the same instant, the order
        return lo + r % span, r >> 44

    def ranks(self, key: int) -> Callable[[], int]:
        return partial(Random(self.ready_rng.bits(key)).getrandbits, 20)  # the request's own sequence, drawn in C


class Pct:
    """Probabilistic concurrency testing: each request draws one priority and a change point. Its steps up to the
    change point all run at that priority (a high-priority request runs ahead of the others), and every step after
    it at the bottom. One formula for both questions; what differs is the range the change point is drawn from, as
    a request makes a few store round trips but many ready callbacks."""

    name: ClassVar[str] = "pct"
    TRIP_DEPTH = (1, 4)  # the change point among a request's store round trips: after its 1st to 4th
    READY_DEPTH = (9, 24)  # ... among its ready callbacks

    __slots__ = ("trips", "ready_rng")

    def __init__(self, trips: Keyed, ready: Keyed) -> None:
        self.trips = trips
        self.ready_rng = ready

    @staticmethod
    def _priority(rng: Keyed, key: int, depth: tuple[int, int]) -> tuple[int, int]:
        """Request ``key``'s priority and change point, from one draw: the same for all its steps."""
        p = rng.bits(key, RANKS)
        return p >> 44, depth[0] + (p & 0xFFFF) % (depth[1] - depth[0] + 1)

    def trip(self, key: int, n: int, lo: int, span: int) -> tuple[int, int]:
        rank, keep = self._priority(self.trips, key, self.TRIP_DEPTH)
        if n > keep:
            rank = _BOTTOM
        return lo + (rank * span >> 20), rank  # a high priority is a fast round trip too

    def ranks(self, key: int) -> Callable[[], int]:
        rank, keep = self._priority(self.ready_rng, key, self.READY_DEPTH)
        steps = count(1)

        def draw() -> int:
            return rank if next(steps) <= keep else _BOTTOM
        return draw


STRATEGIES: dict[str, type[Uniform] | type[Pct]] = {kind.name: kind for kind in (Uniform, Pct)}


def strategy(name: str, trips: Keyed, ready: Keyed) -> Uniform | Pct:
    """The strategy called ``name`` (a scenario's ``run.scheduler``), drawing from these streams."""
    return STRATEGIES[name](trips, ready)
