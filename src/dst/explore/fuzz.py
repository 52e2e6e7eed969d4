"""Fuzz campaigns: many seeds, in parallel processes, grouped into failure signatures.

A campaign runs seeds in order and consumes results in order, so any number of
workers reports exactly what one worker would: the same outcomes for the same seeds.
A time budget only decides how long a prefix of the seeds gets run. ``--shard K/N``
keeps the seeds congruent to K-1 modulo N, so N CI jobs cover disjoint seeds.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import Executor, Future, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Generator, Iterable, Iterator, Sequence

import attrs

from ..errors import MODEL_ERROR
from ..invariants.situations import catalogue
from ..invariants.user import catalogue as assertions_in
from ..plan import Branch
from ..runner import Cut, RunResult, on_model, run
from ..scenario import Scenario
from ..sim.trace import format_time
from ..sut import Model, System
from .coverage import Coverage, never_reached
from .seed import Chunk, Outcome, explore_seed, run_chunk, run_seed
from .steer import Steering
from .pool import StopRequest, partials, stop_workers, worker_pool
from ..runner.reproduce import reproduce
from ..runner.swarm import swarm as swarm_of

__all__ = ["Outcome", "Shard", "campaign", "count_seeds", "drive", "ended", "fuzz", "run_seed", "seeds", "tallied"]

# Seeds per task handed to a worker: enough to amortise the round trip where a seed costs milliseconds (dst's own
# models), one where it costs tens of milliseconds or more (a user's): a chunk's outcomes come back together, so a
# campaign that stops at its first violation would pay for the rest of its chunk, and of the chunks in flight.
_CHUNK, _GUEST_CHUNK = 8, 1


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


def count_seeds(first: int, stop: int, shard: Shard | None) -> int:
    """How many seeds :func:`seeds` yields, without yielding them."""
    if stop <= first:
        return 0
    if shard is None:
        return stop - first
    start = first + (shard.index - 1 - first) % shard.count  # the shard's first seed at or after ``first``
    return max(0, (stop - start + shard.count - 1) // shard.count)


_OVERDUE = 3.0  # seconds past the deadline a campaign waits for the seeds in flight before it ends their workers


def guest(scenarios: Sequence[Scenario]) -> bool:
    """Some of the scenarios run a user's model: its seeds run in worker processes, never in the campaign's own."""
    return any(not s.model.impl.startswith("dst.") for s in scenarios)


def campaign(scenario: Scenario | Sequence[Scenario], seed_iter: Iterator[int], *, use_swarm: bool, workers: int,
             deadline: float | None = None, clock: Callable[[], float] = time.monotonic,
             executor: Executor | None = None, stop: StopRequest | None = None,
             broad: int = 0, worlds: int = 1, branches: int = 0) -> Generator[Outcome, None, None]:
    """Outcomes in seed order until the seeds run out or ``clock()`` passes ``deadline``. Given several
    scenarios, :class:`~dst.explore.steer.Steering` tells which one each seed runs (``Outcome.arm``): many to the
    first ``broad`` of them (0: all are broad), the rest in turns and where coverage is thin; with ``worlds`` of
    3, the scenarios are a :class:`~dst.explore.steer.Roster`'s of three worlds, and a seed's position says which.
    With ``branches``, each seed's first risky moment gets up to so many branches (:mod:`dst.explore.branch`), as
    the steering says: their outcomes follow their seed's.

    With one worker the seeds run in this process; with more, in a pool of processes (``executor``,
    or one made here), with a window of ``2 * workers`` chunks in flight. An ``executor`` given is used
    whatever ``workers`` says (a cluster's, :mod:`dst.explore.cluster`, with one worker); it is given a
    chunk's ``deadline`` as a keyword, so that it can carry it to another machine's clock. Ctrl-C (or :class:`Terminated`, or ``stop``
    noting a signal) stops at once: the workers are ended, the outcomes already computed in seed order
    are still handed out, and then the interrupt goes on up. Closing the iterator ends the workers too.
    """
    scenarios = (scenario,) if isinstance(scenario, Scenario) else tuple(scenario)
    steering = Steering(len(scenarios), catalogue(scenarios[0].model.resolve().situations)
                        if len(scenarios) > 1 or branches else (), broad, worlds, branches)
    numbered = enumerate(seed_iter)  # (position in the campaign, seed)

    def learned(outcome: Outcome) -> Outcome:
        if outcome.branch is None:
            steering.learn(outcome.arm, outcome.checked, outcome.fired, outcome.reached, outcome.cases)
        return outcome

    if workers <= 1 and executor is None and not guest(scenarios):
        for position, seed in numbered:
            if deadline is not None and clock() >= deadline:
                return
            arm = steering.arm(position)
            try:
                outcomes = explore_seed(scenarios[arm], seed, use_swarm, deadline, clock, arm,
                                        steering.branches(position), fork=False)
            except Cut:
                return  # the seed in flight passed the deadline: it has no outcome
            for outcome in outcomes:
                yield learned(outcome)
        return
    pool = executor or worker_pool(workers)
    size = _GUEST_CHUNK if guest(scenarios) else _CHUNK
    pending: list[Future[tuple[list[Outcome], bool]]] = []
    firsts: list[int] = []  # the first seed of each pending chunk: its key
    chunks: list[Chunk] = []  # each pending chunk's seeds, to hand out again
    held: tuple[int, int] | None = None  # the next (position, seed), taken but not yet steerable
    try:
        exhausted = False
        while True:
            while not exhausted and len(pending) < 2 * workers and (deadline is None or clock() < deadline):
                if stop is not None and stop.is_set():
                    raise stop.interrupt()  # a signal noted while this process minimized: no new chunk
                chunk: Chunk = []
                while len(chunk) < size:
                    held = held or next(numbered, None)
                    if held is None or not steering.ready(held[0]):
                        break  # no seed left, or its block waits for the outcomes in flight
                    chunk.append((held[1], steering.arm(held[0]), steering.branches(held[0])))
                    held = None
                if not chunk:
                    exhausted = held is None
                    break
                pending.append(pool.submit(run_chunk, scenarios, chunk, use_swarm, deadline=deadline))
                firsts.append(chunk[0][0])
                chunks.append(chunk)
            if not pending:
                return
            while True:
                if stop is not None and stop.is_set():
                    raise stop.interrupt()  # here, where no lock of the pool is held
                if pending[0].done():
                    break
                if deadline is not None and clock() >= deadline + _OVERDUE:
                    return  # a seed that will not stop at the deadline (its code blocked in C): its worker is ended
                wait(pending[:1], timeout=0.1)
            try:
                outcomes, cut = pending[0].result()
            except BrokenProcessPool:
                if stop is not None and stop.is_set():  # the signal reached the workers first
                    raise stop.interrupt() from None
                if executor is not None:
                    raise
                # A worker's process died under a model's code: a fresh pool, and the chunks in flight again,
                # each seed in a process of its own, so the one that kills its process is its own model error.
                stop_workers(pool)
                pool = worker_pool(workers)
                pending = [pool.submit(run_chunk, scenarios, chunk, use_swarm, deadline=deadline, isolated=True)
                           for chunk in chunks]
                continue
            pending.pop(0)
            firsts.pop(0)
            chunks.pop(0)
            for outcome in outcomes:
                yield learned(outcome)
            if cut:
                return  # the seeds after a cut one are not a contiguous prefix: drop them
            if deadline is not None and clock() >= deadline:
                exhausted = True  # the chunks in flight stop at the deadline too; what they finished is kept
    except KeyboardInterrupt:
        stop_workers(pool)
        cut_short = partials(pool)  # the seeds finished in chunks a worker was stopped in, by first seed
        for future, first in zip(pending, firsts):  # what is already done, as long as the seeds stay in order
            if not future.done() or future.cancelled() or future.exception() is not None:
                yield from cut_short.get(first, ())
                break
            outcomes, cut = future.result()
            yield from outcomes
            if cut:
                break
        pending = []
        raise
    finally:
        for future in pending:
            future.cancel()
        if executor is None:
            stop_workers(pool)


SEEDS_SHOWN = 20  # seeds a report lists per signature: the first ones, in seed order


@attrs.define
class _Tallied:
    """Seeds that went the same way, as the campaign runs: violations that share a signature (invariant plus
    the shape of the message), or runs unjudged for one reason."""

    signature: str
    invariant: str
    first: Outcome
    seeds: list[int] = attrs.Factory(list)


@attrs.define
class Tally:
    """A campaign's running totals, fed one outcome at a time."""

    seeds_run: int = 0
    branches_run: int = 0  # branches of the seeds' runs (dst.explore.branch): runs too, but no seeds
    events: int = 0
    violations: int = 0
    model_errors: int = 0  # runs the model's own code ended (dst.MODEL_ERROR): not violations, and told apart
    groups: dict[str, _Tallied] = attrs.Factory(dict)
    last_seed: int | None = None
    unjudged: dict[str, _Tallied] = attrs.Factory(dict)  # by kind: runs that ended before they could be judged
    checked: set[str] = attrs.Factory(set)  # invariant ids any run checked
    coverage: Coverage = attrs.Factory(Coverage)
    arms: Counter[int] = attrs.Factory(Counter)  # seeds each of the campaign's scenarios ran
    broken: set[str] = attrs.Factory(set)  # invariant ids some run violated: as its cause, or a consequence

    def add(self, outcome: Outcome) -> _Tallied | None:
        """Count an outcome (a seed's, or a branch's); returns its group when it is a violation with a new
        signature."""
        if outcome.branch is None:
            self.seeds_run += 1
            self.arms[outcome.arm] += 1
            self.last_seed = outcome.seed
        else:
            self.branches_run += 1
        self.events += outcome.events
        self.checked.update(outcome.checked)
        self.coverage.add(outcome.fired, outcome.reached, outcome.cases, outcome.enabled, outcome.assertions)
        if outcome.unjudged is not None:
            kind = outcome.unjudged[0]
            self.unjudged.setdefault(kind, _Tallied(kind, "", outcome)).seeds.append(outcome.seed)
        signature = outcome.signature
        if signature is None:
            return None
        self.broken.update([outcome.invariant or "", *(c[0] for c in outcome.consequences)])
        if outcome.invariant == MODEL_ERROR:
            self.model_errors += 1
        else:
            self.violations += 1
        group = self.groups.get(signature)
        if group is None:
            group = self.groups[signature] = _Tallied(signature, outcome.invariant or "", outcome)
            group.seeds.append(outcome.seed)
            return group
        group.seeds.append(outcome.seed)
        return None


# --- the campaign as a function: dst.fuzz ----------------------------------------------------------

@attrs.frozen
class Group:
    """Seeds of a campaign that went the same way: violations that share a signature (``key`` is the
    signature), or runs left unjudged for one reason (``key`` is its kind: ``undrained``, ``over-budget``)."""

    key: str
    seeds: tuple[int, ...]  # every seed of the group, in order
    first: Outcome  # the first seed's outcome
    reproduce: str | None  # the ``dst run`` command for the first seed (None: see RunResult.reproduce)
    _scenario: Scenario = attrs.field(repr=False, eq=False, alias="scenario")  # as the first seed ran it

    @property
    def count(self) -> int:
        return len(self.seeds)

    def run(self) -> RunResult:
        """The first seed run again, whole: its trace, ``explain()`` and ``save()``. The same seed gives the
        same run, so this is the run the campaign saw."""
        return run(self._scenario, self.first.seed)


@attrs.frozen
class FuzzResult:
    """What a campaign (:func:`fuzz`) did: its counts, its violations grouped by signature, its coverage."""

    scenarios: tuple[str, ...]  # the names of the scenarios it ran (coverage steered the seeds among them)
    swarm: bool  # each seed picked which faults were on, and how often
    seeds_run: int
    branches_run: int  # runs branched off the seeds' runs at their risky moments (dst.explore.branch)
    last_seed: int | None
    events: int
    violations: int  # runs that violated an invariant
    model_errors: int  # runs that the model's own code ended (a signature's invariant is then dst.MODEL_ERROR)
    signatures: tuple[Group, ...]  # the violations, one group per signature, in the order they were first met
    unjudged: tuple[Group, ...]  # runs that ended before they could be judged, one group per kind
    invariants: tuple[str, ...]  # the invariants some run checked
    coverage: dict[str, Any]  # faults fired, situations reached, invariants put to the test: as dst fuzz --json
    never_reached: tuple[str, ...]  # a line per risky situation no run reached, naming what went untested there
    stopped: str  # why it ended: "seeds" (they ran out), "time budget", or "on_result" (the callback said so)
    wall_seconds: float

    @property
    def ok(self) -> bool:
        """No run violated an invariant, and none ended in the model's own error."""
        return self.violations == 0 and self.model_errors == 0

    def explain(self) -> str:
        """The campaign for a person: what ran, and each signature with its seeds and the command that runs
        its first seed again (``group.run().explain()`` shows that run's causal slice)."""
        plural = "" if self.seeds_run == 1 else "s"
        why = {"seeds": "", "time budget": "; the time budget ended it", "on_result": "; on_result ended it"}
        count = len(self.signatures)
        lines = [f"{' + '.join(dict.fromkeys(self.scenarios))}: {self.seeds_run:,} seed{plural} run{why[self.stopped]}, "
                 f"{self.violations:,} violated an invariant"
                 + (f", {self.model_errors:,} ended in the model's own error" if self.model_errors else "")
                 + (f", in {count} signature{'' if count == 1 else 's'}:" if count else "")]
        for group in self.signatures:
            shown = ", ".join(map(str, group.seeds[:SEEDS_SHOWN])) + (", ..." if group.count > SEEDS_SHOWN else "")
            then = ", ".join(f"{c[0]} at t={format_time(c[1])}" for c in group.first.consequences)
            lines += [f"  {group.key}", f"    {group.count:,} seed{'' if group.count == 1 else 's'}: {shown}",
                      f"    first: {group.first.message}", *([f"    its consequences: {then}"] if then else []),
                      f"    run it again: {group.reproduce or 'group.run() (no command line runs it)'}"]
        for group in self.unjudged:
            lines.append(f"  {group.count:,} unjudged ({group.key}), first seed {group.first.seed}: "
                         f"{group.first.unjudged[1] if group.first.unjudged else ''}")
        lines += [f"  {line}" for line in self.never_reached]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()

    def save(self, folder: str | Path, *, max_runs: int = 3000, seconds: float = 120.0) -> list[Path]:
        """Minimize the first seed of each signature and write it as a finding in ``folder``, as ``dst fuzz``
        does (a finding with the same signature already there is kept); the findings' paths, in order."""
        from .record import campaign_origin, minimize, record

        paths = []
        for group in self.signatures:
            shrunk = minimize(group._scenario, group.first.seed, use_swarm=False, max_runs=max_runs, seconds=seconds)
            assert shrunk is not None, "the same seed violates the same way"
            origin = campaign_origin(group._scenario, group.first.seed, self.swarm, group.key)
            paths.append(record(shrunk, Path(folder), origin).path)
        return paths


def fuzz(scenario: Scenario | Sequence[Scenario], seeds: Iterable[int] = range(1, 101), *, workers: int = 1,
         swarm: bool = True, time_budget: float | None = None,
         model: str | Model[Any] | Callable[..., System] | None = None,
         on_result: Callable[[Outcome], bool | None] | None = None, branches: int | None = None) -> FuzzResult:
    """Run a campaign: each seed of ``seeds`` (in order) on ``scenario`` (given several, coverage steers the seeds
    among them: :mod:`dst.explore.steer`), on ``workers`` processes; with ``swarm``, as ``dst fuzz`` without ``--no-swarm``, each seed
    picks which of the scenario's faults are on and how often. It ends when the seeds run out, when
    ``time_budget`` seconds have passed, or when ``on_result`` (called with each seed's :class:`Outcome`, in
    seed order) returns True. The same seeds give the same result on any number of workers.

    ``seeds`` may be endless (``itertools.count(1)``) with a time budget or a callback to end it. ``model``
    runs another model than the scenarios name, as :func:`dst.run`'s does (with workers, by its importable
    name). ``branches`` is the most branches each seed's first risky moment gets (:mod:`dst.explore.branch`; their
    outcomes follow their seed's, with :attr:`Outcome.branch` set); None: as ``dst fuzz`` does (4 for a real
    service, none for the coroutine seam's models). Ctrl-C ends the workers and goes on up as KeyboardInterrupt."""
    scenarios = (scenario,) if isinstance(scenario, Scenario) else tuple(scenario)
    if not scenarios:
        raise ValueError("fuzz: no scenario given")
    if workers < 1:
        raise ValueError(f"fuzz: workers must be at least 1, got {workers}")
    if model is not None:
        scenarios = tuple(on_model(s, model) for s in scenarios)
    started = time.monotonic()
    deadline = None if time_budget is None else started + time_budget
    if branches is None:
        from .steer import one_scenario

        branches = one_scenario(scenarios[0]).branches
    tally = Tally()
    outcomes = campaign(scenarios, iter(seeds), use_swarm=swarm, workers=workers, deadline=deadline, branches=branches)
    asked = drive(outcomes, tally, None if on_result is None else lambda outcome, _: on_result(outcome))
    return tallied(tally, scenarios, swarm, ended(asked, deadline), time.monotonic() - started)


def drive(outcomes: Generator[Outcome, None, None], tally: Tally,
          each: Callable[[Outcome, Tally], bool | None] | None) -> bool:
    """Count each outcome in ``tally`` and hand it to ``each``, until the outcomes end or ``each`` returns
    True (then True); the campaign is closed however this ends (its workers with it)."""
    try:
        for outcome in outcomes:
            tally.add(outcome)
            if each is not None and each(outcome, tally):
                return True
        return False
    finally:
        outcomes.close()


def ended(asked: bool, deadline: float | None, clock: Callable[[], float] = time.monotonic) -> str:
    """Why a campaign that was not interrupted ended (:attr:`FuzzResult.stopped`): its callback asked, its
    time budget ran out, or its seeds did."""
    return "on_result" if asked else "time budget" if deadline is not None and clock() >= deadline else "seeds"


def tallied(tally: Tally, scenarios: tuple[Scenario, ...], use_swarm: bool, stopped: str, wall: float) -> FuzzResult:
    """The result of a campaign from its tally."""
    def group(key: str, tallied: _Tallied) -> Group:
        first = tallied.first
        scenario = scenarios[first.arm]
        if first.branch is not None:
            scenario = attrs.evolve(scenario, branch=Branch(*first.branch))
        ran = swarm_of(scenario, first.seed) if use_swarm else scenario
        return Group(key, tuple(tallied.seeds), tallied.first, reproduce(ran, tallied.first.seed), scenario=ran)

    situations = catalogue(scenarios[0].model.resolve().situations)
    coverage = tally.coverage.report(situations, tally.checked, assertions_in(scenarios[0].model.impl))
    if len(scenarios) > 1:  # the seeds each scenario ran, as coverage steered them (by name: shards sum them)
        coverage["scenarios"] = dict(sorted(Counter({scenarios[arm].name: n for arm, n in tally.arms.items()}).items()))
    return FuzzResult(
        scenarios=tuple(s.name for s in scenarios), swarm=use_swarm, seeds_run=tally.seeds_run,
        branches_run=tally.branches_run, last_seed=tally.last_seed,
        events=tally.events, violations=tally.violations, model_errors=tally.model_errors,
        signatures=tuple(group(key, t) for key, t in sorted(tally.groups.items(), key=lambda kt: kt[1].first.seed)),
        unjudged=tuple(group(kind, t) for kind, t in sorted(tally.unjudged.items())),
        invariants=tuple(sorted(tally.checked)),
        coverage=coverage, never_reached=tuple(never_reached(coverage, tally.broken)),
        stopped=stopped, wall_seconds=round(wall, 3),
    )
