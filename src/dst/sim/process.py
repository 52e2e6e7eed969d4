"""The process protocol: what a fault can do to a process, whichever kind of process it is.

Two kinds of host run a system under test: the coroutine seam's (:mod:`dst.sim.hosts`) and the asyncio
mode's (:mod:`dst.aio.host`). Both keep this protocol, and the fault registry (:mod:`dst.faults`) is typed
against it alone: every fault kind acts on either kind of process, with no second copy, and a new kind of
fault is one record that calls these methods.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

from .kernel import Kernel
from .network import Network


class Targets:
    """Faults armed for a process's next sensitive moment: moment name -> (what it does, how to do it)."""

    __slots__ = ("armed",)

    def __init__(self) -> None:
        self.armed: dict[str, tuple[str, Callable[[], None]]] = {}

    def arm(self, moment: str, what: str, fire: Callable[[], None]) -> None:
        self.armed.setdefault(moment, (what, fire))  # one armed fault per moment: a second waits for none

    def take(self, moment: str) -> tuple[str, Callable[[], None]] | None:
        return self.armed.pop(moment, None) if self.armed else None


class ClientProcess(Protocol):
    """A client: it runs the jobs the plan gives it, one at a time."""

    name: str
    alive: bool
    incarnation: int
    targets: Targets
    last_active: int  # when its last job ended, or it died
    ended: dict[str, int]  # how its jobs ended -> how many

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

    def receive(self, message: tuple) -> None: ...


class ServerProcess(Protocol):
    """The server: it handles requests, runs its background work, and keeps its durable store."""

    targets: Targets

    @property
    def idle(self) -> bool:
        """Up, and no request in progress."""

    @property
    def drawn(self) -> list[tuple[int, int, int, int]]:
        """Every slow store round trip: (time, handler key, round trip, ms)."""

    def boot(self) -> None: ...

    def restart(self, down: int) -> None:
        """It dies (memory and every handler in flight lost, the store kept) and boots again after ``down``."""

    def pause(self, duration: int) -> None:
        """Frozen for ``duration``, memory intact; requests wait."""

    def pin_slow(self, key: int, n: int, ms: int) -> None:
        """The handler of ``key`` takes ``ms`` longer over its ``n``-th store round trip."""

    def receive(self, message: tuple) -> None: ...


class Processes(Protocol):
    """What a fault acts on: the processes of a run, the network between them, and the ghost it tells."""

    kernel: Kernel
    network: Network
    trace: list[Any]
    ghost: Any

    @property
    def clients(self) -> Mapping[str, ClientProcess]: ...

    @property
    def server(self) -> ServerProcess: ...
