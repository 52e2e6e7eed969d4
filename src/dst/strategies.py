"""Hypothesis strategies for dst: a test suite draws plans and scenarios, and Hypothesis shrinks them.

    from hypothesis import given, settings
    import dst
    from dst.strategies import SETTINGS, plans

    scenario = dst.load_scenario("double-release")

    @settings(SETTINGS)  # optional, and faster: see SETTINGS
    @given(plan=plans(scenario))
    def test_my_leases(plan):
        assert dst.run(scenario, seed=0, plan=plan).ok

:func:`plans` draws a run's plan (jobs, runs and fault steps, with their times and arguments) and
:func:`scenarios` whole scenarios within bounds, every value through Hypothesis's own strategies, so a
failure shrinks as Hypothesis shrinks (fewer steps, earlier times, shorter durations, smaller counts,
lower client numbers) and is kept in Hypothesis's example database. Hypothesis prints the failing plan
as the lines of a scenario's ``steps`` list; ``dst.save_finding(dst.run(scenario, seed, plan), folder)`` writes
it as a finding file that ``dst replay`` and the pytest plugin replay.

In such a test the seed stays fixed and the plan is what varies: the network's and the store's draws
(latencies, and the loss, duplication, delay and slowness the scenario sets) still come from the seed,
keyed by each step's id, so every step draws its id and keeps it while Hypothesis deletes others.

Fault steps come from the registry, :data:`dst.faults.FAULTS`: a step for each scheduled kind the
scenario enables (a rate above zero), its duration in the scenario's range for that kind, its other
arguments by their declared kind, aimed at a moment the model marks only where the scenario aims that
kind (``targeted`` above zero). A pinned kind (a lost, duplicated or delayed message, a slow store round
trip, a reset store connection) the scenario gives a chance (the key its registry entry names) is drawn aimed
at a message of a job or run step of the same plan: its key is that step's id, a message kind the model sends
(learned from runs of the scenario) and a count.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable

from hypothesis import Phase, settings
from hypothesis import strategies as st

from .runner.generate import REBORN, workers
from .faults import BY_NAME, FAULTS, SCHEDULED, FaultKind, is_pinned
from .plan import Step, make_step, sort_steps, step_from_mapping
from .scenario import FaultRate, Scenario, load_scenario, parse_scenario, scenario_to_doc
from .sim.trace import is_background, key_name, keys_in, message_key, parse_key, response_key, step_key_parts, step_of
from .text import parse_duration, shorten

__all__ = ["SETTINGS", "plans", "scenarios"]

# Hypothesis's settings for a test that runs dst, to build on: ``@settings(SETTINGS, max_examples=500)``.
SETTINGS = settings(
    deadline=None,  # a run takes tens of milliseconds, more for a long plan: that is not a slowdown to report
    # The explain phase traces every line run (sys.settrace before Python 3.12): each run is several times
    # slower, and it adds runs after the shrinking to say which steps could be anything.
    phases=tuple(phase for phase in Phase if phase is not Phase.explain),
    # Shrink the first failure found. (Hunting for more goes on until ten wall-clock seconds after the first:
    # on a loaded machine another example would be shrunk, and a derandomized test would not be the same.)
    report_multiple_bugs=False,
)

MAX_STEPS = 32  # a plan's steps at most, unless the test says otherwise (a generated plan has about as many)
STEP_IDS = 9_999  # step ids are drawn from 1 to about this
RUNS = 4  # runs are numbered from 1 to this (a plan has few, so a cancel often names one submitted)
_FEW = 4  # the highest value drawn for a fault kind's own counts (an "int" or "count" argument)

Draft = tuple[str, str, dict[str, object]]  # a step without its id and time: actor, action, arguments


def plans(scenario: Scenario, *, max_steps: int = MAX_STEPS) -> st.SearchStrategy[tuple[Step, ...]]:
    """A plan for ``scenario``: at most ``max_steps`` steps, in time order, for ``dst.run(scenario, seed,
    plan=...)``.

    Jobs (``acquire``) for the lease clients ``c1`` .. ``cN`` of ``[workload]``, on the model's limits, with
    ``work`` and ``writes`` in the workload's ranges (none when its ``jobs`` is 0); with ``[runs]``, the
    workers' ``serve`` and the user's ``submit`` and ``cancel``; a fault step of each kind the scenario
    enables. Each sort of step is a list of its own (so a plan is about as dense as a generated one, which is
    what finds bugs), every step at a time drawn in whole multiples of ``run.granularity`` in
    ``[0, run.duration)``; the earliest ``max_steps`` are kept."""
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        raise ValueError(f"max_steps: expected an integer >= 1, got {shorten(max_steps)}")
    workload = _workload(scenario)
    drafts, pins = workload + _faults(scenario), _pins(scenario)
    if not drafts:
        return st.just(())
    duration, grain = scenario.run.duration, scenario.run.granularity
    times = _multiples(0, duration - 1, grain)
    # Each sort of step draws its ids apart from the others' (the k-th sort of n: k, k + n, k + 2n ...) and never
    # twice, so no id depends on another step: deleting a step leaves the others' ids, and their draws, alone.
    sorts = len(drafts) + len(pins)
    timed = [st.lists(st.tuples(_ids(k, sorts), times, draft), max_size=max_steps, unique_by=lambda drafted: drafted[0])
             for k, draft in enumerate(drafts, 1)]

    @st.composite
    def plan(draw: st.DrawFn) -> tuple[Step, ...]:  # drawn, not mapped: Hypothesis prints the steps themselves
        drawn = [draw(sort) for sort in timed]
        drafted = [one for sort in drawn for one in sort]
        # A pinned fault names a message by the workload step it was sent for: one of those drawn above.
        named = sorted((step_id, at) for sort in drawn[:len(workload)] for step_id, at, _ in sort)
        if named:
            for k, pin in enumerate(pins, len(drafts) + 1):
                drafted += draw(st.lists(st.tuples(_ids(k, sorts), pin(named)), max_size=max_steps,
                                         unique_by=lambda pinned: pinned[0]).map(
                    lambda pinned: [(step_id, at, draft) for step_id, (at, draft) in pinned]))
        return _plan(drafted, max_steps)

    return plan()


def scenarios(base: Scenario | None = None, *, clients: tuple[int, int] = (1, 4), jobs: tuple[int, int] = (1, 6),
              duration: tuple[str, str] = ("10s", "600s"), faults: Iterable[str] | None = None,
              rates: tuple[float, float] = (0.0, 1.0), bugs: Iterable[str] = ()) -> st.SearchStrategy[Scenario]:
    """Whole scenarios: ``base`` (default: the embedded default scenario) with its clients, jobs per client,
    run duration (durations as a scenario file writes them, ``"10s"``) and fault kinds drawn within the bounds
    given, and ``bugs`` switched on.

    Each kind in ``faults`` (default: every scheduled kind of the registry) gets a rate per virtual minute in
    ``rates`` (a rate of 0 leaves it off) and, when it lasts, a duration range inside the base's range for it;
    the kinds not named are off. The rest (the model, the network, the quiet period, ``[runs]``) is the
    base's. Bounds a scenario could not hold raise ``ScenarioError`` or ``ValueError`` here, in one line."""
    base = load_scenario() if base is None else base
    names = tuple(kind.name for kind in SCHEDULED) if faults is None else tuple(faults)
    unknown = [name for name in names if name not in BY_NAME or BY_NAME[name].pinned]
    if unknown:
        raise ValueError(f"faults: expected scheduled fault kinds from: {', '.join(k.name for k in SCHEDULED)}; "
                         f"got unknown {shorten(unknown[0])}")
    drawn_clients, drawn_jobs = _bounds("clients", clients, int), _bounds("jobs", jobs, int)
    drawn_rates = _bounds("rates", rates, float)
    try:
        lasts = (parse_duration(duration[0]), parse_duration(duration[1]))
    except (ValueError, TypeError, IndexError) as e:
        raise ValueError(f"duration: expected (low, high) durations such as ('10s', '600s'): {e}") from None
    _bounds("duration", lasts, int)
    doc = scenario_to_doc(base)
    doc.pop("steps", None)
    doc["bugs"] = list(dict.fromkeys([*base.bugs, *bugs]))
    source = f"<drawn from {base.name}>"
    grain = base.run.granularity
    ranges = {name: getattr(base.faults, name).duration for name in names}

    def scenario(values: dict[str, Any]) -> Scenario:
        drawn = {**doc, "run": {**doc["run"], "duration": f"{values['duration']}ms"},
                 "workload": {**doc["workload"], "clients": values["clients"], "jobs": values["jobs"]},
                 "faults": {name: {**section, "rate": 0.0} for name, section in doc["faults"].items()}}
        for name, (rate, low, high) in values["faults"].items():
            drawn["faults"][name] = {**drawn["faults"][name], "rate": rate, "duration": [f"{low}ms", f"{high}ms"]}
        return parse_scenario(drawn, source)

    # The corners load, or the bounds are refused now, in the scenario loader's own words.
    for end in (0, 1):
        scenario({"clients": clients[end], "jobs": jobs[end], "duration": lasts[end],
                  "faults": {name: (rates[end], *ranges[name]) for name in names}})

    def fault(name: str) -> st.SearchStrategy[tuple[float, int, int]]:
        low, high = ranges[name]
        span = st.lists(_multiples(low, high, grain), min_size=2, max_size=2).map(sorted)
        return st.tuples(drawn_rates, span).map(lambda drawn: (drawn[0], drawn[1][0], drawn[1][1]))

    return st.fixed_dictionaries({
        "clients": drawn_clients, "jobs": drawn_jobs, "duration": _multiples(*lasts, grain),
        "faults": st.fixed_dictionaries({name: fault(name) for name in names}),
    }).map(scenario)


# --- drafts: a step of each sort, without its id and time ---------------------------------------------

def _workload(scenario: Scenario) -> list[st.SearchStrategy[Draft]]:
    """A strategy per sort of workload step the scenario has: jobs, and the runs part's steps. Their messages
    are keyed by their step ids."""
    wl, runs, grain = scenario.workload, scenario.runs, scenario.run.granularity
    serving = workers(scenario)
    out: list[st.SearchStrategy[Draft]] = []
    if wl.jobs > 0:
        out.append(_jobs(scenario))
    if serving:
        numbers = st.integers(1, RUNS)  # a run submitted twice is a retry: the server answers "already submitted"
        out += [st.sampled_from(serving).map(lambda worker: (worker, "serve", {})),
                st.tuples(numbers, _multiples(*runs.work, grain)).map(
                    lambda drawn: ("user", "submit", {"run": drawn[0], "work": drawn[1]})),
                numbers.map(lambda run: ("user", "cancel", {"run": run}))]
    return out


def _faults(scenario: Scenario) -> list[st.SearchStrategy[Draft]]:
    """A strategy per scheduled fault kind the scenario enables (a rate above zero)."""
    wl, grain = scenario.workload, scenario.run.granularity
    serving = workers(scenario)
    out: list[st.SearchStrategy[Draft]] = []
    model = scenario.model.resolve()
    moments = {"client": model.client_moments, "server": model.server_moments}
    for name, rate in scenario.faults.kinds():
        if rate.rate > 0:
            kind = BY_NAME[name]
            out.append(_fault(kind, rate, wl.clients + len(serving), serving,
                              moments.get(kind.target, ()) if rate.targeted > 0 else (), grain))
    return out


def _jobs(scenario: Scenario) -> st.SearchStrategy[Draft]:
    wl, grain = scenario.workload, scenario.run.granularity
    limits = dict(scenario.model.limits)
    names = sorted(limits, key=lambda name: name != wl.limit)  # the workload's limit first: shrinks toward it

    def job(limit: str) -> st.SearchStrategy[Draft]:
        return st.builds(lambda actor, args: (actor, "acquire", {"limit": limit, **args}), _client(wl.clients),
                         st.fixed_dictionaries({"slots": st.integers(1, limits[limit]),
                                                "work": _multiples(*wl.work, grain),
                                                "writes": st.integers(*wl.writes)}))

    return st.sampled_from(names).flatmap(job)


# What a fault kind's own arguments are drawn as, by their declared kind ("name" and "key" arguments,
# which only the model or a run can fill in, are left out: see REBORN for the one the generator fills).
_ARGUMENTS: dict[str, st.SearchStrategy[object]] = {"int": st.integers(1, _FEW), "count": st.integers(0, _FEW)}


def _arguments(kind: FaultKind) -> dict[str, st.SearchStrategy[Any]]:
    """A strategy per argument of ``kind`` that can be drawn: by :data:`_ARGUMENTS`, or one of a choice's names
    (``before|after``: shrinks toward the first)."""
    return {name: _ARGUMENTS[of] if of in _ARGUMENTS else st.sampled_from(of.split("|"))
            for name, of in kind.args if of in _ARGUMENTS or "|" in of}


def _fault(kind: FaultKind, rate: FaultRate, clients: int, serving: tuple[str, ...], moments: tuple[str, ...],
           grain: int) -> st.SearchStrategy[Draft]:
    args = _arguments(kind)
    args |= {name: _multiples(*rate.duration, grain) for name, of in kind.args if of == "duration"}
    if kind.duration_arg:
        args[kind.duration_arg] = _multiples(*rate.duration, grain)
    if moments:
        args["moment"] = st.none() | st.sampled_from(moments)  # mostly struck at its time, as drawn

    def draft(actor: str, drawn: dict[str, Any]) -> Draft:
        values = {name: value for name, value in drawn.items() if value is not None}
        if kind.action in REBORN and actor in serving:
            values["then"] = "serve"  # a worker's new incarnation serves again, as in a generated plan
        return actor, kind.action, values

    target = st.just("server") if kind.target == "server" else _client(clients)
    return st.builds(draft, target, st.fixed_dictionaries(args))


Pin = Callable[[list[tuple[int, int]]], st.SearchStrategy[tuple[int, Draft]]]  # named steps -> (at, draft)


def _pins(scenario: Scenario) -> list[Pin]:
    """A strategy maker per pinned fault kind the scenario gives a chance above zero: given the workload steps
    drawn (id, time), it draws the kind's step aimed at a message one of them sends or is answered with."""
    chosen = [kind for kind in FAULTS if kind.pinned and _setting(scenario, kind.chance[0]) > 0]
    if not chosen:
        return []
    messages = _messages(scenario)
    grain = scenario.run.granularity
    out: list[Pin] = []
    for kind in chosen:
        aimed = messages if kind.target == "net" else tuple(m for m in messages if not m[1])  # a round trip: a request's
        if not aimed:
            continue
        args = _arguments(kind)
        if kind.duration_arg:
            low, high = _setting(scenario, kind.chance[1])
            args[kind.duration_arg] = _multiples(low, high, grain)
        out.append(functools.partial(_pin, kind, aimed, args))
    return out


def _pin(kind: FaultKind, messages: tuple[tuple[int, bool], ...], args: dict[str, st.SearchStrategy[Any]],
         named: list[tuple[int, int]]) -> st.SearchStrategy[tuple[int, Draft]]:
    """A ``kind`` step naming the ``n``-th message of one sort sent for a named step (or its response), at that
    step's time: a pinned fault is in place from the start, so its time only places it in the plan."""
    def draft(step: tuple[int, int], message: tuple[int, bool], n: int, values: dict[str, Any]) -> tuple[int, Draft]:
        (step_id, at), (sort, response) = step, message
        key = response_key(message_key(step_id, sort, n)) if response else message_key(step_id, sort, n)
        return at, (kind.target, kind.action, {"message": key_name(key), **values})

    return st.builds(draft, st.sampled_from(named), st.sampled_from(messages), st.integers(0, _FEW - 1),
                     st.fixed_dictionaries(args))


@functools.lru_cache(maxsize=64)  # a test that draws plans() per example learns a scenario's messages once
def _messages(scenario: Scenario) -> tuple[tuple[int, bool], ...]:
    """The sorts of message a workload step's program sends or is answered with, as (kind, response): only
    the model knows them, so they are learned from runs of the scenario (seeds 0 to 2: a sort one of them
    misses, such as a renewal, is not drawn)."""
    from .runner import run

    seen = set()
    for event in (event for seed in range(3) for event in run(scenario, seed).raw_trace):
        for key in keys_in(event[3]):
            if not is_background(key):
                _, sort, _, response = step_key_parts(key)
                seen.add((sort, response))
    return tuple(sorted(seen))


def _setting(scenario: Scenario, dotted: str) -> Any:
    """A scenario's value by its key as a file writes it: ``network.loss``."""
    return functools.reduce(getattr, dotted.split("."), scenario)


# --- values -----------------------------------------------------------------------------------------------

def _ids(k: int, n: int) -> st.SearchStrategy[int]:
    """Step ids of the k-th sort of step of n: k, k + n, k + 2n ... (shrinks toward k)."""
    return st.integers(0, STEP_IDS // n).map(lambda j: j * n + k)


def _client(clients: int) -> st.SearchStrategy[str]:
    return st.integers(1, clients).map(lambda n: f"c{n}")


def _multiples(low: int, high: int, grain: int) -> st.SearchStrategy[int]:
    """A duration in ``[low, high]`` ms, a whole multiple of ``grain`` (``low`` when none is): shrinks toward low."""
    first, last = -(-low // grain), high // grain
    return st.just(low) if first > last else st.integers(first, last).map(lambda k: k * grain)


def _bounds(name: str, bounds: tuple[Any, Any], kind: Callable[[Any], Any]) -> st.SearchStrategy[Any]:
    """``(low, high)`` (or a list of two) checked, as a strategy (integers or floats) drawing inside it."""
    if (not isinstance(bounds, (tuple, list)) or len(bounds) != 2 or any(isinstance(b, bool) for b in bounds)
            or not all(isinstance(b, (int, float) if kind is float else int) for b in bounds) or bounds[0] > bounds[1]):
        raise ValueError(f"{name}: expected (low, high) with low <= high, got {shorten(bounds)}")
    if kind is float:
        return st.floats(float(bounds[0]), float(bounds[1]), allow_nan=False)
    return st.integers(*bounds)


def _plan(drafted: list[tuple[int, int, Draft]], max_steps: int) -> tuple[Step, ...]:
    """The drafts as steps in time order: the earliest ``max_steps``, less a pinned fault whose step is not kept."""
    steps = (_checked(make_step(step_id, at, actor, action, **args)) for step_id, at, (actor, action, args) in drafted)
    kept = sort_steps(steps)[:max_steps]
    ids = {step.id for step in kept}
    return tuple(step for step in kept if not is_pinned(step) or step_of(parse_key(str(step.arg("message")))) in ids)


def _checked(step: Step) -> Step:
    """The step as a scenario's ``steps`` list reads it back: the plan's own checks, so a drawn step is one a
    user could write (a strategy that drew another would fail here, loudly)."""
    again = step_from_mapping(step.to_dict(), step.id)
    if again != step:
        raise AssertionError(f"a drawn step does not read back as itself: {step!r} became {again!r}")
    return again

