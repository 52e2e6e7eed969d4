"""Prefect's own server code for global concurrency limits (v2) with leases, wired as a simulated process.

Nothing of Prefect is copied or changed: this builds Prefect's FastAPI app (its REST API, with the
``/v2/concurrency_limits`` router and its ``increment-with-lease``, ``leases/{id}/renew`` and
``decrement-with-lease`` handlers), resets the module-level state a restarted server would not have, creates
the limits through Prefect's model layer, and runs Prefect's repossessor step on its loop interval.

* **The app**: ``create_app(ignore_cache=True)``; its lifespan is not run (it would run the migrations,
  register blocks and start docket and every background service). Requests reach it through httpx's ASGI
  support, one task each, as under uvicorn.
* **The repossessor**: docket runs ``monitor_expired_leases`` as a perpetual task every
  ``PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS`` and schedules one ``revoke_expired_lease`` task per
  expired lease (keyed by the lease in Prefect 3.9, so that one runs at a time; not in 3.8). The scheduling is
  replaced by a plain loop that does the same (the scan, then a task per expired lease, or, keyed, per lease not
  already being revoked); the revoke step is Prefect's own function, called as docket calls it.
* **A restart** loses the process's memory: the in-memory lease storage is a class-level singleton, engines
  and the database configuration are cached in module globals; :func:`reset` forgets them, as a new process
  would not have them.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import uuid
from typing import Any, Awaitable, Callable

import prefect.locking._filelock as filelock
import prefect.server.database.configurations as db_configurations
import prefect.server.database.dependencies as db_dependencies
import prefect.server.models.events as events_model
import prefect.server.utilities.messaging.memory as memory_messaging
from prefect.server import models
from prefect.server.api.server import create_app
from prefect.server.concurrency.lease_storage import get_concurrency_lease_storage
from prefect.server.concurrency.lease_storage import memory as memory_storage
from prefect.server.database import provide_database_interface
from prefect.server.database.query_components import BaseQueryComponents
from prefect.server.schemas.actions import ConcurrencyLimitV2Create
from prefect.server.services import repossessor as repossessor_service
from prefect.server.services.repossessor import revoke_expired_lease
from prefect.settings.context import get_current_settings
from prefect.utilities import asyncutils

revoking: dict[uuid.UUID, list[asyncio.Task[None]]] = {}  # the repossessor's revoke tasks, by lease
# Docket runs one task per key at a time: Prefect 3.9 keys each revoke by its lease, 3.8 gives no key (each task gets
# a key of its own, and a lease still being revoked at the next pass is revoked again).
KEYED = "key=" in inspect.getsource(repossessor_service.monitor_expired_leases)


_create_async_engine = db_configurations.create_async_engine


def _engine_without_forced_isolation(url: Any, **kwargs: Any) -> Any:
    kwargs.pop("isolation_level", None)
    return _create_async_engine(url, **kwargs)


def force_read_committed(forced: bool) -> None:
    """Whether Prefect's PostgreSQL engine forces READ COMMITTED, as it has since Prefect 3.8 (PR 22531, after a
    production race on a database whose default was stricter), or leaves each transaction at the database's
    default, as before: the one keyword of that change (``isolation_level``) left out of ``create_async_engine``."""
    db_configurations.create_async_engine = _create_async_engine if forced else _engine_without_forced_isolation


def reset() -> None:
    """What a restarted server process does not have: the state Prefect keeps in module globals."""
    memory_storage.ConcurrencyLeaseStorage._instance = None  # the in-memory leases (memory.py: a singleton)
    memory_storage.ConcurrencyLeaseStorage._initialized = False
    db_configurations.ENGINES.clear()  # engines cached per loop and URL: the dead process's pool
    # Caches a process keeps in module and class globals, keyed by ids a seed repeats (a flow run's, a configuration
    # key): the next boot, or the next run of the same seed in this process, would find them warm and skip a read.
    for cache in (events_model._flow_run_resource_data_cache, BaseQueryComponents._configuration_cache,
                  memory_messaging.Cache._recently_seen_messages):
        cache.clear()
    for key in list(db_dependencies.MODELS_DEPENDENCIES):
        db_dependencies.MODELS_DEPENDENCIES[key] = None  # the database configuration, queries and ORM
    # Prefect disposes of an engine when its loop shuts down: an async generator it keeps in a module global, which
    # a dead process's loop never closes. Closed now, as asyncio.run would at that process's exit (its engine is
    # forgotten above, so the disposal finds nothing and the generator drops its own entry), not whenever
    # the garbage collector gets to it, in some later boot or run, keyed by an id() that could be reused.
    for generator in list(asyncutils.EVENT_LOOP_GC_REFS.values()):
        closing = generator.aclose()
        try:
            closing.send(None)
        except StopIteration:
            continue
        closing.close()  # it awaited something: drop it half way rather than let it run later
    # The filesystem storage's lock (locking/_filelock.py) probes its holder with os.kill(pid, 0); every
    # simulated process has this OS process's pid, and a dead server's lock file would look held for good. A new
    # process finds the old one's pid dead: the leftover lock is stale, and it goes.
    redis_client = sys.modules.get("prefect_redis.client")
    if redis_client is not None:  # prefect-redis caches its clients per loop: the dead process's connections
        redis_client._client_cache.clear()  # type: ignore[attr-defined]
        redis_client._get_redis_messaging_url.cache_clear()  # type: ignore[attr-defined]
    revoking.clear()  # the dead process's revoke tasks never run again
    lock = os.path.join(get_current_settings().home, "concurrency_leases", "expirations.lock")
    if os.path.exists(lock):
        os.remove(lock)
    filelock._is_pid_alive = lambda pid: pid == os.getpid()


async def create_limits(limits: dict[str, int]) -> None:
    """The limits, created through Prefect's model layer (as ``POST /v2/concurrency_limits/`` would), once."""
    db = provide_database_interface()
    async with db.session_context(begin_transaction=True) as session:
        have = {limit.name for limit in await models.concurrency_limits_v2.bulk_read_concurrency_limits(
            session=session, names=sorted(limits))}
        for name, size in sorted(limits.items()):
            if name not in have:
                await models.concurrency_limits_v2.create_concurrency_limit(
                    session=session, concurrency_limit=ConcurrencyLimitV2Create(name=name, limit=size))


def settled() -> bool:
    """No revoke task is between its two stores (it decrements the count in the database, then revokes the lease in
    the lease storage): with no request in flight either, the counts and the leases agree."""
    return all(task.done() for tasks in revoking.values() for task in tasks)


async def repossessor(every: float, revoke: Callable[..., Awaitable[None]] = revoke_expired_lease,
                      keyed: bool = KEYED) -> None:
    """Prefect's repossessor on its loop interval: the scan of expired leases, then a ``revoke`` task per lease
    (``keyed``: for a lease that none is revoking yet, docket's key-based deduplication; else one per scan)."""
    while True:
        await asyncio.sleep(every)
        for lease_id in list(revoking):
            revoking[lease_id] = [task for task in revoking[lease_id] if not task.done()]
        for lease_id in await get_concurrency_lease_storage().read_expired_lease_ids():
            if keyed and revoking.get(lease_id):
                continue
            revoking.setdefault(lease_id, []).append(asyncio.create_task(revoke(
                lease_id, db=provide_database_interface(), lease_storage=get_concurrency_lease_storage())))


async def start(limits: dict[str, int], repossessor_every: float) -> Any:
    """One boot of the server process: its memory new, its database file as the last process left it."""
    reset()
    await create_limits(limits)
    asyncio.get_running_loop().create_task(repossessor(repossessor_every))
    return create_app(ignore_cache=True, ephemeral=True)
