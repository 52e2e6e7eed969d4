"""The reference model assembled behind the seam: its options, and a fresh system per run.

This is the one place that decides where the model keeps its state, so the durability bugs
live here. It uses nothing of ``dst`` but the public seam, exactly as a user's model would.
"""

from __future__ import annotations

from typing import Any, Callable, Coroutine, Iterable

import attrs

from ..sut import Bounds, Env, Model, Order, OptionError, System, option
from .bugs import CATALOGUE, Bugs
from .client import lease_job
from .protocol import Write
from .resource import FencedResource
from .runs import DEADLINE_TICK, RunService, RunStore, Worker
from .service import RELEASE_REPEATED, LeaseService
from .store import Store

Handler = Coroutine[Any, Any, Any]


@attrs.frozen
class ReferenceOptions:
    """The reference model's keys in a scenario's ``[model]`` table."""

    ttl: int = option(60_000, "positive-duration",
                      help="lease time-to-live, from the server's receipt of an acquire or renew")
    reaper_interval: int = option(15_000, "positive-duration", help="how often the reaper revokes expired leases")
    renew_fraction: float = option(0.75, "fraction", help="holders renew at this fraction of the TTL")
    renew_attempts: int = option(3, "positive-count", help="tries per renewal before the holder stops work")
    retry_after: int = option(1_000, "positive-duration", help="the wait a denied acquire is told to take")
    acquire_wait: int = option(30_000, "duration",
                               help="how long the server holds a denied acquire open, waiting for a slot to be given "
                                    "back or a lease to run out (a long poll); 0: the client asks again after "
                                    "retry_after (polling)")
    resource_contract: str = option(
        "token", "choice", choices=("token", "token-and-lease"),
        help="'token': the resource accepts a write whose fencing token is at least the highest it accepted "
             "on that seat; 'token-and-lease': it also asks the authority that the writer's lease is valid")
    cancelling_timeout: int = option(300_000, "positive-duration",
                                     help="the server's deadline for a run in CANCELLING")
    sweep_interval: int = option(20_000, "positive-duration",
                                 help="how often the sweep looks for CANCELLING runs past their deadline")
    redelivery_timeout: int = option(300_000, "positive-duration",
                                     help="a claim idle this long is reclaimed by the next reader")
    heartbeat_interval: int = option(30_000, "positive-duration", help="how often a worker heartbeats its claim")
    poll_interval: int = option(5_000, "positive-duration", help="how long an idle worker waits before reading again")

    def __attrs_post_init__(self) -> None:
        if self.heartbeat_interval >= self.redelivery_timeout:
            raise OptionError("heartbeat_interval", f"less than redelivery_timeout ({self.redelivery_timeout}ms)")
        # A worker not yet told of a cancel is sure to have stopped only once its claim could have lapsed:
        # a shorter deadline cancels runs that are still being worked on.
        if self.cancelling_timeout < self.redelivery_timeout:
            raise OptionError("cancelling_timeout", f"at least redelivery_timeout ({self.redelivery_timeout}ms)")


class Server:
    """One server process running several services: each request goes to the service that handles its type."""

    def __init__(self, *services: Any) -> None:
        self.services = services
        self._loop_owner = {name: s for s in services for name, _ in s.loops()}

    def handlers(self) -> dict[type, Callable[[Any], Handler]]:
        return {kind: handler for service in self.services for kind, handler in service.handlers().items()}

    def loops(self) -> list[tuple[str, int]]:
        return [loop for service in self.services for loop in service.loops()]

    def tick(self, loop: str, now: int) -> Iterable[Handler]:
        ticked: Iterable[Handler] = self._loop_owner[loop].tick(loop, now)
        return ticked

    def crash(self) -> None:
        for service in self.services:
            service.crash()

    def boot(self) -> list[Handler]:
        return [handler for service in self.services for handler in service.boot()]


def build(env: Env[ReferenceOptions]) -> System:
    o, clock, bugs, limits = env.options, env.clock, Bugs(env.bugs), dict(env.limits)
    store = Store(limits, env.facts,
                  # wrong (volatile-leases): leases in process memory, counts durable (Prefect PR #20090)
                  durable_leases=not bugs.volatile_leases,
                  # wrong (volatile-fence-counter): the token counter, and the high-water mark kept
                  # beside it, reset on restart (docket's generation inside the hash it guards)
                  durable_fence=not bugs.volatile_fence_counter)
    leases = LeaseService(store, clock, limits=limits, ttl=o.ttl, retry_after=o.retry_after,
                          reaper_interval=o.reaper_interval, bugs=bugs, facts=env.facts)
    # The runs part runs only when the plan has runs: its deadline loop would cost events in every run.
    run_store = RunStore(env.facts) if env.workload.runs else None
    service = Server(leases) if run_store is None else Server(leases, RunService(run_store, clock, o, bugs))
    wl = env.workload
    lease_client = lease_job(env, ttl=o.ttl, renew_fraction=o.renew_fraction, renew_attempts=o.renew_attempts,
                             acquire_wait=o.acquire_wait, bugs=bugs)

    def job(name: str, incarnation: int, order: Order) -> Any:
        if order.action == "serve":
            consumer = f"{name}#{incarnation}"  # a new incarnation is a new consumer: it does not own the old one's entries
            return Worker(consumer, clock, o, shift_end=wl.active_until, write_time=wl.write_time,
                          retries=wl.retries).serve()
        return lease_client(name, incarnation, order)

    def lease_valid(req: Write) -> bool:
        lease = store.get_lease(req.lease)
        return lease is not None and lease.holder == req.holder and lease.expiry > clock.now

    return System(
        service=service, job=job, leases=store, runs=run_store,
        resource=FencedResource(env.facts, highest=store.highest, bugs=bugs,
                                valid=lease_valid if o.resource_contract == "token-and-lease" else None),
        bounds=Bounds(reclaim_within=o.ttl + o.reaper_interval,
                      transition_within=o.cancelling_timeout + o.sweep_interval + DEADLINE_TICK,
                      claim_timeout=o.redelivery_timeout,
                      redeliver_within=o.redelivery_timeout + o.poll_interval,
                      write_checks_lease=o.resource_contract == "token-and-lease",
                      renew_every=int(o.ttl * o.renew_fraction), heartbeat_every=o.heartbeat_interval),
    )


model: Model[ReferenceOptions] = Model(
    build, ReferenceOptions, CATALOGUE, scenarios="dst:scenarios",
    client_moments=("granted", "before-renew", "before-write", "before-release", "delivered", "before-beat", "before-ack"),
    server_moments=("checked", "reaping", "sweeping"),
    situations=(RELEASE_REPEATED,),
    description="the reference lease/slot service: limits, leases with a TTL, renewal, a reaper, fencing tokens, "
                "and server-owned deadlines for runs")
