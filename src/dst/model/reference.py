"""The reference model assembled: store, service, resource and clients, with the bugs switched on.

This is the one place that decides where the model keeps its state, so the
durability bug lives here.
"""

from __future__ import annotations

from typing import Any, Generator

from .bugs import Bugs
from .client import ClientConfig, LeaseClient
from .interface import Handler, Observer
from .resource import FencedResource
from .runs import RunObserver, RunService, RunStore, Worker
from .service import Clock, LeaseService
from .store import Store


class Server:
    """One server process running several services: requests go to the service that handles their type."""

    def __init__(self, *services: Any) -> None:
        self.services = services
        # Request type -> the bound handler that serves it: one lookup per request.
        self.routes = {kind: handler.__get__(service) for service in services
                       for kind, handler in service._handlers.items()}

    def handle(self, request: Any) -> Handler:
        return self.routes[type(request)](request)

    def loops(self) -> list[tuple[str, int]]:
        return [(f"{i}:{name}", interval) for i, s in enumerate(self.services) for name, interval in s.loops()]

    def background(self, loop: str, now: int) -> list[tuple[int, Handler]]:
        index, name = loop.split(":", 1)
        return self.services[int(index)].background(name, now)

    def crash(self) -> None:
        for service in self.services:
            service.crash()

    def boot(self) -> list[tuple[int, Handler]]:
        return [handler for service in self.services for handler in service.boot()]


class ReferenceModel:
    """``model`` and ``workload`` are the scenario's ModelConfig and WorkloadConfig."""

    def __init__(self, model: Any, workload: Any, runs: Any, bugs: Bugs, observer: Observer, clock: Clock, *,
                 run_observer: RunObserver | None = None, shift_end: int = 0) -> None:
        limits = dict(model.limits)
        self.store = Store(limits, observer,
                           # wrong (volatile-leases): leases in process memory, counts durable (Prefect PR #20090)
                           durable_leases=not bugs.volatile_leases,
                           # wrong (volatile-fence-counter): the token counter, and the high-water mark kept
                           # beside it, reset on restart (docket's generation inside the hash it guards)
                           durable_fence=not bugs.volatile_fence_counter)
        leases = LeaseService(self.store, clock, limits=limits, ttl=model.ttl, retry_after=model.retry_after,
                              reaper_interval=model.reaper_interval, bugs=bugs)
        self.run_store = RunStore(run_observer) if run_observer is not None else None
        self.service = Server(leases) if self.run_store is None else Server(
            leases, RunService(self.run_store, clock, runs, bugs))
        self.resource = FencedResource(self.store, clock, observer,
                                       check_lease=model.resource_contract == "token-and-lease", bugs=bugs)
        self._client_config = ClientConfig(ttl=model.ttl, renew_fraction=model.renew_fraction,
                                           renew_attempts=model.renew_attempts, retries=workload.retries,
                                           acquire_patience=workload.acquire_patience,
                                           write_time=workload.write_time)
        self._workload = workload
        self._runs = runs
        self._clock = clock
        self._bugs = bugs
        self._shift_end = shift_end

    def job(self, client: str, incarnation: int, step: Any) -> Generator[Any, Any, Any]:
        """The job a plan step asks of a client."""
        wl = self._workload
        if step.action == "serve":
            consumer = f"{client}#{incarnation}"  # a new incarnation is a new consumer: it does not own the old one's entries
            return Worker(consumer, self._clock, self._runs, shift_end=self._shift_end, write_time=wl.write_time,
                          retries=wl.retries).serve()
        return LeaseClient(client, self._clock, self._client_config, self._bugs).job(
            step.arg("limit", wl.limit), step.arg("slots", wl.slots), step.arg("work", wl.work[0]),
            step.arg("writes", wl.writes[0]))
