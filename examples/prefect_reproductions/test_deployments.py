"""dst's findings on Prefect's deployment concurrency (``docs/prefect-deployments.md``), as plain pytest tests against
Prefect's own app, in the manner of ``test_limits.py``: a deployment with a concurrency limit made through the REST
API, its runs moved through ``POST /flow_runs/{id}/set_state`` as a worker and the engine move them, the
repossessor's revoke step called as its docket task calls it, the interleavings forced with ordinary asyncio tools.

A lease is made expired without waiting by renewing it into the past through Prefect's lease storage
(``renew_lease`` with a negative ttl: the in-memory storage sets the expiry to now plus the ttl); the repossessor's
scan (``read_expired_lease_ids``) then finds it, as it would a lease whose holder has been quiet for its length.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
import pytest
from prefect.server.concurrency.lease_storage import get_concurrency_lease_storage
from prefect.server.database import provide_database_interface
from prefect.server.services.repossessor import revoke_expired_lease

from conftest import both_read_before_either_goes_on, live_leases, restart_the_server_process

pytestmark = pytest.mark.anyio


async def deployment(api: httpx.AsyncClient, limit: int) -> UUID:
    """A deployment whose concurrency limit enqueues the runs it cannot admit (Prefect's default strategy); its
    grace period is Prefect's default."""
    flow = (await api.post("/flows/", json={"name": "flow"})).raise_for_status().json()
    response = await api.post("/deployments/", json={
        "name": "deployment", "flow_id": flow["id"], "concurrency_limit": limit,
        "concurrency_options": {"collision_strategy": "ENQUEUE"}})
    return UUID(response.raise_for_status().json()["id"])


async def flow_run(api: httpx.AsyncClient, deployment_id: UUID) -> UUID:
    response = await api.post(f"/deployments/{deployment_id}/create_flow_run", json={})
    return UUID(response.raise_for_status().json()["id"])


async def propose(api: httpx.AsyncClient, run: UUID, state: str) -> str:
    """The state a worker or the engine proposes; the type of the state the server answers with."""
    response = await api.post(f"/flow_runs/{run}/set_state", json={"state": {"type": state}})
    return str(response.raise_for_status().json()["state"]["type"])


async def lease(api: httpx.AsyncClient, run: UUID) -> UUID:
    response = await api.get(f"/flow_runs/{run}")
    return UUID(response.raise_for_status().json()["state"]["state_details"]["deployment_concurrency_lease_id"])


async def active_slots(api: httpx.AsyncClient, deployment_id: UUID) -> int:
    response = await api.get(f"/deployments/{deployment_id}")
    return int(response.raise_for_status().json()["global_concurrency_limit"]["active_slots"])


async def expire(lease_id: UUID) -> None:
    assert await get_concurrency_lease_storage().renew_lease(lease_id, ttl=timedelta(seconds=-1))


async def reap(lease_id: UUID) -> None:
    """What the repossessor does with an expired lease: its scan finds it, its docket task revokes it (docket resolves
    the task's dependencies to these two)."""
    storage = get_concurrency_lease_storage()
    assert lease_id in await storage.read_expired_lease_ids()
    await revoke_expired_lease(lease_id, db=provide_database_interface(), lease_storage=storage)


async def running(api: httpx.AsyncClient, deployment_id: UUID) -> tuple[UUID, UUID]:
    """A run of the deployment taken to PENDING (its slot and lease taken) and RUNNING; the run and its lease."""
    run = await flow_run(api, deployment_id)
    assert await propose(api, run, "PENDING") == "PENDING"
    assert await propose(api, run, "RUNNING") == "RUNNING"
    return run, await lease(api, run)


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="finding 001: a deleted run's lease, reaped after its expiry, gives back the slot of the "
                          "run that took its place")
async def test_the_reap_of_a_deleted_runs_lease_keeps_the_slot_of_the_run_that_replaced_it(
        api: httpx.AsyncClient) -> None:
    deploy = await deployment(api, limit=1)
    a, a_lease = await running(api, deploy)
    (await api.delete(f"/flow_runs/{a}")).raise_for_status()  # gives A's slot back; its lease stays stored
    await running(api, deploy)  # B: takes the free slot
    await expire(a_lease)  # nobody renews A's lease after its engine's next call is answered 404
    await reap(a_lease)
    assert await active_slots(api, deploy) == 1  # it is 0 while B runs: the reap gave back B's slot


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="finding 002: a PENDING lease reaped, its run's RUNNING rejected into CANCELLED; the release's "
                          "fallback (lease not found: decrement by the deployment's limit) gives back another run's slot")
async def test_the_rejection_of_a_run_whose_pending_lease_was_reaped_keeps_the_other_runs_slot(
        api: httpx.AsyncClient) -> None:
    deploy = await deployment(api, limit=1)
    a = await flow_run(api, deploy)
    assert await propose(api, a, "PENDING") == "PENDING"
    a_lease = await lease(api, a)
    await expire(a_lease)  # A's infrastructure takes longer than the grace period to start its engine
    await reap(a_lease)
    b = await flow_run(api, deploy)
    assert await propose(api, b, "PENDING") == "PENDING"  # takes the slot A's reap gave back
    # A's engine: its lease cannot be renewed, the limit is full, ValidateDeploymentConcurrencyAtRunning rejects it
    assert await propose(api, a, "RUNNING") == "CANCELLED"
    assert await active_slots(api, deploy) == 1  # it is 0 while B holds its slot: the fallback gave B's back


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="finding 003: a renewal answered between the revoke's read of an expired lease and its "
                          "removal is undone")
async def test_a_lease_renewed_and_answered_204_is_not_removed_by_a_reap_that_read_it_before(
        api: httpx.AsyncClient) -> None:
    """The order forced: the revoke reads A's expired lease, finds it still expired (3.9.1's recheck) and decrements;
    A's engine renews the lease and is answered 204 while the revoke's transaction is open; then the revoke removes
    it. The revoke waits in its ``revoke_lease``, past the recheck: the in-memory storage hands out the lease object
    itself, so a renewal before the recheck would be seen by it."""
    deploy = await deployment(api, limit=1)
    a, a_lease = await running(api, deploy)
    await expire(a_lease)  # A's engine out of touch for its lease's length
    storage = get_concurrency_lease_storage()
    revoke, revoking, renewed = storage.revoke_lease, asyncio.Event(), asyncio.Event()

    async def revoke_lease(lease_id: UUID, *args: Any, **kwargs: Any) -> None:
        revoking.set()
        await renewed.wait()
        await revoke(lease_id, *args, **kwargs)

    storage.revoke_lease = revoke_lease  # type: ignore[method-assign]

    async def renew() -> None:  # as PrefectClient.renew_concurrency_lease does for the engine, 300 s
        await revoking.wait()
        response = await api.post(f"/v2/concurrency_limits/leases/{a_lease}/renew", json={"lease_duration": 300})
        assert response.status_code == 204
        renewed.set()

    await asyncio.gather(reap(a_lease), renew())
    assert await storage.read_lease(a_lease) is not None  # it is gone: A runs on a lease answered 204 and removed
    assert await active_slots(api, deploy) == 1


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="finding 005: a server restart loses the in-memory leases; active_slots keeps their slots")
async def test_a_server_restart_leaves_no_deployment_slot_counted_that_no_lease_holds(api: httpx.AsyncClient) -> None:
    deploy = await deployment(api, limit=1)
    assert await propose(api, await flow_run(api, deploy), "PENDING") == "PENDING"
    restart_the_server_process()  # while the run holds its slot
    assert await active_slots(api, deploy) == await live_leases()  # 1 and 0: a slot no lease holds, none to reap


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="finding 006: a RUNNING run's lease reaped; its COMPLETED's release finds the lease gone and "
                          "its fallback gives back another run's slot")
async def test_the_completion_of_a_run_whose_lease_was_reaped_keeps_the_other_runs_slot(
        api: httpx.AsyncClient) -> None:
    deploy = await deployment(api, limit=1)
    a, a_lease = await running(api, deploy)
    await expire(a_lease)  # A's engine cut off from the server for its lease's length
    await reap(a_lease)
    await running(api, deploy)  # B: takes the slot A's reap gave back
    assert await propose(api, a, "COMPLETED") == "COMPLETED"  # A's engine, back in touch (PrefectClient's retry)
    assert await active_slots(api, deploy) == 1  # it is 0 while B runs: the fallback gave B's back


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="read-present (no dst finding; Prefect's xfail test_terminal_release_racing_reaper_"
                          "preserves_replacement_slot): a run's COMPLETED and the reap of its expired lease both read "
                          "the lease present, and both decrement")
async def test_a_completion_and_a_reap_that_both_read_the_lease_give_its_slot_back_once(
        api: httpx.AsyncClient) -> None:
    """The order forced: A's COMPLETED (``_release_concurrency_lease``, in the orchestration transaction) and the
    repossessor's revoke of A's expired lease each hold at the lease storage's ``read_lease`` until both have read
    the lease, then go on. Nothing in Prefect orders the two reads: the revoke's is before its transaction, the
    release's before its decrement. The COMPLETED transaction holds SQLite's write lock (``set_state`` begins
    IMMEDIATE), so it decrements, revokes and commits first, and the revoke's decrement, waiting for the lock,
    commits after it. The other order (the revoke's decrement first, Prefect's own test's) would wait on that lock
    while the COMPLETED waits: on SQLite it deadlocks unless the state write is committed early, as that test does."""
    deploy = await deployment(api, limit=2)
    a, a_lease = await running(api, deploy)
    await running(api, deploy)  # B: keeps its slot
    await expire(a_lease)  # A's engine out of touch for its lease's length, back just as the scan finds it
    both_read_before_either_goes_on(a_lease)
    completed, _ = await asyncio.gather(propose(api, a, "COMPLETED"), reap(a_lease))
    assert completed == "COMPLETED"
    assert await active_slots(api, deploy) == 1  # it is 0 while B runs: A's slot given back twice
