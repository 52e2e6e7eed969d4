"""Models whose adapters assert properties of their own (dst.always & co.), for tests/test_user_invariants.py: the
reference model behind the coroutine seam, and a small asyncio service.

``checked``'s jobs assert what holds of every correct run; ``strict`` also asserts that every job finishes its work,
which a pause past the lease's expiry breaks (``always:jobs-finish-their-work``); ``hasty`` asks that every slot be
free soon after each job ends, which another holder breaks (``eventually:slots-free-after-a-job``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

import dst
from dst import aio, sut
from dst.reference import model as reference
from dst.reference.protocol import Acquire, Done

SETTLE_MS = 1_000_000_000  # an eventually judged at the end of the quiet period


def _reference(strict: bool = False, within: int = SETTLE_MS, bad_id: object = None, swallow: bool = False,
               settles: bool = True, renewals_fail: bool = True) -> sut.Model[Any]:
    def build(env: sut.Env[Any]) -> sut.System:
        system = reference.build(env)
        inner, store = system.job, system.leases
        assert store is not None

        async def job(client: str, incarnation: int, order: sut.Order) -> str:
            dst.reachable("a-job-ran")
            dst.sometimes("c2-ran-a-job", client == "c2")
            if bad_id is not None:
                try:
                    dst.always(bad_id, True)  # type: ignore[arg-type]
                except ValueError:
                    if not swallow:
                        raise
            outcome: str = await inner(client, incarnation, order)
            if order.action != "acquire":
                return outcome
            if strict:
                dst.always("jobs-finish-their-work", outcome == "done", {"client": client, "outcome": outcome})
            dst.always("outcome-is-known", outcome in ("done", "lease lost", "renewal failed", "gave up acquiring",
                                                       "write not accepted"), {"outcome": outcome})
            dst.eventually("slots-free-after-a-job", lambda: all(store.count(limit) == 0 for limit in env.limits),
                           within_ms=within)
            if not settles:
                dst.eventually("nothing-ever-settles", lambda: False, within_ms=SETTLE_MS)
            if not renewals_fail and outcome == "renewal failed":
                dst.unreachable("renewal-failed", {"client": client})
            return outcome

        return attrs.evolve(system, job=job)

    return sut.Model(build, options=reference.options, bugs=reference.bugs, scenarios=reference.scenarios)


checked = _reference()
strict = _reference(strict=True)
hasty = _reference(within=5_000)
empty_id = _reference(bad_id="")
number_id = _reference(bad_id=7)
swallowed_id = _reference(bad_id="", swallow=True)
never_settles = _reference(settles=False)
no_renewal_failures = _reference(renewals_fail=False)


def _aio(fails: bool) -> sut.Model[object]:
    """An asyncio service whose handler asserts its holder is not c2 (``fails``) or is any client."""

    def build(env: sut.Env[object]) -> aio.System:
        served: list[str] = []

        async def server() -> object:
            async def acquire(req: Acquire) -> Done:
                dst.always("holder-is-not-c2", not fails or req.holder != "c2", {"holder": req.holder})
                await asyncio.sleep(0.01)
                served.append(req.holder)
                return Done("ok")

            return {Acquire: acquire}

        async def job(client: str, incarnation: int, order: sut.Order) -> str:
            dst.reachable("aio-job-ran")
            dst.sometimes("c3-asked", client == "c3")
            dst.eventually("served-them-all", lambda: len(served) >= 2, within_ms=1_000)
            try:
                response = await aio.call(Acquire("db", 1, client), timeout=5_000)
            except TimeoutError:
                dst.unreachable("no-answer", {"client": client})
                return "no answer"
            return str(response.what)

        return aio.System(server=server, job=job)

    return sut.Model(build)


aio_checked = _aio(fails=False)
aio_fails = _aio(fails=True)
