"""Hosts: the processes that run a model's code under the kernel, and the faults on them.

* :class:`ClientHost` runs one client's jobs one at a time. A job is a coroutine (or a
  generator) that awaits the seam's ``sleep``, ``call`` and ``work``, each of which hands this
  host one command (``SLEEP``, ``CALL``, ``WORK``). It owns the faults that hit a client: crash
  (gone for good), restart (a new incarnation that remembers nothing), pause (frozen:
  whatever would have woken it waits until it resumes) and the request timeout.
* :class:`ServerHost` runs the service's handlers. Each ``await store_step()`` of a handler
  costs one store round trip whose latency is a keyed draw, so which ready handler runs
  next is a seeded decision. A restart drops every in-flight handler, loses process
  memory, keeps the store, and starts the background loops again after the downtime.
* :class:`UserHost` sends the requests of people outside the system (submit, cancel),
  each on its own with its retries; :class:`ResourceHost` applies each write on delivery.

They report protected work, step boundaries and finished requests to the ghost (the invariants), and keep the
run's :class:`~dst.sim.process.Running` up to date as they call into the model's code, so who runs is known
when a violation, an error or a stall must be blamed on someone.
"""

from __future__ import annotations

from collections import deque
from functools import partial
from typing import Any, Callable

from ..errors import ContractError, UserError
from ..sut import CALL, MOMENT, RESOURCE, SERVER, SLEEP, WORK, Handler
from .kernel import Kernel
from .network import Network
from .process import ClientLifecycle, HostHooks, Running, ServerLifecycle, Targets
from .store import RoundTrips
from .trace import BOOT, OWN, RESOURCE_WRITE, RESPONSE, SENT, Event, background_key, check_loops, message_key

# The commands a job hands its host (see dst.sut): (SLEEP, ms) -> None, ms of the client's own time
# later; (CALL, destination, request, wait) -> the response, or None on timeout; (WORK, handle, ms) -> ms
# of the slice not done (nonzero when a pause cut it). A handler hands the server None (a store round
# trip), (SLEEP, ms) or (WAIT, wakes, ms) (parked: see dst.sut.Waiters). Both may hand up (MOMENT, name, deadline): a
# targeted fault armed for that moment strikes there.


_NOTHING = object()


class ClientHost(ClientLifecycle):
    __slots__ = (
        "name", "kernel", "network", "trace", "ghost", "running", "make_job", "timeout",
        "alive", "incarnation", "jobs", "job", "job_step", "sent", "wait", "pending",
        "working", "work_end", "paused_until", "stash", "targets", "wall_offset", "ended", "last_active",
    )

    def __init__(self, name: str, kernel: Kernel, network: Network, trace: list[Event], ghost: HostHooks,
                 running: Running, make_job: Callable[[str, int, Any], Handler], request_timeout: int) -> None:
        self.name = name
        self.kernel = kernel
        self.network = network
        self.trace = trace
        self.ghost = ghost
        self.running = running
        self.make_job = make_job  # (client name, incarnation, plan step) -> job coroutine
        self.timeout = request_timeout
        self.alive = True
        self.incarnation = 1
        self.jobs: deque[Any] = deque()
        self.job: Handler | None = None
        self.job_step = 0  # the plan step id of the running job: the key space of its messages
        self.sent: dict[int, int] = {}  # messages of each kind sent by the running job
        self.wait = 0  # bumped on every wait; a wake-up carrying an older value is stale
        self.pending = -1  # key of the request awaiting its response
        self.working: int | None = None  # lease id while inside a WORK slice
        self.work_end = 0
        self.paused_until = -1
        self.stash: object = _NOTHING  # the wake-up that arrived while paused
        self.targets = Targets()
        self.wall_offset = 0  # how far the client's wall clock is from the shared time (set back: negative)
        self.ended: dict[str, int] = {}  # how its jobs ended -> how many
        self.last_active = 0  # when its last job ended, or it died

    def _die(self) -> None:
        self.last_active = self.kernel.now
        self._stop_work()
        if self.job is not None:
            running = self.running
            actor, key = running.actor, running.key
            running.actor, running.key = self.name, None  # its finally blocks are its code
            self.job.close()
            running.actor, running.key = actor, key
        self.alive = False
        self.job = None
        self.jobs.clear()
        self.wait += 1
        self.pending = -1
        self.paused_until = -1
        self.stash = _NOTHING
        self.ghost.client_died(self.name)

    def _era(self) -> int:
        return self.incarnation

    def _cut_work(self, now: int) -> None:
        self.stash = self.work_end - now
        self.wait += 1
        self._stop_work()

    def _go_on(self) -> None:
        stash, self.stash = self.stash, _NOTHING
        if stash is not _NOTHING:
            self._advance(stash)
        elif self.job is None and self.jobs:
            self._next_job()

    # --- running jobs ---------------------------------------------------------------------

    def _next_job(self) -> None:
        step = self.jobs.popleft()
        running = self.running
        actor, key = running.actor, running.key
        running.actor, running.key = self.name, None
        self.job = self.make_job(self.name, self.incarnation, step)
        running.actor, running.key = actor, key
        self.job_step = step.id
        self.sent = {}
        self.trace.append((self.kernel.now, self.name, "job", f"step {step.id}"))
        self._advance(None)

    def _wake(self, arg: tuple[int, object]) -> None:
        wait, value = arg
        if wait != self.wait:
            return  # stale: answered, timed out, or the incarnation is gone
        self.pending = -1  # whatever woke the job, a response that comes later is too late
        if self.paused_until > self.kernel.now:
            self.stash = value
            self.wait += 1
            return
        if self.working is not None:
            self._stop_work()
        self._advance(value)

    def _advance(self, value: object) -> None:
        """The job runs to its next command, as the running process: put back as it was once the job waits, and an
        error on the way blamed on this client (:meth:`Running.blame`)."""
        running = self.running
        was = running.actor, running.key  # (not two locals: the body below names a message's key "key")
        running.actor, running.key = self.name, None
        try:
            kernel = self.kernel
            job = self.job
            self.wait += 1  # whatever else was set to wake this job is stale from now on
            while True:
                try:
                    command = job.send(value)  # type: ignore[union-attr]  # a job is running whenever this is called
                except StopIteration as stop:
                    self.trace.append((kernel.now, self.name, "job-end", f"step {self.job_step}: {stop.value}"))
                    self.ended[stop.value] = self.ended.get(stop.value, 0) + 1
                    self.last_active = kernel.now
                    self.job = None
                    self.pending = -1
                    if self.jobs:
                        self._next_job()
                    return
                if command[0] != MOMENT:
                    break
                armed = self.targets.take(command[1])
                value = None
                if armed is None:
                    continue  # nothing aimed at this moment: the job goes straight on
                self.trace.append((kernel.now, self.name, "moment", f"{command[1]}: {armed[0]}"))
                armed[1](command[2])
                self.running.actor = self.name  # the fault ran the harness's code (a restart's boot, say): this job again
                if not self.alive or self.job is None:
                    return
                if self.paused:
                    self.stash = None  # the job goes on from here when the pause ends
                    return
                job = self.job  # the one running now (a restart's next job, say)
                self.wait += 1
            op = command[0]
            if op == CALL:
                request = command[2]
                kind = request.kind
                n = self.sent.get(kind, 0)
                self.sent[kind] = n + 1
                key = message_key(self.job_step, kind, n)
                self.pending = key
                self.trace.append((kernel.now, self.name, "send", (SENT, request, command[1], key)))
                self.network.send((self.name, command[1], key, request))
                kernel.after(self.timeout + command[3], self._wake, (self.wait, None))
            elif op == WORK:
                lease, ms = command[1], command[2]
                if ms <= 0:
                    raise ContractError(f"{self.name}: a work slice must be positive, got {ms}")
                self.working = lease
                self.work_end = kernel.now + ms
                self.ghost.work_started(self.name, lease)
                kernel.after(ms, self._wake, (self.wait, 0))
            elif op == SLEEP:
                kernel.after(command[1], self._wake, (self.wait, None))
            else:
                raise ContractError(f"{self.name}: unknown command {command!r}")
        except BaseException:
            running.blame()
            raise
        finally:
            running.actor, running.key = was

    def receive(self, message: tuple[Any, ...]) -> None:
        key = message[2]
        if not self.alive or key != self.pending | RESPONSE:
            return  # a late or duplicated response: the job no longer waits for it
        self.pending = -1
        payload = message[3]
        self.trace.append((self.kernel.now, self.name, "recv", (OWN, payload, key)))
        self._wake((self.wait, payload))

    def _stop_work(self) -> None:
        if self.working is not None:
            lease, self.working = self.working, None
            self.ghost.work_stopped(self.name, lease)


class ServerHost(ServerLifecycle):
    """Runs handlers with store latency (:class:`~dst.sim.store.RoundTrips`: the draws, slow round trips and the
    two schedulers); restarts and pauses; the background loops. A pause freezes the process: nothing of it runs
    until it resumes, requests wait, and it goes on with its memory intact."""

    __slots__ = ("kernel", "service", "routes", "loops", "network", "trace", "ghost", "running", "trips", "epoch", "up",
                 "ticks", "boots", "serving", "paused_until", "targets", "frozen", "replied")

    def __init__(self, kernel: Kernel, service: Any, network: Network, trace: list[Event], ghost: HostHooks,
                 running: Running, trips: RoundTrips) -> None:
        self.kernel = kernel
        self.service = service
        self.routes = dict(service.handlers())  # request type -> handler: one lookup per request
        self.loops = tuple(service.loops())  # (name, interval): their handlers' keys read by the name
        try:
            check_loops(name for name, _ in self.loops)
        except ValueError as e:
            raise UserError(f"the service's loops(): {e}") from None
        self.network = network
        self.trace = trace
        self.ghost = ghost
        self.running = running
        self.trips = trips
        self.replied: dict[str, list[int]] | None = None
        self.epoch = 0
        self.up = False
        self.ticks: dict[str, int] = {}  # loop -> ticks so far, over every process: a tick's handlers' key space
        self.boots = 0
        self.serving = 0  # requests this process is handling right now
        self.paused_until = -1
        self.targets = Targets()
        # Handlers a pause froze in the middle of a step (at a moment): they finish it first when the process
        # resumes, before any other handler's step, as a transaction a process pause holds open would.
        self.frozen: list[list[Any]] = []

    def boot(self) -> None:
        self.up = True
        self.boots += 1
        self.ghost.server_up()
        self.trace.append((self.kernel.now, "server", "boot", f"epoch {self.epoch}"))
        running = self.running
        actor, key = running.actor, running.key
        running.actor, running.key = SERVER, None
        for i, recovery in enumerate(self.service.boot()):
            self._step([recovery, background_key(BOOT, self.boots, i), 0, None, self.epoch])
        running.actor, running.key = actor, key
        for loop, interval in self.loops:
            self.kernel.after(interval, self._tick, (self.epoch, loop, interval))

    @property
    def periods(self) -> tuple[int, ...]:
        return tuple(sorted({interval for _, interval in self.loops}))

    @property
    def idle(self) -> bool:
        """Up and running, and no request is being handled (background loops aside)."""
        return self.serving == 0 and self.up and self.paused_until <= self.kernel.now

    def restart(self, down: int) -> None:
        self.epoch += 1
        self.up = False
        self.serving = 0  # the process's handlers are gone
        self.paused_until = -1
        self.frozen = []  # with the process they ran in
        self.trace.append((self.kernel.now, "server", "restart", f"down for {down}ms"))
        self.ghost.server_down()  # down first: what the crash then loses was held when it went down
        running = self.running
        actor, key = running.actor, running.key
        running.actor, running.key = SERVER, None
        self.service.crash()
        running.actor, running.key = actor, key
        self.ghost.settle()
        self.kernel.after(down, self._boot_epoch, self.epoch)

    def _thaw(self) -> None:
        frozen, self.frozen = self.frozen, []
        for task in frozen:
            self._step(task)

    def _accept(self, message: tuple[Any, ...]) -> None:
        payload = message[3]
        running = self.running
        actor, key = running.actor, running.key
        running.actor, running.key = SERVER, None
        handle = self.routes.get(payload.__class__)
        if handle is None:
            raise ContractError(f"the service has no handler for {payload.__class__.__name__} requests "
                            f"(its handlers: {', '.join(sorted(t.__name__ for t in self.routes))})")
        # A task is [handler, key for its draws, steps taken, request message, epoch].
        self.serving += 1
        handler = handle(payload)
        running.actor, running.key = actor, key
        self._step([handler, message[2], 0, message, self.epoch])

    def _step(self, task: list[Any]) -> None:
        """Run the handler to its next await, as the running process and handler (put back as it was once the
        handler waits: an error on the way leaves them naming it), then wait one store round trip (or its sleep)
        before the next step."""
        if task[4] != self.epoch:
            return  # the process that ran this handler is gone
        if self.paused_until > self.kernel.now:
            self.kernel.at(self.paused_until, self._step, task)
            return
        running = self.running
        actor, key = running.actor, running.key
        running.actor, running.key = SERVER, task[1]
        try:
            try:
                command = task[0].send(None)
                while command is not None and command[0] == MOMENT:
                    armed = self.targets.take(command[1])
                    if armed is not None:
                        self.trace.append((self.kernel.now, "server", "moment", f"{command[1]}: {armed[0]}"))
                        armed[1](command[2])
                        self.running.actor, self.running.key = SERVER, task[1]  # this handler again, after the fault
                        if task[4] != self.epoch:
                            return  # struck down at the moment: the process that ran it is gone
                        if self.paused_until > self.kernel.now:
                            self.frozen.append(task)  # frozen mid-step: it goes on first when the process resumes
                            return
                    command = task[0].send(None)
            except StopIteration as stop:
                response = stop.value
                self.ghost.settle()
                message = task[3]
                if message is not None:
                    self.serving -= 1
                    self.ghost.handled(message[3])
                if message is not None and response is not None:
                    self.reply(message, response)
                return
            self.ghost.settle()
            if command is None:
                self._round_trip(task)
            elif command[0] == SLEEP:  # the handler's own time, not a store round trip
                self.kernel.after(command[1], self._step, task)
            else:  # (WAIT, wakes, ms): parked until a wake or the time is up; the first to come ends in a round trip
                woken = (task, task[2])
                command[1].append(partial(self._woken, woken))
                self.kernel.after(command[2], self._woken, woken)
        except BaseException:
            running.blame()
            raise
        finally:
            running.actor, running.key = actor, key

    def _round_trip(self, task: list[Any]) -> None:
        """The handler's next step comes after one store round trip."""
        task[2] += 1
        ms, rank = self.trips.delay(task[1], task[2])
        self.kernel.after_ranked(ms, rank, self._step, task)

    def _woken(self, arg: tuple[list[Any], int]) -> None:
        task, trips = arg
        if task[2] == trips:  # still parked: neither a notification nor its time up has woken it yet
            self._round_trip(task)

    def _tick(self, arg: tuple[int, str, int]) -> None:
        epoch, loop, interval = arg
        if epoch != self.epoch:
            return  # the loop belonged to a process that restarted
        if self.paused_until > self.kernel.now:
            self.kernel.at(self.paused_until, self._tick, arg)  # the loop goes on where it stopped
            return
        tick = self.ticks[loop] = self.ticks.get(loop, 0) + 1
        running = self.running
        actor, key = running.actor, running.key
        running.actor, running.key = SERVER, None
        for i, handler in enumerate(self.service.tick(loop, self.kernel.now)):
            self._step([handler, background_key(loop, tick, i), 0, None, epoch])
        running.actor, running.key = actor, key
        self.kernel.after(interval, self._tick, arg)


class UserHost:
    """The people and programs outside the system: each step is one request, retried on timeout,
    independent of every other (a user does not wait for one cancel before the next submit)."""

    __slots__ = ("kernel", "network", "trace", "timeout", "retries", "pending")

    def __init__(self, kernel: Kernel, network: Network, trace: list[Event], *, request_timeout: int, retries: int) -> None:
        self.kernel = kernel
        self.network = network
        self.trace = trace
        self.timeout = request_timeout
        self.retries = retries
        self.pending: dict[int, tuple[int, int, Any]] = {}  # message key -> (step id, try, request)

    def submit(self, step_id: int, request: Any) -> None:
        self._send(step_id, 0, request)

    def _send(self, step_id: int, n: int, request: Any) -> None:
        key = message_key(step_id, request.kind, n)
        self.pending[key] = (step_id, n, request)
        self.trace.append((self.kernel.now, "user", "send", (OWN, request, key)))
        self.network.send(("user", "server", key, request))
        self.kernel.after(self.timeout, self._timed_out, key)

    def _timed_out(self, key: int) -> None:
        entry = self.pending.pop(key, None)
        if entry is not None and entry[1] < self.retries:
            self._send(entry[0], entry[1] + 1, entry[2])

    def receive(self, message: tuple[Any, ...]) -> None:
        if self.pending.pop(message[2] & ~RESPONSE, None) is not None:
            self.trace.append((self.kernel.now, "user", "recv", (OWN, message[3], message[2])))


class ResourceHost:
    """The protected resource: handles each write atomically on delivery."""

    __slots__ = ("kernel", "resource", "network", "trace", "ghost", "running")

    def __init__(self, kernel: Kernel, resource: Any, network: Network, trace: list[Event], ghost: HostHooks,
                 running: Running) -> None:
        self.kernel = kernel
        self.resource = resource
        self.network = network
        self.trace = trace
        self.ghost = ghost
        self.running = running

    def receive(self, message: tuple[Any, ...]) -> None:
        running = self.running
        actor, key = running.actor, running.key
        running.actor, running.key = RESOURCE, None
        response = self.resource.write(message[3])
        running.actor, running.key = actor, key
        self.trace.append((self.kernel.now, "resource", "recv", (RESOURCE_WRITE, message[3], message[0], response)))
        self.ghost.settle()
        self.network.send(("resource", message[0], message[2] | RESPONSE, response))
