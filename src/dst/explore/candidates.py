"""The simpler forms the minimizer tries of a plan's steps and of a scenario's environment: a client folded into
another, a step's durations shortened, the network and the store made plain; and which steps are a client's
faults, its deaths, the job a fault strikes."""

from __future__ import annotations

from typing import Any, Callable, Iterator, cast

import attrs

from ..faults import fault_of
from ..plan import ACTIONS, Step
from ..scenario import Scenario


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
