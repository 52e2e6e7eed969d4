"""A run assembled and driven: scenario + plan + world + mode + invariants, composed in one place.

The :class:`~.world.World` is what the run's processes live in and faults act on; the mode (:mod:`.modes`) makes
the built system's processes in it and says who runs; the phases (:mod:`.phases`: active, drain, quiet) take the
run to its end. This module applies the plan's steps, notes violations and the model's errors, and builds the
result. It knows no mode.

A first violation does not end the run: it goes on, as the model would, for a *consequence window* (the
longest time the model's bounds give a case to settle, such as TTL + reaper interval, plus the worst
delays), or to its natural end if that comes first, and notes the first violation of each other invariant.
The run reports the cause among them (:func:`~dst.invariants.cause_of`); the rest are its consequences. The
model's own error still ends a run at once.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from typing import Any, Callable, Mapping, Protocol, cast

import attrs

from .. import assertions
from ..errors import MODEL_ERROR, ModelFault, Stalled
from ..faults import fault_of, is_pinned, struck
from ..frames import described, raised_in
from ..invariants import BY_ID
from ..invariants.situations import cases_met, catalogue
from ..invariants.user import Book
from ..models import ModelError
from ..plan import Branch, Step, is_client, sort_steps
from ..scenario import Scenario
from ..sim.kernel import Pause
from ..sim.rng import Streams
from ..sim.trace import format_time, key_name
from ..sut import SERVER, Cancel, Env, Submit, Workload
from .bounds import built, check_bounds, slack_of, window_of
from .generate import Order, generate_plan
from .hold import SignalsHeld
from .modes import Mode, mode_for
from .phases import Phases
from .result import RunResult, Unjudged, ViolationReport, build_failed, outcome
from .watchdog import watching
from .world import World

_RUN_ACTIONS = ("serve", "submit", "cancel")
_CHECK_WALL_EVERY = 20_000  # events between looks at the wall clock, when a run has a deadline


class Cut(Exception):
    """A run stopped at a wall-clock deadline (a campaign's ``--time-budget``): it has no result at all."""


def timed_steps(plan: tuple[Step, ...]) -> tuple[Step, ...]:
    """The steps that happen at their time, chained one after another: not a pinned fault (it names a message, and is
    in place from the start) nor a branch (it comes first at its moment)."""
    return tuple(s for s in plan if not is_pinned(s) and s.action != "branch")


@attrs.frozen
class Outline:
    """What a run makes of its plan before its first step: when its active phase ends, whether it has runs, its
    clients and the workers that serve the runs stream. Two plans of one outline part only where their steps do
    (:func:`dst.explore.snapshot.diverges`)."""

    active_until: int
    runs: bool
    clients: tuple[str, ...]
    workers: tuple[str, ...]

    @classmethod
    def of(cls, scenario: Scenario, plan: tuple[Step, ...]) -> Outline:
        timed = timed_steps(plan)
        clients = {f"c{i}" for i in range(1, scenario.workload.clients + 1)} | {s.actor for s in plan
                                                                                if is_client(s.actor)}
        return cls(active_until=max([scenario.run.duration] + [s.at + 1 for s in timed]),
                   runs=scenario.runs.enabled or any(s.action in _RUN_ACTIONS or s.arg("then") in _RUN_ACTIONS
                                                     for s in plan),
                   clients=tuple(sorted(clients, key=lambda n: int(n[1:]))),
                   workers=tuple(sorted({s.actor for s in plan if "serve" in (s.action, s.arg("then"))})))


class Explorer(Protocol):
    """What a run that explores the futures of its first risky moment asks (:mod:`dst.explore.branch` is one).

    The moment is when the run first reaches a situation (:mod:`dst.invariants.situations`) that ``budget`` gives
    branches to, unless it violated an invariant by then; the branches start the millisecond after it (the first
    ``at``), and a moment where several such situations come up gets the most any of them is given."""

    @property
    def budget(self) -> Mapping[str, int]:
        """Situation id -> how many branches its moment gets."""

    def fork(self, at: int, branches: int, folder: str | None, forkable: bool) -> Branch | None:
        """At the moment: the :class:`~dst.plan.Branch` to go on as (in a forked child), or None (this run goes on
        as the seed's own, its branches run or left to run afterwards). ``folder`` is the run's durable state on
        disk, which forked branches share with it; ``forkable`` says whether the run's mode may be forked at all (a
        real service's, whose files are its folder's)."""

    def report(self, result: RunResult) -> None:
        """A branch's run ended (in the child :meth:`fork` made): hand its result over, and end the process."""


class Simulation:
    """One run, assembled. Build it, then :meth:`run` it once."""

    mode: Mode

    def __init__(self, scenario: Scenario, seed: int, plan: tuple[Step, ...] | None = None, *,
                 deadline: float | None = None, clock: Callable[[], float] = time.monotonic,
                 explorer: Explorer | None = None) -> None:
        self.scenario = scenario
        self.explorer = explorer
        self.moment: list[int] | None = None  # [the first branch's time, how many branches] once a moment came
        # In a process forked in the middle of the run to go on as another (see forked): where its result goes.
        self.report: Callable[[RunResult], None] | None = None
        self.applied = 0  # the plan's timed steps applied so far
        self.chained = -1  # the seq of the next one's event (reserved where there is none): see _chain
        self.seed = seed
        self.deadline = deadline
        self.clock = clock
        streams = Streams(seed)
        self.plan_given = plan is not None
        self.plan = plan if plan is not None else (scenario.steps if scenario.steps is not None
                                                   else generate_plan(scenario, streams))
        if scenario.branch is not None:
            self.plan = sort_steps((*self.plan, scenario.branch.step()))
        budget = scenario.run.max_events
        self.world = world = World(scenario, streams, self._checkpoint,
                                   budget if deadline is None else min(budget, _CHECK_WALL_EVERY))
        self.kernel = world.kernel
        self.timed = timed_steps(self.plan)
        self.outline = outline = Outline.of(scenario, self.plan)
        self.active_until = outline.active_until
        has_runs = outline.runs
        wl, limits = scenario.workload, dict(scenario.model.limits)
        env = Env(clock=world.kernel, facts=world.traced, options=scenario.model.settings(), limits=limits,
                  bugs=frozenset(scenario.bugs),
                  workload=Workload(retries=wl.retries, write_time=wl.write_time, acquire_patience=wl.acquire_patience,
                                    active_until=self.active_until, runs=has_runs))
        model, self._close = scenario.model.resolve(), None
        self.found: list[ViolationReport] = []  # the first violation of each invariant, in the order found
        self.noting: list[int] = []  # those found in the callback running now: noted where it returns (see hold)
        self.opened: int | None = None  # the trace's length where the first violation opened the consequence window
        self.error: ViolationReport | None = None  # the model's error that ended the run
        self.window = 0  # ms: how long the run goes on after its first violation
        self.refused: tuple[int, int, str] | None = None  # the first bad call of dst.always & co. (time, trace, line)
        try:
            with SignalsHeld():  # a signal waits, then strikes with the close in place
                self.system, self.build_error = built(model, env)
                if self.build_error is not None:
                    return
                kind = mode_for(self.system)
                if kind is None:
                    raise ModelError(f"{scenario.model.impl}: build() returned {type(self.system).__name__}, not a "
                                     f"dst.sut.System (nor a dst.aio.System)")
                self._close = self.system.close
                self.mode = kind(self.system, world, scenario, seed)
            self._assemble(has_runs)
        except BaseException:  # whatever stops the assembly (a bad bound, Ctrl-C), what build opened is closed
            self.close()
            raise

    def _assemble(self, has_runs: bool) -> None:
        """Everything around the built system: its bounds checked, its processes made, pinned faults in place."""
        scenario, world, system, mode = self.scenario, self.world, self.system, self.mode
        mode.refuse(has_runs)
        # The invariants this run checks: the scenario's, less those of a part the run does not have.
        parts = {"leases"} if system.leases is not None else set()
        if has_runs:
            parts.add("runs")
        self.invariants = tuple(i for i in scenario.invariants if BY_ID[i].parts & parts)
        slack, bounds = slack_of(scenario), system.bounds
        check_bounds(scenario, bounds, slack, has_runs, self.invariants)
        world.traced.view = system.leases
        world.ghost.watch(self.invariants, leases=system.leases, runs=system.runs if has_runs else None,
                          resource=system.resource, handling=mode.handling, senders={s.id: s.actor for s in self.plan},
                          bounds=attrs.evolve(bounds, reclaim_within=bounds.reclaim_within + slack,
                                              transition_within=bounds.transition_within + slack))
        world.ghost.recorder = self._violated
        if self.explorer is not None:
            world.ghost.on_moment = self._moment
        self.window = window_of(bounds, parts, slack)
        # The user's own assertions (dst.always & co.): noted as dst's own are, where they are found.
        self.book = Book(world.kernel, mode.who, self._violated, self._refused)

        wl = scenario.workload
        names = list(self.outline.clients)
        defaults: dict[str, object] = {"limit": wl.limit, "slots": wl.slots, "work": wl.work[0], "writes": wl.writes[0]}

        def job(client: str, incarnation: int, step: Step) -> Any:
            return system.job(client, incarnation, Order(step, defaults, world.clients[client]))

        server, clients = mode.processes(names, job)
        world.add(server, clients, system.resource)
        workers = list(self.outline.workers)
        self.phases = Phases(world, scenario, self.active_until, self._go, workers, self.book.quiet_period_over)
        for step in self.plan:
            fault = fault_of(step)
            if fault is not None and fault.pinned:
                world.faults[fault.name] += 1
                fault.apply(world, step)

    def _chain(self, index: int) -> None:
        """The plan's step ``index`` chained, if there is one: plan steps are chained, one pending at a time, so a
        long plan does not deepen the event queue. Its seq is taken even when there is none, where a longer plan
        (a minimizer's candidate, going on from a snapshot of this run: :meth:`adopt`) would have its next step."""
        kernel = self.world.kernel
        self.applied = index
        self.chained = (kernel.at(self.timed[index].at, self._apply, index) if index < len(self.timed)
                        else kernel.reserve())

    def _apply(self, index: int) -> None:
        world, step = self.world, self.timed[index]
        self._chain(index + 1)
        fault = fault_of(step)
        if fault is not None:
            world.faults[fault.name] += 1
            aim = cast(str | None, step.arg("moment"))
            if aim is None:
                fault.apply(world, step)
                return
            # Targeted: armed now, it strikes at the actor's next moment of that name.
            host = world.server if step.actor == SERVER else world.clients[step.actor]
            what = step.describe().split(" ", 2)[2].replace(f" moment={aim}", "")
            world.trace.append((world.kernel.now, step.actor, "aim", f"{what} at its next {aim}"))
            host.targets.arm(aim, what, lambda until: fault.apply(world, struck(step, until, world.kernel.now)))
            return
        if step.actor == "user":
            run_id, work = cast(int, step.arg("run")), cast(int, step.arg("work", 0))
            world.user.submit(step.id, Submit(run_id, work) if step.action == "submit" else Cancel(run_id))
            return
        world.clients[step.actor].submit(step)  # a job: acquire or serve

    def _branch(self, step: Step) -> None:
        self.world.branch(step.number("draw"))

    def _moment(self, situation: str) -> None:
        """The run reached ``situation`` for the first time: if the explorer gives it branches, the run stops before
        anything else happens the next millisecond (see :class:`Explorer`)."""
        assert self.explorer is not None
        branches = self.explorer.budget.get(situation, 0)
        if not branches:
            return
        at = self.kernel.now + 1
        if self.moment is None:
            self.moment = [at, branches]
            self.pause_at(at, self._branch_off)
        elif self.moment[0] == at:
            self.moment[1] = max(self.moment[1], branches)

    def pause_at(self, at: int, then: Callable[[], None]) -> None:
        """Stop the run before anything else due at ``at`` (nothing past ``at - 1`` has happened) and call ``then``
        there: where a run is forked to explore what follows (a branch, a minimizer's candidate). The stop is no
        event of the run."""
        self.kernel.first_at(at, self._stop, then)

    def _stop(self, then: Callable[[], None]) -> None:
        raise _Stopped(then)

    def _branch_off(self) -> None:
        """At the moment: the explorer forks the branches, and this process goes on as the one it is handed (a
        child), or as the seed's own run. A branch goes on from the very event the stop was, as a run of the branch
        from the start runs its branch step there."""
        assert self.explorer is not None and self.moment is not None
        branch = None
        if not self.found:  # a violation by then: the seed's own story
            with self.watch.aside():  # the clock stands still while the branches run
                at, branches = self.moment
                branch = self.explorer.fork(at, branches, getattr(self.system, "folder", None), self.mode.real_service)
        if branch is None:
            return
        self.forked(self.explorer.report)
        self.scenario = attrs.evolve(self.scenario, branch=branch)
        step = branch.step()
        self.plan = sort_steps((*self.plan, step))
        self.kernel.events += 1  # the branch's step, as an event of its own (as where the run branches from the start)
        self._branch(step)

    def forked(self, report: Callable[[RunResult], None]) -> None:
        """This process was forked at a stop (:meth:`pause_at`) to go on as another run: ``report`` takes its result
        (and ends the process) where :meth:`run` would return it."""
        self.report = report
        self.watch.adopt()  # the watchdog's thread did not come along
        for hook in self.world.on_fork:
            hook()

    def adopt(self, scenario: Scenario) -> None:
        """Go on as the run of ``scenario`` (scripted), at a stop: its plan is this run's up to now, and so is the
        rest of it (:func:`dst.explore.snapshot.diverges` says which plans qualify). Its later steps are chained
        instead of this one's, where a run of it from the start has them, its pinned faults put in place, and the
        result is its."""
        plan = scenario.steps or ()
        timed = timed_steps(plan)
        assert timed[:self.applied] == self.timed[:self.applied], "a plan that differs in what already happened"
        world = self.world
        self.kernel.put(self.chained, timed[self.applied].at if self.applied < len(timed) else None, self._apply,
                        self.applied)
        world.network.pinned.clear()
        world.trips.pinned.clear()
        world.trips.pinned_resets.clear()
        for old, new in ((self.plan, -1), (plan, 1)):
            for step in old:
                fault = fault_of(step)
                if fault is not None and fault.pinned:
                    world.faults[fault.name] += new
                    if new > 0:
                        fault.apply(world, step)
        world.faults = +world.faults  # a kind the new plan pins no more is not counted at all, as from the start
        world.ghost.senders = {s.id: s.actor for s in plan}
        self.scenario, self.plan, self.timed = scenario, plan, timed

    def run(self) -> RunResult:
        # Like timeit, a run switches the cycle collector off: nothing here makes a reference cycle per
        # event (refcounting frees it all), and with hundreds of clients the collector's repeated scans of
        # the live state cost as much as the events themselves. It is back on when the run returns.
        if self.build_error is not None:
            return build_failed(self.scenario, self.seed, self.plan, self.build_error, self.plan_given)
        collecting = gc.isenabled()
        gc.disable()
        mode = self.mode
        self.watch = watching(self.kernel, self.deadline, lambda frame: mode.who(), mode.stop())
        assertions.book = self.book  # dst.always & co., called from the model's code, go to this run's book
        try:
            with self.watch, mode.guarded():  # a model's code that never returns is interrupted
                result = self._run()
                if self.report is not None:
                    self.report(result)  # a run forked from another's: its process ends here
                return result
        finally:
            if assertions.book is self.book:
                assertions.book = None
            self.close()
            if collecting:
                gc.enable()

    def close(self) -> None:
        """Close what the model's build opened, once."""
        mode = getattr(self, "mode", None)
        if mode is not None:
            mode.close()
        with SignalsHeld():
            close, self._close = self._close, None
            if close is not None:
                close()

    def _checkpoint(self, events: int) -> int:
        """Called by the kernel at the count it returns: ends a run over its event budget, or past its deadline."""
        budget = self.scenario.run.max_events
        if events >= budget:
            raise _OverBudget()
        if self.deadline is None:
            return budget
        if self.clock() >= self.deadline:  # the wall clock only ever ends a run; it never shapes one
            raise Cut()
        return min(budget, events + _CHECK_WALL_EVERY)

    def _violated(self, invariant: str, message: str) -> None:
        """The ghost's recorder: the first violation of ``invariant``. The run's first opens the consequence
        window. Noted with the trace as long as it is now, where such a violation used to end the run (under
        the asyncio mode, inside a callback: where the callback returns), so a trace's digest up to it is the
        same as it was before the window."""
        during = self.mode.handling()
        report = ViolationReport(invariant, self.kernel.now, len(self.world.trace), message,
                                 None if during is None else key_name(during))
        if self.mode.hold():
            self.noting.append(len(self.found))
        elif not self.found:
            self.opened = report.step
        self.found.append(report)
        if len(self.found) == 1:
            self.kernel.after(self.window, self._window_over)

    def _refused(self, line: str) -> None:
        """A bad call of dst.always & co. (an id that is none): the model's error at its moment, even if the
        model's code swallows the exception it raised."""
        if self.refused is None:
            self.refused = (self.kernel.now, len(self.world.trace), line)

    def _window_over(self, _: object) -> None:
        raise _WindowOver()

    def _noted(self) -> None:
        """The violations found in the callback that just returned, noted where it returned."""
        if not self.noting:
            return
        during = self.mode.handling()
        for i in self.noting:
            self.found[i] = attrs.evolve(self.found[i], step=len(self.world.trace),
                                         during=None if during is None else key_name(during))
        self.noting.clear()
        if self.opened is None:
            self.opened = self.found[0].step

    def _go(self, until: int) -> None:
        """The kernel run to ``until``, stopping a moment wherever a violation is to be noted (see _violated), and
        at the risky moment an explorer branches at."""
        while True:
            try:
                self.kernel.run(until)
                return
            except _Stopped as stop:
                self.kernel.events -= 1  # the stop is no event of the run
                stop.then()
            except Pause:
                self._noted()

    def _run(self) -> RunResult:
        kernel, scenario, world = self.kernel, self.scenario, self.world
        self._chain(0)
        for step in self.plan:
            if step.action == "branch":
                kernel.first_at(step.at, self._branch, step)
        world.server.boot()
        unjudged = None
        try:
            unjudged = self.phases.course()
        except _WindowOver:
            pass  # the consequence window closed: what was found is the outcome
        except _OverBudget:
            if not self.found:
                unjudged = Unjudged("over-budget", f"passed run.max_events ({scenario.run.max_events:,} events) at "
                                                   f"t={format_time(kernel.now)}: a larger max_events, or a smaller "
                                                   f"workload")
        except Cut:
            raise
        except (Exception, Stalled) as e:  # the model's own error (or a refusal, or a stall): the run ends with it
            stalled = self.watch.stalled  # whatever the stopped code raised on its way out, the stall is the cause
            if stalled is None and raised_in(e) is None and not isinstance(e, ModelFault):
                raise  # none of the user's code is on its way: dst's own bug, with its traceback
            self._noted()  # a violation found in the callback that raised: noted where it ended
            during = self.mode.handling()
            # A fault's own line names the user's frame, as the description of an exception does.
            actor, told = stalled or (self.mode.who(), str(e) if isinstance(e, ModelFault) else described(e))
            world.trace.append((kernel.now, actor, "error", told))
            self.error = ViolationReport(MODEL_ERROR, kernel.now, len(world.trace), f"{actor}: {told}",
                                         None if during is None else key_name(during))
        self._noted()
        return self._result(None if self.found else unjudged)

    def _result(self, unjudged: Unjudged | None) -> RunResult:
        kernel, scenario, world = self.kernel, self.scenario, self.world
        # Where the run stopped before the consequence window was: its first violation, or its end.
        stop = len(world.trace) if self.opened is None else self.opened
        found, errors = self.found, [] if self.error is None else [self.error]
        swallowed = min((r for r in (self.mode.refusal, self.refused) if r is not None), default=None)
        stalled = self.watch.stalled
        if stalled is not None and self.error is None:
            swallowed = (self.watch.stalled_at, stop, ": ".join(stalled))  # caught, and went on
        ended = found[0] if found else self.error  # what ended the run's course (before the window, the run)
        if swallowed is not None and (found or ended is None or ended.time > swallowed[0]):
            # A refusal the model caught and went on from is the model's error all the same, at its moment (unless
            # it is the very error that ended the run).
            errors.insert(0, ViolationReport(MODEL_ERROR, *swallowed))
        violation, consequences = outcome(found, errors)
        jobs: Counter[str] = Counter()
        for host in world.clients.values():
            jobs.update(host.ended)
        reached = world.ghost.situations_reached()
        counted = self.book.tally()  # the book takes no more: a dropped task's last words count for nothing
        result = RunResult(
            ran=scenario, seed=self.seed, plan=self.plan, virtual_time=kernel.now,
            events=kernel.events, raw_trace=tuple(world.trace), faults=dict(world.faults), invariants=self.invariants,
            checks=world.ghost.checks, jobs=dict(jobs), violation=violation,
            befell=(world.network.drawn, world.server.drawn, world.server.resets), unjudged=unjudged,
            situations=reached, moments=dict(world.ghost.moments),
            cases=cases_met(reached, catalogue(scenario.model.resolve().situations), self.invariants,
                            [v.invariant for v in (violation, *consequences) if v is not None]),
            plan_given=self.plan_given, consequences=tuple(consequences),
            decided=stop if violation is None else max(stop, violation.step), periods=world.server.periods,
            logs=tuple(world.logs), work=world.ghost.worked(kernel.now), assertions=counted,
        )
        world.clear()
        return result


class _OverBudget(Exception):
    pass


class _Stopped(Pause):
    """The run is at a stop (see Simulation.pause_at): the kernel stops there, and ``then`` is called."""

    def __init__(self, then: Callable[[], None]) -> None:
        super().__init__()
        self.then = then


class _WindowOver(Exception):
    """The consequence window after a run's first violation closed: the run ends."""
