"""The fault registry: one record per kind of fault, and everything else derives from it.

A kind's record says its key in a scenario's ``[faults]`` table, the plan step it becomes (its
action, who it targets, the argument its drawn duration goes in), how the simulator applies that
step, what it does (for the docs), and how a finding that contains it is titled and drawn. The
scenario schema, the plan's step vocabulary, the plan generator, swarm testing, the minimizer and
the renderings read this table; adding a kind is adding a record here.

Faults arrive as a Poisson process at the scenario's rate (per virtual minute); each draws a
duration from the kind's range and, for a client fault, its target client uniformly.
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import attrs


def _crash(sim: Any, step: Any) -> None:
    sim.clients[step.actor].crash()


def _restart(sim: Any, step: Any) -> None:
    sim.clients[step.actor].restart()


def _pause(sim: Any, step: Any) -> None:
    sim.clients[step.actor].pause(step.arg("for"))


def _partition(sim: Any, step: Any) -> None:
    now = sim.kernel.now
    until = now + step.arg("for")
    sim.trace.append((now, step.actor, "partition", f"from the server until t={until}"))
    partitioned = sim.network.partitioned
    partitioned[step.actor] = max(partitioned.get(step.actor, 0), until)


def _server_restart(sim: Any, step: Any) -> None:
    sim.server.restart(step.arg("down", 0))


@attrs.frozen
class FaultKind:
    name: str  # its key in [faults], and in the run's fault counts
    action: str  # the plan step it becomes
    target: Literal["client", "server"]  # a client drawn uniformly, or the server
    duration_arg: str | None  # the step argument its drawn duration goes in (None: it takes no duration)
    apply: Callable[[Any, Any], None]  # (the simulation, the step): what happens at the step's time
    effect: str  # what it does, for the docs
    title: str  # words for a finding's name when its minimized plan has this fault
    title_rank: int  # when a plan has several kinds, the lowest rank names the finding
    style: str = ""  # how its trace events are drawn (rich style)
    new_incarnation: bool = False  # a client comes back as a new process (a worker then serves again)


FAULTS: tuple[FaultKind, ...] = (
    FaultKind("crash", "crash", "client", None, _crash,
              "a client dies for good; its later steps are skipped", "after-a-crash", 3, "bold red"),
    FaultKind("restart", "restart", "client", None, _restart,
              "a client dies and a new incarnation starts with no memory of the old one's leases",
              "after-a-client-restart", 4, "red", new_incarnation=True),
    FaultKind("pause", "pause", "client", "for", _pause,
              "a client is frozen; whatever would wake it waits until it resumes, and it continues where it "
              "stopped (a work slice cut by the pause is reported to the job, which checks its lease before "
              "working again)", "after-a-pause", 1, "yellow"),
    FaultKind("partition", "partition", "client", "for", _partition,
              "messages between a client and the server are cut (the resource is still reachable)",
              "during-a-partition", 2, "magenta"),
    FaultKind("server_restart", "restart", "server", "down", _server_restart,
              "the server loses process memory and every in-flight handler, keeps its durable store, is down for "
              "the duration, and starts its background loops again", "after-a-server-restart", 0, "red"),
)

BY_NAME: dict[str, FaultKind] = {kind.name: kind for kind in FAULTS}
FAULT_ACTIONS: tuple[str, ...] = tuple(dict.fromkeys(kind.action for kind in FAULTS))


def fault_of(step: Any) -> FaultKind | None:
    """The kind of fault a plan step is (None: it is not a fault)."""
    target = "server" if step.actor == "server" else "client"
    for kind in FAULTS:
        if kind.action == step.action and kind.target == target:
            return kind
    return None
