"""What both files' tests run on: Prefect's own app, its defaults, and what a server restart forgets."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, AsyncIterator
from uuid import UUID

import httpx
import prefect
import pytest
from docket import Docket
from prefect.client.constants import SERVER_API_VERSION
from prefect.server.api.server import create_app
from prefect.server.concurrency.lease_storage import get_concurrency_lease_storage
from prefect.server.concurrency.lease_storage import memory
from prefect.server.database import provide_database_interface
from prefect.server.database.dependencies import temporary_database_interface
from prefect.settings import (PREFECT_API_DATABASE_CONNECTION_URL, PREFECT_HOME,
                              PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE, temporary_settings)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """Prefect's app on a fresh SQLite database made by its own migrations, with its default lease storage, called
    with the User-Agent PrefectClient sends (the server validates a run's lease at RUNNING for clients from 3.4.11 on,
    and revokes it for older ones)."""
    with temporary_settings(updates={
        PREFECT_HOME: str(tmp_path / "home"),
        PREFECT_API_DATABASE_CONNECTION_URL: f"sqlite+aiosqlite:///{tmp_path / 'prefect.db'}",
        PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE: "prefect.server.concurrency.lease_storage.memory",
    }), temporary_database_interface():  # this test's database, not one an earlier test cached
        restart_the_server_process()
        db = provide_database_interface()
        await db.create_db()
        app = create_app(ephemeral=True, ignore_cache=True)
        # The docket the app's lifespan would open (Prefect's default, memory://), without its worker: a task a route
        # schedules (a deleted run's logs) is queued and not run. The lifespan itself is not run (its services).
        async with Docket(name=f"prefect-server-{tmp_path.name}", url="memory://") as docket:
            for route in app.routes:
                mounted = getattr(route, "app", None)
                if mounted is not None and hasattr(mounted, "state"):
                    mounted.state.docket = docket
            headers = {"User-Agent": f"prefect/{prefect.__version__} (API {SERVER_API_VERSION})"}
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://server/api",
                                         headers=headers) as client:
                yield client
        await (await db.engine()).dispose()
        restart_the_server_process()


def restart_the_server_process() -> None:
    """What a new server process does not have: the in-memory lease storage is a class-level singleton
    (``lease_storage/memory.py``); the database keeps what it committed."""
    memory.ConcurrencyLeaseStorage._instance = None
    memory.ConcurrencyLeaseStorage._initialized = False


async def live_leases() -> int:
    return len(await get_concurrency_lease_storage().read_active_lease_ids(limit=100))


def both_read_before_either_goes_on(held: UUID) -> None:
    """The lease storage's ``read_lease`` of ``held`` held until two callers have read it: both pass the read
    before either goes on (an order two requests, or a request and the repossessor, handled at once can take)."""
    storage = get_concurrency_lease_storage()
    read, barrier = storage.read_lease, asyncio.Barrier(2)

    async def read_lease(lease_id: UUID, *args: Any, **kwargs: Any) -> Any:
        found = await read(lease_id, *args, **kwargs)
        if lease_id == held:
            await barrier.wait()
        return found

    storage.read_lease = read_lease  # type: ignore[method-assign]
