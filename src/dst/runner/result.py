"""What a run returns: its outcome, its plan, its trace, and what it met on the way."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import attrs

from ..causal import causal_slice
from ..errors import MODEL_ERROR
from ..faults import BY_NAME, befell
from ..invariants import cause_of
from ..invariants.user import catalogue, counted, never_met
from ..plan import Step, make_step
from ..scenario import Scenario
from ..sut import SERVER
from ..sim.trace import Event, digest, format_event, format_time, formatted
from .reproduce import reproduce as _command


@attrs.frozen
class ViolationReport:
    invariant: str
    time: int
    step: int  # how many trace events there were when it was detected (so the index of the next one)
    message: str
    during: str | None = None  # the message key of the server handler it was detected in (17.1.0), if any


def outcome(found: list[ViolationReport], errors: list[ViolationReport]) -> tuple[ViolationReport | None,
                                                                               list[ViolationReport]]:
    """A run's violation and its consequences (in time order), from the first violation of each invariant it found
    (in the order found) and the model's errors (the first first). The model's error that came first is the outcome;
    otherwise the cause among the violations (:func:`~dst.invariants.cause_of`), and the rest are what followed."""
    violation: ViolationReport | None = None
    if errors and (not found or found[0].time > errors[0].time):
        violation, consequences = errors[0], [*found, *errors[1:]]
    elif found:
        cause = cause_of([v.invariant for v in found])
        violation, consequences = found[cause], [*found[:cause], *found[cause + 1:], *errors]
    else:
        consequences = []
    consequences.sort(key=lambda v: v.time)
    return violation, consequences


def build_failed(scenario: Scenario, seed: int, plan: tuple[Step, ...], error: str, plan_given: bool) -> RunResult:
    """The result of a run whose model's build raised ``error``: a model error at t=0, and nothing else ran."""
    return RunResult(ran=scenario, seed=seed, plan=plan, virtual_time=0, events=0, raw_trace=((0, SERVER, "error", error),),
                     faults={}, invariants=tuple(scenario.invariants), checks=0, jobs={},
                     violation=ViolationReport(MODEL_ERROR, 0, 1, f"{SERVER}: {error}"), plan_given=plan_given)


@attrs.frozen
class Unjudged:
    """A run that ended before it could be judged: neither a pass nor a violation.

    ``kind`` is ``"undrained"`` (a client or the server was still busy when ``run.drain_limit`` ran out,
    so the liveness checks that follow the quiet period would accuse a live holder) or ``"over-budget"``
    (the run passed ``run.max_events``)."""

    kind: str
    why: str
@attrs.frozen(slots=False)  # not slotted: ``trace`` is a cached property
class RunResult:
    ran: Scenario = attrs.field(repr=False)  # the scenario as it ran: its name, model and bugs
    seed: int
    plan: tuple[Step, ...]
    virtual_time: int
    events: int
    raw_trace: tuple[Event, ...]  # as recorded: details still raw (see dst.sim.trace)
    faults: dict[str, int]
    invariants: tuple[str, ...]
    checks: int
    jobs: dict[str, int]
    violation: ViolationReport | None
    # What the network and the server recorded of the faults that befell messages and round trips.
    befell: tuple[list[tuple[int, str, int, int]], list[tuple[int, int, int, int]],
                  list[tuple[int, int, int, str]]] = ([], [], [])
    unjudged: Unjudged | None = None
    situations: dict[str, int] = attrs.Factory(dict)  # the risky situations reached, and how often
    moments: dict[str, int] = attrs.Factory(dict)  # each situation reached: when the run first reached it (ms)
    cases: dict[str, int] = attrs.Factory(dict)  # each invariant checked: how often it met a case it exists for
    plan_given: bool = attrs.field(default=False, repr=False, eq=False)  # ``plan`` was passed to run()
    # The other invariants the run violated, each the first time, in time order, after its first violation opened
    # the consequence window (and the model's error, if it ended the run then): what followed from the cause.
    consequences: tuple[ViolationReport, ...] = ()
    # How many trace events lead up to the outcome: to the reported violation, and at least to the first one
    # (where a run stopped before the consequence window); None: all of them. The digest covers these.
    decided: int | None = None
    periods: tuple[int, ...] = ()  # the server's background loops' periods (ms): ServerProcess.periods
    # What the model logged with the logging module, kept off the terminal: (time, process, how many trace events
    # came before it, its line). Not in the trace, nor its digest: ``events_with_logs`` puts them in their place.
    logs: tuple[tuple[int, str, int, str], ...] = ()
    # The clients' protected work (dst.sut.work, dst.aio.work): (client, the lease or run it worked under, start,
    # end), for the page.
    work: tuple[tuple[str, str, int, int], ...] = ()
    # The user's own assertions the run met (dst.always & co.): name (``always:my-id``) -> (times checked or
    # reached, times true, times false).
    assertions: dict[str, tuple[int, int, int]] = attrs.Factory(dict)

    def assertion_counts(self) -> dict[str, dict[str, int]]:
        """Each of the user's assertions (``dst.always`` & co.) the run met or the model's source names, with its
        counts: ``checked`` (times checked, reached or asked), ``true``, ``false``."""
        return counted(self.assertions, catalogue(self.model))

    def never_met(self) -> list[str]:
        """A line per assertion of the user's the run never met as it exists to be met: a ``sometimes`` never true,
        a ``reachable`` never reached, an ``always`` or ``eventually`` never checked."""
        return never_met(self.assertion_counts())

    def events_with_logs(self) -> list[tuple[int, str, str, str]]:
        """The formatted trace with each log line in its place, as an event ``log`` of the process that logged it."""
        trace, out, logs = self.trace, [], iter(self.logs)
        log = next(logs, None)
        for i, event in enumerate((*trace, None)):
            while log is not None and log[2] <= i:
                out.append((log[0], log[1], "log", log[3]))
                log = next(logs, None)
            if event is not None:
                out.append(event)
        return out

    @property
    def scenario(self) -> str:
        """The scenario's name."""
        return self.ran.name

    @property
    def model(self) -> str:
        """The importable name of the model that ran."""
        return self.ran.model.impl

    @property
    def bugs(self) -> tuple[str, ...]:
        return self.ran.bugs

    @property
    def fired(self) -> dict[str, int]:
        """Every fault that struck, by kind: the plan's, and those the network and the store drew at random."""
        fired = Counter({kind: n for kind, n in self.faults.items() if not BY_NAME[kind].pinned})
        fired.update(action for _, _, action, _ in befell(*self.befell))  # a message fault's action is its name
        return dict(sorted(fired.items()))

    @property
    def ok(self) -> bool:
        """No invariant was violated (an unjudged run is ok, and says why it was not judged in full)."""
        return self.violation is None

    @property
    def outcome(self) -> str:
        """``"ok"``, ``"violation"``, ``"model-error"`` (the model's own code ended the run), or how the run went
        unjudged (``"undrained"``, ``"over-budget"``)."""
        if self.violation is not None:
            return MODEL_ERROR if self.violation.invariant == MODEL_ERROR else "violation"
        return "ok" if self.unjudged is None else self.unjudged.kind

    @property
    def headline(self) -> str:
        """What ended the run, in a few words: ``VIOLATION of capacity at t=1.2s``, ``MODEL ERROR at t=19ms``."""
        v = self.violation
        if v is None:
            return "no violation"
        what = "MODEL ERROR" if v.invariant == MODEL_ERROR else f"VIOLATION of {v.invariant}"
        return f"{what} at t={format_time(v.time)}"

    @property
    def decided_trace(self) -> tuple[Event, ...]:
        """The raw trace up to the outcome (:attr:`decided`): without the consequence window's events after it."""
        return self.raw_trace if self.decided is None else self.raw_trace[:self.decided]

    @functools.cached_property
    def digest(self) -> str:
        """The digest of the trace up to the outcome (:attr:`decided_trace`): taken when first asked for (a
        campaign never asks). What follows the reported violation is left out, so a finding keeps its digest
        whatever its consequences do."""
        return digest(self.decided_trace)

    @functools.cached_property
    def drawn(self) -> tuple[Step, ...]:
        """Every fault that befell a message or a store round trip, as the pinned steps (id 0) that would say
        so, in time order: made when first read (only the minimizer reads it)."""
        return tuple(make_step(0, *step[:3], **step[3]) for step in befell(*self.befell))

    @functools.cached_property
    def trace(self) -> tuple[tuple[int, str, str, str], ...]:
        """The trace with every detail as text: made when first read (a campaign never reads it)."""
        return tuple(formatted(e) for e in self.raw_trace)

    def summary(self) -> dict[str, Any]:
        """Everything but wall-clock figures: the same seed gives the same dict."""
        out: dict[str, Any] = {
            "scenario": self.scenario,
            "model": self.model,
            "seed": self.seed,
            "bugs": list(self.bugs),
            "result": self.outcome,
            "unjudged": None if self.unjudged is None else self.unjudged.why,
            "virtual_time_ms": self.virtual_time,
            "events": self.events,
            "trace_events": len(self.raw_trace),
            "trace_digest": self.digest,
            "plan_steps": len(self.plan),
            "faults": dict(sorted(self.faults.items())),
            "jobs": dict(sorted(self.jobs.items())),
            "invariants": list(self.invariants),
            "checks": self.checks,
            "situations": self.situations,
            "cases": self.cases,
            "violation": None,
        }
        mine = self.assertion_counts()
        if mine:  # a model with none has none in its summary
            out["assertions"] = mine
        if self.violation is not None:
            v = self.violation
            out["violation"] = {"invariant": v.invariant, "time_ms": v.time, "step": v.step, "message": v.message,
                                "during": v.during, "slice": [list(e) for e in self.causal()]}
        out["consequences"] = [{"invariant": c.invariant, "time_ms": c.time, "step": c.step, "message": c.message}
                               for c in self.consequences]
        return out

    def causal(self, every_step: bool = False) -> tuple[tuple[int, str, str, str], ...]:
        """The events that led to the violation (none without one): its causal slice, formatted.
        ``every_step`` keeps every plan step, as a finding's minimized steps all are."""
        v = self.violation
        if v is None:
            return ()
        trace = self.trace if self.decided is None else self.trace[:self.decided]
        return tuple(trace[i] for i in causal_slice(trace, v.message, during=v.during, every_step=every_step))

    @property
    def reproduce(self) -> str | None:
        """The ``dst run`` command that runs this seed again, or None when no command line can: a plan passed
        to :func:`run`, or a scenario built or changed in code (:func:`dst.save_finding` writes it as a finding, which ``dst replay`` runs)."""
        if self.plan_given:
            return None
        return _command(self.ran, self.seed)

    def explain(self) -> str:
        """What the run did, for a person: its outcome; with a violation, the message, the events that led to it
        (its causal slice) and how to run it again."""
        head = f"{self.scenario}, seed {self.seed}"
        if self.violation is None:
            why = "" if self.unjudged is None else f", but {self.unjudged.kind}: {self.unjudged.why}"
            return f"{head}: no violation{why} ({self.events:,} events, {format_time(self.virtual_time)} of virtual time)"
        v, led = self.violation, self.causal()
        again = self.reproduce
        lines = [f"{head}: {self.headline}", f"  {v.message}",
                 *(["its consequences (what else the run violated, each the first time):"] if self.consequences
                   else []),
                 *(f"  {consequence(c)}" for c in self.consequences),
                 f"the {len(led):,} events that led to it (of {len(self.decided_trace):,}):",
                 *(f"  {format_event(e)}" for e in led),
                 f"run it again: {again}" if again else
                 "run it again: no command line runs this plan as given; dst.save_finding(result, folder) writes "
                 " it as a finding that `dst replay` runs"]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def consequence(c: ViolationReport) -> str:
    """A consequence in one line: ``capacity at t=1.2s: leases the authority recognises hold ...``."""
    return f"{c.invariant} at t={format_time(c.time)}: {c.message}"
