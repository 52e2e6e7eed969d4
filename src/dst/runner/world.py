"""The world a run's processes live in, and what its faults act on: the clock, the streams, the trace, the network,
the store's round trips, the ghost and the facts' way to it, and the people outside the system.

It knows no mode. A mode (:mod:`dst.runner.modes`) makes the processes of a built system in it (:meth:`World.add`),
and the fault registry acts on the world as :class:`~dst.sim.process.Processes`: the same record for every mode.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Mapping

from ..invariants import Ghost
from ..invariants.ghost import FactsGate
from ..scenario import Scenario
from ..sim.facts import TracedFacts
from ..sim.hosts import ResourceHost, UserHost
from ..sim.kernel import Kernel
from ..sim.network import Network
from ..sim.process import ClientProcess, Running, ServerProcess
from ..sim.rng import Streams
from ..sim.schedule import strategy
from ..sim.store import RoundTrips
from ..sim.trace import Event
from ..sut import RESOURCE, SERVER, Resource


class World:
    """One run's world. ``checkpoint`` is the kernel's (an event budget, a deadline), first called at ``first``."""

    clients: Mapping[str, ClientProcess]
    server: ServerProcess

    def __init__(self, scenario: Scenario, streams: Streams, checkpoint: Callable[[int], int], first: int) -> None:
        self.streams = streams
        self.kernel = kernel = Kernel(checkpoint, first)
        self.trace: list[Event] = []
        self.running = Running()  # who runs now: what a violation, an error or a stall is blamed on
        self.ghost = ghost = Ghost(kernel, dict(scenario.model.limits))
        self.facts = FactsGate(ghost)  # the harness's side of env.facts (a mode may hold it: see FactsGate)
        self.traced = TracedFacts(self.facts, kernel, self.trace)  # env.facts: the store's changes traced too
        net, m = scenario.network, scenario.model
        self.network = Network(kernel, streams.keyed("network"), latency=net.latency, loss=net.loss,
                               duplicate=net.duplicate, delay=net.delay, delay_by=net.delay_by, trace=self.trace,
                               server=SERVER, reset=net.reset, proxy_retry=net.proxy_retry,
                               proxy_timeout=net.proxy_timeout)
        # One scheduling strategy for the run: the store's round trips and the asyncio mode's ready callbacks.
        self.strategy = strategy(scenario.run.scheduler, streams.keyed("scheduling"),
                                 streams.keyed("scheduling", "ready"))
        self.trips = RoundTrips(kernel, streams.keyed("scheduling"), self.trace, latency=m.store_latency,
                                strategy=self.strategy, slow=m.store_slow, slow_by=m.store_slow_by,
                                reset=m.store_reset)
        wl = scenario.workload
        self.user = UserHost(kernel, self.network, self.trace, request_timeout=wl.request_timeout, retries=wl.retries)
        self.faults: Counter[str] = Counter()  # how many of each fault kind the run applied
        # What the model logged through the logging module (the sandbox keeps it off the terminal): (time, the
        # process, how many trace events came before it, the line). Apart from the trace, so no digest moves.
        self.logs: list[tuple[int, str, int, str]] = []
        # What else draws from the seed and must draw afresh when the run branches (a mode's caches of draws, the
        # sandbox's random): called with the branch's draw.
        self.on_branch: list[Callable[[int], None]] = []
        # What a run that goes on in a process forked in its middle must set again (asyncio's running loop).
        self.on_fork: list[Callable[[], None]] = []

    def branch(self, draw: int) -> None:
        """The run branches here: every draw from now on is branch ``draw``'s (:class:`~dst.plan.Branch`)."""
        self.streams.branch(draw)
        for hook in self.on_branch:
            hook(draw)
        self.trace.append((self.kernel.now, "world", "branch",
                           f"draw {draw}: every draw from here on (latencies, losses, orders, the service's random) "
                           f"is this branch's"))

    def logged(self, actor: str, text: str) -> None:
        self.logs.append((self.kernel.now, actor, len(self.trace), text))

    def add(self, server: ServerProcess, clients: Mapping[str, ClientProcess], resource: Resource | None) -> None:
        """The processes a mode made, on the network: the server, the clients, the resource and the people outside."""
        self.server, self.clients = server, clients
        network = self.network
        network.attach(SERVER, server.receive)
        if resource is not None:
            network.attach(RESOURCE, ResourceHost(self.kernel, resource, network, self.trace, self.ghost,
                                                  self.running).receive)
        network.attach("user", self.user.receive)
        for name, host in clients.items():
            network.attach(name, host.receive)

    def busy(self) -> list[str]:
        """Who keeps the run from draining: clients with a job, queued jobs or a pause, and a busy server."""
        busy = [name for name, c in self.clients.items() if not c.idle]
        return busy + ([] if self.server.idle else ["the server"])

    def clear(self) -> None:
        """The run is over: the hosts, network and kernel reference one another, so only the cycle collector could
        free them; emptying the big containers returns their memory at once (flat memory over a campaign)."""
        self.trace.clear()
        self.kernel._queue.clear()
