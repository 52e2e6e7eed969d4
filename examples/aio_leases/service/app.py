"""The HTTP API: FastAPI over the lease store, with the reaper started by the app's lifespan."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from .store import Full, LeaseStore


@dataclass(frozen=True)
class Settings:
    limits: dict[str, int] = field(default_factory=lambda: {"db": 1})
    ttl: float = 60.0  # seconds a lease lives without a renewal
    reaper_interval: float = 15.0
    retry_after: float = 1.0
    bugs: frozenset[str] = frozenset()


class AcquireBody(BaseModel):
    holder: str
    slots: int = 1


class HolderBody(BaseModel):
    holder: str


class ReleaseBody(BaseModel):
    holder: str
    limit: str
    slots: int


def create_app(path: str, settings: Settings) -> FastAPI:
    store = LeaseStore(path, settings.bugs)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await store.create(settings.limits)
        reaper = asyncio.create_task(store.reap_forever(settings.reaper_interval))
        yield
        reaper.cancel()

    app = FastAPI(lifespan=lifespan)
    app.state.store = store

    @app.post("/limits/{limit}/leases")
    async def acquire(limit: str, body: AcquireBody) -> Any:
        try:
            return await store.acquire(limit, body.holder, body.slots, settings.ttl)
        except Full:
            return JSONResponse({"retry_after": settings.retry_after}, status_code=423)

    @app.post("/leases/{lease}/renew")
    async def renew(lease: int, body: HolderBody) -> Any:
        expires_at = await store.renew(lease, body.holder, settings.ttl)
        if expires_at is None:
            raise HTTPException(404, "no such lease")
        return {"expires_at": expires_at}

    @app.post("/leases/{lease}/release")
    async def release(lease: int, body: ReleaseBody) -> Any:
        if not await store.release(lease, body.holder, body.limit, body.slots):
            raise HTTPException(404, "no such lease")
        return {"released": lease}

    return app
