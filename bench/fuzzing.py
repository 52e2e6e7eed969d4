"""Fuzzing measurements: how soon one core finds a catalogue bug, and a
contender running a campaign's seeds, in this process or in a pool of worker processes.
"""

from __future__ import annotations

import os
from itertools import count
from time import perf_counter, process_time
from typing import Any, Iterable

from dst.explore.fuzz import Outcome, campaign, seeds
from dst.explore.selftest import bug_scenario, hunt
from dst.scenario import Scenario


def hunts(slug: str, starts: Iterable[int], max_seeds: int, seconds: float) -> list[dict[str, Any]]:
    """Fuzz ``slug``'s scenario (swarm on, one core) from each start until its first violation,
    at most ``max_seeds`` seeds or ``seconds`` of CPU time each. One record per hunt."""
    scenario = bug_scenario(slug)
    records = []
    for start in starts:
        began = perf_counter()
        found, n, cpu = hunt(scenario, start=start, max_seeds=max_seeds, seconds=seconds, use_swarm=True,
                             workers=1, clock=process_time)
        records.append({"start": start, "invariant": found and found.invariant, "seed": found and found.seed,
                        "seeds": n, "cpu_seconds": cpu, "wall_seconds": perf_counter() - began})
    return records


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (a pool's workers, once shut down)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CampaignRunner:
    """A contender running the next ``batch`` seeds of a swarm campaign on ``workers`` workers
    (``first``, ``first + batch``, ... on successive calls, so two runners built alike run the
    same seeds round by round). Each call makes and shuts down its own pool, as ``dst fuzz``
    does, so the workers' CPU time is counted. Keeps totals, and every violation, across calls."""

    def __init__(self, scenario: Scenario, workers: int, batch: int, first: int = 0) -> None:
        self.scenario, self.workers, self.batch = scenario, workers, batch
        self.starts = count(first, batch)
        self.runs = 0
        self.violations: list[Outcome] = []
        self.cpu_per_seed: list[float] = []  # one per call, workers included

    def __call__(self) -> int:
        start, cpu = next(self.starts), cpu_seconds()
        done = 0
        for outcome in campaign(self.scenario, seeds(start, start + self.batch, None), use_swarm=True,
                                workers=self.workers):
            done += 1
            if outcome.invariant is not None:
                self.violations.append(outcome)
        self.cpu_per_seed.append((cpu_seconds() - cpu) / done)
        self.runs += done
        return done
