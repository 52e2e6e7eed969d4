"""One seed of a campaign, as a worker runs it: its run and its branches' (:mod:`.branch`), and what the campaign
keeps of each (:class:`Outcome`: small, so it crosses process boundaries cheaply), in the worker's process or, for
a costly model's seed, in a fork of the warm worker (:mod:`.isolate`)."""

from __future__ import annotations

import time
from typing import Callable

import attrs

from ..errors import MODEL_ERROR
from ..invariants import signed
from ..plan import Branch
from ..runner import Cut, RunResult, Simulation
from ..runner.swarm import enabled_kinds, swarm as swarm_of
from ..scenario import Scenario
from .branch import Branching
from .isolate import CAN_FORK, Died, Late, forked, warm
from .pool import leave_partial, running

Budget = tuple[tuple[str, int], ...]  # (situation, the branches its moment gets): Steering.branches


@attrs.frozen
class Outcome:
    """What one seed did (small, so it crosses process boundaries cheaply)."""

    seed: int
    events: int
    invariant: str | None = None
    message: str | None = None
    time: int | None = None
    unjudged: tuple[str, str] | None = None  # (kind, why): a run that ended before it could be judged
    checked: tuple[str, ...] = ()  # the invariant ids the run checked (a report lists those that held)
    # Coverage, as (name, count) pairs: the faults that struck, the situations reached, the cases each
    # invariant met.
    fired: tuple[tuple[str, int], ...] = ()
    reached: tuple[tuple[str, int], ...] = ()
    cases: tuple[tuple[str, int], ...] = ()
    # The violation's consequences (RunResult.consequences), as (invariant, time, message).
    consequences: tuple[tuple[str, int, str], ...] = ()
    arm: int = 0  # which of the campaign's scenarios it ran (an index into them)
    enabled: tuple[str, ...] = ()  # the fault kinds its scenario (its swarm's, in a swarm) turned on
    # The user's own assertions it met (dst.always & co.): (name, times checked, true, false).
    assertions: tuple[tuple[str, int, int, int], ...] = ()
    branch: tuple[int, int] | None = None  # a branch of the seed's run (dst.plan.Branch): (at, draw)

    @property
    def ok(self) -> bool:
        """No invariant was violated (an unjudged run is ok, as :attr:`RunResult.ok <dst.RunResult.ok>` says)."""
        return self.invariant is None

    @property
    def signature(self) -> str | None:
        """What the violation has in common with others of its kind: the invariant and the message's shape
        (its names and numbers taken out). None for a run that violated nothing."""
        return None if self.invariant is None else f"{self.invariant}: {signed(self.invariant, self.message or '')}"


def run_seed(scenario: Scenario, seed: int, use_swarm: bool, deadline: float | None = None,
             clock: Callable[[], float] = time.monotonic, arm: int = 0,
             explorer: Branching[Outcome] | None = None) -> Outcome:
    """One seed's outcome; past ``deadline`` (on ``clock``) the run stops where it is and raises :class:`Cut`."""
    ran = swarm_of(scenario, seed) if use_swarm else scenario
    return outcome_of(Simulation(ran, seed, deadline=deadline, clock=clock, explorer=explorer).run(), arm)


def outcome_of(result: RunResult, arm: int) -> Outcome:
    """What a campaign keeps of a run of its scenario ``arm``."""
    v, unjudged, branch = result.violation, result.unjudged, result.ran.branch
    return Outcome(result.seed, result.events, None if v is None else v.invariant, None if v is None else v.message,
                   None if v is None else v.time, None if unjudged is None else (unjudged.kind, unjudged.why),
                   checked=result.invariants, fired=tuple(result.fired.items()),
                   reached=tuple(result.situations.items()), cases=tuple(result.cases.items()),
                   consequences=tuple((c.invariant, c.time, c.message) for c in result.consequences), arm=arm,
                   enabled=enabled_kinds(result.ran), assertions=tuple((n, *c) for n, c in result.assertions.items()),
                   branch=None if branch is None else (branch.at, branch.draw))


def explore_seed(scenario: Scenario, seed: int, use_swarm: bool, deadline: float | None = None,
                 clock: Callable[[], float] = time.monotonic, arm: int = 0, budget: Budget = (),
                 fork: bool = True) -> list[Outcome]:
    """A seed's outcome, then its branches' (:mod:`dst.explore.branch`): ``budget`` gives the moment of each risky
    situation its branches; with ``fork``, a real service's branches are forked from the seed's run at its moment."""
    if not budget:
        return [run_seed(scenario, seed, use_swarm, deadline, clock, arm)]

    def died(branch: Branch, why: str) -> Outcome:
        return Outcome(seed, 0, MODEL_ERROR, f"the run: {why}", arm=arm, branch=(branch.at, branch.draw))

    explorer = Branching(dict(budget), lambda result: outcome_of(result, arm), died, deadline=deadline, fork=fork)
    outcomes = [run_seed(scenario, seed, use_swarm, deadline, clock, arm, explorer), *explorer.answers]
    for branch in explorer.cold:  # where the run could not be forked: each branch from the start
        outcomes.append(run_seed(attrs.evolve(scenario, branch=branch), seed, use_swarm, deadline, clock, arm))
    return outcomes


_FORK_ABOVE = 0.15  # CPU seconds of a worker's first seed above which its seeds pay for a fork each (~15 ms)
_fork_seeds: bool | None = None  # in a worker: whether its seeds run in forks of it (None: not known before one ran)


def in_worker(scenario: Scenario, seed: int, use_swarm: bool, deadline: float | None, arm: int,
                    isolated: bool, budget: Budget = ()) -> list[Outcome]:
    """One seed in a worker (and its branches, given a ``budget``). A user's model's seeds run in forks of the warm
    worker once a seed proves costly enough to pay for one (each is then safe from the others and from what it does
    to its own process), and all of them where the worker's process died once already (``isolated``); cheap ones
    run in the worker itself."""
    global _fork_seeds

    def explored() -> list[Outcome]:
        return explore_seed(scenario, seed, use_swarm, deadline, arm=arm, budget=budget)

    if not CAN_FORK or scenario.model.impl.startswith("dst."):
        return explored()
    if not isolated and not _fork_seeds:
        began = time.process_time()
        outcomes = explored()
        if _fork_seeds is None:  # the first seed: it warmed the worker, and says whether forks pay
            _fork_seeds = time.process_time() - began >= _FORK_ABOVE
            if _fork_seeds:
                warm()
        return outcomes
    if _fork_seeds is None:  # a worker that forks from the start: the model imported here, once
        scenario.model.resolve()
        warm()
    try:
        return forked(explored, deadline=deadline)
    except Died as e:  # what the model did to its process is that seed's model error
        return [Outcome(seed, 0, MODEL_ERROR, f"the run: {e}", arm=arm)]
    except Late:
        raise Cut() from None


Chunk = list[tuple[int, int, Budget]]  # (seed, arm, branches) of the seeds handed to a worker at once


def run_chunk(scenarios: tuple[Scenario, ...], chunk: Chunk, use_swarm: bool,
              deadline: float | None, isolated: bool = False) -> tuple[list[Outcome], bool]:
    """The chunk's outcomes (of its seeds, each followed by its branches') in seed order, and whether the deadline
    cut it short (after the ones returned). ``isolated``: every seed in a process of its own (a worker died on this
    chunk)."""
    outcomes: list[Outcome] = []
    with running():
        try:
            for seed, arm, budget in chunk:
                outcomes += in_worker(scenarios[arm], seed, use_swarm, deadline, arm, isolated, budget)
            return outcomes, False
        except Cut:
            return outcomes, True
        except SystemExit:  # SIGTERM: the campaign stops; the seeds finished before count in its report
            leave_partial(chunk[0][0], outcomes)
            raise
