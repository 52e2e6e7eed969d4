"""A run assembled and driven: scenario + plan + simulator + model + invariants, composed in one place.

A run has three phases: the *active* phase (plan steps: jobs and faults), the
*drain* (no new steps; wait until every client has finished its jobs and the server
has answered every request it is handling, up to ``run.drain_limit``), and the *quiet* period, after which ``stranded-slot``
checks that nothing is left held (and ``at-least-once`` that every run that was
not cancelled was acknowledged).

A first violation does not end the run: it goes on, as the model would, for a *consequence window* (the
longest time the model's bounds give a case to settle, such as TTL + reaper interval, plus the worst
delays), or to its natural end if that comes first, and notes the first violation of each other invariant.
The run reports the cause among them (:func:`~dst.invariants.cause_of`); the rest are its consequences. The
model's own error still ends a run at once.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections import Counter
from typing import Any, Callable, Mapping, cast

import attrs

from ..errors import BUILD_RAISED, MODEL_ERROR, ModelFault, Stalled, UserError
from ..frames import described, raised_in, short
from ..invariants import BY_ID, INVARIANTS, Ghost, cause_of
from ..invariants.ghost import FactsGate
from ..invariants.situations import cases_met, catalogue
from ..models import ModelError
from ..faults import fault_of, is_pinned
from ..plan import Step, is_client
from ..scenario import Scenario
from ..sim.facts import TracedFacts
from ..sim.hosts import ClientHost, ResourceHost, ServerHost, UserHost, handling, handling_now, raised_by, running_in
from ..sim.kernel import Kernel, Pause
from ..sim.network import Network
from ..sim.process import ClientProcess, ServerProcess
from ..sim.rng import Streams
from ..sim.store import RoundTrips
from ..sim.trace import SENT, Event, detail_args, format_time, key_name
from ..sut import RESOURCE, SERVER, Cancel, Env, Submit, System, Workload
from ..text import format_duration
from .bounds import check_bounds
from .generate import Order, generate_plan
from .hold import SignalsHeld
from .result import RunResult, Unjudged, ViolationReport
from .watchdog import watching

_DRAIN_POLL = 1_000
_RUN_ACTIONS = ("serve", "submit", "cancel")


class Cut(Exception):
    """A run stopped at a wall-clock deadline (a campaign's ``--time-budget``): it has no result at all."""


_CHECK_WALL_EVERY = 20_000  # events between looks at the wall clock, when a run has a deadline


class Simulation:
    """One run, assembled. Build it, then :meth:`run` it once."""

    def __init__(self, scenario: Scenario, seed: int, plan: tuple[Step, ...] | None = None, *,
                 deadline: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.scenario = scenario
        self.seed = seed
        self.deadline = deadline
        self.clock = clock
        streams = Streams(seed)
        self.plan_given = plan is not None
        self.plan = plan if plan is not None else (scenario.steps if scenario.steps is not None
                                                   else generate_plan(scenario, streams))
        wl, runs = scenario.workload, scenario.runs
        limits = dict(scenario.model.limits)
        budget = scenario.run.max_events
        self.kernel = kernel = Kernel(self._checkpoint, budget if deadline is None else min(budget, _CHECK_WALL_EVERY))
        self.trace: list[Event] = []
        # The timed steps; pinned faults name a message, not a moment, and are in place from the start.
        self.timed = tuple(s for s in self.plan if not is_pinned(s))
        self.active_until = max([scenario.run.duration] + [s.at + 1 for s in self.timed])
        has_runs = runs.enabled or any(s.action in _RUN_ACTIONS or s.arg("then") in _RUN_ACTIONS for s in self.plan)

        # The model, built fresh against the harness's facts; the ghost learns its views and bounds after.
        self.ghost = ghost = Ghost(kernel, limits)
        self.facts = FactsGate(ghost)
        self.traced = TracedFacts(self.facts, kernel, self.trace)  # the model's: the store's changes traced too
        env = Env(clock=kernel, facts=self.traced, options=scenario.model.settings(), limits=limits,
                  bugs=frozenset(scenario.bugs),
                  workload=Workload(retries=wl.retries, write_time=wl.write_time, acquire_patience=wl.acquire_patience,
                                    active_until=self.active_until, runs=has_runs))
        model, self._close = scenario.model.resolve(), None
        self.build_error: str | None = None  # what the model's build raised: the run is a model error at once
        self.refusal: tuple[int, int, str] | None = None  # the sandbox's first refusal: time, trace index, line
        self.found: list[ViolationReport] = []  # the first violation of each invariant, in the order found
        self.noting: list[int] = []  # those found in the asyncio callback running now: noted where it returns
        self.opened: int | None = None  # the trace's length where the first violation opened the consequence window
        self.error: ViolationReport | None = None  # the model's error that ended the run
        self.window = 0  # ms: how long the run goes on after its first violation
        try:
            with SignalsHeld():  # a signal waits, then strikes with the close in place
                try:
                    self.system: Any = model.build(env)
                except UserError:
                    raise  # the build's own refusal of the scenario (an option it cannot take): one line, exit 2
                except Exception as e:  # the run is a model error at once; a raise before the build's first
                    code = getattr(model.build, "__code__", None)  # line (a wrong signature) is named by the build
                    at = "" if raised_in(e) is not None or code is None else (
                        f" (the build: {short(code.co_filename)}:{code.co_firstlineno} {code.co_qualname})")
                    self.build_error = f"{BUILD_RAISED}{described(e)}{at}"
                    return
                systems = (System, *_aio_systems())  # either kind of system has a close
                self._close = getattr(self.system, "close", None) if isinstance(self.system, systems) else None
            self._assemble(streams, has_runs)
        except BaseException:  # whatever stops the assembly (a bad bound, Ctrl-C), what build opened is closed
            self.close()
            raise

    def _assemble(self, streams: Streams, has_runs: bool) -> None:
        """Everything around the built system: its bounds checked, the network, the hosts, pinned faults."""
        scenario, kernel, ghost, system, wl = self.scenario, self.kernel, self.ghost, self.system, self.scenario.workload
        self.aio = isinstance(system, _aio_systems())
        if not isinstance(system, System) and not self.aio:
            raise ModelError(f"{scenario.model.impl}: build() returned {type(system).__name__}, not a dst.sut.System "
                             f"(nor a dst.aio.System)")
        if self.aio and has_runs:
            raise ModelError(f"{scenario.model.impl}: an asyncio system does not run work yet: this scenario submits runs")
        routes = {} if self.aio else system.service.handlers()
        if has_runs and (system.runs is None or Submit not in routes or Cancel not in routes):
            raise ModelError(f"{scenario.model.impl} does not run work (it needs handlers for Submit and Cancel and "
                             f"a runs view): this scenario submits runs")
        # The invariants this run checks: the scenario's, less those of a part the run does not have.
        parts = {"leases"} if system.leases is not None else set()
        if has_runs:
            parts.add("runs")
        self.invariants = tuple(i for i in scenario.invariants if BY_ID[i].parts & parts)
        # Worst-case round trips on top of the model's bounds, so a liveness window never closes on a message in flight.
        m = scenario.model
        store = m.store_latency[1] + (m.store_slow_by[1] if m.store_slow > 0 else 0)  # a slow round trip, too
        slack = scenario.network.latency[1] + scenario.network.delay_by[1] + 4 * store
        bounds = system.bounds
        check_bounds(scenario, bounds, slack, has_runs, self.invariants)
        self.traced.view = system.leases
        ghost.watch(self.invariants, leases=system.leases, runs=system.runs if has_runs else None,
                    resource=system.resource, bounds=attrs.evolve(bounds, reclaim_within=bounds.reclaim_within + slack,
                                        transition_within=bounds.transition_within + slack))
        ghost.recorder = self._violated
        # The consequence window: the longest the model's bounds give a case of this kind of system to settle
        # (a dead holder's slot reclaimed: TTL + reaper interval; a CANCELLING run ended; a run redelivered),
        # plus the worst delays. A slip whose first violation is a symptom shows its cause within it (a slot
        # given back twice shows when the reaper reclaims the lease its release left behind).
        settling = {unit.settles_within for unit in INVARIANTS if unit.parts & parts} - {""}
        self.window = max((cast(int, getattr(bounds, field)) for field in settling), default=0) + slack

        self.network = network = Network(kernel, streams.keyed("network"), latency=scenario.network.latency,
                                         loss=scenario.network.loss, duplicate=scenario.network.duplicate,
                                         delay=scenario.network.delay, delay_by=scenario.network.delay_by,
                                         trace=self.trace, server=SERVER)
        trips = RoundTrips(kernel, streams.keyed("scheduling"), self.trace, latency=scenario.model.store_latency,
                           scheduler=scenario.run.scheduler, slow=scenario.model.store_slow,
                           slow_by=scenario.model.store_slow_by)
        clients = {f"c{i}" for i in range(1, wl.clients + 1)} | {s.actor for s in self.plan if is_client(s.actor)}
        names = sorted(clients, key=lambda n: int(n[1:]))
        defaults: dict[str, object] = {"limit": wl.limit, "slots": wl.slots, "work": wl.work[0],
                                       "writes": wl.writes[0]}

        def job(client: str, incarnation: int, step: Step) -> Any:
            return system.job(client, incarnation, Order(step, defaults, self.clients[client]))

        self.clients: Mapping[str, ClientProcess]
        self.server: ServerProcess
        if self.aio:
            from ..aio.host import assemble

            self.loop, self.server, self.clients = assemble(system, kernel, network, self.trace, ghost, self.facts,
                                                            trips, names, job, streams, scenario)
        else:
            self.server = ServerHost(kernel, system.service, network, self.trace, ghost, trips)
            self.clients = {name: ClientHost(name, kernel, network, self.trace, ghost, job, wl.request_timeout)
                            for name in names}
        network.attach(SERVER, self.server.receive)
        if system.resource is not None:
            network.attach(RESOURCE, ResourceHost(kernel, system.resource, network, self.trace, ghost).receive)
        self.user = UserHost(kernel, network, self.trace, request_timeout=wl.request_timeout, retries=wl.retries)
        network.attach("user", self.user.receive)

        for name, host in self.clients.items():
            network.attach(name, host.receive)
        self.faults: Counter[str] = Counter()
        for step in self.plan:
            fault = fault_of(step)
            if fault is not None and fault.pinned:
                self.faults[fault.name] += 1
                fault.apply(self, step)

    def _apply(self, index: int) -> None:
        # Plan steps are chained, one pending at a time, so a long plan does not deepen the event queue.
        step = self.timed[index]
        if index + 1 < len(self.timed):
            self.kernel.at(self.timed[index + 1].at, self._apply, index + 1)
        fault = fault_of(step)
        if fault is not None:
            self.faults[fault.name] += 1
            aim = cast(str | None, step.arg("moment"))
            if aim is None:
                fault.apply(self, step)
                return
            # Targeted: armed now, it strikes at the actor's next moment of that name.
            host = self.server if step.actor == SERVER else self.clients[step.actor]
            what = step.describe().split(" ", 2)[2].replace(f" moment={aim}", "")
            self.trace.append((self.kernel.now, step.actor, "aim", f"{what} at its next {aim}"))
            host.targets.arm(aim, what, lambda: fault.apply(self, step))
            return
        if step.actor == "user":
            run_id, work = cast(int, step.arg("run")), cast(int, step.arg("work", 0))
            self.user.submit(step.id, Submit(run_id, work) if step.action == "submit" else Cancel(run_id))
            return
        self.clients[step.actor].submit(step)  # a job: acquire or serve

    def run(self) -> RunResult:
        # Like timeit, a run switches the cycle collector off: nothing here makes a reference cycle per
        # event (refcounting frees it all), and with hundreds of clients the collector's repeated scans of
        # the live state cost as much as the events themselves. It is back on when the run returns.
        if self.build_error is not None:
            return self._build_failed(self.build_error)
        collecting = gc.isenabled()
        gc.disable()
        self.watch = (watching(self.kernel, self.deadline, lambda frame: self.loop.process.name,
                               lambda: self.loop.stop_with(Stalled())) if self.aio else
                      watching(self.kernel, self.deadline, running_in))
        try:
            with self.watch:  # a model's code that never returns is interrupted
                return self._guarded()
        finally:
            self.close()
            if collecting:
                gc.enable()

    def _guarded(self) -> RunResult:
        """The run in what guards it: an asyncio system's loop and sandbox, a guest model's sandbox."""
        if self.aio:
            with self.loop.running():  # the loop is asyncio's running loop, and the sandbox is up
                try:
                    return self._run()
                finally:  # what is still pending is dropped with the sandbox up: a dead process's
                    self.loop.close(collect=True)  # last words, if any, reach nothing real
        if self.scenario.model.impl.startswith("dst."):
            return self._run()  # dst's own model reads nothing real: no sandbox to pay for
        with self._sandbox():
            return self._run()

    def _sandbox(self) -> Any:
        """The sandbox a guest model's coroutine-seam run is in: its clocks read virtual time, its random draws
        come from the seed, and threads, sockets, subprocesses and signals are refused (a model error). Files
        may be written anywhere: a model keeps its store where its build put it (and its close removes it)."""
        from ..sandbox import Sandbox
        from ..aio.loop import VIRTUAL_EPOCH_MS

        kernel = self.kernel

        def refused(refusal: BaseException) -> None:
            if self.refusal is None:  # the first one: the run ends with it, even if the model swallows it
                self.refusal = (kernel.now, len(self.trace), f"{running_in(sys._getframe(1))}: {refusal}")

        return Sandbox(wall_ms=lambda: VIRTUAL_EPOCH_MS + kernel.now, monotonic_ms=lambda: kernel.now,
                       seed=self.seed, folder=os.sep, refused=refused)

    def close(self) -> None:
        """Close what the model's build opened, once."""
        loop = getattr(self, "loop", None)
        if loop is not None:
            loop.close()  # the tasks still pending are dropped before their files go
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

    def _busy(self) -> list[str]:
        """Who keeps the run from draining: clients with a job, queued jobs or a pause, and a busy server."""
        busy = [name for name, c in self.clients.items() if not c.idle]
        return busy + ([] if self.server.idle else ["the server"])

    def _served_until(self) -> int | None:
        """The last moment a worker served the runs stream: now while one still does; after they all stopped, just
        before the last time the server answered one before its serve job ended (or its client died); -1 when
        no worker is left alive to serve; None when one is paused (it may owe a run it could not get to: not
        judged)."""
        workers = [self.clients[c] for c in sorted({s.actor for s in self.plan if "serve" in (s.action, s.arg("then"))})]
        if not any(w.alive for w in workers):
            return -1
        if any(w.alive and w.paused for w in workers):
            return None
        if any(not w.idle for w in workers):
            return self.kernel.now
        # A worker that stopped acted on what the server last told it: it served the stream only until that
        # answer, and not in its instant (what came before the answer in that instant, the answer counted, and
        # a worker told of a run would not have stopped).
        stopped = {w.name: w.last_active for w in workers}
        told: dict[str, int] = {}
        for event in reversed(self.trace):  # once per run, when every worker has stopped
            reply = detail_args(event, SENT) if event[2] == "reply" and event[1] == SERVER else None
            if reply is not None and reply[1] in stopped and reply[1] not in told and event[0] <= stopped[reply[1]]:
                told[reply[1]] = event[0]
                if len(told) == len(stopped):
                    break
        return max(told[name] - 1 if name in told else last for name, last in stopped.items())

    def _violated(self, invariant: str, message: str) -> None:
        """The ghost's recorder: the first violation of ``invariant``. The run's first opens the consequence
        window. Noted with the trace as long as it is now, where such a violation used to end the run (under
        the asyncio mode, inside a callback: where the callback returns), so a trace's digest up to it is the
        same as it was before the window."""
        kernel = self.kernel
        if self.aio:
            during = self.loop.server_key()
        else:
            during = handling_now(sys._getframe(1))
        report = ViolationReport(invariant, kernel.now, len(self.trace), message,
                                 None if during is None else key_name(during))
        if self.aio and self.ghost.holding:
            self.noting.append(len(self.found))
            self.loop.stop_with(Pause())  # the kernel stops where the callback returns, and _go notes it
        elif not self.found:
            self.opened = report.step
        self.found.append(report)
        if len(self.found) == 1:
            kernel.after(self.window, self._window_over)

    def _window_over(self, _: object) -> None:
        raise _WindowOver()

    def _noted(self) -> None:
        """The violations found in the asyncio callback that just returned, noted where it returned."""
        if not self.noting:
            return
        during = self.loop.server_key()
        for i in self.noting:
            self.found[i] = attrs.evolve(self.found[i], step=len(self.trace),
                                         during=None if during is None else key_name(during))
        self.noting.clear()
        if self.opened is None:
            self.opened = self.found[0].step

    def _go(self, until: int) -> None:
        """The kernel run to ``until``, stopping a moment wherever a violation is to be noted (see _violated)."""
        while True:
            try:
                self.kernel.run(until)
                return
            except Pause:
                self._noted()

    def _run(self) -> RunResult:
        kernel, scenario = self.kernel, self.scenario
        if self.timed:
            kernel.at(self.timed[0].at, self._apply, 0)
        self.server.boot()
        unjudged = None
        try:
            unjudged = self._course()
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
            actor = self.loop.process.name if self.aio else raised_by(e)
            during = self.loop.server_key() if self.aio else handling(e)
            # A fault's own line names the user's frame, as the description of an exception does.
            actor, told = stalled or (actor, str(e) if isinstance(e, ModelFault) else described(e))
            self.trace.append((kernel.now, actor, "error", told))
            self.error = ViolationReport(MODEL_ERROR, kernel.now, len(self.trace), f"{actor}: {told}",
                                         None if during is None else key_name(during))
        self._noted()
        return self._result(None if self.found else unjudged)

    def _course(self) -> Unjudged | None:
        """The run's phases, to its natural end: the active phase, the drain, the quiet period and the checks
        after it. Returns why the run could not be judged in full, if it could not."""
        kernel, scenario = self.kernel, self.scenario
        self._go(self.active_until)
        drain_end = self.active_until + scenario.run.drain_limit
        # Drained: every client finished its jobs and the server answered what it was handling (a backlog
        # of retried requests can still grant leases; the quiet period starts after them).
        while kernel.now < drain_end and self._busy():
            self._go(min(kernel.now + _DRAIN_POLL, drain_end))
        # A drain that runs out leaves the quiet period not quiet: what was still moving (a late grant, a
        # backlog of runs) is live, not stranded, and the checks pass over it; the run says so.
        busy = self._busy()
        quiet_from = self.ghost.quiet_from = kernel.now
        self._go(quiet_from + scenario.run.quiet)
        up = self.ghost.server.up_since
        if up is None or up > quiet_from:
            # The reaper and the deadlines could not run for the whole quiet period: nothing is judged.
            return Unjudged("undrained", f"the server was down or paused during the quiet period (from "
                                         f"t={format_time(quiet_from)}): nothing was judged after it "
                                         f"(a longer drain_limit, or shorter server faults)")
        self.ghost.quiet_period_over(self._served_until(), frozenset(busy))
        if not busy:
            return None
        shown = ", ".join(busy[:5]) + (f" and {len(busy) - 5} more" if len(busy) > 5 else "")
        return Unjudged("undrained", f"{shown} still busy when run.drain_limit "
                                     f"({format_duration(scenario.run.drain_limit)}) ran out at "
                                     f"t={format_time(quiet_from)}: what was still moving was not "
                                     f"judged after the quiet period (a longer drain_limit, or "
                                     f"shorter jobs)")

    def _build_failed(self, error: str) -> RunResult:
        """The result of a run whose model's build raised: a model error at t=0, and nothing else ran."""
        event = (0, SERVER, "error", error)
        return RunResult(ran=self.scenario, seed=self.seed, plan=self.plan, virtual_time=0, events=0,
                         raw_trace=(event,), faults={}, invariants=tuple(self.scenario.invariants), checks=0, jobs={},
                         violation=ViolationReport(MODEL_ERROR, 0, 1, f"{SERVER}: {error}"),
                         plan_given=self.plan_given)

    def _result(self, unjudged: Unjudged | None) -> RunResult:
        kernel, scenario = self.kernel, self.scenario
        # Where the run stopped before the consequence window was: its first violation, or its end.
        stop = len(self.trace) if self.opened is None else self.opened
        found, errors = self.found, [] if self.error is None else [self.error]
        swallowed = self.refusal
        stalled = self.watch.stalled
        if stalled is not None and self.error is None:
            swallowed = (self.watch.stalled_at, stop, ": ".join(stalled))  # caught, and went on
        ended = found[0] if found else self.error  # what ended the run's course (before the window, the run)
        if swallowed is not None and (found or ended is None or ended.time > swallowed[0]):
            # A refusal the model caught and went on from is the model's error all the same, at its moment (unless
            # it is the very error that ended the run).
            errors.insert(0, ViolationReport(MODEL_ERROR, *swallowed))
        violation: ViolationReport | None = None
        if errors and (not found or found[0].time > errors[0].time):
            # The model's error came first: it is the outcome, and what came after it its consequences.
            violation, consequences = errors[0], [*found, *errors[1:]]
        elif found:
            cause = cause_of([v.invariant for v in found])
            violation, consequences = found[cause], [*found[:cause], *found[cause + 1:], *errors]
        else:
            consequences = []
        consequences.sort(key=lambda v: v.time)
        jobs: Counter[str] = Counter()
        for host in self.clients.values():
            jobs.update(host.ended)
        checks = self.ghost.checks
        reached = self.ghost.situations_reached()
        result = RunResult(
            ran=scenario, seed=self.seed, plan=self.plan, virtual_time=kernel.now,
            events=kernel.events, raw_trace=tuple(self.trace), faults=dict(self.faults), invariants=self.invariants,
            checks=checks, jobs=dict(jobs), violation=violation, befell=(self.network.drawn, self.server.drawn),
            unjudged=unjudged, situations=reached,
            cases=cases_met(reached, catalogue(scenario.model.resolve().situations), self.invariants,
                            [v.invariant for v in (violation, *consequences) if v is not None]),
            plan_given=self.plan_given, consequences=tuple(consequences),
            decided=stop if violation is None else max(stop, violation.step), periods=self.server.periods,
        )
        # The hosts, network and kernel reference one another, so only the cycle collector could free
        # them; emptying the big containers now returns their memory at once (flat memory over a campaign).
        self.trace.clear()
        kernel._queue.clear()
        return result


class _OverBudget(Exception):
    pass


class _WindowOver(Exception):
    """The consequence window after a run's first violation closed: the run ends."""


def _aio_systems() -> tuple[type, ...]:
    """dst.aio.System, when the asyncio mode has been imported (an adapter that returns one has imported it)."""
    import sys

    aio = sys.modules.get("dst.aio")
    return (aio.System,) if aio is not None else ()
