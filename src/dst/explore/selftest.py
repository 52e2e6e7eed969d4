"""The proof that dst works on a model: every bug it declares is found, and its correct form is never accused.

For each of the model's bugs, fuzz its scenario (``<slug>.toml`` in the folder the model names;
the reference model's are shipped with the package) from seed 1 until the first violation,
within a budget, and check the invariant it hit is one the bug lists. Then run every scenario
with its bug switched off and expect no violation at all.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

import attrs

from ..models import DEFAULT_IMPL, resolve
from ..scenario import Scenario, load_scenario, load_shipped, shipped_names
from ..sut import Bug
from .fuzz import Outcome, campaign, seeds
from .record import minimize
from .shrink import Shrunk, size


def bug_of(slug: str, impl: str = DEFAULT_IMPL) -> Bug:
    for bug in resolve(impl).bugs:
        if bug.slug == slug:
            return bug
    raise ValueError(f"{impl} has no bug {slug!r}")


def bug_scenario(slug: str, impl: str = DEFAULT_IMPL) -> Scenario:
    """The scenario that switches ``slug`` on: ``<slug>.toml`` in the model's scenario folder (run on that
    model whatever it names), or else the embedded default with the bug on."""
    if slug in shipped_names(impl):
        return load_shipped(slug, impl)
    return attrs.evolve(load_scenario(model=impl), name=slug, bugs=(slug,))


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


def find_bug(slug: str, *, impl: str = DEFAULT_IMPL, max_seeds: int, seconds: float, use_swarm: bool, workers: int,
             executor: ProcessPoolExecutor | None = None) -> BugRow:
    found, n, took = hunt(bug_scenario(slug, impl), start=1, max_seeds=max_seeds, seconds=seconds,
                          use_swarm=use_swarm, workers=workers, executor=executor)
    expected = bug_of(slug, impl).breaks
    if found is None:
        return BugRow(slug, expected, None, n, None, took, None)
    return BugRow(slug, expected, found.invariant, n, found.seed, took, found.message)


def smallest_finding(slug: str, first: Outcome, *, impl: str = DEFAULT_IMPL, candidates: int, use_swarm: bool, workers: int,
                     max_seeds: int = 2000, executor: ProcessPoolExecutor | None = None) -> Shrunk:
    """Minimize the first ``candidates`` violations of ``first``'s invariant, from its seed on; keep the smallest."""
    scenario = bug_scenario(slug, impl)
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


def stay_clean(slug: str, *, impl: str = DEFAULT_IMPL, count: int, use_swarm: bool, workers: int,
               executor: ProcessPoolExecutor | None = None) -> CleanRow:
    scenario = attrs.evolve(bug_scenario(slug, impl), bugs=())
    began = time.monotonic()
    outcomes = list(campaign(scenario, seeds(1, 1 + count, None), use_swarm=use_swarm, workers=workers,
                             executor=executor))
    bad = tuple(o for o in outcomes if o.invariant is not None)
    return CleanRow(slug, len(outcomes), bad, time.monotonic() - began)
