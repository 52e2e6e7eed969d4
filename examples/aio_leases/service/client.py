"""The service's client library: acquire with retries, a lease renewed in the background, release.

A holder keeps a local deadline: the time it sent the request that last granted or renewed its lease,
plus the TTL (on the monotonic clock). The server stamps the expiry on receipt, never earlier, so a
holder that stops at its local deadline never works on a lease the server no longer recognises.
Renewal runs in a task of its own at half the TTL; when it fails, the lease is marked lost and the
holder must stop working.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Lease:
    id: int
    limit: str
    slots: int
    token: int
    ttl: float
    deadline: float  # loop time after which the lease may be gone
    lost: asyncio.Event = field(default_factory=asyncio.Event)

    def valid(self) -> bool:
        return not self.lost.is_set() and asyncio.get_running_loop().time() < self.deadline


class LeaseClient:
    def __init__(self, http: httpx.AsyncClient, holder: str, *, ttl: float = 60.0, timeout: float = 2.0,
                 retries: int = 2, bugs: frozenset[str] = frozenset()) -> None:
        self.http = http
        self.holder = holder
        self.ttl = ttl
        self.timeout = timeout
        self.retries = retries
        self.bugs = bugs

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response | None:
        """A request with retries on a timeout or a broken connection (a retried release is a duplicate release: its
        first try may have run); None if every try failed so."""
        for _ in range(self.retries + 1):
            try:
                return await asyncio.wait_for(self.http.post(path, json=body), timeout=self.timeout)
            except (asyncio.TimeoutError, httpx.TransportError):
                continue
        return None

    async def acquire(self, limit: str, slots: int = 1, patience: float = 30.0) -> Lease | None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + patience
        while True:
            sent = loop.time()
            response = await self._post(f"/limits/{limit}/leases", {"holder": self.holder, "slots": slots})
            if response is not None and response.status_code == 200:
                granted = response.json()
                return Lease(granted["id"], limit, slots, granted["token"], self.ttl, sent + self.ttl)
            if loop.time() >= give_up:
                return None
            wait = response.json()["retry_after"] if response is not None and response.status_code == 423 else 1.0
            await asyncio.sleep(wait)

    async def renew(self, lease: Lease) -> bool:
        sent = asyncio.get_running_loop().time()
        response = await self._post(f"/leases/{lease.id}/renew", {"holder": self.holder})
        if response is not None and response.status_code == 200:
            lease.deadline = sent + self.ttl
            return True
        return False

    async def still_held(self, lease: Lease) -> bool:
        """Whether the holder may go on working: yes before its local deadline; past it (a long pause, a slow
        renewal) the server's word decides, so a holder that wakes late renews before it gives up."""
        if lease.lost.is_set():
            return False
        if lease.valid():
            return True
        # Asked again after the answer: a holder paused between the server's answer and reading it wakes past
        # the deadline that answer set, and its lease may be gone by then.
        return await self.renew(lease) and lease.valid()

    async def keep_renewing(self, lease: Lease) -> None:
        """Renew at half the TTL until cancelled; on a failed renewal, mark the lease lost and stop."""
        while True:
            await asyncio.sleep(lease.ttl / 2)
            if not await self.renew(lease):
                if "ignore-lost-renewal" in self.bugs:
                    # bug: a failed renewal is logged and ignored, and the lease trusted on (Prefect: "Execution
                    # will continue, but concurrency limits may be exceeded")
                    lease.deadline = float("inf")
                    continue
                lease.lost.set()
                return

    async def release(self, lease: Lease) -> bool:
        response = await self._post(f"/leases/{lease.id}/release",
                                    {"holder": self.holder, "limit": lease.limit, "slots": lease.slots})
        return response is not None and response.status_code == 200
