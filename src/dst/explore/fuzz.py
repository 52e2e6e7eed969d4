"""Fuzz campaigns: many seeds, in parallel processes, grouped into failure signatures.

A campaign runs seeds in order and consumes results in order, so any number of
workers reports exactly what one worker would: the same outcomes for the same seeds.
A time budget only decides how long a prefix of the seeds gets run. ``--shard K/N``
keeps the seeds congruent to K-1 modulo N, so N CI jobs cover disjoint seeds.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Callable, Generator, Iterator, Sequence

import attrs

from ..invariants import shape
from ..runner import run
from ..scenario import Scenario
from .swarm import swarm

_CHUNK = 8  # seeds per task handed to a worker: big enough to amortise the round trip, small enough to stop soon


@attrs.frozen
class Outcome:
    """What one seed did (small, so it crosses process boundaries cheaply)."""

    seed: int
    events: int
    invariant: str | None = None
    message: str | None = None
    time: int | None = None

    @property
    def signature(self) -> str | None:
        return None if self.invariant is None else f"{self.invariant}: {shape(self.message or '')}"


@attrs.frozen
class Shard:
    index: int  # 1-based
    count: int

    def keeps(self, seed: int) -> bool:
        return seed % self.count == self.index - 1


def seeds(first: int, stop: int | None, shard: Shard | None) -> Iterator[int]:
    """Seeds ``first, first+1, ...`` below ``stop`` (forever if None) that the shard keeps."""
    seed = first
    while stop is None or seed < stop:
        if shard is None or shard.keeps(seed):
            yield seed
        seed += 1


def run_seed(scenario: Scenario, seed: int, use_swarm: bool) -> Outcome:
    result = run(swarm(scenario, seed) if use_swarm else scenario, seed)
    v = result.violation
    if v is None:
        return Outcome(seed, result.events)
    return Outcome(seed, result.events, v.invariant, v.message, v.time)


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """Processes for a campaign. Ctrl-C reaches the whole process group; the workers ignore it, so
    only the campaign stops, cleanly, and prints what it found."""
    return ProcessPoolExecutor(max_workers=workers, initializer=_ignore_interrupts)


def pick(scenarios: tuple[Scenario, ...], seed: int) -> Scenario:
    """The scenario a seed runs in a campaign over several: they take turns, seed by seed."""
    return scenarios[seed % len(scenarios)]


def _run_chunk(scenarios: tuple[Scenario, ...], chunk: list[int], use_swarm: bool) -> list[Outcome]:
    return [run_seed(pick(scenarios, seed), seed, use_swarm) for seed in chunk]


def campaign(scenario: Scenario | Sequence[Scenario], seed_iter: Iterator[int], *, use_swarm: bool, workers: int,
             deadline: float | None = None, clock: Callable[[], float] = time.monotonic,
             executor: ProcessPoolExecutor | None = None) -> Generator[Outcome, None, None]:
    """Outcomes in seed order until the seeds run out or ``clock()`` passes ``deadline``. Given several
    scenarios, seed ``s`` runs ``pick(scenarios, s)``.

    With one worker the seeds run in this process; with more, in a pool of processes (``executor``,
    or one made here), with a window of chunks in flight. Closing the iterator (or Ctrl-C) stops
    promptly: chunks not started are cancelled.
    """
    scenarios = (scenario,) if isinstance(scenario, Scenario) else tuple(scenario)
    if workers <= 1:
        for seed in seed_iter:
            if deadline is not None and clock() >= deadline:
                return
            yield run_seed(pick(scenarios, seed), seed, use_swarm)
        return
    pool = executor or worker_pool(workers)
    pending: list[Future[list[Outcome]]] = []
    try:
        exhausted = False
        while True:
            while not exhausted and len(pending) < 2 * workers and (deadline is None or clock() < deadline):
                chunk = [seed for _, seed in zip(range(_CHUNK), seed_iter)]
                if not chunk:
                    exhausted = True
                    break
                pending.append(pool.submit(_run_chunk, scenarios, chunk, use_swarm))
            if not pending:
                return
            yield from pending.pop(0).result()
            if deadline is not None and clock() >= deadline:
                exhausted = True  # let the chunks in flight finish: their seeds are a contiguous prefix
    finally:
        for future in pending:
            future.cancel()
        if executor is None:
            pool.shutdown(wait=True, cancel_futures=True)


@attrs.define
class Group:
    """Violations that share a signature (invariant plus the shape of the message)."""

    signature: str
    invariant: str
    first: Outcome
    seeds: list[int] = attrs.Factory(list)


@attrs.define
class Tally:
    """A campaign's running totals, fed one outcome at a time."""

    seeds_run: int = 0
    events: int = 0
    violations: int = 0
    groups: dict[str, Group] = attrs.Factory(dict)
    last_seed: int | None = None

    def add(self, outcome: Outcome) -> Group | None:
        """Count an outcome; returns its group when it is a violation with a new signature."""
        self.seeds_run += 1
        self.events += outcome.events
        self.last_seed = outcome.seed
        signature = outcome.signature
        if signature is None:
            return None
        self.violations += 1
        group = self.groups.get(signature)
        if group is None:
            group = self.groups[signature] = Group(signature, outcome.invariant or "", outcome)
            group.seeds.append(outcome.seed)
            return group
        group.seeds.append(outcome.seed)
        return None
