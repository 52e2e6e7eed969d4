"""The proof that dst works: every catalogue bug is found, and the correct model is never accused.

For each slug, fuzz its scenario (``scenarios/<slug>.toml``, shipped with the package)
from seed 1 until the first violation, within a budget, and check the invariant it hit
is one the catalogue lists for it. Then run every scenario with its bug switched off and
expect no violation at all.
"""

from __future__ import annotations

import time
import tomllib
from concurrent.futures import ProcessPoolExecutor
from importlib import resources
from typing import Callable

import attrs

from ..model.bugs import CATALOGUE
from ..scenario import Scenario, parse_scenario
from .fuzz import Outcome, campaign, seeds
from .record import minimize
from .shrink import Shrunk, size


def bug_scenario(slug: str) -> Scenario:
    """The shipped scenario that switches ``slug`` on."""
    path = resources.files("dst").joinpath(f"scenarios/{slug}.toml")
    return parse_scenario(tomllib.loads(path.read_text(encoding="utf-8")), f"scenarios/{slug}.toml")


@attrs.frozen
class BugRow:
    slug: str
    expected: tuple[str, ...]
    hit: str | None  # the invariant of the first violation, None if the budget ran out
    seeds: int  # seeds run up to and including the first violation (or all, if none)
    first_seed: int | None
    seconds: float
    message: str | None

    @property
    def ok(self) -> bool:
        return self.hit is not None and self.hit in self.expected


@attrs.frozen
class CleanRow:
    slug: str
    seeds: int
    violations: tuple[Outcome, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.violations


def hunt(scenario: Scenario, *, start: int, max_seeds: int, seconds: float, use_swarm: bool, workers: int,
         executor: ProcessPoolExecutor | None = None,
         clock: Callable[[], float] = time.monotonic) -> tuple[Outcome | None, int, float]:
    """Fuzz from ``start`` until the first violation: (that outcome or None, seeds run, wall seconds)."""
    began = clock()
    n = 0
    for outcome in campaign(scenario, seeds(start, start + max_seeds, None), use_swarm=use_swarm, workers=workers,
                            deadline=began + seconds, clock=clock, executor=executor):
        n += 1
        if outcome.invariant is not None:
            return outcome, n, clock() - began
    return None, n, clock() - began


def find_bug(slug: str, *, max_seeds: int, seconds: float, use_swarm: bool, workers: int,
             executor: ProcessPoolExecutor | None = None) -> BugRow:
    found, n, took = hunt(bug_scenario(slug), start=1, max_seeds=max_seeds, seconds=seconds, use_swarm=use_swarm,
                          workers=workers, executor=executor)
    if found is None:
        return BugRow(slug, CATALOGUE[slug], None, n, None, took, None)
    return BugRow(slug, CATALOGUE[slug], found.invariant, n, found.seed, took, found.message)


def smallest_finding(slug: str, first: Outcome, *, candidates: int, use_swarm: bool, workers: int,
                     max_seeds: int = 2000, executor: ProcessPoolExecutor | None = None) -> Shrunk:
    """Minimize the first ``candidates`` violations of ``first``'s invariant, from its seed on; keep the smallest."""
    scenario = bug_scenario(slug)
    best: Shrunk | None = None
    tried = 0
    for outcome in campaign(scenario, seeds(first.seed, first.seed + max_seeds, None), use_swarm=use_swarm,
                            workers=workers, executor=executor):
        if outcome.invariant != first.invariant:
            continue
        shrunk = minimize(scenario, outcome.seed, use_swarm=use_swarm)
        if shrunk is not None and (best is None or size(shrunk.scenario) < size(best.scenario)):
            best = shrunk
        tried += 1
        if tried == candidates:
            break
    assert best is not None  # ``first`` itself is one of them
    return best


def stay_clean(slug: str, *, count: int, use_swarm: bool, workers: int,
               executor: ProcessPoolExecutor | None = None) -> CleanRow:
    scenario = attrs.evolve(bug_scenario(slug), bugs=())
    began = time.monotonic()
    outcomes = list(campaign(scenario, seeds(1, 1 + count, None), use_swarm=use_swarm, workers=workers,
                             executor=executor))
    bad = tuple(o for o in outcomes if o.invariant is not None)
    return CleanRow(slug, len(outcomes), bad, time.monotonic() - began)
