"""Models for the tests of causes and consequences: the reference model with a release that leaves the lease's row.

Its release gives the lease's slots back at once but leaves the row for the reaper, which gives them back again
when the lease runs out. Between the lease's expiry and its reap the admission check counts its slots free twice,
so a second holder gets in (``capacity``, a symptom); the reap then gives back slots the lease no longer owns
(``no-foreign-release``: the slip, named).
"""

from __future__ import annotations

from typing import Any

from dst import sut
from dst.reference import model as reference
from dst.reference.protocol import Done, Refused, Release
from dst.reference.service import LeaseService
from dst.reference.store import Lease


def _leaves_the_row(env: sut.Env[Any], *, reaper_raises: bool) -> sut.System:
    system = reference.build(env)
    leases: LeaseService = system.service.services[0]
    handlers = system.service.handlers()

    async def release(req: Release) -> Any:
        await sut.store_step()
        lease = leases.store.get_lease(req.lease)
        if lease is None or lease.holder != req.holder:
            return Refused("no such lease")
        leases._give_back(lease.limit, lease.slots, lease.id)  # wrong: the row is left for the reaper
        return Done("released")

    revoke = leases._revoke

    async def revoke_or_raise(lease: Lease) -> bool:
        done = await revoke(lease)
        if reaper_raises:
            raise RuntimeError("the reaper gave back a released lease's slots")
        return done

    leases._revoke = revoke_or_raise  # type: ignore[method-assign]
    system.service.handlers = lambda: {**handlers, Release: release}
    return system


def _build(env: sut.Env[Any]) -> sut.System:
    return _leaves_the_row(env, reaper_raises=False)


def _build_raising(env: sut.Env[Any]) -> sut.System:
    return _leaves_the_row(env, reaper_raises=True)


leaves_the_row = sut.Model(_build, options=reference.options)
leaves_the_row_and_raises = sut.Model(_build_raising, options=reference.options)
