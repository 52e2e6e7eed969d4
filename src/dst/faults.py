"""The fault registry: one record per kind of fault, and everything else derives from it.

A kind's record says the plan step it becomes (its action, who it targets, its arguments), how
the simulator applies that step, what it does (for the docs), and how a finding that contains it
is titled and drawn. The scenario schema, the plan's step vocabulary, the plan generator, swarm
testing, the minimizer and the renderings read this table; adding a kind is adding a record here.

Two sorts of kind:

* *scheduled* faults have a key in a scenario's ``[faults]`` table: they arrive as a Poisson
  process at its rate (per virtual minute), each with a duration drawn from its range and, for a
  client fault, a target client drawn uniformly;
* *pinned* faults are what the keyed draws do to one message or one store round trip (a loss, a
  duplicate, a long delay, a slow round trip, a reset store connection), at the probabilities of ``[network]`` and
  ``[model]``. Written as a step, such a fault happens whatever the draws say: it is how a
  finding states the faults its story needs, and the minimizer writes them so.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Protocol

import attrs

from .sim.process import Processes
from .sim.store import WHEN
from .sim.trace import key_name, parse_key


class Step(Protocol):
    """What a fault reads of its plan step (a :class:`dst.plan.Step`, which imports this registry)."""

    @property
    def actor(self) -> str: ...

    def arg(self, name: str, default: object = None) -> object: ...

    def number(self, name: str, default: int = 0) -> int: ...

    def text(self, name: str) -> str: ...

    def as_job(self, action: str) -> object:
        """The same step as a job of ``action`` with no arguments (keyed as this step)."""

    def with_arg(self, name: str, value: object) -> Step:
        """This step with argument ``name`` set to ``value``."""


def _crash(sim: Processes, step: Step) -> None:
    sim.clients[step.actor].crash()


def _restart(sim: Processes, step: Step) -> None:
    host = sim.clients[step.actor]
    host.restart()
    then = step.arg("then")
    if then is not None:  # the new incarnation's first job (a worker serves again), keyed by this step
        host.submit(step.as_job(str(then)))


def _pause(sim: Processes, step: Step) -> None:
    sim.clients[step.actor].pause(step.number("for"))


def _partition(sim: Processes, step: Step) -> None:
    now = sim.kernel.now
    until = now + step.number("for")
    sim.trace.append((now, step.actor, "partition", f"from the server until t={until}"))
    partitioned = sim.network.partitioned
    partitioned[step.actor] = max(partitioned.get(step.actor, 0), until)
    sim.ghost.client_cut_off(step.actor, until)


def _clock_skew(sim: Processes, step: Step) -> None:
    sim.clients[step.actor].skew(step.number("by"))


def _server_restart(sim: Processes, step: Step) -> None:
    sim.server.restart(step.number("down"))


def _server_pause(sim: Processes, step: Step) -> None:
    sim.server.pause(step.number("for"))


# Pinned faults are applied before the run starts: they name the message, not the moment.

def _pin_message(effect: int) -> Callable[[Processes, Step], None]:
    """A pinned fault on the message a step names: 0 lost, 1 delayed by ``by``, 2 duplicated, 3 reset, 4 sent again
    by a retrying proxy after its upstream timeout ``by`` (the network's ``pinned`` record, in that order)."""
    def pin(sim: Processes, step: Step) -> None:
        key = parse_key(step.text("message"))
        lost, extra, twice, reset, proxy = sim.network.pinned.get(key, (False, 0, False, False, 0))
        by = step.number("by")
        sim.network.pinned[key] = (lost or effect == 0, by if effect == 1 else extra, twice or effect == 2,
                                   reset or effect == 3, by if effect == 4 else proxy)

    return pin


def _pin_slow(sim: Processes, step: Step) -> None:
    sim.server.pin_slow(parse_key(step.text("message")), step.number("round_trip"), step.number("by"))


def _pin_reset(sim: Processes, step: Step) -> None:
    sim.server.pin_reset(parse_key(step.text("message")), step.number("round_trip"), step.text("when"))


@attrs.frozen
class FaultKind:
    name: str  # its key in [faults] (scheduled kinds), and in the run's fault counts
    action: str  # the plan step it becomes
    target: Literal["client", "server", "net"]  # a client drawn uniformly, the server, or the network
    duration_arg: str | None  # the step argument its duration goes in (None: it takes no duration)
    apply: Callable[[Processes, Step], None]  # what happens to the run's processes at the step's time
    effect: str  # what it does, for the docs
    title: str  # words for a finding's name when its minimized plan has this fault
    title_rank: int  # when a plan has several kinds, the lowest rank names the finding
    style: str = ""  # how its trace events are drawn (rich style)
    new_incarnation: bool = False  # a client comes back as a new process (a worker then serves again)
    pinned: bool = False  # a pinned fault: applied before the run, to the message it names (no [faults] key)
    args: tuple[tuple[str, str], ...] = ()  # its other step arguments and their kinds (dst.plan.ACTIONS)
    drawn_as: str = ""  # the trace event its draws make (pinned kinds): a finding without the step is named by it
    merges_into: str = ""  # a client's several faults of this kind say what one of that (client) kind says
    duration: tuple[int, int] = (0, 0)  # its duration range when a scenario gives only a rate (ms)
    ends_on: tuple[str, ...] = ()  # the actor's trace events that end it (dst show draws it as a span until one)
    cuts_as: str = ""  # what the network's trace calls its doing to a message (a partition's "cut")
    # Pinned kinds: the scenario's keys of the chance a message (or round trip) draws it with, and of the range
    # its duration is drawn from. A chance of 0 means the scenario wants none: dst.strategies draws none then.
    chance: tuple[str, str] = ("", "")
    connection_only: bool = False  # it befalls only a message on a connection (HTTP), never a datagram (RPC)

    @property
    def lasts_past(self) -> bool:
        """Aimed at a moment that names a deadline, it can last until a while past it (``past``): a holder paused, or
        a server frozen, or a client cut off, until just after the expiry it reckons with."""
        return self.duration_arg == "for" and not self.pinned


FAULTS: tuple[FaultKind, ...] = (
    FaultKind("crash", "crash", "client", None, _crash,
              "a client dies for good; its later steps are skipped", "after-a-crash", 4, "bold red"),
    FaultKind("restart", "restart", "client", None, _restart,
              "a client dies and a new incarnation starts with no memory of the old one's leases (and, with "
              "`then`, starts that job: a worker serves again)", "after-a-client-restart", 5, "red",
              new_incarnation=True, args=(("then", "name"),)),
    FaultKind("pause", "pause", "client", "for", _pause,
              "a client is frozen; whatever would wake it waits until it resumes, and it continues where it "
              "stopped (a work slice cut by the pause is reported to the job, which checks its lease before "
              "working again)", "after-a-pause", 2, "yellow", merges_into="pause", duration=(1_000, 90_000),
              ends_on=("resume", "crash", "restart")),
    FaultKind("partition", "partition", "client", "for", _partition,
              "messages between a client and the server are cut (the resource is still reachable)",
              "during-a-partition", 3, "magenta", duration=(1_000, 60_000), cuts_as="cut"),
    FaultKind("clock_skew", "clock-skew", "client", "by", _clock_skew,
              "a client's wall clock is set back by the duration (an NTP step, a restored VM): a program that times "
              "its lease on it believes it valid for longer; the server's clock is the authority",
              "after-a-clock-skew", 6, "yellow", duration=(1_000, 60_000)),
    FaultKind("server_restart", "restart", "server", "down", _server_restart,
              "the server loses process memory and every in-flight handler, keeps its durable store, is down for "
              "the duration, and starts its background loops again", "after-a-server-restart", 0, "red",
              duration=(0, 5_000), ends_on=("boot",)),
    FaultKind("server_pause", "pause", "server", "for", _server_pause,
              "the server process is frozen (a stop-the-world pause): no handler and no background loop runs and "
              "requests wait, then it goes on where it stopped, its memory intact", "after-a-server-pause", 1, "yellow",
              duration=(1_000, 30_000), ends_on=("resume", "restart", "boot")),
    # Pinned kinds: `message` names a message as the trace does (17.3.0: step 17's first message of kind 3).
    FaultKind("slow", "slow", "server", "by", _pin_slow,
              "the handler of `message` takes `by` longer over its `round_trip`-th store round trip",
              "with-a-slow-store-round-trip", 7, "yellow", pinned=True,
              args=(("message", "key"), ("round_trip", "int")), drawn_as="slow",
              chance=("model.store_slow", "model.store_slow_by")),
    # Redis's connections only: the coroutine seam's round trips, and the SQL drop-ins', are on none dst resets.
    FaultKind("store-reset", "store-reset", "server", None, _pin_reset,
              "the store connection (Redis) of the handler of `message` is reset at its `round_trip`-th store "
              "round trip, `when` `before` the store ran the write or `after` (its reply lost): the client reads the "
              "end of the stream, and redis-py's retry sends the command again", "with-a-reset-store-connection", 8,
              "dim red", pinned=True, args=(("message", "key"), ("round_trip", "int"), ("when", "|".join(WHEN))),
              drawn_as="store-reset", chance=("model.store_reset", "")),
    FaultKind("duplicate", "duplicate", "net", None, _pin_message(2),
              "`message` is delivered twice (a datagram: an RPC message; a connection never duplicates one)",
              "with-a-duplicated-message", 9, "magenta", pinned=True, args=(("message", "key"),),
              drawn_as="duplicated", chance=("network.duplicate", "")),
    FaultKind("delay", "delay", "net", "by", _pin_message(1), "`message` takes `by` longer than its latency",
              "with-a-delayed-message", 10, "yellow", pinned=True, args=(("message", "key"),), drawn_as="delayed",
              chance=("network.delay", "network.delay_by")),
    FaultKind("lose", "lose", "net", None, _pin_message(0),
              "`message` is lost (on a connection: a request before the server, which its client reads as a refused "
              "connection; a response after the server ran it, which its client waits out)", "with-a-lost-message", 11,
              "dim red", pinned=True, args=(("message", "key"),), drawn_as="lost", merges_into="partition",
              chance=("network.loss", "")),
    # Connections only (HTTP): a datagram has no connection to reset, and no proxy in front of its server.
    FaultKind("reset", "reset", "net", None, _pin_message(3),
              "the connection carrying `message` is reset: its client reads the reset, and the server never saw the "
              "request (a request) or ran it (a response)", "with-a-reset-connection", 12, "dim red", pinned=True,
              args=(("message", "key"),), drawn_as="reset", chance=("network.reset", ""), connection_only=True),
    FaultKind("proxy-retry", "proxy-retry", "net", "by", _pin_message(4),
              "a retrying proxy in front of the server forwards the request `message`, and when no response has come "
              "back `by` later (its upstream timeout) sends it again; its client gets the second attempt's answer",
              "with-a-proxy-retry", 13, "magenta", pinned=True, args=(("message", "key"),), drawn_as="proxy-retried",
              chance=("network.proxy_retry", "network.proxy_timeout"), connection_only=True),
)
SCHEDULED: tuple[FaultKind, ...] = tuple(kind for kind in FAULTS if not kind.pinned)

BY_NAME: dict[str, FaultKind] = {kind.name: kind for kind in FAULTS}
FAULT_ACTIONS: tuple[str, ...] = tuple(dict.fromkeys(kind.action for kind in FAULTS))


def befell(network_drawn: list[tuple[int, str, int, int]], server_drawn: list[tuple[int, int, int, int]],
           server_resets: list[tuple[int, int, int, str]]) -> list[tuple[int, str, str, dict[str, Any]]]:
    """Every fault that befell a message or a store round trip in a run (drawn or pinned), from what the
    network and the server recorded (its slow round trips, its reset store connections), as the
    ``(at, actor, action, args)`` of the pinned steps that would say so."""
    out = [(at, "net", action, {"message": key_name(key), **({"by": ms} if BY_NAME[action].duration_arg else {})})
           for at, action, key, ms in network_drawn]
    out += [(at, "server", "slow", {"message": key_name(key), "round_trip": n, "by": ms})
            for at, key, n, ms in server_drawn]
    out += [(at, "server", "store-reset", {"message": key_name(key), "round_trip": n, "when": when})
            for at, key, n, when in server_resets]
    return sorted(out, key=lambda step: step[0])


def struck(step: Step, until: int | None, now: int) -> Step:
    """An aimed step as it strikes, at ``now``, a moment that names the deadline ``until`` (or none): with ``past``
    it lasts until that long after the deadline (``past`` alone if the deadline has gone by); else as drawn."""
    past = step.arg("past")
    if until is None or not isinstance(past, int):
        return step
    return step.with_arg("for", max(0, until - now) + past)


_BY_STEP: dict[tuple[str, str], FaultKind] = {(kind.action, kind.target): kind for kind in FAULTS}


def fault_of(step: Any) -> FaultKind | None:
    """The kind of fault a plan step is (None: it is not a fault)."""
    actor = step.actor
    return _BY_STEP.get((step.action, actor if actor == "server" or actor == "net" else "client"))


def is_pinned(step: Any) -> bool:
    """The step is a pinned fault: it names a message, and its time is only a label."""
    kind = fault_of(step)
    return kind is not None and kind.pinned
