"""The reference client: acquire, work while renewing, fenced writes, release.

A job is a generator of commands (see :mod:`dst.model.interface`). The client
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

from typing import Generator

import attrs

from .bugs import Bugs
from .interface import (CALL, RESOURCE, SLEEP, WORK, call, Acquire, Denied, Done, Evict, Exit, Granted, Occupant, Owner,
                        Release, Renew, Renewed, Write)
from .service import Clock

Job = Generator[tuple, object, str]


@attrs.frozen
class ClientConfig:
    ttl: int
    renew_fraction: float
    renew_attempts: int
    retries: int
    acquire_patience: int
    write_time: int


class LeaseClient:
    def __init__(self, name: str, clock: Clock, config: ClientConfig, bugs: Bugs) -> None:
        self.name = name
        self.clock = clock
        self.config = config
        self.bugs = bugs

    def job(self, limit: str, slots: int, work: int, writes: int) -> Job:
        """One job; returns how it ended (shown in the trace)."""
        clock, cfg = self.clock, self.config
        give_up = clock.now + cfg.acquire_patience
        while True:
            response, sent = yield from call(self.clock, Acquire(limit, slots, self.name), cfg.retries + 1)
            if isinstance(response, Granted):
                break
            if clock.now >= give_up:
                # The run leaves its active state without ever holding a slot, and says so.
                yield from call(self.clock, Exit(limit, slots, self.name), cfg.retries + 1)
                return "gave up acquiring"
            yield (SLEEP, response.retry_after if isinstance(response, Denied) else 1_000)
        lease, token, seat = response.lease, response.token, response.seat
        renew_every = int(cfg.ttl * cfg.renew_fraction)
        deadline, renew_at = sent + cfg.ttl, sent + renew_every

        outcome = "done"
        chunks = _split(work, max(writes, 1))
        for chunk in chunks:
            left = chunk
            while left > 0:
                if clock.now >= renew_at:
                    # Renewal is the authority's word on the lease, so a holder that wakes late asks it first.
                    response, sent = yield from call(self.clock, Renew(lease, self.name), cfg.renew_attempts)
                    if isinstance(response, Renewed):
                        deadline, renew_at = sent + cfg.ttl, sent + renew_every
                        continue  # a reply that came back late may already be due again
                    if self.bugs.continue_after_lost_renewal:
                        # wrong: keep working after renewal failed (Prefect concurrency/_leases.py:
                        # "Execution will continue, but concurrency limits may be exceeded")
                        deadline = renew_at = _NEVER
                    else:
                        outcome = "renewal failed"
                        break
                if clock.now >= deadline:
                    # Woke from a pause (or a slow renewal) past the local deadline: the lease may be gone.
                    outcome = "lease lost"
                    break
                piece = min(left, renew_at - clock.now)
                not_done = yield (WORK, lease, piece)
                left -= piece - not_done  # type: ignore[operator]
            if left > 0:
                break
            if writes:
                if clock.now >= deadline:
                    outcome = "lease lost"
                    break
                # Producing the write takes time after the check: a pause here sends it late, and
                # only the resource's fencing can stop it (Kleppmann's GC-pause timeline; seed 004).
                yield (SLEEP, cfg.write_time)
                response = yield (CALL, RESOURCE, Write(token, lease, self.name, limit, seat))
                if not isinstance(response, Done):
                    outcome = "write not accepted"
                    break
        yield from self._release(lease, limit, slots, seat)
        return outcome

    def _release(self, lease: int, limit: str, slots: int, seat: int) -> Generator[tuple, object, None]:
        attempts = self.config.retries + 1
        if self.bugs.unchecked_release:
            # wrong: compare the owner, then delete by key, as two requests: a successor's lease can
            # take the seat in between (seed 004; docket keys slots by task; redis-py does it in Lua)
            response, _ = yield from call(self.clock, Owner(limit, seat), attempts)
            if isinstance(response, Occupant) and response.lease == lease:
                yield from call(self.clock, Evict(limit, seat, lease), attempts)
            return
        yield from call(self.clock, Release(lease, self.name, limit, slots), attempts)


_NEVER = 1 << 62


def _split(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` near-equal integer pieces, larger ones first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]
