"""Small asyncio services on Redis for the tests of dst.aio.stores.redis: redis-py's asyncio client, unmodified,
against a Server of the adapter's, in the server process and in the clients' jobs."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from dst import aio, sut
from dst.aio import stores

LOG: list[tuple[str, object]] = []  # what the services did, and when (virtual ms)
LAST: dict[str, Any] = {}  # the last build's Redis server, for the tests to read after the run


@sut.message
class Do:
    """Ask the server to do ``what`` on Redis (the request the jobs send)."""

    kind = 20
    what: str


@sut.message
class Did:
    kind = 21
    what: str


def now() -> int:
    return round(asyncio.get_running_loop().time() * 1000)


def note(what: str, value: object = None) -> None:
    LOG.append((what, (now(), value) if value is not None else now()))


Handler = Callable[[Any, Any], Awaitable[str]]  # (the server's redis client, the Server) -> what it did
Job = Callable[[str, Any, sut.Order], Awaitable[str]]  # (client, the Server, order) -> how it ended


def model(handlers: dict[str, Handler], job: Job | None = None, *, persistence: str = "aof",
          setup: Callable[[Any], Awaitable[None]] | None = None, retrying: bool = False) -> sut.Model[object]:
    """A service whose server answers ``Do(what)`` with ``handlers[what]`` and whose jobs run ``job`` (by default: ask
    the server to do the step's ``limit``). Its server's client is made by ``Redis.from_url``, which retries nothing
    (redis-py 8), or, ``retrying``, by ``Redis(host, port)``, with redis-py's default retry."""

    def build(env: sut.Env[object]) -> aio.System:
        from redis.asyncio import Redis

        server = LAST["server"] = stores.redis.Server(name="redis", persistence=persistence)  # type: ignore[arg-type]

        async def boot() -> object:
            client = Redis(host=server.name, port=server.port) if retrying else Redis.from_url(server.url)
            await client.ping()  # the connection's handshake before any request: a request's commands only
            if setup is not None:
                await setup(client)

            async def do(request: Do) -> Did:
                return Did(await handlers[request.what](client, server))

            return {Do: do}

        async def run_job(client: str, incarnation: int, order: sut.Order) -> str:
            if job is not None:
                return await job(client, server, order)
            return str((await aio.call(Do(order.arg("limit")), timeout=30_000)).what)

        return aio.System(server=boot, job=run_job)

    return sut.Model(build)


# --- a round trip per command -------------------------------------------------------------------------------

async def _commands(r: Any, server: Any) -> str:
    times = [now()]
    await r.set("k", "v")
    times.append(now())
    await r.get("k")
    times.append(now())
    async with r.pipeline(transaction=True) as p:
        p.incr("n").incr("n").set("m", "x").get("m").expire("m", 60)
        done = await p.execute()
    times.append(now())
    async with r.pipeline(transaction=False) as p:
        p.get("k").get("n")
        plain = await p.execute()
    times.append(now())
    return f"{[b - a for a, b in zip(times, times[1:])]} {done} {plain}"


async def _timed_out(r: Any, server: Any) -> str:
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import TimeoutError

    impatient = Redis.from_url(server.url, retry=Retry(NoBackoff(), 0), single_connection_client=True)
    await impatient.ping()
    impatient.connection.socket_timeout = 0.002  # connected: now shorter than a round trip
    try:
        await impatient.set("late", "1")
        outcome = "answered"
    except TimeoutError:
        outcome = "timed out"  # redis-py closes the connection; the SET is already on its way
    first = server.string("late")
    await asyncio.sleep(0.01)
    await impatient.aclose()
    return f"{outcome} {first!r} {server.string('late')!r}"


commands = model({"commands": _commands, "timed-out": _timed_out})


# --- blocking reads -------------------------------------------------------------------------------------------

async def _group(r: Any) -> None:
    await r.xgroup_create("s", "g", id="0", mkstream=True)


async def _xadd(r: Any, server: Any) -> str:
    entry = await r.xadd("s", {"f": "v"})
    note("added", entry)
    return "added"


async def _read_blocking(client: str, server: Any, order: sut.Order) -> str:
    from redis.asyncio import Redis

    if order.arg("limit") != "read":
        return str((await aio.call(Do(order.arg("limit")), timeout=30_000)).what)
    r = Redis.from_url(server.url)
    note(f"{client} reads")
    block = order.arg("work")
    got = await r.xreadgroup("g", client, {"s": ">"}, block=0 if block == 60_000 else block, count=1)
    note(f"{client} read", repr(got))
    blpop = await r.blpop(["nothing"], timeout=2 if block != 60_000 else 0.001)
    note(f"{client} blpop", repr(blpop))
    await r.aclose()
    return "read"


async def _busy(r: Any, server: Any) -> str:
    from redis.asyncio import Redis

    other = Redis.from_url(server.url)
    await other.ping()
    seen = [server.busy]
    parked = asyncio.create_task(other.blpop(["queue"], timeout=0))
    await asyncio.sleep(0.001)
    seen.append(server.busy)  # BLPOP on its way
    await asyncio.sleep(0.01)
    seen.append(server.busy)  # parked: idle
    pushing = asyncio.create_task(r.lpush("queue", "x"))
    await asyncio.sleep(0.001)
    seen.append(server.busy)  # LPUSH on its way
    await pushing
    popped = await parked
    seen.append(server.busy)
    await other.aclose()
    return f"{seen} {popped}"


blocking = model({"xadd": _xadd, "busy": _busy}, _read_blocking, setup=_group)


# --- pub/sub ------------------------------------------------------------------------------------------------

async def _publish(r: Any, server: Any) -> str:
    n = await r.publish("news", "hello")
    note("published", n)
    return f"to {n}"


async def _subscribe(client: str, server: Any, order: sut.Order) -> str:
    from redis.asyncio import Redis

    if order.arg("limit") != "listen":
        return str((await aio.call(Do(order.arg("limit")), timeout=30_000)).what)
    r = Redis.from_url(server.url, protocol=2 if client == "c1" else 3)
    pubsub = r.pubsub()
    await pubsub.subscribe("news")
    await pubsub.psubscribe("ne*")
    got = []
    while len(got) < 3:
        message = await pubsub.get_message(timeout=None)
        if message is not None:
            got.append((message["type"], message["data"]))
            note(f"{client} got {message['type']}", repr(message["data"]))
    await pubsub.aclose()
    await r.aclose()
    return repr(got)


pubsub = model({"publish": _publish}, _subscribe)


# --- restarts and resets --------------------------------------------------------------------------------------

async def _write_and_restart(r: Any, server: Any) -> str:
    from redis.exceptions import ConnectionError

    await r.set("kept", "1")
    await r.xadd("s", {"f": "v"})
    sha = await r.script_load("return 1")
    note("restart")
    server.restart()
    try:
        await r.get("kept")
    except ConnectionError:  # the pooled connection was reset: redis-py reads the end of the stream
        note("reset seen")
    value = await r.get("kept")  # and opens another
    scripts = await r.script_exists(sha)
    return f"{value!r} {server.stream('s') != []} {scripts}"


async def _restart(r: Any, server: Any) -> str:
    note("restart")
    server.restart()
    return "restarted"


async def _reset_in_flight(client: str, server: Any, order: sut.Order) -> str:
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError

    what = order.arg("limit")
    if what not in ("park", "hold"):
        return str((await aio.call(Do(what), timeout=30_000)).what)
    r = Redis.from_url(server.url, retry=Retry(NoBackoff(), 0), single_connection_client=True)
    await r.ping()
    try:
        if what == "park":
            await r.blpop(["nothing"], timeout=0)
        else:
            await asyncio.sleep(5)  # idle on an open connection across the restart
            await r.get("x")
    except ConnectionError as e:
        note(f"{client} {what} reset", str(e))
    again = await r.ping()  # redis-py's next use reconnects
    await r.aclose()
    return f"ping {again}"


restarts = model({"restart": _restart}, _reset_in_flight)
restart_aof = model({"restart-check": _write_and_restart})
restart_none = model({"restart-check": _write_and_restart}, persistence="none")


# --- a client crash -------------------------------------------------------------------------------------------

async def _read_or_ask(client: str, server: Any, order: sut.Order) -> str:
    from redis.asyncio import Redis

    if order.arg("limit") != "read":
        return str((await aio.call(Do(order.arg("limit")), timeout=30_000)).what)
    r = Redis.from_url(server.url)
    note(f"{client} reads")
    got = await r.xreadgroup("g", client, {"s": ">"}, block=0)
    note(f"{client} read", repr(got))
    return "read"


async def _pending(r: Any, server: Any) -> str:
    return repr(await r.xpending("s", "g"))


crash = model({"xadd": _xadd, "pending": _pending}, _read_or_ask, setup=_group)


# --- Lua and TTLs -----------------------------------------------------------------------------------------------

async def _lua(r: Any, server: Any) -> str:
    from redis.exceptions import ConnectionError

    out = [await r.eval("redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])", 2, "a", "x", "c")]
    script = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
    out.append(await script(keys=["c"], args=[10]))  # EVALSHA, loaded on NOSCRIPT
    out.append(await r.evalsha(script.sha, 1, "c", 5))
    server.restart()  # the script cache goes with the process
    try:
        await r.ping()
    except ConnectionError:  # the connection was reset: redis-py opens another at the next command
        pass
    out.append(await script(keys=["c"], args=[1]))
    return repr(out)


async def _expiring(r: Any, server: Any) -> str:
    await r.set("short", "1", px=1500)
    await r.hset("h", mapping={"a": "1", "b": "2"})
    await r.expire("h", 3)
    note("ttl", (await r.pttl("short"), server.keys()))
    return "set"


async def _expired(r: Any, server: Any) -> str:
    before = server.keys()
    stored = sorted(server._fake.dbs[0]._dict)  # what Redis still holds, expired or not: a reader deletes nothing
    value, left = await r.get("short"), await r.pttl("h")
    note("expired", (before, stored, value, left, server.hash("h")))
    return "read"


async def _skewed(client: str, server: Any, order: sut.Order) -> str:
    import time

    from redis.asyncio import Redis

    if order.arg("limit") != "skewed":
        return str((await aio.call(Do(order.arg("limit")), timeout=30_000)).what)
    r = Redis.from_url(server.url)
    entry = await r.xadd("clock", {"f": "v"})  # the id is Redis's clock, not this client's
    await r.set("short", "1", px=1500)
    note("skewed", (round(time.time() * 1000), entry, await r.pttl("short")))
    await r.aclose()
    return "skewed"


lua = model({"lua": _lua})
ttl = model({"expiring": _expiring, "expired": _expired}, _skewed)


# --- the determinism test's service: what varies by seed, by address, by hash seed ----------------------------

async def _mixed_setup(r: Any) -> None:
    await r.xgroup_create("jobs", "workers", id="0", mkstream=True)
    await r.sadd("names", *(f"n{i}" for i in range(20)))


async def _produce(r: Any, server: Any) -> str:
    ids = [await r.xadd("jobs", {"n": str(i)}) for i in range(3)]
    popped = await r.spop("names")
    # A list, in the order Redis sent them (redis-py's SMEMBERS makes a set): fakeredis's order is the members'
    # string hashes', which dst has it iterate as they were added instead.
    members = await r.eval("return redis.call('smembers', KEYS[1])", 1, "names")
    listed = await r.sinter("names")
    await r.publish("done", repr(ids))
    return f"{ids} {popped} {members} {len(listed)} {await r.srandmember('names', 3)} {await r.randomkey()}"


async def _consume(client: str, server: Any, order: sut.Order) -> str:
    from redis.asyncio import Redis

    what = order.arg("limit")
    if what != "consume":
        return str((await aio.call(Do(what), timeout=30_000)).what)
    r = Redis.from_url(server.url)
    pubsub = r.pubsub()
    await pubsub.subscribe("done")
    got = await r.xreadgroup("workers", client, {"jobs": ">"}, block=3000, count=2)
    message = await pubsub.get_message(timeout=5)
    while message is not None and message["type"] != "message":
        message = await pubsub.get_message(timeout=5)
    if got:
        await r.xack("jobs", "workers", *(entry for entry, _ in got[0][1]))
    await pubsub.aclose()
    await r.aclose()
    return f"{got} {None if message is None else message['data']}"


mixed = model({"produce": _produce}, _consume, setup=_mixed_setup)


# --- pydocket: a task added by the service, run by a worker in a client ---------------------------------------

async def greet(name: str) -> None:
    note("greeted", name)


def _docket(env: sut.Env[object]) -> aio.System:
    from docket import Docket, Worker

    server = LAST["server"] = stores.redis.Server(name="redis")

    async def boot() -> object:
        docket = Docket(name="tasks", url=server.url)
        await docket.__aenter__()  # for the life of the process: a crash gives it no time to close
        docket.register(greet)

        async def add(request: Do) -> Did:
            execution = await docket.add(greet)(request.what)
            return Did(execution.key)

        return {Do: add}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        if order.arg("limit") != "work":
            return str((await aio.call(Do(client), timeout=30_000)).what[:8])
        async with Docket(name="tasks", url=server.url) as docket:
            docket.register(greet)
            async with Worker(docket, name=client) as worker:
                await worker.run_until_finished()
        return "worked"

    return aio.System(server=boot, job=job)


docket = sut.Model(_docket)


# --- a reset store connection: redis-py's own retry sends the command again ------------------------------------

async def _incr(r: Any, server: Any) -> str:
    return str(await r.incr("n"))


counter = model({"incr": _incr}, retrying=True)
