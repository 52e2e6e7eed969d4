"""Processes of an asyncio system: the server and the clients, on one deterministic loop.

They keep the process protocol the faults call (``crash``, ``restart``, ``pause``, ``skew``, ``pin_slow``,
``pin_reset``, ``receive``, ``idle``, ``targets``), so every fault kind acts on an asyncio process as it acts on a
coroutine-seam one, and the runner, the invariants and the findings see no difference.

* :class:`Server` builds the service with the adapter's factory at every boot (over the durable state
  the run's folder keeps), dispatches each request that arrives as a task of its own (an RPC handler, or
  the ASGI app through httpx's ASGI support), and answers through dst's network. A restart kills the
  process (none of its code runs again: its handles are dropped, its open store connections closed,
  which rolls back what had not committed), and builds it again after the downtime.
* :class:`Client` runs one client's jobs one at a time, as tasks; its calls to the server go through
  the network, each with a timeout; a pause freezes it; a restart is a new incarnation with no memory.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from typing import Any, Callable, Mapping

from ..errors import ContractError
from ..frames import where_raised
from ..sim.process import ClientLifecycle, Fire, HostHooks, ServerLifecycle, Targets
from ..sim.kernel import Kernel
from ..sim.network import Network
from ..sim.store import RoundTrips
from ..sim.trace import BOOT, OWN, RESPONSE, SENT, Event, background_key, check_loops, message_key
from .handles import Process
from .loop import REQUEST, Loop
from .observe import Observer, RunObserver
from .wire import HttpRequest, HttpResponse, RemoteError

async def _moment(process: Any, name: str, until: int | None) -> None:
    """A sensitive moment of ``process``'s code (naming the deadline ``until``, virtual ms, or none): the fault
    armed for it, if any, strikes here."""
    armed = process.targets.take(name)
    if armed is None:
        return
    process.trace.append((process.kernel.now, process.name, "moment", f"{name}: {armed[0]}"))
    epoch = process.epoch
    armed[1](until)
    if process.epoch != epoch:
        await process.loop.create_future()  # struck down at the moment: nothing of this process runs again
    await asyncio.sleep(0)  # paused at the moment: the rest of the step waits for the resume


AWAIT = "await"  # the moment every await in the user's code is: a fault aimed at it strikes at the next resumption


class _Targets(Targets):
    """A process's armed faults; one aimed at ``await`` strikes as the process next resumes from any await."""

    __slots__ = ("process",)

    def __init__(self, process: Any) -> None:
        super().__init__()
        self.process = process

    def arm(self, moment: str, what: str, fire: Fire) -> None:
        if moment != AWAIT:
            super().arm(moment, what, fire)
        elif self.process.at_await is None:
            process = self.process

            def strike() -> None:
                process.trace.append((process.kernel.now, process.name, "moment", f"{AWAIT}: {what}"))
                fire(None)

            process.at_await = strike


def _in_context(key: int) -> contextvars.Context:
    context = contextvars.copy_context()
    context.run(REQUEST.set, key)
    return context


class Server(Process, ServerLifecycle):
    __slots__ = ("kernel", "loop", "network", "trace", "ghost", "trips", "factory", "reset", "app", "up", "boots",
                 "serving", "targets", "trip_counts", "backlog", "ready", "observers", "settled", "replied")

    def __init__(self, kernel: Kernel, loop: Loop, network: Network, trace: list[Event], ghost: HostHooks,
                 trips: RoundTrips, factory: Callable[[], Any], reset: Callable[[], None] | None) -> None:
        super().__init__("server")
        self.kernel = kernel
        self.loop = loop
        self.network = network
        self.trace = trace
        self.ghost = ghost
        self.trips = trips
        self.replied: dict[str, list[int]] | None = None
        self.factory = factory
        self.reset = reset
        self.app: Any = None
        self.up = False
        self.ready = False  # the factory has built the service of this boot
        self.boots = 0
        self.serving = 0
        self.targets = _Targets(self)
        self.trip_counts: dict[int, int] = {}  # request key -> store round trips so far
        self.started: dict[str, int] = {}  # this boot's background jobs of each name (dst.aio.background)
        self.backlog: list[tuple[Any, ...]] = []  # requests that arrived while the service was being built
        # Facts from what the store holds, for a service that reports none: its leases, its runs.
        self.observers: list[Observer | RunObserver] = []
        self.settled: Callable[[], bool] | None = None  # the service's stores agree: see dst.aio.System.settled
        self.settle = self.after_step

    # --- the process protocol ---------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        return self.serving == 0 and self.up and self.ready and self.paused_until <= self.kernel.now

    def boot(self) -> None:
        self.up = True
        self.ready = False
        self.boots += 1
        self.started = {}
        self.ghost.server_up()
        self.trace.append((self.kernel.now, "server", "boot", f"epoch {self.epoch}"))
        loop = self.loop
        loop.process = self
        loop.create_task(self._build(), context=_in_context(background_key(BOOT, self.boots, 0)))

    async def _build(self) -> None:
        self.app = await self.factory()
        self.ready = True
        backlog, self.backlog = self.backlog, []
        for message in backlog:
            self._dispatch(message)

    def _thaw(self) -> None:
        self.loop.thaw(self)

    def restart(self, down: int) -> None:
        self.epoch += 1  # every handle of the old process is dropped unrun
        self.up = self.ready = False
        self.serving = 0
        self.paused_until = -1
        self.frozen = []
        self.backlog = []
        self.app = None
        self.trace.append((self.kernel.now, "server", "restart", f"down for {down}ms"))
        self.ghost.server_down()
        dying, self.on_crash = self.on_crash, []
        for die in dying:
            die()
        if self.reset is not None:
            self.reset()
        self.loop.current = None  # what the restart did is no request's: the last callback that ran may be one
        self.after_step()  # what the crash rolled back
        self.kernel.after(down, self._boot_epoch, self.epoch)

    def after_step(self) -> None:
        for observer in self.observers:
            observer.step()
        if self.settled is None or (self.serving == 0 and self.settled()):
            self.ghost.settle()

    # --- requests ------------------------------------------------------------------------------------------

    def _accept(self, message: tuple[Any, ...]) -> None:
        self.serving += 1
        if self.ready:
            self._dispatch(message)
        else:
            self.backlog.append(message)

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        loop = self.loop
        loop.process = self
        loop.create_task(self._handle(message), context=_in_context(message[2]))

    async def _handle(self, message: tuple[Any, ...]) -> None:
        payload = message[3]
        response: Any
        try:
            if payload.__class__ is HttpRequest:
                from .net import serve_http

                response = await serve_http(self.app, payload, message[0])
            else:
                handler = self.app.get(payload.__class__) if isinstance(self.app, Mapping) else None
                if handler is None:
                    raise ContractError(f"the service has no handler for {payload.__class__.__name__} requests")
                response = await handler(payload)
        except Exception as e:  # the service's own error: a real server logs it and answers with an error
            self.trace.append((self.kernel.now, "server", "error", f"{type(e).__name__}: {e} at {where_raised(e)}"))
            response = (HttpResponse(500, (), b"Internal Server Error") if payload.__class__ is HttpRequest
                        else RemoteError(type(e).__name__, str(e)))
        self.serving -= 1
        self.ghost.handled(payload)
        if response is not None:
            self.reply(message, response)

    # --- what the service awaits -----------------------------------------------------------------------------

    def trip(self) -> tuple[int, int]:
        """The next store round trip of the request (or background job) running now: its latency and its rank among
        what is due then. For a drop-in that does not wait it out itself (a Redis write: its client reads the reply)."""
        return self.trips.delay(*self._next_trip())

    def connection_trip(self) -> tuple[int, int, str]:
        """:meth:`trip` for a write on a connection store's connection (Redis), and whether that connection is reset
        at it: ``""`` (no), ``"before"`` the store ran the write, or ``"after"`` (its reply is lost)."""
        return self.trips.connection_delay(*self._next_trip())

    def _next_trip(self) -> tuple[int, int]:
        key = REQUEST.get()
        n = self.trip_counts[key] = self.trip_counts.get(key, 0) + 1
        return key, n

    def background(self, name: str) -> contextvars.Context:
        """A context for the next background job named ``name`` of this boot: its round trips are keyed
        ``name.<boot>.<n>``, apart from the boot's and from every other job's."""
        check_loops([name])
        n = self.started[name] = self.started.get(name, 0) + 1
        return _in_context(background_key(name, self.boots, n))

    async def round_trip(self) -> None:
        """One store round trip of the request (or background job) running now."""
        ms, rank = self.trip()
        loop = self.loop
        done = loop.create_future()
        loop.call_after_ms(ms, rank, _resolve, done)
        await done

    async def moment(self, name: str, until: int | None = None) -> None:
        await _moment(self, name, until)


def _resolve(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(None)


class Client(Process, ClientLifecycle):
    __slots__ = ("kernel", "loop", "network", "trace", "ghost", "make_job", "timeout", "alive", "incarnation",
                 "jobs", "job", "job_step", "sent", "pending", "slices", "targets", "wall_offset", "ended",
                 "last_active", "serving_idle")

    def __init__(self, name: str, kernel: Kernel, loop: Loop, network: Network, trace: list[Event], ghost: HostHooks,
                 make_job: Callable[[str, int, Any], Any], request_timeout: int) -> None:
        super().__init__(name)
        self.kernel = kernel
        self.loop = loop
        self.network = network
        self.trace = trace
        self.ghost = ghost
        self.make_job = make_job
        self.timeout = request_timeout
        self.alive = True
        self.incarnation = 1
        self.jobs: deque[Any] = deque()
        self.job: asyncio.Task[Any] | None = None
        self.job_step = 0
        self.sent: dict[int, int] = {}
        self.pending: dict[int, asyncio.Future[Any]] = {}  # request key -> its response's future
        # The work slices in progress, in the order begun: [handle, when it ends, the future its task awaits]. A
        # worker that runs several tasks at once (a queue's concurrency) has one each.
        self.slices: list[list[Any]] = []
        # The adapter's word that this worker, its job still running, only waits for work (a long poll): see
        # dst.aio.System.idle. None: a client is idle only once its jobs are done.
        self.serving_idle: Callable[[str], bool] | None = None
        self.targets = _Targets(self)
        self.wall_offset = 0
        self.ended: dict[str, int] = {}
        self.last_active = 0

    def _die(self) -> None:
        self.last_active = self.kernel.now
        self._stop_work()
        self.epoch += 1  # none of this incarnation's code runs again
        self.alive = False
        self.job = None
        self.jobs.clear()
        self.pending = {}
        self.paused_until = -1
        self.frozen = []
        dying, self.on_crash = self.on_crash, []  # what it held open dies with it (its store connections)
        for die in dying:
            die()
        self.ghost.client_died(self.name)

    def _era(self) -> int:
        return self.epoch

    @property
    def working(self) -> Any:
        """The handle of its first work slice in progress (None: it is not working)."""
        return self.slices[0][0] if self.slices else None

    @property
    def idle(self) -> bool:
        if ClientLifecycle.idle.fget(self):  # type: ignore[attr-defined]
            return True
        hook = self.serving_idle  # a worker between tasks, waiting on its queue's long poll, keeps no drain open
        return (hook is not None and self.alive and not self.paused and not self.slices and not self.pending
                and hook(self.name))

    def _cut_work(self, now: int) -> None:
        cut, self.slices = self.slices, []
        for handle, end, wait in cut:  # each task learns how much of its slice was left, in the order begun
            self.ghost.work_stopped(self.name, handle)
            if not wait.done():
                self.loop.process = self
                wait.set_result(end - now)

    def _go_on(self) -> None:
        self.loop.thaw(self)
        if self.job is None and self.jobs:
            self._next_job()

    # --- jobs ---------------------------------------------------------------------------------------------

    def _next_job(self) -> None:
        step = self.jobs.popleft()
        self.job_step = step.id
        self.sent = {}
        self.trace.append((self.kernel.now, self.name, "job", f"step {step.id}"))
        loop = self.loop
        loop.process = self
        context = _in_context(message_key(step.id, 0, 0))
        self.job = job = loop.create_task(self.make_job(self.name, self.incarnation, step), context=context)
        job.add_done_callback(self._job_done)

    def _job_done(self, job: asyncio.Task[Any]) -> None:
        if job is not self.job:
            return
        if job.cancelled() or job.exception() is not None:  # the adapter's own error: it ends the run, as it is
            self.loop.stop_with(job.exception() or RuntimeError(f"{self.name}: its job for step {self.job_step} "
                                                                f"was cancelled"))
            return
        outcome = job.result()
        self.trace.append((self.kernel.now, self.name, "job-end", f"step {self.job_step}: {outcome}"))
        self.ended[outcome] = self.ended.get(outcome, 0) + 1
        self.last_active = self.kernel.now
        self.job = None
        if self.jobs and not self.paused:
            self._next_job()

    # --- what a job awaits ------------------------------------------------------------------------------------

    async def call(self, destination: str, request: Any, timeout: int | None = None) -> Any:
        """Send ``request`` and wait for its response; raises :class:`TimeoutError` when none came in time."""
        kernel, loop = self.kernel, self.loop
        kind = request.kind
        n = self.sent.get(kind, 0)
        self.sent[kind] = n + 1
        key = message_key(self.job_step, kind, n)
        answer = loop.create_future()
        self.pending[key] = answer
        self.trace.append((kernel.now, self.name, "send", (SENT, request, destination, key)))
        self.network.send((self.name, destination, key, request))
        timer = loop.call_later((self.timeout if timeout is None else timeout) / 1000, _time_out, answer)
        try:
            return await answer
        finally:
            timer.cancel()
            if self.pending.get(key) is answer:
                del self.pending[key]

    def receive(self, message: tuple[Any, ...]) -> None:
        key = message[2]
        answer = self.pending.pop(key & ~RESPONSE, None) if self.alive else None
        if answer is None or answer.done():
            return  # a late or duplicated response: nobody waits for it
        payload = message[3]
        self.trace.append((self.kernel.now, self.name, "recv", (OWN, payload, key)))
        self.loop.process = self
        answer.set_result(payload)

    async def work(self, handle: Any, ms: int) -> int:
        """Protected work under ``handle`` for ``ms``; returns the ms not done (a pause cut it)."""
        if ms <= 0:
            raise ContractError(f"{self.name}: a work slice must be positive, got {ms}")
        loop = self.loop
        wait: asyncio.Future[int] = loop.create_future()
        piece = [handle, self.kernel.now + ms, wait]
        self.slices.append(piece)
        self.ghost.work_started(self.name, handle)
        timer = loop.call_later(ms / 1000, _finish_work, self, piece)
        try:
            return await wait
        finally:
            timer.cancel()

    def _stop_work(self, piece: list[Any] | None = None) -> None:
        """One work slice ends (``piece``), or every one in progress (None: the client died)."""
        ending = [piece] if piece is not None else list(self.slices)
        for one in ending:
            if one in self.slices:
                self.slices.remove(one)
                self.ghost.work_stopped(self.name, one[0])

    async def moment(self, name: str, until: int | None = None) -> None:
        await _moment(self, name, until)


def _time_out(answer: asyncio.Future[Any]) -> None:
    if not answer.done():
        answer.set_exception(TimeoutError())


def _finish_work(client: Client, piece: list[Any]) -> None:
    if piece in client.slices:
        client._stop_work(piece)
        if not piece[2].done():
            piece[2].set_result(0)
