"""The reference client: acquire, work while renewing, fenced writes, release.

A job is a coroutine that awaits the seam's ``call``, ``sleep`` and ``work``. The client
keeps a *local deadline*: the send time of the request that last granted or
renewed its lease, plus the TTL. The server's expiry is never earlier (the server
stamps it on receipt), so a client that stops at its local deadline never works
on a lease the authority no longer recognises. It renews at ``renew_fraction`` of
the TTL with ``renew_attempts`` tries, and stops work when renewal fails before
its local deadline (Prefect's flow engine: "Terminating execution to prevent
over-allocation"). Requests that time out are retried, which is where duplicate
releases come from.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..sut import RESOURCE, SERVER, Clock, Env, Job, Order, call, moment, sleep, work
from .bugs import Bugs
from .protocol import Acquire, Denied, Done, Evict, Exit, Granted, Occupant, Owner, Release, Renew, Renewed, Write


async def ask(clock: Clock, request: Any, attempts: int, destination: str = SERVER, wait: int = 0) -> tuple[Any, int]:
    """A request with retries on timeout: the response (None when every try timed out), and the send
    time of the try that was answered (a holder's local deadline counts from it). ``wait``: how long the
    server may hold it open (a long poll)."""
    sent = clock.now
    for _ in range(attempts):
        sent = clock.now
        response = await call(destination, request, wait=wait)
        if response is not None:
            return response, sent
    return None, sent


@attrs.frozen
class ClientConfig:
    ttl: int
    renew_fraction: float
    renew_attempts: int
    retries: int
    acquire_patience: int
    write_time: int
    acquire_wait: int = 0  # a denied acquire: how long the server may hold it open (0: ask again after retry_after)


def lease_job(env: Env[Any], *, ttl: int, renew_fraction: float = 0.75, renew_attempts: int = 3,
              acquire_wait: int = 0, bugs: Bugs | None = None) -> Job:
    """The reference client program as a model's ``job``: for a service that speaks the reference
    protocol (:mod:`dst.reference.protocol`), with leases of ``ttl`` ms. With ``acquire_wait``, an acquire
    asks the server to hold it open that long for a slot to free (a long poll), instead of polling."""
    wl, clock, flags = env.workload, env.clock, bugs or Bugs()
    config = ClientConfig(ttl=ttl, renew_fraction=renew_fraction, renew_attempts=renew_attempts, retries=wl.retries,
                          acquire_patience=wl.acquire_patience, write_time=wl.write_time, acquire_wait=acquire_wait)

    def job(client: str, incarnation: int, order: Order) -> Any:
        if order.action != "acquire":
            raise ValueError(f"the lease client runs acquire jobs, not {order.action!r}")
        return LeaseClient(client, clock, config, flags, order.wall_clock).job(
            order.arg("limit"), order.arg("slots"), order.arg("work"), order.arg("writes"))

    return job


class LeaseClient:
    def __init__(self, name: str, clock: Clock, config: ClientConfig, bugs: Bugs | None = None,
                 wall_clock: Clock | None = None) -> None:
        self.name = name
        self.clock = clock
        self.config = config
        self.bugs = bugs or Bugs()
        self.wall_clock = wall_clock or clock

    def _timing(self, sent: int, expiry: int) -> tuple[Clock, int, int]:
        """The clock the holder times its lease on, and its deadline and renewal point on that clock."""
        cfg = self.config
        renew_every = int(cfg.ttl * cfg.renew_fraction)
        if self.bugs.trusts_client_clock:
            # wrong: judge the lease by the server's expiry against the client's own wall clock: a clock set
            # back extends the hold as the holder sees it (a client cannot extend a hold by changing its clock)
            return self.wall_clock, expiry, expiry - cfg.ttl + renew_every
        # The local deadline counts from the send on the monotonic clock: the server's expiry is never earlier.
        return self.clock, sent + cfg.ttl, sent + renew_every

    async def job(self, limit: str, slots: int, work_ms: int, writes: int) -> str:
        """One job; returns how it ended (shown in the trace)."""
        clock, cfg = self.clock, self.config
        give_up = clock.now + cfg.acquire_patience
        while True:
            wait = min(cfg.acquire_wait, max(give_up - clock.now, 0))
            response, sent = await ask(clock, Acquire(limit, slots, self.name, wait), cfg.retries + 1, wait=wait)
            if isinstance(response, Granted):
                break
            if clock.now >= give_up:
                # The run leaves its active state without ever holding a slot, and says so.
                await ask(clock, Exit(limit, slots, self.name), cfg.retries + 1)
                return "gave up acquiring"
            if not (wait and isinstance(response, Denied) and clock.now >= sent + wait):
                # Polling, or no answer, or a server that did not hold it open: wait before asking again.
                await sleep(response.retry_after if isinstance(response, Denied) else 1_000)
        lease, token, seat = response.lease, response.token, response.seat
        await moment("granted")
        timer, deadline, renew_at = self._timing(sent, response.expiry)

        outcome = "done"
        chunks = _split(work_ms, max(writes, 1))
        for chunk in chunks:
            left = chunk
            while left > 0:
                if timer.now >= renew_at:
                    # Renewal is the authority's word on the lease, so a holder that wakes late asks it first.
                    await moment("before-renew")
                    response, sent = await ask(clock, Renew(lease, self.name), cfg.renew_attempts)
                    if isinstance(response, Renewed):
                        timer, deadline, renew_at = self._timing(sent, response.expiry)
                        continue  # a reply that came back late may already be due again
                    if self.bugs.continue_after_lost_renewal:
                        # wrong: keep working after renewal failed (Prefect concurrency/_leases.py:
                        # "Execution will continue, but concurrency limits may be exceeded")
                        deadline = renew_at = _NEVER
                    else:
                        outcome = "renewal failed"
                        break
                if timer.now >= deadline:
                    # Woke from a pause (or a slow renewal) past the local deadline: the lease may be gone.
                    outcome = "lease lost"
                    break
                piece = min(left, renew_at - timer.now)
                left -= piece - await work(lease, piece)
            if left > 0:
                break
            if writes:
                if timer.now >= deadline:
                    outcome = "lease lost"
                    break
                # Producing the write takes time after the check: a pause here sends it late, and
                # only the resource's fencing can stop it (Kleppmann's GC-pause timeline).
                await sleep(cfg.write_time)
                await moment("before-write")
                response = await call(RESOURCE, Write(token, lease, self.name, limit, seat))
                if not isinstance(response, Done):
                    outcome = "write not accepted"
                    break
        await moment("before-release")
        await self._release(lease, limit, slots, seat)
        return outcome

    async def _release(self, lease: int, limit: str, slots: int, seat: int) -> None:
        attempts = self.config.retries + 1
        if self.bugs.unchecked_release:
            # wrong: compare the owner, then delete by key, as two requests: a successor's lease can
            # take the seat in between (docket keys slots by task; redis-py does it in Lua)
            response, _ = await ask(self.clock, Owner(limit, seat), attempts)
            if isinstance(response, Occupant) and response.lease == lease:
                await ask(self.clock, Evict(limit, seat, lease), attempts)
            return
        await ask(self.clock, Release(lease, self.name, limit, slots), attempts)


_NEVER = 1 << 62


def _split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` near-equal integer pieces, larger ones first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]
