"""The reference model assembled: store, service, resource and clients, with the bugs switched on.

This is the one place that decides where the model keeps its state, so the
durability bug lives here.
"""

from __future__ import annotations

from typing import Any, Generator

from .bugs import Bugs
from .client import ClientConfig, LeaseClient
from .interface import Observer
from .resource import FencedResource
from .service import Clock, LeaseService
from .store import Store


class ReferenceModel:
    """``model`` and ``workload`` are the scenario's ModelConfig and WorkloadConfig."""

    def __init__(self, model: Any, workload: Any, bugs: Bugs, observer: Observer, clock: Clock) -> None:
        limits = dict(model.limits)
        self.store = Store(limits, observer,
                           # wrong (volatile-leases): leases in process memory, counts durable (Prefect PR #20090)
                           durable_leases=not bugs.volatile_leases,
                           # wrong (volatile-fence-counter): the token counter, and the high-water mark kept
                           # beside it, reset on restart (docket's generation inside the hash it guards)
                           durable_fence=not bugs.volatile_fence_counter)
        self.service = LeaseService(self.store, clock, limits=limits, ttl=model.ttl, retry_after=model.retry_after,
                                    bugs=bugs)
        self.resource = FencedResource(self.store, clock, observer,
                                       check_lease=model.resource_contract == "token-and-lease", bugs=bugs)
        self._client_config = ClientConfig(ttl=model.ttl, renew_fraction=model.renew_fraction,
                                           renew_attempts=model.renew_attempts, retries=workload.retries,
                                           acquire_patience=workload.acquire_patience,
                                           write_time=workload.write_time)
        self._workload = workload
        self._clock = clock
        self._bugs = bugs

    def job(self, client: str, step: Any) -> Generator:
        """The job a plan step asks of a client."""
        wl = self._workload
        return LeaseClient(client, self._clock, self._client_config, self._bugs).job(
            step.arg("limit", wl.limit), step.arg("slots", wl.slots), step.arg("work", wl.work[0]),
            step.arg("writes", wl.writes[0]))
