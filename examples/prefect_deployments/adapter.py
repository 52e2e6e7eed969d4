"""Prefect's deployment concurrency, installed from the package index, under dst.

The server is Prefect's own (``server.py``) with one deployment whose ``concurrency_limit`` is the scenario's
limit. Each plan step is one flow run of that deployment, driven as Prefect's worker and flow engine drive it,
through ``PrefectClient`` (with its retries) and Prefect's state-transition API, so that Prefect's own policy
rules take and give back the slots:

* **the worker** creates the run (``create_flow_run_from_deployment``: SCHEDULED) and proposes PENDING
  (``SecureFlowConcurrencySlots`` counts a slot and creates a lease with the deployment's grace period); when it is
  told to wait (``AwaitingConcurrencySlot``: rejected into SCHEDULED) it proposes again at the scheduled time,
  until the acquire patience runs out; then it starts the infrastructure (``provision``);
* **the flow engine** proposes RUNNING (``ValidateDeploymentConcurrencyAtRunning`` renews the lease, takes a new
  slot if the lease is gone, or rejects into CANCELLED when none is free), renews the lease as
  ``maintain_concurrency_lease(lease_id, 300, raise_on_lease_renewal_failure=True)`` does (Prefect's renewal loop,
  ``examples.prefect_limits.adapter.renew_until_it_fails``), works, and proposes COMPLETED
  (``ReleaseFlowConcurrencySlots`` gives the slot back), still renewing until that is answered (Prefect's engine
  proposes it inside the run context that maintains the lease). When renewal gives up the engine is cancelled and the run
  ends CRASHED. The engine works only within the validity its last answered renewal guaranteed (sent at ``t``
  for ``d`` seconds: valid until ``t + d`` at least; an accepted RUNNING renewed it for the grace period), so that
  ``single-executor`` speaks of the server alone: a lease removed while its engine works was removed before the
  expiry the server had granted;
* **a user** acts on the run half way through its work, as the step's ``writes`` says (see ``USER``): cancels it
  (CANCELLING, and the worker's cancellation ends it CANCELLED) or deletes it (``DELETE /flow_runs/{id}``:
  ``cleanup_flow_run_concurrency_slots``).

The books are the TLA+ model's: ``ledger.py`` notes on whose behalf each change of the count was made, the
leases come from Prefect's lease storage after every server step (``Table``).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from typing import Any, Iterable

from examples.prefect_limits import settings  # noqa: I001  # first: Prefect's settings before Prefect is imported

import attrs
import httpx
from prefect import states
from prefect.client.orchestration import PrefectClient
from prefect.client.schemas import OrchestrationResult
from prefect.client.schemas.objects import State
from prefect.client.schemas.responses import SetStateStatus
from prefect.concurrency import _leases as renewal
from prefect.exceptions import ObjectNotFound

from dst import aio, sut

from examples.prefect_limits import server as base
from examples.prefect_limits.adapter import (DatabaseOptions, Ids, RunDatabase, Table as LimitsTable, lease_redis,
                                             renew_until_it_fails)

from . import ledger, server

USER = {0: "nobody", 1: "cancels", 2: "deletes"}  # a step's ``writes``: what a user does half way through its work
CANCELS, DELETES = 1, 2


@attrs.frozen
class Options(DatabaseOptions):
    grace: int = sut.option(300_000, "positive-duration",
                            help="the deployment's grace_period_seconds: the lease PENDING takes (Prefect: 60s to 1 day)")
    lease_duration: int = sut.option(300_000, "positive-duration",
                                     help="the lease_duration the flow engine renews with (Prefect's engine: 300s)")
    provision: int = sut.option(5_000, "duration",
                                help="how long the worker's infrastructure takes to start the engine")
    repossessor_interval: int = sut.option(15_000, "positive-duration",
                                           help="PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS")
    storage: str = sut.option("memory", "choice", choices=settings.STORAGES,
                              help="PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE")

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.grace < 60_000:
            raise sut.OptionError("grace", "at least 60s (Prefect refuses a shorter grace_period_seconds)")
        if self.lease_duration < 60_000:
            raise sut.OptionError("lease_duration", "at least 60s (Prefect refuses a shorter lease_duration)")


class Table(LimitsTable):
    """The deployment's limit as the scenario names it, its count from Prefect's database, its leases from Prefect's
    lease storage. A lease's holder is the client driving the run the lease was created for; its slots are not read
    from the lease: ``ledger.py`` reports them as they are counted (the model's claims)."""

    def __init__(self, ids: Ids, folder: str, storage: str, limit: str, workers: dict[uuid.UUID, str],
                 db: Any = None, redis: Any = None) -> None:
        super().__init__(ids, (), folder, storage, db, redis)
        self.limit, self.workers = limit, workers

    def leases(self) -> Iterable[aio.LeaseRow]:
        active = ledger.ACTIVE
        rows = []
        for lease, expiration in self._leases():
            run = active.run_of.get(lease.id) if active is not None else None
            holder = self.workers.get(run, "?") if run is not None else "?"
            rows.append(aio.LeaseRow(self.ids.of(lease.id), holder, self.limit, 0, aio.virtual_ms(expiration.timestamp())))
        return rows

    def count(self, limit: str) -> int:
        slots = self._one("SELECT active_slots FROM concurrency_limit_v2 WHERE name LIKE ?", "deployment:%")
        return int(slots) if slots is not None else 0


def build(env: sut.Env[Options]) -> aio.System:
    o = env.options
    if len(env.limits) != 1:
        raise sut.OptionError("limits", "one limit: the deployment's concurrency_limit")
    (limit, size), = env.limits.items()
    folder = tempfile.mkdtemp(prefix="run-", dir=settings.FOLDER)
    database = RunDatabase(o, folder)
    restore = settings.use(folder, o.storage, database.url)
    ids = Ids()
    workers: dict[uuid.UUID, str] = {}  # flow run -> the client driving it
    table = Table(ids, folder, o.storage, limit, workers, database.server, lease_redis(o.storage))
    ledger.ACTIVE = ledger.Ledger(env.facts, limit, ids.of)
    duration = o.lease_duration / 1000
    patience = env.workload.acquire_patience / 1000

    async def start() -> Any:
        return await server.start(size, o.grace // 1000, o.repossessor_interval / 1000)

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        loop = asyncio.get_running_loop()
        work, user = order.arg("work"), order.arg("writes", 0)
        async with PrefectClient(api="http://server/api", httpx_settings={"transport": aio.transport()}) as api:
            try:
                run = await api.create_flow_run_from_deployment(server.DEPLOYMENT_ID)
            except httpx.HTTPError as e:
                return f"no run created ({type(e).__name__})"
            workers[run.id] = client
            # The worker: PENDING, or wait for the time it is given and propose again.
            give_up = loop.time() + patience
            while True:
                try:
                    pending = loop.time()
                    result: OrchestrationResult[Any] = await api.set_flow_run_state(run.id, states.Pending())
                except (httpx.HTTPError, ObjectNotFound) as e:
                    return f"pending failed ({type(e).__name__})"
                if result.status == SetStateStatus.ACCEPT:
                    break
                if result.status == SetStateStatus.WAIT:
                    await asyncio.sleep(getattr(result.details, "delay_seconds", 0))
                    continue
                if result.status != SetStateStatus.REJECT or result.state is None or not result.state.is_scheduled():
                    return f"pending {result.status.value.lower()}"
                scheduled = result.state.state_details.scheduled_time
                wait = scheduled.timestamp() - time.time() if scheduled is not None else 0.0
                if loop.time() + wait > give_up:
                    return "gave up waiting for a slot"
                await asyncio.sleep(max(wait, 0))
            await aio.moment("pending", until=pending + o.grace / 1000)  # its lease lasts the grace period
            await asyncio.sleep(o.provision / 1000)  # the infrastructure starts
            # The flow engine.
            sent = loop.time()
            try:
                result = await api.set_flow_run_state(run.id, states.Running())
            except ObjectNotFound:
                return "run deleted before it ran"
            except httpx.HTTPError as e:
                return f"running failed ({type(e).__name__})"
            # A RUNNING proposed again (PrefectClient sends it again after a timeout) is rejected with the run's
            # state, RUNNING: the engine goes on, as Prefect's does with the state it is given.
            running = result.state is not None and result.state.is_running()
            if result.status != SetStateStatus.ACCEPT and not running:
                state = result.state.type.value if result.state is not None else "none"
                if state == "CANCELLED":
                    env.facts.reached("cancelled-after-lost-lease")
                return f"running {result.status.value.lower()}: {state}"
            lease_id = result.state.state_details.deployment_concurrency_lease_id if result.state else None
            if lease_id is None:
                return "running without a lease"
            valid_until = [sent + o.grace / 1000]  # RUNNING renewed the lease (or took a new one) for the grace period
            await aio.moment("running", until=valid_until[0])
            failed, cancelled = asyncio.Event(), asyncio.Event()

            def renewed(sent: float) -> None:
                valid_until[0] = max(valid_until[0], sent + duration)

            renewing = asyncio.create_task(renew_until_it_fails(api, lease_id, duration, failed, renewed))
            acting = asyncio.create_task(act(api, run.id, user, work / 2000, cancelled)) if user in USER and user else None
            left, outcome = work, "completed"
            while left > 0:
                if failed.is_set():
                    outcome = "lease lost"
                    break
                if cancelled.is_set():
                    outcome = "cancelled"
                    break
                room = int((valid_until[0] - loop.time()) * 1000)
                if room <= 0:  # its last renewal's validity ran out: wait for the next answer, or its failure
                    await asyncio.sleep(0.1)
                    continue
                piece = min(left, 1_000, room)
                left -= piece - await aio.work(ids.of(lease_id), piece)
            if acting is not None:
                await acting
            await aio.moment("before-terminal", until=valid_until[0])  # the expiry its last answered renewal gave
            final: State[Any] = {"completed": states.Completed(), "cancelled": states.Cancelled(),
                     "lease lost": states.Crashed(message="lease renewal failed")}[outcome]
            try:  # the engine proposes its terminal state inside the run context: the lease is still renewed
                result = await api.set_flow_run_state(run.id, final)
            except ObjectNotFound:
                return f"{outcome}; the run was deleted"
            except httpx.HTTPError as e:
                return f"{outcome}; terminal state failed ({type(e).__name__})"
            finally:
                renewing.cancel()
            return outcome if result.status == SetStateStatus.ACCEPT else f"{outcome}; {result.status.value.lower()}"

    async def act(api: PrefectClient, run_id: uuid.UUID, user: int, after: float, cancelled: asyncio.Event) -> None:
        """A user cancels or deletes the run ``after`` seconds into its work."""
        await asyncio.sleep(after)
        try:
            if user == DELETES:
                await api.delete_flow_run(run_id)
            elif user == CANCELS:
                result: OrchestrationResult[Any] = await api.set_flow_run_state(run_id, states.Cancelling())
                if result.status == SetStateStatus.ACCEPT:
                    cancelled.set()  # the worker's cancellation observer: the engine stops
        except (httpx.HTTPError, ObjectNotFound):
            pass

    def close() -> None:
        ledger.ACTIVE = None
        if table.conn is not None:
            table.conn.close()
        database.close()
        restore()
        shutil.rmtree(folder, ignore_errors=True)

    reclaim = max(o.grace, o.lease_duration) + o.repossessor_interval
    return aio.System(server=start, job=job, leases=table, observe=True, settled=server.settled, folder=folder,
                      close=close, reset=base.reset, inline_threads=True,
                      bounds=sut.Bounds(reclaim_within=reclaim, renew_every=int(o.lease_duration * renewal._RENEWAL_FRACTION)))


SITUATIONS = (
    # A decrement for a lease whose slot was already given back, by its path and the path that gave the slot back
    # (with another lease's claim to take, no-foreign-release fails at it): the model's counterexamples first.
    sut.Situation("reap-after-deletion", "a reap decremented for a deleted run's lease, whose slot the deletion had "
                  "given back (the model's flow-run deletion)", ("no-foreign-release",),
                  "no deleted run's lease was reaped"),
    sut.Situation("fallback-after-reap", "a transition's release found its lease reaped and decremented the limit by "
                  "its id (the model's missing-lease fallback)", ("no-foreign-release",),
                  "no run left PENDING or RUNNING after its lease was reaped"),
    sut.Situation("reap-after-release", "a reap decremented for a lease a transition had released, both having read "
                  "it present (the model's read-present release)", ("no-foreign-release",),
                  "no reap read a lease that a release was giving back"),
    sut.Situation("release-after-reap", "a transition's release decremented for a lease a reap had given back, both "
                  "having read it present (the model's read-present release)", ("no-foreign-release",),
                  "no release read a lease that a reap was giving back"),
    sut.Situation("reap-after-reap", "two reaps decremented for one lease (the model's duplicate reapers)",
                  ("no-foreign-release",), "no lease was reaped twice"),
    sut.Situation("deletion-after-reap", "a deletion decremented for a run whose lease had been reaped (the model "
                  "has a deletion only of a run that holds its claim)", ("no-foreign-release",),
                  "no run was deleted after its lease was reaped"),
    sut.Situation("revokes-at-once", "two revoke tasks of one lease ran at once (a scan found it expired while "
                  "the last one's revoke was under way)", ("no-foreign-release",),
                  "no revoke outlasted the repossessor's interval"),
    sut.Situation("reap-of-a-renewed-lease", "a revoke removed a lease renewed after the revoke read it (the "
                  "model's stale reap)", ("single-executor",), "no renewal landed between a revoke's read and its "
                  "removal of the lease"),
    sut.Situation("cancelled-after-lost-lease", "an engine's RUNNING was rejected into CANCELLED: its lease was gone "
                  "and no slot was free (the rejection's release finds the lease gone: the fallback)",
                  ("no-foreign-release",), "no worker lost its lease between PENDING and RUNNING while the limit was "
                  "full"),
    sut.Situation("slot-taken-for-no-lease", "a slot was counted with no lease created for it", ("slot-accounting",)),
)

model = sut.Model(build, options=Options, scenarios="examples.prefect_deployments:scenarios",
                  description="Prefect's deployment concurrency: flow runs through its orchestration rules, its leases "
                              "and its repossessor, from the package index",
                  situations=SITUATIONS,
                  client_moments=("pending", "running", "before-terminal", "await"), server_moments=("await",))
