"""The simpler forms the minimizer tries of a plan's steps and of a scenario's environment: a client folded into
another, a client's faults merged into one, a step's durations shortened, the network and the store made plain;
and which steps are a client's faults, its deaths, the job a fault strikes."""

from __future__ import annotations

from typing import Any, Callable, Iterator, cast

import attrs

from ..faults import BY_NAME, FAULTS, fault_of
from ..plan import ACTIONS, Step, is_client, make_step
from ..scenario import Scenario
from ..sim.trace import parse_key, step_of


def folded(steps: tuple[Step, ...], gone: str, into: str) -> list[Step]:
    """``steps`` with client ``gone``'s faults moved to ``into`` and its jobs dropped; each of ``into``'s jobs
    that began before a moved fault lasts at least until the job of ``gone`` it struck would have ended."""
    lengthen: dict[int, int] = {}  # step id of a job of ``into`` -> the work it needs
    for fault in (s for s in steps if s.actor == gone and client_fault(s)):
        struck, mine = job_at(steps, gone, fault.at), job_at(steps, into, fault.at)
        if struck is not None and mine is not None:
            end = struck.at + cast(int, struck.arg("work", 0))
            lengthen[mine.id] = max(lengthen.get(mine.id, 0), end - mine.at)
    out = []
    for step in steps:
        if step.actor == gone:
            if client_fault(step):
                out.append(attrs.evolve(step, actor=into))
        elif step.id in lengthen and lengthen[step.id] > cast(int, step.arg("work", 0)):
            out.append(step.with_arg("work", lengthen[step.id]))
        else:
            out.append(step)
    return out


def merges(plan: tuple[Step, ...]) -> Iterator[list[tuple[tuple[Step, ...], Step]]]:
    """For each client's faults of a kind the registry says one fault says (a partition for the messages it lost,
    one pause for its pauses), the steps to replace and the one fault spanning them: all of them first, then each
    two next to each other in time (the client's work between two pauses may be what the run needs, where two
    others only add up)."""
    owner: dict[int | None, str] = {step.id: step.actor for step in plan}  # None: no step sent it
    groups: dict[tuple[str, str], list[Step]] = {}
    for step in plan:
        kind = fault_of(step)
        if kind is None or not kind.merges_into or step.arg("moment") is not None:
            continue
        # Whose fault: the client it struck, or for a message the client of the step that sent it.
        client = step.actor if kind.target == "client" else \
            owner.get(step_of(parse_key(cast(str, step.arg("message")))), "")
        if is_client(client):
            groups.setdefault((client, kind.name), []).append(step)
    for (client, name), group in sorted(groups.items()):
        if len(group) < 2:
            continue
        kind = BY_NAME[name]
        into = next(k for k in FAULTS if k.action == kind.merges_into and k.target == "client")

        def spanning(steps: tuple[Step, ...]) -> Step:
            start = min(step.at for step in steps)
            end = max(step.at + cast(int, step.arg(kind.duration_arg or "", 1)) for step in steps)
            return make_step(min(step.id for step in steps), start, client, into.action,
                             **{cast(str, into.duration_arg): end - start})

        in_time = tuple(sorted(group, key=lambda step: (step.at, step.id)))
        sets = [in_time] + (list(zip(in_time, in_time[1:])) if len(in_time) > 2 else [])
        yield [(steps, spanning(steps)) for steps in sets]


def job_at(steps: tuple[Step, ...], actor: str, at: int) -> Step | None:
    """The job ``actor`` was given last at or before ``at`` (the one a fault then strikes), if any."""
    return max((s for s in steps if s.actor == actor and "work" in dict(s.args) and s.at <= at),
               key=lambda s: s.at, default=None)


def client_death(step: Step) -> bool:
    """A crash or restart of a client: it dies, and whatever it had asked for may be granted to no one."""
    kind = fault_of(step)
    return kind is not None and kind.target == "client" and kind.duration_arg is None and not kind.pinned


def client_fault(step: Step) -> bool:
    """A scheduled fault that strikes a client (a crash, a pause, a partition): not a job, not a pinned fault."""
    kind = fault_of(step)
    return kind is not None and kind.target == "client" and not kind.pinned


def shorter_steps(step: Step) -> Iterator[Step]:
    kinds = ACTIONS[step.action][1]
    for name, value in step.args:
        if kinds.get(name) == "duration" and isinstance(value, int) and value > 0:
            for shorter in dict.fromkeys((0, value // 2, value - value % 1000)):
                if shorter < value:
                    yield step.with_arg(name, shorter)


def plainer(s: Scenario) -> Iterator[Callable[[Scenario], Scenario]]:
    """Simplifications of the environment, one at a time, in a fixed order."""
    yield lambda sc: attrs.evolve(sc, network=attrs.evolve(sc.network, loss=0.0))
    yield lambda sc: attrs.evolve(sc, network=attrs.evolve(sc.network, duplicate=0.0))
    yield lambda sc: attrs.evolve(sc, network=attrs.evolve(sc.network, delay=0.0))
    yield lambda sc: attrs.evolve(sc, network=attrs.evolve(sc.network, latency=(sc.network.latency[0],) * 2))
    yield lambda sc: attrs.evolve(sc, model=attrs.evolve(sc.model, store_latency=(sc.model.store_latency[0],) * 2))
    yield lambda sc: attrs.evolve(sc, model=attrs.evolve(sc.model, store_slow=0.0))
    yield lambda sc: attrs.evolve(sc, model=attrs.evolve(sc.model, store_reset=0.0))
    yield lambda sc: attrs.evolve(sc, run=attrs.evolve(sc.run, scheduler="uniform"))


def what(step: Step) -> tuple[Any, ...]:
    return step.action, step.arg("message"), step.arg("round_trip")
