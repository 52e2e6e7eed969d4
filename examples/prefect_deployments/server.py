"""Prefect's own server with one deployment that has a concurrency limit, wired as a simulated process.

What a boot does, beside what ``examples.prefect_limits.server`` does for any Prefect server (forget the dead
process's module globals, build the app with ``create_app``):

* **The deployment**: a flow and a deployment with ``concurrency_limit`` and ``concurrency_options`` (its
  collision strategy ``ENQUEUE``, its grace period), created through Prefect's model layer as
  ``POST /deployments/`` would, once: Prefect creates the deployment's limit (``deployment:<id>``) with it.
* **Docket**: the app's routes reach docket through ``app.state.docket``. The lifespan that would start docket is
  not run; :class:`Docket` runs the one task that acts on a run's slot, Prefect's CANCELLING timeout, at its time,
  and accepts the others (a deleted run's logs) without running them.
* **The repossessor**: the scan on its interval and one revoke task per expired lease, Prefect's own
  ``revoke_expired_lease``, as ``examples.prefect_limits.server.repossessor`` runs them, with docket's rule for
  its key: Prefect 3.9 keys each revoke by its lease, and the docket it installs (pydocket 0.27.2) takes an
  ``add`` of a key whose task is queued or running as a no-op (``schedule.lua`` answers ``EXISTS`` for a run in
  state ``running``; ``tests/test_aio_redis.py`` holds the real pydocket to it), so a scan that finds a lease
  whose revoke is still running schedules none; Prefect 3.8 gives no key, and it schedules another.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from typing import Any, Callable, NoReturn

from prefect.server import models, schemas
from prefect.server.api.server import create_app
from prefect.server.concurrency.lease_storage import get_concurrency_lease_storage
from prefect.server.database import provide_database_interface
from prefect.server.services import cancellation_cleanup
from prefect.server.services.cancellation_cleanup import handle_cancelling_timeout
from prefect.server.services.repossessor import revoke_expired_lease

from dst import aio

from examples.prefect_limits import server as base

from . import ledger

FLOW, DEPLOYMENT = "dst-flow", "dst-deployment"
# The deployment's id, fixed: its workers know it from their configuration, not from the server's memory.
DEPLOYMENT_ID = uuid.UUID("5d1e0000-0000-4000-8000-00000000d001")


class _Rescheduled(Exception):
    """A task asked docket to run it again later (docket's ``Retry.at``/``after`` raise to say so)."""

    def __init__(self, delay: float) -> None:
        super().__init__(delay)
        self.delay = delay


class _Retry:
    """The ``Retry`` dependency ``handle_cancelling_timeout`` is given (``Retry.forever``, 0.5 s apart): ``at`` asks
    for a run at a later time, as docket's does, by raising."""

    def at(self, when: datetime.datetime) -> NoReturn:
        raise _Rescheduled(max(0.0, when.timestamp() - time.time()))

    def after(self, delay: datetime.timedelta) -> NoReturn:
        raise _Rescheduled(delay.total_seconds())


class Docket:
    """Docket as the app's routes use it (``await docket.add(fn, key=...)(*args)``, ``docket.replace(fn, key=...,
    when=...)(**kwargs)``), in the server process (Prefect's default, ``memory://``: its tasks go with a restart).

    * **Prefect's CANCELLING timeout** (``handle_cancelling_timeout``, ``services/cancellation_cleanup.py``), which
      the set-state route schedules ``cancelling_timeout_seconds`` (300 s) after a run enters CANCELLING, runs at its
      time as docket's worker runs it: one task a key (an ``add`` of a key already scheduled is a no-op, a
      ``replace`` takes its place), again 0.5 s after a failure (``Retry.forever``), and at the time it asks for. A
      run whose worker never reported CANCELLED is set CANCELLED by it, and that transition's release runs.
    * Left out: the startup's seeding of that check for runs already in CANCELLING
      (``ensure_cancelling_timeout_checks``), so a run in CANCELLING when the server restarted is checked only if it
      enters CANCELLING again (its query at every boot would move every run's timing: the shipped findings were
      recorded without it); and what else the routes schedule (a deleted run's logs: accepted, not run).
    """

    def __init__(self) -> None:
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.running: set[asyncio.Task[None]] = set()

    def add(self, function: Any, *, key: str | None = None, when: datetime.datetime | None = None,
            **_: Any) -> Callable[..., Any]:
        return self._schedule(function, key, when, replace=False)

    def replace(self, function: Any, *, key: str | None = None, when: datetime.datetime | None = None,
                **_: Any) -> Callable[..., Any]:
        return self._schedule(function, key, when, replace=True)

    def _schedule(self, function: Any, key: str | None, when: datetime.datetime | None,
                  replace: bool) -> Callable[..., Any]:
        async def schedule(*args: Any, **kwargs: Any) -> None:
            if function is not handle_cancelling_timeout or key is None:
                return None
            if key in self._timers and not replace:
                return None
            self._at(key, 0.0 if when is None else max(0.0, when.timestamp() - time.time()), kwargs)
            return None
        return schedule

    def _at(self, key: str, delay: float, kwargs: dict[str, Any]) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        # The server's own job, keyed apart: a check that runs or not moves no other work's draws.
        self._timers[key] = loop.call_later(delay, self._start, key, kwargs, context=aio.background("cancelling"))

    def _start(self, key: str, kwargs: dict[str, Any]) -> None:
        self._timers.pop(key, None)
        task = asyncio.get_running_loop().create_task(self._run(key, kwargs))
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def _run(self, key: str, kwargs: dict[str, Any]) -> None:
        try:
            await handle_cancelling_timeout(**kwargs, db=provide_database_interface(),
                                            cleanup_queue=cancellation_cleanup._get_service_worker_cleanup_queue(),
                                            retry=_Retry())
        except _Rescheduled as again:
            self._at(key, again.delay, kwargs)
        except Exception:
            self._at(key, 0.5, kwargs)  # Retry.forever(delay=0.5s)


DOCKET: Docket | None = None  # this boot's


def settled() -> bool:
    """No revoke task is between its two stores, and no CANCELLING check is in its transaction (its CANCELLED's
    release revokes the lease before the decrement commits, as a request's does)."""
    return base.settled() and (DOCKET is None or not DOCKET.running)


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
    global DOCKET
    DOCKET = docket = Docket()
    app = create_app(ignore_cache=True, ephemeral=True)
    for route in app.routes:
        mounted = getattr(route, "app", None)
        if mounted is not None and hasattr(mounted, "state"):
            mounted.state.docket = docket
    get_concurrency_lease_storage()  # the storage of this boot, before the first request
    return app
