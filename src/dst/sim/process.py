"""The process protocol: what a fault can do to a process, whichever kind of process it is, and what a process
may tell the harness.

Two kinds of host run a system under test: the coroutine seam's (:mod:`dst.sim.hosts`) and the asyncio
mode's (:mod:`dst.aio.host`). Both keep this protocol, and the fault registry (:mod:`dst.faults`) is typed
against it alone: every fault kind acts on either kind of process, with no second copy, and a new kind of
fault is one record that calls these methods. What a host tells the harness in turn (work started and stopped,
a client died or froze, the server went down, a step settled) is :class:`HostHooks`, the ghost's side.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Mapping, Protocol

from .kernel import Kernel
from .network import Network
from .store import RoundTrips
from .trace import RECEIVED, RESPONSE, RESTARTED, SENT, SERVER_DOWN, format_time


class HostHooks(Protocol):
    """What a host may tell the harness's ghost (:class:`~dst.invariants.Ghost` keeps them): the facts of a process's
    life that no model reports, because the harness, not the model, makes them happen."""

    def work_started(self, client: str, handle: Any) -> None:
        """``client`` starts protected work under ``handle`` (a lease id, or a run's claim)."""

    def work_stopped(self, client: str, handle: Any) -> None: ...

    def client_died(self, client: str) -> None:
        """A client incarnation is gone (a crash, or a restart's old incarnation)."""

    def client_paused(self, client: str, until: int) -> None: ...

    def client_cut_off(self, client: str, until: int) -> None:
        """A partition cuts ``client`` from the server until ``until``."""

    def server_down(self) -> None:
        """The server went down (a restart) or froze (a pause): its background work stops too."""

    def server_up(self) -> None: ...

    def handled(self, request: Any) -> None:
        """The server finished handling ``request``."""

    def settle(self) -> None:
        """A step of the model's code ended: check what it changed."""


class Running:
    """Who runs now: the process whose code the run is in (``actor``), and, while a server handler's step runs,
    that handler's key (``key``: a request's message key, or a background job's). The coroutine seam's hosts set
    it as they call into the model's code and put it back as that code returns; an error on its way out is blamed
    (:meth:`blame`) on who ran where it was raised. Read when something must be blamed on someone (a violation, an
    error, a stall, a refusal), so the hot path pays a few attribute writes a step, and nothing is read from stack
    frames."""

    __slots__ = ("actor", "key", "raised")

    IDLE = "server"  # what a run blames when no process's code runs (dst's own events)

    def __init__(self) -> None:
        self.actor = Running.IDLE
        self.key: int | None = None
        self.raised: tuple[str, int | None] | None = None  # who ran where the error that ends the run was raised

    def blame(self) -> None:
        """An error passes on its way out of the code running now: the innermost host it leaves names it."""
        if self.raised is None:
            self.raised = (self.actor, self.key)

    def who(self) -> tuple[str, int | None]:
        """The process (and handler) to blame: where an error was raised, or who runs now."""
        return self.raised if self.raised is not None else (self.actor, self.key)


Fire = Callable[[int | None], None]
"""How an armed fault strikes: told the deadline the moment names (virtual ms: a holder's expiry by its own
reckoning), or None."""


class Targets:
    """Faults armed for a process's next sensitive moment: moment name -> (what it does, how to do it)."""

    __slots__ = ("armed",)

    def __init__(self) -> None:
        self.armed: dict[str, tuple[str, Fire]] = {}

    def arm(self, moment: str, what: str, fire: Fire) -> None:
        self.armed.setdefault(moment, (what, fire))  # one armed fault per moment: a second waits for none

    def take(self, moment: str) -> tuple[str, Fire] | None:
        return self.armed.pop(moment, None) if self.armed else None


class ClientProcess(Protocol):
    """A client: it runs the jobs the plan gives it, one at a time."""

    name: str
    alive: bool
    incarnation: int
    last_active: int  # when its last job ended, or it died
    ended: dict[str, int]  # how its jobs ended -> how many

    @property
    def targets(self) -> Targets:
        """The faults armed for its next sensitive moments."""

    @property
    def now(self) -> int:
        """Its wall clock (a clock skew sets it back)."""

    @property
    def paused(self) -> bool: ...

    @property
    def idle(self) -> bool:
        """Nothing to do and nothing in progress (a dead client is idle)."""

    def submit(self, step: Any) -> None: ...

    def crash(self) -> None:
        """Gone for good: later steps for it are skipped."""

    def restart(self) -> None:
        """It dies, and a new incarnation starts with no memory of the old one."""

    def pause(self, duration: int) -> None:
        """Frozen for ``duration``: what would wake it waits; it goes on where it stopped."""

    def skew(self, by: int) -> None:
        """Its wall clock is set back by ``by``."""

    def receive(self, message: tuple[Any, ...]) -> None: ...


class ClientLifecycle:
    """What every kind of client process does the same way: its wall clock, its queue of plan steps, and dying
    (for good, or into a new incarnation). A kind of client brings ``_next_job`` and ``_die`` (and its own
    ``pause``), and the attributes these read."""

    name: str
    kernel: Kernel
    trace: list[Any]
    ghost: HostHooks
    alive: bool
    incarnation: int
    jobs: Any  # a deque of plan steps
    job: Any
    paused_until: int
    wall_offset: int

    working: Any  # the handle it works under right now (None: it is not working)

    def _next_job(self) -> None:
        raise NotImplementedError

    def _die(self) -> None:
        raise NotImplementedError

    def _era(self) -> int:
        """What a wake-up from a pause is checked against: it is stale once the process it was for died."""
        raise NotImplementedError

    def _cut_work(self, now: int) -> None:
        """A pause cuts the work slice in progress: the job learns how much was left when it wakes."""
        raise NotImplementedError

    def _go_on(self) -> None:
        """The pause ended: go on where it stopped."""
        raise NotImplementedError

    def pause(self, duration: int) -> None:
        if self._skip_if_dead("pause"):
            return
        now = self.kernel.now
        until = now + duration
        self.trace.append((now, self.name, "pause", f"until t={format_time(until)}"))
        if until <= self.paused_until:
            return
        if self.working is not None:
            self._cut_work(now)
        self.paused_until = until
        self.ghost.client_paused(self.name, until)
        self.kernel.at(until, self._resume, (self._era(), until))

    def _resume(self, arg: tuple[int, int]) -> None:
        era, until = arg
        if era != self._era() or until != self.paused_until or not self.alive:
            return
        self.trace.append((self.kernel.now, self.name, "resume", ""))
        self._go_on()

    @property
    def now(self) -> int:
        """The client's wall clock (the host is the ``wall_clock`` its jobs read)."""
        return self.kernel.now + self.wall_offset

    def skew(self, by: int) -> None:
        """The client's wall clock is set back by ``by`` (it keeps running from there)."""
        if self._skip_if_dead("clock skew"):
            return
        self.wall_offset -= by
        self.trace.append((self.kernel.now, self.name, "clock-skew", f"wall clock set back to t={format_time(self.now)}"))

    @property
    def paused(self) -> bool:
        return self.paused_until > self.kernel.now

    @property
    def idle(self) -> bool:
        """Nothing to do and nothing in progress (dead clients are idle)."""
        return not self.alive or (self.job is None and not self.jobs and not self.paused)

    def submit(self, step: Any) -> None:
        if self._skip_if_dead(f"step {step.id}"):
            return
        self.jobs.append(step)
        if self.job is None and not self.paused:
            self._next_job()

    def crash(self) -> None:
        """Gone for good: later steps for this client are skipped."""
        if self._skip_if_dead("crash"):
            return
        self.trace.append((self.kernel.now, self.name, "crash", f"incarnation {self.incarnation}"))
        self._die()

    def restart(self) -> None:
        """The process dies and a new incarnation starts with no memory of the old one."""
        if self._skip_if_dead("restart"):
            return
        self.trace.append((self.kernel.now, self.name, "restart", f"incarnation {self.incarnation} -> {self.incarnation + 1}"))
        self._die()
        self.alive = True
        self.incarnation += 1

    def _skip_if_dead(self, what: str) -> bool:
        if not self.alive:
            self.trace.append((self.kernel.now, self.name, "skip", f"{what}: the client crashed for good"))
        return not self.alive


class ServerLifecycle:
    """What every kind of server process does the same way: its pinned round trips (slow, reset), a pause (requests
    wait in its socket, and die with the process if it restarts), the boot after a restart's downtime. A kind of
    server brings ``boot``, ``restart``, ``_accept`` (a request it takes in) and ``_thaw`` (what a pause froze goes
    on), and the attributes these read."""

    kernel: Kernel
    trace: list[Any]
    ghost: HostHooks
    network: Network
    trips: RoundTrips
    epoch: int
    up: bool
    paused_until: int
    # Client -> when the server sent it each reply, kept when the run asks (a runs stream's liveness: when a worker
    # last heard from the server before it stopped), else None.
    replied: dict[str, list[int]] | None

    def boot(self) -> None:
        raise NotImplementedError

    def _accept(self, message: tuple[Any, ...]) -> None:
        raise NotImplementedError

    def _thaw(self) -> None:
        raise NotImplementedError

    @property
    def drawn(self) -> list[tuple[int, int, int, int]]:
        return self.trips.drawn

    @property
    def periods(self) -> tuple[int, ...]:
        return ()

    @property
    def resets(self) -> list[tuple[int, int, int, str]]:
        return self.trips.resets

    def pin_slow(self, key: int, n: int, ms: int) -> None:
        self.trips.pin_slow(key, n, ms)

    def pin_reset(self, key: int, n: int, when: str) -> None:
        self.trips.pin_reset(key, n, when)

    def reply(self, message: tuple[Any, ...], response: Any) -> None:
        """Answer the request ``message`` with ``response``."""
        to, key, now = message[0], message[2] | RESPONSE, self.kernel.now
        self.trace.append((now, "server", "reply", (SENT, response, to, key)))
        if self.replied is not None:
            self.replied.setdefault(to, []).append(now)
        self.network.send(("server", to, key, response))

    def last_reply(self, client: str, until: int) -> int | None:
        """When the server last sent ``client`` a reply, at or before ``until`` (None: never; or not kept)."""
        times = None if self.replied is None else self.replied.get(client)
        if not times:
            return None
        i = bisect_right(times, until)
        return times[i - 1] if i else None

    def pause(self, duration: int) -> None:
        """Freeze the process for ``duration``: it keeps its memory and goes on where it stopped."""
        now = self.kernel.now
        until = now + duration
        self.trace.append((now, "server", "pause", f"until t={format_time(until)}"))
        if not self.up or until <= self.paused_until:
            return
        if self.paused_until <= now:
            self.ghost.server_down()  # its background work stops too: liveness windows wait for it
        self.paused_until = until
        self.kernel.at(until, self._resume, (self.epoch, until))

    def _resume(self, arg: tuple[int, int]) -> None:
        epoch, until = arg
        if epoch == self.epoch and until == self.paused_until:
            self.trace.append((self.kernel.now, "server", "resume", ""))
            self.ghost.server_up()
            self._thaw()

    def _boot_epoch(self, epoch: int) -> None:
        if epoch == self.epoch:
            self.boot()

    def receive(self, message: tuple[Any, ...]) -> None:
        if self.paused_until > self.kernel.now:
            # Frozen: the request waits in the process's socket, and goes with the process if it restarts.
            self.kernel.at(self.paused_until, self._receive_waiting, (self.epoch, message))
            return
        payload = message[3]
        if not self.up:
            self.trace.append((self.kernel.now, "server", "drop", (SERVER_DOWN, payload)))
            return
        self.trace.append((self.kernel.now, "server", "recv", (RECEIVED, payload, message[0], message[2])))
        self._accept(message)

    def _receive_waiting(self, arg: tuple[int, tuple[Any, ...]]) -> None:
        epoch, message = arg
        if epoch == self.epoch:
            self.receive(message)
        else:
            self.trace.append((self.kernel.now, "server", "drop", (RESTARTED, message[3])))


class ServerProcess(Protocol):
    """The server: it handles requests, runs its background work, and keeps its durable store."""

    @property
    def targets(self) -> Targets:
        """The faults armed for its next sensitive moments."""

    @property
    def idle(self) -> bool:
        """Up, and no request in progress."""

    @property
    def drawn(self) -> list[tuple[int, int, int, int]]:
        """Every slow store round trip: (time, handler key, round trip, ms)."""

    @property
    def resets(self) -> list[tuple[int, int, int, str]]:
        """Every store connection reset: (time, handler key, round trip, "before" or "after")."""

    @property
    def periods(self) -> tuple[int, ...]:
        """The periods (ms) its background loops tick at, from each boot; () where they are not known."""

    def boot(self) -> None: ...

    def restart(self, down: int) -> None:
        """It dies (memory and every handler in flight lost, the store kept) and boots again after ``down``."""

    def pause(self, duration: int) -> None:
        """Frozen for ``duration``, memory intact; requests wait."""

    def pin_slow(self, key: int, n: int, ms: int) -> None:
        """The handler of ``key`` takes ``ms`` longer over its ``n``-th store round trip."""

    def pin_reset(self, key: int, n: int, when: str) -> None:
        """The store connection of the handler of ``key``'s ``n``-th round trip is reset ``when`` (before the store
        ran the write, or after). A round trip on no connection that dst resets takes none: the trace says so."""

    def receive(self, message: tuple[Any, ...]) -> None: ...

    replied: dict[str, list[int]] | None

    def last_reply(self, client: str, until: int) -> int | None:
        """When it last sent ``client`` a reply, at or before ``until`` (kept once ``replied`` is a dict)."""


class Processes(Protocol):
    """What a fault acts on: the processes of a run, the network between them, and the ghost it tells."""

    kernel: Kernel
    network: Network
    trace: list[Any]

    @property
    def ghost(self) -> HostHooks: ...

    @property
    def clients(self) -> Mapping[str, ClientProcess]: ...

    @property
    def server(self) -> ServerProcess: ...
