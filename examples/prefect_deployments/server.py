"""Prefect's own server with one deployment that has a concurrency limit, wired as a simulated process.

What a boot does, beside what ``examples.prefect_limits.server`` does for any Prefect server (forget the dead
process's module globals, build the app with ``create_app``):

* **The deployment**: a flow and a deployment with ``concurrency_limit`` and ``concurrency_options`` (its
  collision strategy ``ENQUEUE``, its grace period), created through Prefect's model layer as
  ``POST /deployments/`` would, once: Prefect creates the deployment's limit (``deployment:<id>``) with it.
* **Docket**: the app's routes reach docket through ``app.state.docket`` (a deleted run's logs are deleted by a
  docket task). The lifespan that would start docket is not run; a stand-in accepts the task and drops it (the
  logs are not part of what is checked).
* **The repossessor**: the scan on its interval and one revoke task per expired lease, Prefect's own
  ``revoke_expired_lease``, as ``examples.prefect_limits.server.repossessor`` runs them, with docket's rule for
  its key: Prefect 3.9 keys each revoke by its lease, and the docket it installs (pydocket 0.27.2) takes an
  ``add`` of a key whose task is queued or running as a no-op (``schedule.lua`` answers ``EXISTS`` for a run in
  state ``running``; ``tests/test_aio_redis.py`` holds the real pydocket to it), so a scan that finds a lease
  whose revoke is still running schedules none; Prefect 3.8 gives no key, and it schedules another.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Callable

from prefect.server import models, schemas
from prefect.server.api.server import create_app
from prefect.server.concurrency.lease_storage import get_concurrency_lease_storage
from prefect.server.database import provide_database_interface
from prefect.server.services.repossessor import revoke_expired_lease

from examples.prefect_limits import server as base

from . import ledger

FLOW, DEPLOYMENT = "dst-flow", "dst-deployment"
# The deployment's id, fixed: its workers know it from their configuration, not from the server's memory.
DEPLOYMENT_ID = uuid.UUID("5d1e0000-0000-4000-8000-00000000d001")


class DroppedTasks:
    """Docket as the app's routes use it (``await docket.add(fn, key=...)(*args)``, ``docket.replace``): the task is
    accepted and not run. Here that is a deleted run's logs, and the check that a run left CANCELLING in time (the
    worker here always takes a CANCELLING run on to CANCELLED)."""

    def add(self, function: Any, **_: Any) -> Callable[..., Any]:
        async def schedule(*args: Any, **kwargs: Any) -> None:
            return None
        return schedule

    replace = add


async def create_deployment(limit: int, grace_seconds: int) -> None:
    """The deployment and its concurrency limit, created through Prefect's model layer, once."""
    db = provide_database_interface()
    async with db.session_context(begin_transaction=True) as session:
        flow = await models.flows.read_flow_by_name(session=session, name=FLOW)
        if flow is None:
            flow = await models.flows.create_flow(session=session, flow=schemas.core.Flow(name=FLOW))
        found = await models.deployments.read_deployment_by_name(session=session, name=DEPLOYMENT, flow_name=FLOW)
        if found is not None:
            return
        options = schemas.core.ConcurrencyOptions(collision_strategy=schemas.core.ConcurrencyLimitStrategy.ENQUEUE,
                                                  grace_period_seconds=grace_seconds)
        await models.deployments.create_deployment(session=session, deployment=schemas.core.Deployment(
            id=DEPLOYMENT_ID, name=DEPLOYMENT, flow_id=flow.id, concurrency_limit=limit, concurrency_options=options))


async def revoke(lease_id: uuid.UUID, **kwargs: Any) -> None:
    """Prefect's revoke step, its decrement noted as this lease's."""
    done = ledger.revoking(lease_id)
    try:
        await revoke_expired_lease(lease_id, **kwargs)
    finally:
        done()


async def start(limit: int, grace_seconds: int, repossessor_every: float) -> Any:
    """One boot: Prefect's memory new, its database as the last process left it."""
    base.reset()
    if ledger.ACTIVE is not None:
        ledger.ACTIVE.forget_process()
    await create_deployment(limit, grace_seconds)
    asyncio.get_running_loop().create_task(base.repossessor(repossessor_every, revoke=revoke))
    app = create_app(ignore_cache=True, ephemeral=True)
    for route in app.routes:
        mounted = getattr(route, "app", None)
        if mounted is not None and hasattr(mounted, "state"):
            mounted.state.docket = DroppedTasks()
    get_concurrency_lease_storage()  # the storage of this boot, before the first request
    return app
