"""The minimizer: from a violating run to the smallest run that violates the same invariant.

Hypothesis's shrinker contract (``internal/conjecture/shrinker.py``): passes make
deterministic progress, a candidate is accepted only if it is *smaller* in one fixed
order, every pass runs under a call budget, and the reason it stopped is an enum.

"Smaller" compares, in order: the number of plan steps, the number of clients, the total
duration of the steps (work, pauses, partitions, downtime), how late the last step is,
then the rest (writes, slots, capacity, randomness left in the network and store). The
passes, run until none makes progress:

1. delete chunks of steps, halving the chunk size down to one (adaptive deletion);
2. delete every step of one client, or fold it into another (its faults moved there, its jobs gone);
3. write one fault for several: a partition for the messages a client lost, one pause for its pauses;
4. shorten durations (to zero, half, whole seconds) and close gaps between steps;
5. lower counts: renumber clients densely, fewer writes and slots, a smaller capacity, and a seat
   fewer together with the client that only kept it busy;
6. prefer the plain environment: no loss, duplication or long delays, fixed latencies,
   the uniform scheduler;
7. once those are stuck: a client's crash moved back to the start of the job it struck, and the plan
   shrunk again from there on a small budget (the moved plan alone need not violate).

A candidate that loses the violation is tried once more with its faults made to follow what they were
about where the change moved it (:mod:`dst.explore.follow`: a pinned fault its request, a pause the
last reply its client heard), counted as the pass ``re_aim``.

Where the draws made many more faults than the plan has steps (a long run of a heavy model), first the big cuts
(the steps after the violation, whole clients, halves of the plan) run on a third of the budget, with the faults
still the keyed draws' (so the steps that stay meet the same fates). Then the faults
the draws made (a lost, duplicated or delayed message, a slow store round trip) are written as explicit steps
that pin them, and the probabilities that made them are set to zero: the run is the same, event for event, but
its story is now in its steps, and the passes delete the faults it does not need like any other step. A budget
that runs out before those are gone, with more steps left than the seed's plan had, leaves the plan the big
cuts left: never a longer one than the seed's.

The minimizer changes only what the correct model is correct under whatever its value
(the plan, capacities, the network's randomness): never timeouts, TTLs or the quiet
period, which could make a correct model look guilty. Steps keep their ids, so the keyed
random draws of the steps that stay do not shift when one is deleted.
"""

from __future__ import annotations

import enum
import time
from typing import Any, Callable, Iterable, cast

import attrs

from ..errors import UserError
from ..faults import FAULTS, fault_of, is_pinned
from ..plan import ACTIONS, Step, is_client, sort_steps
from ..invariants import shape
from ..runner import RunResult, real_service, run
from ..runner.watchdog import known_stall
from ..scenario import Scenario, scripted
from .candidates import client_death, folded, job_at, merges, plainer, shorter_steps, what
from .follow import followed
from .isolate import warm
from .snapshot import Snapshots


_DETOUR = 200  # runs a shrink from a moved crash may take (crash_sooner)
_FEW_DRAWS = 20  # faults drawn that the passes delete as steps; past twice the plan and this, the big cuts go first


class StopReason(enum.Enum):
    CONVERGED = "converged: no smaller candidate violates the invariant"
    RUN_BUDGET = "run budget spent"
    TIME_BUDGET = "time budget spent"
    STOPPED = "stopped: the campaign was asked to stop (the smallest plan so far is kept)"


class _Budget(Exception):
    def __init__(self, reason: StopReason) -> None:
        self.reason = reason


@attrs.define
class PassStats:
    """What one pass of the minimizer did over a minimization: candidates it ran, those it kept (each smaller and
    still failing the same way), and the time its runs took."""

    name: str
    tried: int = 0
    kept: int = 0
    seconds: float = 0.0
    snapshots: int = 0  # of those tried, run from a snapshot of the best run (dst.explore.snapshot)


@attrs.frozen
class Shrunk:
    scenario: Scenario  # the smallest violating scenario, its plan as scripted steps
    seed: int
    result: RunResult  # its run
    steps_before: int
    runs: int
    seconds: float
    stop: StopReason
    passes: tuple[PassStats, ...] = ()  # per pass, in the order they ran first (dst shrink --verbose)

    @property
    def steps_after(self) -> int:
        return len(self.scenario.steps or ())


def _durations(step: Step) -> int:
    kinds = ACTIONS[step.action][1]
    return sum(v for k, v in step.args if kinds.get(k) == "duration")  # type: ignore[misc]


def size(s: Scenario) -> tuple[int, ...]:
    """The fixed order candidates must go down in."""
    steps = s.steps or ()
    timed = [st for st in steps if not is_pinned(st)]
    clients = {st.actor for st in steps if st.actor.startswith("c")}
    net = s.network
    noise = (net.loss > 0) + (net.duplicate > 0) + (net.delay > 0) + (net.latency[0] != net.latency[1]) \
        + (s.model.store_latency[0] != s.model.store_latency[1]) + (s.model.store_slow > 0) \
        + (s.model.store_reset > 0) + (s.run.scheduler != "uniform")
    return (len(steps), len(clients), sum(_durations(st) for st in steps), max((st.at for st in timed), default=0),
            sum(st.at for st in timed), sum(cast(int, st.arg("writes", 0)) + cast(int, st.arg("slots", 0)) for st in steps),
            sum(cap for _, cap in s.model.limits), noise, max((int(a[1:]) for a in clients), default=0))


class NotDeterministic(UserError):
    """The same seed ran two ways: the model depends on something the seed does not decide."""


def _same_run(scenario: Scenario, seed: int, first: RunResult, again: RunResult) -> None:
    if again.digest != first.digest:
        raise NotDeterministic(
            f"{scenario.name}, seed {seed}: the same run went two ways (trace digests {first.digest[:12]} and "
            f"{again.digest[:12]}), so it cannot be minimized: the model depends on something the seed does not "
            f"decide (the real clock, the global random module, the order of a set of objects, a thread); "
            f"dst run --check-determinism shows where the runs part")


class Shrinker:
    def __init__(self, scenario: Scenario, seed: int, invariant: str, *, max_runs: int = 3000,
                 seconds: float = 120.0, clock: Callable[[], float] = time.monotonic,
                 stopped: Callable[[], bool] = lambda: False, signature: str | None = None,
                 snapshots: Snapshots | None = None) -> None:
        self.stopped = stopped
        self.snapshots = snapshots
        self.seed = seed
        self.invariant = invariant
        # The shape of the violation a candidate must keep (its campaign signature; None: the best run's).
        self.signature = signature
        self.max_runs = max_runs
        self.deadline = clock() + seconds
        self.clock = clock
        self.runs = 0
        self.best = scenario
        self.best_result: RunResult | None = None
        self.passes: dict[str, PassStats] = {}
        self._pass = PassStats("")  # the pass running now
        self.cold_seconds = float("inf")  # what the last run from the start took (snapshots pay for long runs only)

    def consider(self, candidate: Scenario) -> bool:
        """Run ``candidate``; keep it if it is smaller and violates the same invariant."""
        if size(candidate) >= size(self.best):
            return False
        if self.runs >= self.max_runs:
            raise _Budget(StopReason.RUN_BUDGET)
        if self.clock() >= self.deadline:
            raise _Budget(StopReason.TIME_BUDGET)
        if self.stopped():
            raise _Budget(StopReason.STOPPED)
        self.runs += 1
        self._pass.tried += 1
        began = self.clock()
        best = self.best_result
        result = (self.snapshots.run(self.best, best, candidate, self.cold_seconds)
                  if self.snapshots is not None and best is not None else None)
        if result is not None:
            self._pass.snapshots += 1
        else:
            result = run(candidate, self.seed)
            self.cold_seconds = self.clock() - began
        self._pass.seconds += self.clock() - began
        if not self._same_violation(result):
            again = None if self._pass.name == "re_aim" else followed(candidate, result, self.best_result)  # once
            return again is not None and self._reaim(again)
        self.best, self.best_result = candidate, result
        self._pass.kept += 1
        return True

    def _same_violation(self, result: RunResult) -> bool:
        """The same violation: the same invariant, and the shape of its message (the campaign's signature), not
        another violation of it that an easier path reaches (a double release that read the lease present must not
        slip into a fallback release; single-executor's two executions are not work under a lapsed claim; a model
        error is not another of the model's). What the finding is named for stays true."""
        if result.violation is None or result.violation.invariant != self.invariant:
            return False
        signature, best = self.signature, self.best_result
        if signature is None and best is not None and best.violation is not None:
            signature = shape(best.violation.message)
        return signature is None or shape(result.violation.message) == signature

    def _reaim(self, candidate: Scenario) -> bool:
        """Run a candidate whose faults were made to follow what they were about, where the change moved it
        (:func:`~dst.explore.follow.followed`; counted apart, as the pass ``re_aim``)."""
        doing, self._pass = self._pass, self.passes.setdefault("re_aim", PassStats("re_aim"))
        try:
            return self.consider(candidate)
        finally:
            self._pass = doing

    def with_steps(self, steps: Iterable[Step]) -> Scenario:
        return attrs.evolve(self.best, steps=sort_steps(steps))

    # --- passes ------------------------------------------------------------------------------

    def after_the_violation(self) -> None:
        """Every step that comes after the violation, at once: it cannot have caused it (a pinned fault's time is
        when its message met it)."""
        result = self.best_result
        if result is not None and result.violation is not None:
            when = result.violation.time
            self.consider(self.with_steps(s for s in self.best.steps or () if s.at <= when))

    def cut_early(self) -> None:
        """The cheap, big cuts, on a plan whose faults are still the draws': the steps after the violation, whole
        clients, halves and quarters of the rest. The draws are keyed, so the steps that stay meet the fates they
        met (a heavy model's budget goes to deletions, not to first writing out every fault of a long run)."""
        try:
            for p in (self.after_the_violation, self.delete_clients, self.delete_chunks):
                self._run(p)
        except _Budget:
            pass

    def delete_chunks(self) -> None:
        size = max(1, len(self.best.steps or ()) // 2)
        while size >= 1:
            i = 0
            while i < len(self.best.steps or ()):
                steps = self.best.steps or ()
                if not self.consider(self.with_steps(steps[:i] + steps[i + size:])):
                    i += 1
            size //= 2

    def delete_clients(self) -> None:
        for actor in sorted({s.actor for s in self.best.steps or ()}):
            self.consider(self.with_steps(s for s in self.best.steps or () if s.actor != actor))

    def fold_clients(self) -> None:
        """One client for two: drop a client's jobs and move the faults that struck it to another client, whose
        job before each fault is lengthened to last as long as the dropped job it struck did (a person writes the
        crash on the holder they already have)."""
        plan = self.best.steps or ()
        clients = sorted({s.actor for s in plan if is_client(s.actor)})
        for gone in clients:
            for into in clients:
                steps = self.best.steps or ()
                if into == gone or not any(s.actor == gone for s in steps) or not any(s.actor == into for s in steps):
                    continue
                self.consider(self.with_steps(folded(steps, gone, into)))

    def shorten(self) -> None:
        for index in range(len(self.best.steps or ())):
            for candidate in shorter_steps((self.best.steps or ())[index]):
                current = list(self.best.steps or ())
                if index < len(current):
                    current[index] = candidate
                    if self.consider(self.with_steps(current)):
                        break
        # Close the gap before each timed step, moving it and everything after it earlier. Whole cuts of the
        # background loops' periods keep the steps where they were among the loops' ticks.
        periods = self.best_result.periods if self.best_result is not None else ()
        index = 0
        while index < len(self.best.steps or ()):
            plan = self.best.steps or ()
            if is_pinned(plan[index]):
                index += 1
                continue
            gap = plan[index].at - (plan[index - 1].at if index else 0)
            for cut in dict.fromkeys((gap, *(gap - gap % p for p in periods), gap // 2, gap % 1000)):
                if cut and self.consider(self.with_steps(
                        plan[:index] + tuple(attrs.evolve(s, at=s.at - cut) for s in plan[index:]))):
                    break
            index += 1

    def lower_counts(self) -> None:
        plan = self.best.steps or ()
        order = list(dict.fromkeys(s.actor for s in plan if s.actor.startswith("c")))
        rename = {old: f"c{i}" for i, old in enumerate(order, 1)}
        if any(old != new for old, new in rename.items()):
            self.consider(self.with_steps(attrs.evolve(s, actor=rename.get(s.actor, s.actor)) for s in plan))
        for name in ("writes", "slots"):
            for index in range(len(self.best.steps or ())):
                steps = list(self.best.steps or ())
                value = steps[index].arg(name)
                if isinstance(value, int) and value > (0 if name == "writes" else 1):
                    for lower in dict.fromkeys((0 if name == "writes" else 1, value // 2, value - 1)):
                        steps[index] = steps[index].with_arg(name, lower)
                        if self.consider(self.with_steps(steps)):
                            break
        for limit, cap in self.best.model.limits:
            for lower in dict.fromkeys((1, cap - 1)):
                if 0 < lower < cap:
                    limits = tuple((n, lower if n == limit else c) for n, c in self.best.model.limits)
                    if self.consider(attrs.evolve(self.best, model=attrs.evolve(self.best.model, limits=limits))):
                        break

    def fewer_seats(self) -> None:
        """A seat fewer and a client fewer together: a holder that only kept the other seat busy goes with it
        (on a limit of 2, the stale write needs a third client to keep one seat taken; on a limit of 1 it does
        not, but lowering the limit alone has that client block the others)."""
        for limit, cap in self.best.model.limits:
            if cap < 2:
                continue
            fewer = tuple((name, cap - 1 if name == limit else c) for name, c in self.best.model.limits)
            for actor in sorted({s.actor for s in self.best.steps or () if is_client(s.actor)}):
                candidate = self.with_steps(s for s in self.best.steps or () if s.actor != actor)
                if self.consider(attrs.evolve(candidate, model=attrs.evolve(candidate.model, limits=fewer))):
                    return

    def merge_faults(self) -> None:
        """One fault for several (:func:`~.candidates.merges`): all of a client's of a kind first; where that no
        longer violates, two next to each other in time."""
        for (whole, one), *pairs in merges(self.best.steps or ()):
            if self._replaced(whole, one):
                continue
            for steps, one in pairs:
                if self._replaced(steps, one):
                    return  # the plan changed: the next round looks again

    def _replaced(self, steps: tuple[Step, ...], one: Step) -> bool:
        return self.consider(self.with_steps([s for s in self.best.steps or () if s not in steps] + [one]))

    def crash_sooner(self) -> None:
        """A client's crash (or restart) moved back to the start of the job it struck, right after that job's
        request went out, and the plan shrunk again from there: a person writes "c2 acquires and crashes". The
        run around it may need other steps to change too (a holder it waited behind, a time), so the moved plan
        need not violate on its own: a shrink of its own, on a small budget, looks for the smaller one."""
        plan = self.best.steps or ()
        for death in (s for s in plan if client_death(s)):
            struck = job_at(plan, death.actor, death.at)
            if struck is None or struck.at == death.at:
                continue
            moved = self.with_steps(attrs.evolve(s, at=struck.at) if s is death else s for s in plan)
            detour = Shrinker(moved, self.seed, self.invariant, max_runs=min(_DETOUR, self.max_runs - self.runs),
                              seconds=self.deadline - self.clock(), clock=self.clock, stopped=self.stopped,
                              signature=self.signature, snapshots=self.snapshots)
            began = self.clock()
            detour.shrink()
            self.runs += detour.runs
            self._pass.tried += detour.runs
            self._pass.seconds += self.clock() - began
            if detour.best_result is not None and size(detour.best) < size(self.best):
                self.best, self.best_result = detour.best, detour.best_result
                self._pass.kept += 1
                return

    def plain_environment(self) -> None:
        for change in plainer(self.best):
            self.consider(change(self.best))

    def shrink(self) -> StopReason:
        passes = (self.delete_chunks, self.delete_clients, self.fold_clients, self.merge_faults, self.shorten,
                  self.lower_counts, self.fewer_seats, self.plain_environment)
        try:
            while True:
                before = size(self.best)
                for p in passes:
                    self._run(p)
                if size(self.best) == before:
                    self._run(self.crash_sooner)  # the costly one, only once the others are stuck
                    if size(self.best) == before:
                        return StopReason.CONVERGED
        except _Budget as budget:
            return budget.reason

    def _run(self, p: Callable[[], None]) -> None:
        self._pass = self.passes.setdefault(p.__name__, PassStats(p.__name__))
        p()


def pin_draws(scenario: Scenario, result: RunResult) -> Scenario:
    """The same run with the faults its draws made written as steps, and no draw left to make more."""
    steps = scenario.steps or ()
    top = max((step.id for step in steps), default=0)
    have = {what(step) for step in steps}
    fresh = [step for step in dict.fromkeys(result.drawn) if what(step) not in have]
    pinned = tuple(attrs.evolve(step, id=top + i) for i, step in enumerate(fresh, 1))
    return no_draws(attrs.evolve(scenario, steps=sort_steps((scenario.steps or ()) + pinned)))


def no_draws(scenario: Scenario) -> Scenario:
    """The scenario with every pinned fault kind's chance (``network.loss``, ``model.store_slow``, ...) at zero."""
    for kind in FAULTS:
        if kind.pinned:
            section, _, name = kind.chance[0].partition(".")
            scenario = attrs.evolve(scenario, **{section: attrs.evolve(getattr(scenario, section), **{name: 0.0})})
    return scenario


def _stamped(scenario: Scenario, result: RunResult) -> Scenario:
    """Each pinned fault labelled with the time it happened in ``result`` (the shrinking moved the rest)."""
    when: dict[tuple[Any, ...], int] = {}
    for step in result.drawn:
        when.setdefault(what(step), step.at)
    return attrs.evolve(scenario, steps=sort_steps(
        step if not is_pinned(step) else attrs.evolve(step, at=when.get(what(step), step.at)) for step in scenario.steps or ()))


def shrink(scenario: Scenario, seed: int, plan: tuple[Step, ...] | None = None, invariant: str | None = None, *,
           max_runs: int = 3000, seconds: float = 120.0, clock: Callable[[], float] = time.monotonic,
           stopped: Callable[[], bool] = lambda: False) -> Shrunk:
    """Minimize the run of ``plan`` (None: the seed's own plan) under ``scenario`` and ``seed``, which must
    violate ``invariant`` (None: the invariant it violates); raises ``ValueError`` for a run that does not.
    The smallest plan found keeps violating that invariant: at most ``max_runs`` runs, ``seconds`` of time,
    and no run begun once ``stopped()`` says so."""
    began, ran = clock(), None
    if plan is None or invariant is None:
        ran = run(scenario, seed, plan)
        plan = ran.plan
        if invariant is None:
            if ran.violation is None:
                raise ValueError(f"{scenario.name}: seed {seed} violates nothing: nothing to minimize")
            invariant = ran.violation.invariant
    # The heap the model's imports and first run left is frozen for the collector: a run whose dropped coroutines
    # would not close collects in full, which scanned all of it again at every candidate (Prefect's: 0.27 s a run).
    warm()
    # A real service's candidates start from a snapshot of the best run where they part from it (its runs cost a
    # second); a seam model's run from the start (theirs cost milliseconds, and dst does not know their files).
    snapshots = Snapshots(seed, enabled=real_service(scenario))
    try:
        with known_stall(ran.violation.message if ran is not None and ran.violation is not None else None):
            return _shrink(scenario, seed, plan, invariant, began, max_runs=max_runs, seconds=seconds, clock=clock,
                           stopped=stopped, snapshots=snapshots)
    finally:
        snapshots.close()


def _shrink(scenario: Scenario, seed: int, plan: tuple[Step, ...], invariant: str, began: float, *, max_runs: int,
            seconds: float, clock: Callable[[], float], stopped: Callable[[], bool], snapshots: Snapshots) -> Shrunk:
    start = scripted(scenario, plan)
    timed = clock()
    first = run(start, seed)
    cost = clock() - timed  # what a run from the start takes: snapshots pay for long runs only
    if first.violation is None or first.violation.invariant != invariant:
        raise ValueError(f"the run does not violate {invariant}: nothing to minimize")
    signature = shape(first.violation.message)
    early = Shrinker(start, seed, invariant, max_runs=max(1, max_runs // 3), seconds=seconds / 3, clock=clock,
                     stopped=stopped, signature=signature, snapshots=snapshots)
    early.best_result, early.cold_seconds = first, cost
    if len(pin_draws(start, first).steps or ()) > 2 * len(plan) + _FEW_DRAWS:
        # More faults drawn than the plan has steps (a long run of a heavy model draws hundreds): a third of the
        # budget for the big cuts first, before they are written out as steps, then the passes on the smaller run.
        with known_stall(signature):
            early.cut_early()
        start, first = early.best, early.best_result or first
    explicit = pin_draws(start, first)
    timed = clock()
    again = run(explicit, seed)
    cost = clock() - timed
    _same_run(scenario, seed, first, again)
    shrinker = Shrinker(explicit, seed, invariant, max_runs=max(1, max_runs - early.runs),
                        seconds=max(0.0, seconds - (clock() - began)), clock=clock, stopped=stopped,
                        signature=signature, snapshots=snapshots)
    shrinker.best_result, shrinker.cold_seconds = again, cost
    shrinker.passes = early.passes
    with known_stall(signature):
        stop = shrinker.shrink()
    if len(shrinker.best.steps or ()) > len(plan):
        # The budget ran out before the faults written out could go, leaving more steps than the seed's own plan:
        # the plan as the big cuts left it, its faults the draws' again, is the smaller story (it replays the
        # same: the draws are keyed).
        shrinker.best, shrinker.best_result = start, first
    best = scripted(shrinker.best, shrinker.best.steps or ())  # fewer clients now: say so in the file
    final = run(best, seed)
    _same_run(scenario, seed, shrinker.best_result or first, final)
    best = _stamped(best, final)  # labels only: the run is the same, and its result says so
    final = attrs.evolve(final, ran=best, plan=best.steps or ())
    return Shrunk(best, seed, final, len(plan), early.runs + shrinker.runs + 3, clock() - began, stop,
                  tuple(shrinker.passes.values()))
