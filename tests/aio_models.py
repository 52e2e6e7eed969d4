"""Small asyncio models for the tests of the asyncio mode: plain asyncio services behind dst.aio adapters."""

from __future__ import annotations

import asyncio
import threading
import time

from dst import aio, sut
from dst.reference.protocol import Acquire, Done, Granted, Release

LOG: list[tuple[str, object]] = []  # what the services did, and when (virtual seconds; "after" once the run is over)
LEAK = [0]  # a module global the leaky model never resets


def _when() -> object:
    """Virtual seconds during the run; "after" once it is over (a dead task's coroutine closed at the end)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return "after"
    return "after" if loop.is_closed() else loop.time()


class Probe:
    """A server whose handler takes 1 s under try/finally, and a ticker task."""

    def __init__(self, env: sut.Env[object]) -> None:
        self.env = env

    async def acquire(self, req: Acquire) -> Granted:
        LOG.append(("handling", _when()))
        try:
            await asyncio.sleep(1)
        except asyncio.CancelledError:
            LOG.append(("cancelled", _when()))
            raise
        finally:
            LOG.append(("finally", _when()))
            LOG.append(("finally wall clock", time.time()))
        return Granted(1, 0, 1, 0)

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(1)
            LOG.append(("tick", _when()))


def build_probe(env: sut.Env[object]) -> aio.System:
    async def server() -> object:
        LOG.append(("boot", _when()))
        probe = Probe(env)
        asyncio.get_running_loop().create_task(probe.tick())
        return {Acquire: probe.acquire}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        try:
            await aio.call(Acquire("db", 1, client), timeout=5_000)
            LOG.append(("granted", _when()))
            await aio.work(1, order.arg("work"))
            return "done"
        except TimeoutError:
            return "timed out"
        finally:
            LOG.append((f"{client} finally", _when()))

    return aio.System(server=server, job=job)


probe = sut.Model(build_probe)


def build_deadline_probe(env: sut.Env[object]) -> aio.System:
    """A holder that reckons its grant good for 10 s and marks the moment after it with that deadline."""
    async def server() -> object:
        return {Acquire: Probe(env).acquire}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        await aio.call(Acquire("db", 1, client), timeout=5_000)
        granted = asyncio.get_running_loop().time()
        LOG.append(("granted", _when()))
        await aio.moment("granted", until=granted + 10)
        LOG.append(("went on", _when()))
        return "done"

    return aio.System(server=server, job=job)


deadline_probe = sut.Model(build_deadline_probe, client_moments=("granted",))


def build_background_probe(env: sut.Env[object]) -> aio.System:
    """A server that starts a background job of its own a second after boot: one store round trip, then a log line."""
    async def sweep() -> None:
        await aio.round_trip()
        LOG.append(("swept", _when()))

    async def server() -> object:
        loop = asyncio.get_running_loop()
        loop.call_later(1, lambda: loop.create_task(sweep()), context=aio.background("sweep"))
        return {Acquire: Probe(env).acquire}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        await aio.call(Acquire("db", 1, client), timeout=5_000)
        return "done"

    return aio.System(server=server, job=job)


background_probe = sut.Model(build_background_probe)


def _misbehaving(handler: str) -> sut.Model[object]:
    async def acquire(req: Acquire) -> Done:
        if handler == "thread":
            threading.Thread(target=print).start()
        elif handler == "executor":
            await asyncio.get_running_loop().run_in_executor(None, print)
        elif handler == "socket":
            await asyncio.open_connection("localhost", 80)
        elif handler == "swallowed":
            try:
                threading.Thread(target=print).start()
            except Exception:
                pass
        elif handler == "clock":
            return Done(f"{time.time():.3f} {time.monotonic():.3f}")
        elif handler == "spins":
            while handler:  # never awaits: the watchdog stops it
                pass
        elif handler == "foreign":
            env.facts.slots_taken(1, "db", 1)
            env.facts.lease_stored(1, "c1", "db")
            env.facts.slots_returned(2, "db", 1)  # lease 2 owns nothing: raised inside the handler's task
        return Done("ok")

    env: sut.Env[object]

    def build(e: sut.Env[object]) -> aio.System:
        nonlocal env
        env = e

        async def server() -> object:
            return {Acquire: acquire}

        async def job(client: str, incarnation: int, order: sut.Order) -> str:
            response = await aio.call(Acquire("db", 1, client))
            return str(response.what)

        class NoLeases:
            def count(self, limit: str) -> int:
                return 0

            def expiry(self, lease: int) -> int | None:
                return None

            def lease_ids(self) -> list[int]:
                return []

        return aio.System(server=server, job=job, leases=NoLeases())

    return sut.Model(build)


thread = _misbehaving("thread")
executor = _misbehaving("executor")
socket = _misbehaving("socket")
swallowed = _misbehaving("swallowed")
clock = _misbehaving("clock")
foreign = _misbehaving("foreign")
spins = _misbehaving("spins")


def build_leaky(env: sut.Env[object]) -> aio.System:
    async def server() -> object:
        async def acquire(req: Acquire) -> Done:
            LEAK[0] += 1  # kept between runs: the second run of a seed answers differently
            return Done(f"call {LEAK[0]}")

        return {Acquire: acquire}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        return str((await aio.call(Acquire("db", 1, client))).what)

    return aio.System(server=server, job=job)


leaky = sut.Model(build_leaky)


def _sync_fastapi(inline: bool) -> sut.Model[object]:
    """A FastAPI app with a plain-def dependency and a plain-def endpoint (FastAPI runs both in a thread pool)."""

    def build(env: sut.Env[object]) -> aio.System:
        async def server() -> object:
            from fastapi import Depends, FastAPI

            app = FastAPI()

            def settings() -> dict[str, str]:
                return {"answer": "42"}

            @app.post("/ask")
            def ask(config: dict[str, str] = Depends(settings)) -> dict[str, str]:
                return config

            async def to_thread() -> str:
                return await asyncio.to_thread(lambda: "threaded")

            @app.post("/thread")
            async def thread() -> dict[str, str]:
                return {"answer": await to_thread()}

            return app

        async def job(client: str, incarnation: int, order: sut.Order) -> str:
            async with aio.http() as http:
                first = (await http.post("/ask")).json()["answer"]
                second = (await http.post("/thread")).json()["answer"]
            return f"{first} {second}"

        return aio.System(server=server, job=job, inline_threads=inline)

    return sut.Model(build)


sync_fastapi = _sync_fastapi(inline=True)
sync_fastapi_refused = _sync_fastapi(inline=False)


class SplitStores:
    """A lease service that keeps its counts and its leases in two stores and changes one, then the other (as
    Prefect does): a grant counts the slot, takes a round trip, then stores the lease; a release the reverse."""

    def __init__(self) -> None:
        self.counts = {"db": 0}
        self.expiries: dict[int, int] = {}  # lease -> expiry (virtual ms)
        self.holders: dict[int, str] = {}

    async def acquire(self, req: Acquire) -> Granted:
        self.counts[req.limit] += req.slots
        await aio.round_trip()
        lease = len(self.holders) + 1
        self.holders[lease], self.expiries[lease] = req.holder, 600_000
        return Granted(lease, 600_000, 0, 0)

    async def release(self, req: Release) -> Done:
        if req.lease in self.expiries:
            self.counts[req.limit] -= req.slots
            await aio.round_trip()
            del self.expiries[req.lease]
        return Done("released")

    # the LeaseTable the harness reads
    def version(self) -> object:
        return self.counts["db"], tuple(self.expiries)

    def leases(self) -> list[aio.LeaseRow]:
        return [aio.LeaseRow(lease, self.holders[lease], "db", 1, expiry) for lease, expiry in self.expiries.items()]

    def count(self, limit: str) -> int:
        return self.counts[limit]

    def expiry(self, lease: int) -> int | None:
        return self.expiries.get(lease)

    def lease_ids(self) -> list[int]:
        return sorted(self.expiries)


def _split_stores(settled: bool) -> sut.Model[object]:
    def build(env: sut.Env[object]) -> aio.System:
        stores = SplitStores()

        async def server() -> object:
            return {Acquire: stores.acquire, Release: stores.release}

        async def job(client: str, incarnation: int, order: sut.Order) -> str:
            granted = await aio.call(Acquire("db", 1, client))
            await aio.work(granted.lease, order.arg("work"))
            await aio.call(Release(granted.lease, client, "db", 1))
            return "done"

        return aio.System(server=server, job=job, leases=stores, observe=True,
                          settled=(lambda: True) if settled else None)

    return sut.Model(build)


split_stores, split_stores_settled = _split_stores(False), _split_stores(True)


def build_crash_hook(env: sut.Env[object]) -> aio.System:
    async def server() -> object:
        return {}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        aio.on_crash(lambda: LOG.append((f"{client}.{incarnation} died", _when())))  # what it holds open, closed
        await aio.work(1, order.arg("work"))
        return "done"

    return aio.System(server=server, job=job)


crash_hook = sut.Model(build_crash_hook)


@sut.message
class Take:
    """Acquire one slot of ``limit`` for ``holder``."""

    limit: str
    holder: str


@sut.message
class Taken:
    lease: object  # the service's own id: a UUID string, or a uuid.UUID
    expiry: int


@sut.message
class Give:
    lease: object
    holder: str


class UuidLeases:
    """A lease service whose ids are UUIDs (strings, or ``uuid.UUID`` objects), with a reaper; ``bug``: "reaper"
    deletes what it read as expired without a second look, after a round trip (a renewal may land between)."""

    def __init__(self, env: sut.Env[object], as_objects: bool, bug: str | None) -> None:
        self.env, self.as_objects, self.bug = env, as_objects, bug
        self.counts = {name: 0 for name in env.limits}
        self.rows: dict[object, tuple[str, str, int]] = {}  # lease -> (holder, limit, expiry)
        self.version_ = 0

    def _now(self) -> int:
        return aio.virtual_ms(time.time())

    async def take(self, req: Take) -> Taken | Done:
        if self.counts[req.limit] >= self.env.limits[req.limit]:
            return Done("full")
        import uuid
        lease: object = uuid.uuid4() if self.as_objects else str(uuid.uuid4())
        expiry = self._now() + 2_000
        self.counts[req.limit] += 1
        self.rows[lease] = (req.holder, req.limit, expiry)
        self.version_ += 1
        return Taken(lease, expiry)

    async def give(self, req: Give) -> Done:
        row = self.rows.pop(req.lease, None)
        if row is not None:
            self.counts[row[1]] -= 1
            self.version_ += 1
        return Done("released")

    async def reap(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            expired = [lease for lease, row in self.rows.items() if row[2] <= self._now()]
            if self.bug == "reaper" and not expired:
                expired = [lease for lease, row in self.rows.items() if row[2] <= self._now() + 1_900]
            await aio.round_trip()
            for lease in expired:
                row = self.rows.pop(lease, None)
                if row is not None:
                    self.counts[row[1]] -= 1
                    self.version_ += 1

    # the LeaseTable the harness reads
    def version(self) -> object:
        return self.version_

    def leases(self) -> list[aio.LeaseRow]:
        return [aio.LeaseRow(lease, holder, limit, 1, expiry) for lease, (holder, limit, expiry) in self.rows.items()]

    def count(self, limit: str) -> int:
        return self.counts[limit]

    def expiry(self, lease: object) -> int | None:
        row = self.rows.get(lease)
        return row[2] if row is not None else None

    def lease_ids(self) -> list[object]:
        return sorted(self.rows, key=str)


def _uuid_leases(as_objects: bool, bug: str | None = None) -> sut.Model[object]:
    def build(env: sut.Env[object]) -> aio.System:
        stores = UuidLeases(env, as_objects, bug)

        async def server() -> object:
            asyncio.get_running_loop().create_task(stores.reap())
            return {Take: stores.take, Give: stores.give}

        async def job(client: str, incarnation: int, order: sut.Order) -> str:
            taken = await aio.call(Take(order.arg("limit"), client))
            if not isinstance(taken, Taken):
                return "full"
            await aio.work(taken.lease, order.arg("work"))
            await aio.call(Give(taken.lease, client))
            return "done"

        return aio.System(server=server, job=job, leases=stores, observe=True,
                          bounds=sut.Bounds(reclaim_within=3_000))

    return sut.Model(build)


uuid_leases, uuid_object_leases = _uuid_leases(False), _uuid_leases(True)
uuid_leases_early_reaper = _uuid_leases(False, "reaper")


@sut.message
class Stamped:
    """Acquire (``lease`` None) or renew one slot of ``limit``, sent with the client's wall clock (``sent``, virtual
    ms) for a server that trusts it."""

    limit: str
    holder: str
    lease: object
    sent: int


class ClientClock:
    """A lease service that computes a lease's expiry from the client's timestamp, not its own clock: correct while
    the clocks agree, wrong once a client's is set back (its lease runs out before the client times it out)."""

    TTL = 10_000

    def __init__(self, env: sut.Env[object]) -> None:
        self.limits = dict(env.limits)
        self.counts = {name: 0 for name in env.limits}
        self.rows: dict[int, tuple[str, str, int]] = {}  # lease -> (holder, limit, expiry)
        self.next, self.version_ = 1, 0

    async def stamped(self, req: Stamped) -> Taken | Done:
        expiry = req.sent + self.TTL  # wrong: the client's clock, where the server's own is the authority
        if req.lease is not None:
            row = self.rows.get(req.lease)  # type: ignore[call-overload]
            if row is None or row[2] <= aio.virtual_ms(time.time()):
                return Done("lost")
            self.rows[req.lease] = (row[0], row[1], max(row[2], expiry))  # type: ignore[index]
            self.version_ += 1
            return Taken(req.lease, expiry)
        if self.counts[req.limit] >= self.limits[req.limit]:
            return Done("full")
        lease, self.next = self.next, self.next + 1
        self.counts[req.limit] += 1
        self.rows[lease] = (req.holder, req.limit, expiry)
        self.version_ += 1
        return Taken(lease, expiry)

    async def give(self, req: Give) -> Done:
        row = self.rows.pop(req.lease, None)  # type: ignore[call-overload]
        if row is not None:
            self.counts[row[1]] -= 1
            self.version_ += 1
        return Done("released")

    async def reap(self) -> None:
        while True:
            await asyncio.sleep(1)
            for lease in sorted(self.rows):
                if self.rows[lease][2] <= aio.virtual_ms(time.time()):
                    holder, limit, _ = self.rows.pop(lease)
                    self.counts[limit] -= 1
                    self.version_ += 1

    # the LeaseTable the harness reads
    def version(self) -> object:
        return self.version_

    def leases(self) -> list[aio.LeaseRow]:
        return [aio.LeaseRow(lease, holder, limit, 1, expiry) for lease, (holder, limit, expiry) in self.rows.items()]

    def count(self, limit: str) -> int:
        return self.counts[limit]

    def expiry(self, lease: int) -> int | None:
        row = self.rows.get(lease)
        return row[2] if row is not None else None

    def lease_ids(self) -> list[int]:
        return sorted(self.rows)


def build_client_clock(env: sut.Env[object]) -> aio.System:
    service = ClientClock(env)

    async def server() -> object:
        asyncio.get_running_loop().create_task(service.reap())
        return {Stamped: service.stamped, Give: service.give}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        limit, loop = order.arg("limit"), asyncio.get_running_loop()
        while True:
            asked = loop.time()
            try:
                taken = await aio.call(Stamped(limit, client, None, aio.virtual_ms(time.time())))
            except TimeoutError:
                continue
            if isinstance(taken, Taken):
                break
            await asyncio.sleep(1)
        valid_until = asked + ClientClock.TTL / 2000  # half the TTL from the asking, on its monotonic clock
        left = order.arg("work")
        while left > 0:
            room = int((valid_until - loop.time()) * 1000)
            if room >= 1:  # work only while its own timing says the lease holds (a pause cuts a slice short)
                left -= min(left, room) - await aio.work(taken.lease, min(left, room))
                continue
            asked = loop.time()
            try:
                renewed = await aio.call(Stamped(limit, client, taken.lease, aio.virtual_ms(time.time())))
            except TimeoutError:
                return "renewal timed out"
            if not isinstance(renewed, Taken):
                return "lease lost"
            valid_until = asked + ClientClock.TTL / 2000
        try:
            await aio.call(Give(taken.lease, client))
        except TimeoutError:
            return "release timed out"
        return "done"

    return aio.System(server=server, job=job, leases=service, observe=True,
                      bounds=sut.Bounds(reclaim_within=ClientClock.TTL + 1_000, renew_every=ClientClock.TTL // 2))


client_clock = sut.Model(build_client_clock)


def build_chatty(env: sut.Env[object]) -> aio.System:
    """A service and a client library that log as real ones do: a retry warning, a handler's info line, an error
    with its exception, to a StreamHandler on stderr set up as a library sets one up."""
    import logging
    import sys

    log = logging.getLogger("chatty")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)

    async def server() -> object:
        async def acquire(req: Acquire) -> Done:
            log.info("granting %s to %s", req.limit, req.holder)
            try:
                raise ValueError("the store said no")
            except ValueError:
                log.exception("the store failed once")
            return Done("granted")

        return {Acquire: acquire}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        logging.getLogger("chatty.client").warning("retrying request (1 of 3)")  # the last-resort handler's
        return str((await aio.call(Acquire("db", 1, client))).what)

    return aio.System(server=server, job=job)


chatty = sut.Model(build_chatty)


# --- a queue: runs submitted to the server, taken by workers that poll it, each run's claim a delivery count ----

@sut.message
class TakeRun:
    worker: str


@sut.message
class TakenRun:
    run: int  # 0: nothing to take
    work: int
    token: int


@sut.message
class AckRun:
    run: int


class Queue(aio.RunTable):
    """The queue's store, kept by the adapter (it outlives the server's restarts): run -> [state, work, deliveries,
    worker, handed at]; ``twice``: a take hands a running run out again (a second delivery) while its first runs."""

    def __init__(self, twice: bool) -> None:
        self.rows: dict[int, list[object]] = {}
        self.moves = 0
        self.twice = twice

    def version(self) -> object:
        return self.moves

    def runs(self) -> list[aio.RunRow]:
        return [aio.RunRow(run, str(state), int(n) or None, worker if worker else None, int(at))  # type: ignore[arg-type]
                for run, (state, _, n, worker, at) in sorted(self.rows.items())]

    def take(self, worker: str, now: int) -> TakenRun:
        for run, row in sorted(self.rows.items()):
            if row[0] == "SCHEDULED" or (self.twice and row[0] == "RUNNING" and row[3] == worker and row[2] == 1):
                row[0], row[2], row[3], row[4] = "RUNNING", int(row[2]) + 1, worker, now  # type: ignore[operator]
                self.moves += 1
                return TakenRun(run, int(row[1]), int(row[2]))  # type: ignore[call-overload]
        return TakenRun(0, 0, 0)


def _queue(twice: bool, idle: bool = True) -> sut.Model[object]:
    def build(env: sut.Env[object]) -> aio.System:
        queue = Queue(twice)

        async def server() -> object:
            async def submit(req: sut.Submit) -> Done:
                queue.rows.setdefault(req.run, ["SCHEDULED", req.work, 0, "", 0])
                queue.moves += 1
                return Done("queued")

            async def take(req: TakeRun) -> TakenRun:
                await aio.round_trip()
                return queue.take(req.worker, aio.virtual_ms(time.time()))

            async def ack(req: AckRun) -> Done:
                queue.rows[req.run][0] = "COMPLETED"
                queue.moves += 1
                return Done("acked")

            async def cancel(req: sut.Cancel) -> Done:
                return Done("not cancellable")

            return {sut.Submit: submit, sut.Cancel: cancel, TakeRun: take, AckRun: ack}

        async def perform(taken: TakenRun) -> None:
            await aio.work(sut.RunClaim(taken.run, taken.token), taken.work)
            while True:  # acknowledged until the queue answers (an ack is idempotent)
                try:
                    await aio.call(AckRun(taken.run))
                    return
                except TimeoutError:
                    pass

        async def job(client: str, incarnation: int, order: sut.Order) -> str:
            while True:  # a worker serves for good, its tasks beside its polls of the queue, one a second
                try:
                    taken = await aio.call(TakeRun(client))
                except TimeoutError:
                    taken = TakenRun(0, 0, 0)  # lost: taken again by nobody, or handed out and given up
                if taken.run:
                    asyncio.get_running_loop().create_task(perform(taken))
                await asyncio.sleep(1)

        return aio.System(server=server, job=job, runs=queue, observe=True, idle=(lambda client: True) if idle else None,
                          bounds=sut.Bounds(claim_timeout=600_000, redeliver_within=60_000, heartbeat_every=0))

    return sut.Model(build)


queue, queue_twice, queue_never_idle = _queue(False), _queue(True), _queue(False, idle=False)
