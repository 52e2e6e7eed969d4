"""pydocket (from the package index, unmodified) under dst: its Docket adds tasks to a Redis stream in the server
process, its Worker runs them in the clients, on Redis under simulation (``dst.aio.stores.redis``).

* ``server``: the producer's API: a plan's ``submit`` adds the run as a task keyed by it (``run-7``), ``cancel``
  cancels it, through pydocket's own ``Docket``.
* ``job``: a ``serve`` step is one of pydocket's own ``Worker``s, named for its client, run for good; a task is
  protected work under the claim its message was delivered with.
* ``Runs``: what Redis holds of each run (pydocket's ``runs:<key>`` hash, the stream's pending entries), read
  after every step of every process: dst derives the run facts from it (``observe=True``).

Everything is pydocket's own default (its redelivery timeout of 5 minutes, concurrency of 10) unless a scenario
says otherwise.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Hashable, Iterable

import attrs

from dst import aio, sut
from dst.aio import stores

STREAM, GROUP = b"dst:stream", b"docket-workers"  # pydocket's stream and consumer group for a docket named "dst"
STATES = {b"scheduled": "SCHEDULED", b"queued": "SCHEDULED", b"running": "RUNNING", b"completed": "COMPLETED",
          b"failed": "COMPLETED", b"cancelled": "CANCELLED"}


@attrs.frozen
class Options:
    redelivery_timeout: int = sut.option(300_000, "positive-duration",
                                         help="pydocket's redelivery timeout: a message idle this long is claimed again")
    concurrency: int = sut.option(10, "positive-count", help="tasks a worker runs at once (pydocket's concurrency)")


@sut.message
class Queued:
    """The producer's answer: the run was added (its key)."""

    key: str


class Runs(aio.RunTable):
    """Each run as Redis holds it: its state in pydocket's ``runs:run-N`` hash, its claim the pending entry of its
    message. A claim's token is the message's generation and delivery count, rising with every hand-over."""

    def __init__(self, redis: stores.redis.Server) -> None:
        self.redis = redis

    def version(self) -> Hashable:
        return self.redis.version

    def runs(self) -> Iterable[aio.RunRow]:
        redis, now = self.redis, self.redis.now_ms()
        pending = {entry.id: entry for entry in redis.pending(STREAM, GROUP)}
        messages = {fields[b"key"]: (id, fields) for id, fields in redis.stream(STREAM)}
        rows = []
        for key in sorted(k for k in redis.keys() if k.startswith(b"dst:runs:run-")):
            run, held = redis.hash(key), None
            message = messages.get(key[len(b"dst:runs:"):])
            if message is not None and message[0] in pending:
                held = pending[message[0]]
            token = None if held is None else int(message[1].get(b"generation", b"1")) * 1000 + held.deliveries
            rows.append(aio.RunRow(int(key.rsplit(b"-", 1)[1]), STATES.get(run.get(b"state", b""), "SCHEDULED"),
                                   token, None if held is None else held.consumer.decode(),
                                   0 if held is None else now - held.idle))
        return rows

    def token_of(self, run: int) -> int:
        claim = self.claim_of(run)
        return claim.token if claim is not None else 0


def build(env: sut.Env[Options]) -> aio.System:
    from docket import Docket, Worker

    o = env.options
    redis = stores.redis.Server(name="redis", persistence="aof")
    runs = Runs(redis)

    async def perform(run: int, work: int) -> None:
        """The task: its run's work, as protected work under the claim its message came with."""
        claim, left = sut.RunClaim(run, runs.token_of(run)), work
        while left > 0:
            left = await aio.work(claim, left)  # a pause cuts a slice short: the task goes on with the rest

    async def server() -> object:
        docket = Docket(name="dst", url=redis.url)
        await docket.__aenter__()  # for the life of the process: a crash gives it no time to close
        docket.register(perform)

        async def submit(request: sut.Submit) -> Queued:
            execution = await docket.add(perform, key=f"run-{request.run}")(request.run, request.work)
            return Queued(execution.key)

        async def cancel(request: sut.Cancel) -> Queued:
            await docket.cancel(f"run-{request.run}")
            return Queued(f"run-{request.run}")

        return {sut.Submit: submit, sut.Cancel: cancel}

    async def job(client: str, incarnation: int, order: sut.Order) -> str:
        if order.action != "serve":
            return "no leases here"  # a queue's clients only serve: a scenario's lease jobs end at once
        async with Docket(name="dst", url=redis.url) as docket:
            docket.register(perform)
            async with Worker(docket, name=client, concurrency=o.concurrency,
                              redelivery_timeout=timedelta(milliseconds=o.redelivery_timeout)) as worker:
                await worker.run_forever()
        return "stopped"

    # pydocket renews a worker's claims every quarter of the timeout, and sweeps for abandoned ones as often
    # (jittered up to 1.25 times): an idle message reaches a free worker within the timeout and a sweep.
    sweep = o.redelivery_timeout * 5 // 16
    return aio.System(server=server, job=job, runs=runs, observe=True, idle=lambda client: not redis.busy,
                      bounds=sut.Bounds(claim_timeout=o.redelivery_timeout, heartbeat_every=o.redelivery_timeout // 4,
                                        redeliver_within=o.redelivery_timeout + sweep))


model = sut.Model(build, options=Options, scenarios="examples.pydocket:scenarios",
                  description="pydocket's Redis-stream task queue: its own Docket and Worker, from the package index",
                  client_moments=("await",))
