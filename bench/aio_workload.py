"""A lease service and its clients in plain asyncio, for ``bench/aio.py``: ``await main(seed)``.

Nothing here imports ``dst`` or any simulation library: it is the code an asyncio developer would
write, and each deterministic loop under test runs it unchanged. A few resources have a fixed
number of slots; a client takes a lease on a slot (retrying after a pause when every slot is
taken), renews it under ``asyncio.wait_for`` while it works, and releases it. Leases carry a TTL: a
reaper task, on ``asyncio.sleep``, frees the slots of the leases nobody renewed in time. Every
read-modify-write of a slot count happens under one ``asyncio.Lock``, around a simulated storage
round trip (an ``asyncio.sleep``), so the lock is what keeps the count right.

The structure (clients, rounds, resources, slots) does not depend on the seed; ``random.Random(seed)``
only draws the jitter: storage latency, work time, retry pauses. Durations are virtual seconds
between 0.001 and 0.45: under the real ``asyncio.run`` one seed of the default size takes about
17 seconds of wall clock (16 of them virtual: the clients finish at t = 16 s), under a virtual-time
loop 50 to 200 milliseconds of CPU.

``main`` returns a checksum of the order in which the service granted, denied, renewed, expired and
released leases: the same seed on the same loop must return the same number. It raises
``AssertionError`` if a slot count ever disagrees with the leases held or exceeds its capacity.
"""

from __future__ import annotations

import asyncio
import random
from contextlib import suppress

RESOURCES = ("db", "cache", "queue")
SLOTS = 3  # per resource: 9 slots for the default 20 clients
TTL = 0.3  # seconds a lease lives without a renewal
REAP_EVERY = 0.05
RENEW_TIMEOUT = 0.05  # a renewal slower than this (a slow store, a long queue at the lock) times out
WORK_STEPS = 2  # work, renew; work, renew
MASK = (1 << 61) - 1
KINDS = {"grant": 1, "deny": 2, "renew": 3, "late": 4, "expire": 5, "release": 6}
REAPER = 63  # the reaper's number in the checksum (clients are 0 ...)


class LeaseService:
    """Slots per resource, leases with a TTL, one lock around every change of the counts."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lock = asyncio.Lock()
        self.used = {name: 0 for name in RESOURCES}
        self.leases: dict[int, tuple[str, float]] = {}  # lease id -> (resource, expiry)
        self.next_id = 0
        self.checksum = 0
        self.counts = dict.fromkeys(KINDS, 0)

    def note(self, kind: str, client: int) -> None:
        self.counts[kind] += 1
        self.checksum = (self.checksum * 1_000_003 + KINDS[kind] * 64 + client % 64) & MASK

    async def storage(self) -> None:
        """A round trip to the store that keeps the counts: 1 to 8 ms, one in twenty 20 to 60 ms."""
        slow = self.rng.random() < 0.05
        await asyncio.sleep(self.rng.uniform(0.02, 0.06) if slow else self.rng.uniform(0.001, 0.008))

    def check(self, resource: str) -> None:
        held = sum(1 for name, _ in self.leases.values() if name == resource)
        assert self.used[resource] == held, f"{resource}: count {self.used[resource]}, leases {held}"
        assert 0 <= held <= SLOTS, f"{resource}: {held} leases for {SLOTS} slots"

    async def acquire(self, client: int, resource: str) -> int | None:
        async with self.lock:
            count = self.used[resource]
            await self.storage()
            if count >= SLOTS:
                self.note("deny", client)
                return None
            self.used[resource] = count + 1
            self.next_id += 1
            self.leases[self.next_id] = (resource, asyncio.get_running_loop().time() + TTL)
            self.note("grant", client)
            self.check(resource)
            return self.next_id

    async def renew(self, client: int, lease: int) -> bool:
        async with self.lock:
            await self.storage()
            if lease not in self.leases:
                return False
            resource, _ = self.leases[lease]
            self.leases[lease] = (resource, asyncio.get_running_loop().time() + TTL)
            self.note("renew", client)
            return True

    async def release(self, client: int, lease: int) -> None:
        async with self.lock:
            if lease not in self.leases:
                return  # the reaper took it first
            resource, _ = self.leases[lease]
            count = self.used[resource]
            await self.storage()
            del self.leases[lease]
            self.used[resource] = count - 1
            self.note("release", client)
            self.check(resource)

    async def reaper(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(REAP_EVERY)
            async with self.lock:
                now = loop.time()
                for lease, (resource, expiry) in list(self.leases.items()):
                    if expiry <= now:
                        del self.leases[lease]
                        self.used[resource] -= 1
                        self.note("expire", REAPER)
                        self.check(resource)


async def client(service: LeaseService, me: int, rounds: int, rng: random.Random) -> None:
    for r in range(rounds):
        resource = RESOURCES[(me + r) % len(RESOURCES)]
        while (lease := await service.acquire(me, resource)) is None:
            await asyncio.sleep(rng.uniform(0.05, 0.15))
        for _ in range(WORK_STEPS):
            await asyncio.sleep(rng.uniform(0.005, 0.2 if rng.random() < 0.9 else 0.45))
            try:
                if not await asyncio.wait_for(service.renew(me, lease), timeout=RENEW_TIMEOUT):
                    break  # expired and reaped: the work is lost, nothing to release
            except TimeoutError:
                service.note("late", me)
        else:
            await service.release(me, lease)


async def main(seed: int, clients: int = 20, rounds: int = 20) -> int:
    """Run ``clients`` clients of ``rounds`` leases each to the end; the service's checksum."""
    rng = random.Random(seed)
    service = LeaseService(rng)
    reaper = asyncio.create_task(service.reaper())
    await asyncio.gather(*(client(service, me, rounds, rng) for me in range(clients)))
    reaper.cancel()
    with suppress(asyncio.CancelledError):
        await reaper
    assert not service.leases and not any(service.used.values()), (service.leases, service.used)
    assert service.counts["grant"] == clients * rounds, service.counts
    return service.checksum
