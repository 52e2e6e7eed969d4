"""dst's findings on Prefect's global concurrency limits, as plain pytest tests against Prefect's own app: no dst,
no stand-in, Prefect's defaults (the in-memory lease storage, 300 s leases), the interleaving forced with ordinary
asyncio tools. Each asserts what should hold and is a strict xfail: it fails the way the finding says, and
turns into an unexpected pass (a failure under strict) the day Prefect's code no longer does.

    pip install -e ".[prefect]"
    pytest -p no:dst -p no:xdist -o addopts="" examples/prefect_reproductions

Run apart from dst's own suite: Prefect freezes its settings at import, and dst's examples set theirs first.
"""

from __future__ import annotations

import asyncio
from uuid import UUID

import httpx
import pytest

from conftest import both_read_before_either_goes_on, live_leases, restart_the_server_process

pytestmark = pytest.mark.anyio


async def limit(api: httpx.AsyncClient, name: str, size: int) -> None:
    (await api.post("/v2/concurrency_limits/", json={"name": name, "limit": size})).raise_for_status()


async def acquire(api: httpx.AsyncClient, name: str) -> UUID:
    response = await api.post("/v2/concurrency_limits/increment-with-lease",
                              json={"names": [name], "slots": 1, "mode": "concurrency", "lease_duration": 300})
    response.raise_for_status()
    return UUID(response.json()["lease_id"])


async def release(api: httpx.AsyncClient, lease_id: UUID) -> None:
    (await api.post("/v2/concurrency_limits/decrement-with-lease", json={"lease_id": str(lease_id)})).raise_for_status()


async def active_slots(api: httpx.AsyncClient, name: str) -> int:
    response = await api.get(f"/v2/concurrency_limits/{name}")
    response.raise_for_status()
    return int(response.json()["active_slots"])


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="findings 001 and 004: a restart loses the in-memory leases; the count keeps their slots")
async def test_a_server_restart_leaves_no_slot_counted_that_no_lease_holds(api: httpx.AsyncClient) -> None:
    await limit(api, "db", 1)
    lease_id = await acquire(api, "db")
    restart_the_server_process()  # while the holder works
    await release(api, lease_id)  # 204: decrement-with-lease finds no lease and returns
    assert await live_leases() == 0
    assert await active_slots(api, "db") == 0  # it stays 1: nobody is admitted to the limit again


async def two_holders_and_the_first_released_twice_at_once(api: httpx.AsyncClient) -> None:
    """A limit of 2 held by two leases; the first one's release and PrefectClient's retry of it (sent after its read
    timeout) handled at once, each holding at the lease storage's read_lease until both have read the lease: both
    then pass the read before either revokes (the order two requests handled at once can take)."""
    await limit(api, "db", 2)
    first, _ = await acquire(api, "db"), await acquire(api, "db")  # the second holder keeps its slot
    both_read_before_either_goes_on(first)
    await asyncio.gather(release(api, first), release(api, first))


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="finding 002: two releases of one lease at once both decrement (read, decrement, revoke)")
async def test_two_releases_of_one_lease_at_once_give_its_slot_back_once(api: httpx.AsyncClient) -> None:
    await two_holders_and_the_first_released_twice_at_once(api)
    assert await live_leases() == 1  # the second holder's
    assert await active_slots(api, "db") == 1  # it is 0: the first lease's slot was given back twice


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="finding 003: after 002's double release, a limit of 2 admits three holders")
async def test_a_limit_of_2_never_has_three_live_leases(api: httpx.AsyncClient) -> None:
    await two_holders_and_the_first_released_twice_at_once(api)
    for _ in range(2):
        try:
            await acquire(api, "db")
        except httpx.HTTPStatusError as e:
            if e.response.status_code != 423:  # 423: the limit is full, as it should be
                raise
    assert await live_leases() <= 2  # it is 3: the second holder's lease and both new ones
