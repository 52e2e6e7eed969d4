"""The system-under-test interface: everything the simulator knows about a model.

A model is three pieces the simulator drives, plus one it is handed:

* a **service** (:class:`Service`): ``handle(request)`` returns a *handler*, a
  generator that yields once before each store transaction. Every ``yield`` is a
  point where other requests may run, so concurrent requests really interleave;
  the code between two yields runs atomically. The generator's return value is
  the response. ``loops()`` names the periodic loops (the reaper, a sweep) and
  ``background(loop, now)`` returns a tick's handlers; ``crash()`` loses process
  memory; ``boot()`` returns recovery handlers (a startup sweep).
* a **client** program: a generator per job that yields commands (below) and is
  resumed with their results.
* a **resource**: ``write(request)`` -> response, atomic, called on delivery.
* an **observer** it must report to (the harness's ghost state): the store the
  reference model uses does this itself; a user's model reports the same facts.

Requests and responses are small frozen records; ``describe()`` gives the trace text.
"""

from __future__ import annotations

from typing import Any, Generator, Protocol, TypeVar, cast, dataclass_transform

import attrs

# Client commands (defined with the hosts that carry them out): a job yields one of
# (SLEEP, ms) -> None; (CALL, destination, request) -> the response or None on timeout;
# (WORK, lease_id, ms) -> ms of the slice not done (nonzero when a pause cut it).
from ..sim.trace import format_time
from ..sim.hosts import CALL, SLEEP, WORK  # noqa: F401  (re-exported: part of the interface)



SERVER = "server"
RESOURCE = "resource"

Handler = Generator[None, None, Any]  # yields before each store transaction; returns the response (or None)


def call(clock: Any, request: Any, attempts: int, destination: str = "server") -> Generator[tuple, object, tuple[Any, int]]:
    """A client's request with retries on timeout (``yield from`` it in a job): returns the response,
    or None when every try timed out, and the send time of the try that was answered."""
    sent = clock.now
    for _ in range(attempts):
        sent = clock.now
        response = yield (CALL, destination, request)
        if response is not None:
            return response, sent
    return None, sent


@dataclass_transform(frozen_default=True, field_specifiers=(attrs.field,))
def message(cls: type[T]) -> type[T]:
    """A frozen record for the wire, with a lean ``repr`` (the trace's digest reprs every message it
    records; attrs' own ``repr`` guards against recursion, which costs four times as much)."""
    cls = attrs.frozen(repr=False)(cls)
    fields = ", ".join(f"{{self.{f.name}!r}}" for f in attrs.fields(cast(Any, cls)))
    namespace: dict[str, Any] = {}
    exec(f"def __repr__(self):\n    return f'{cls.__name__}({fields})'", namespace)  # as attrs generates code
    setattr(cls, "__repr__", namespace["__repr__"])
    return cls


T = TypeVar("T")


# --- requests -----------------------------------------------------------------------------------

@message
class Acquire:
    kind = 1  # its message kind, for keyed draws (not a field)
    limit: str
    slots: int
    holder: str

    def describe(self) -> str:
        return f"acquire {self.limit} slots={self.slots}"


@message
class Renew:
    kind = 2  # its message kind, for keyed draws (not a field)
    lease: int
    holder: str

    def describe(self) -> str:
        return f"renew L{self.lease}"


@message
class Release:
    kind = 3  # its message kind, for keyed draws (not a field)
    lease: int
    holder: str
    limit: str  # what the holder took, as Prefect's fallback_concurrency_limit_ids carry it
    slots: int

    def describe(self) -> str:
        return f"release L{self.lease}"


@message
class Exit:
    """A run that holds no lease leaves its active state (it was never admitted, or gave up waiting)."""

    kind = 4  # its message kind, for keyed draws (not a field)
    limit: str
    slots: int
    holder: str

    def describe(self) -> str:
        return f"exit {self.limit} (no lease)"


@message
class Owner:
    """Which lease occupies a seat: the read half of a read-then-delete release."""

    kind = 5  # its message kind, for keyed draws (not a field)
    limit: str
    seat: int

    def describe(self) -> str:
        return f"owner? {self.limit}/{self.seat}"


@message
class Evict:
    """Delete whatever lease occupies a seat, by key, on behalf of the lease named."""

    kind = 6  # its message kind, for keyed draws (not a field)
    limit: str
    seat: int
    lease: int

    def describe(self) -> str:
        return f"evict {self.limit}/{self.seat} for L{self.lease}"


@message
class Write:
    """A protected write to one seat of a limit (the resource fences each seat on its own)."""

    kind = 7  # its message kind, for keyed draws (not a field)
    token: int
    lease: int
    holder: str
    limit: str
    seat: int

    def describe(self) -> str:
        return f"write {self.limit}/{self.seat} token={self.token} L{self.lease}"


Request = Acquire | Renew | Release | Exit | Owner | Evict | Write


# --- responses ----------------------------------------------------------------------------------

@message
class Granted:
    lease: int
    expiry: int
    token: int
    seat: int

    def describe(self) -> str:
        return f"granted L{self.lease} seat={self.seat} token={self.token} expiry={format_time(self.expiry)}"


@message
class Denied:
    retry_after: int

    def describe(self) -> str:
        return f"denied retry_after={format_time(self.retry_after)}"


@message
class Renewed:
    expiry: int

    def describe(self) -> str:
        return f"renewed expiry={format_time(self.expiry)}"


@message
class Refused:
    """The request named a lease the service does not (or no longer) recognise."""

    reason: str

    def describe(self) -> str:
        return f"refused {self.reason}"


@message
class Occupant:
    lease: int | None

    def describe(self) -> str:
        return f"occupied by L{self.lease}" if self.lease is not None else "free"


@message
class Done:
    what: str

    def describe(self) -> str:
        return self.what


Response = Granted | Denied | Renewed | Refused | Occupant | Done


# --- the interfaces -----------------------------------------------------------------------------

class Observer(Protocol):
    """Facts a model reports as they happen; the harness checks invariants against them."""

    def slots_taken(self, lease: int, limit: str, n: int) -> None: ...

    def slots_returned(self, lease: int | None, limit: str, n: int) -> None:
        """``lease`` is the lease the operation names (None: it names none)."""

    def lease_stored(self, lease: int, holder: str, limit: str) -> None: ...

    def lease_removed(self, lease: int) -> None: ...

    def lease_renewed(self, lease: int, limit: str) -> None: ...

    def write_accepted(self, request: Write) -> None: ...


class View(Protocol):
    """The read-only view of the authority's state that invariants read."""

    def count(self, limit: str) -> int: ...

    def expiry(self, lease: int) -> int | None:
        """The lease's expiry if the authority still has it, else None."""

    def lease_ids(self) -> list[int]: ...


class Service(Protocol):
    def handle(self, request: Request) -> Handler: ...

    def loops(self) -> list[tuple[str, int]]:
        """The background loops, by name, with their intervals; they start again after every boot."""

    def background(self, loop: str, now: int) -> list[tuple[int, Handler]]:
        """Handlers for one tick of a background loop, each with a key for its draws."""

    def crash(self) -> None: ...

    def boot(self) -> list[tuple[int, Handler]]:
        """Recovery handlers to run as the process starts (a startup sweep), with keys."""


class Resource(Protocol):
    def write(self, request: Write) -> Response: ...
