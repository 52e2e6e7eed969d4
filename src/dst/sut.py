"""The seam between ``dst`` and a system under test: everything a service author implements or calls.

It imports nothing else of ``dst``; the simulator, its hosts and the invariants import it. A model is named by one
scenario key, ``[model] impl = "package.module:name"``, where ``name`` is a :class:`Model` (or a plain build
function). ``dst`` calls ``build(env)`` once per run and drives what it returns (a :class:`System`):

* the **service**: request handlers, background loops, crash and boot. Handlers are plain ``async def``
  coroutines; ``dst`` drives them itself (no asyncio loop, no threads). Every ``await store_step()`` costs one store
  round trip, during which other requests may run: the code between two awaits is one atomic transaction;
* the **client programs**: a job per plan step (``acquire``, ``serve``), also ``async def``, which ``await
  call(...)``, ``await sleep(...)`` and ``await work(...)``;
* the protected **resource**, which handles each write atomically on delivery;
* the read-only **views** of the authority's state that the invariants read, and the **bounds** their liveness
  checks need.

The model reports what happens to the harness's :class:`Facts` (``env.facts``) as it happens: a slot taken, a lease
stored, a write accepted. The harness keeps its own truth from those facts and checks every invariant against it
after every step.

A simulated service must keep to the rules of a simulation: it reads time only from ``env.clock``, draws no
randomness of its own, starts no threads and opens no sockets. Then one seed gives one run, byte for byte (``dst run
--check-determinism`` checks it).
"""

from __future__ import annotations

import hashlib
import types
from typing import (Any, Callable, Coroutine, Generator, Generic, Iterable, Literal, Mapping, Protocol,
                    Sequence, TypeVar, cast, dataclass_transform, runtime_checkable)

import attrs

__all__ = [
    "SERVER", "RESOURCE", "Clock", "format_time", "LeaseId", "lease_name", "lease_order",
    "store_step", "sleep", "call", "work", "moment", "Waiters",
    "message", "Submit", "Cancel", "RunClaim",
    "Facts", "LeaseView", "RunView", "ClaimView", "ResourceView", "Bounds",
    "Service", "Resource", "Order", "Job", "Handler", "System",
    "Workload", "Env", "Bug", "Situation", "Model", "option", "OptionError", "OptionKind",
]

SERVER = "server"  # where requests go
RESOURCE = "resource"  # where protected writes go

T = TypeVar("T")
O = TypeVar("O")


class Clock(Protocol):
    """What a model may know of time: ``now``, in integer virtual milliseconds, read-only."""

    @property
    def now(self) -> int:
        """Virtual milliseconds since the run began."""


def format_time(ms: int) -> str:
    """``76s``, ``1.25s``, ``250ms``: the shortest exact form of a virtual time."""
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    if ms < 1000:
        return f"{ms}ms"
    seconds, millis = divmod(ms, 1000)
    return f"{seconds}.{millis:03d}".rstrip("0") + "s"


# A lease's id as the service has it: an int, a UUID's text, a uuid.UUID, any hashable whose text names it. Typed
# Any where the protocols take one, so a view typed for its own kind of id (``expiry(self, lease: int)``) is still
# a LeaseView.
LeaseId = Any


def lease_name(lease: LeaseId) -> str:
    """How dst writes a lease id: ``L7`` for an int, any other id as its own text (a UUID as it is)."""
    return f"L{lease}" if lease.__class__ is int else str(lease)


def lease_order(lease: LeaseId) -> tuple[int, int, str]:
    """A lease id's place in dst's orderings: ints by value, then every other id by its text (never by hash)."""
    return (0, lease, "") if lease.__class__ is int else (1, 0, str(lease))


# --- what a coroutine awaits ------------------------------------------------------------------------
# Each awaitable yields one command to the host that drives the coroutine, which resumes it with the
# result. The command codes are the hosts' business; a model only awaits the functions below.

STEP = None  # a store round trip (a bare yield, the cheapest thing to hand up)
SLEEP = 0  # (SLEEP, ms)
CALL = 1  # (CALL, destination, request, wait)
WORK = 2  # (WORK, handle, ms)
MOMENT = 3  # (MOMENT, name, deadline or None)
WAIT = 4  # (WAIT, wakes, ms): parked until a wake in ``wakes`` is called, or ``ms`` pass


@types.coroutine
def store_step() -> Generator[None, None, None]:
    """One store round trip (a handler's only interleaving point with the store): other requests may run while it
    waits. Await it before each transaction; the code after it, up to the next await, runs atomically."""
    yield


@types.coroutine
def sleep(ms: int) -> Generator[tuple[int, int], None, None]:
    """Let ``ms`` of virtual time pass (a client's, or a handler's, own time)."""
    yield (SLEEP, ms)


@types.coroutine
def call(destination: str, request: Any, *, wait: int = 0) -> Generator[tuple[int, str, Any, int], Any, Any]:
    """Send ``request`` to ``destination`` (:data:`SERVER` or :data:`RESOURCE`) and wait for the response; None
    when none came within the scenario's request timeout, plus ``wait`` ms for a request the server may hold open
    that long (a long poll: see :class:`Waiters`). Clients only."""
    return (yield (CALL, destination, request, wait))


@types.coroutine
def moment(name: str, until: int | None = None) -> Generator[tuple[int, str, int | None], None, None]:
    """Mark a sensitive moment (just after a grant, just before a write): a fault aimed at it strikes here, and
    with ``past`` lasts until that long after ``until``, the deadline the code reckons with there (virtual ms: its
    lease's expiry). Declare the names in :class:`Model`. It costs nothing when no fault is aimed."""
    yield (MOMENT, name, until)


@types.coroutine
def work(handle: Any, ms: int) -> Generator[tuple[int, Any, int], Any, int]:
    """Do ``ms`` of protected work under ``handle`` (a lease id of any kind, or a :class:`RunClaim`); returns the ms
    not done, nonzero when a pause cut the slice (the job should check its lease before going on).
    Clients only; ``ms`` must be positive."""
    return cast(int, (yield (WORK, handle, ms)))


class Waiters:
    """Handlers waiting for something to happen (a slot to free): the server's side of a long poll, which holds a
    request open instead of having the client ask again and again. ``await waiters.wait(ms)`` in a handler parks it
    until :meth:`notify_all` or until ``ms`` pass, whichever comes first; it then takes one store round trip, and the
    code after it is a new transaction that checks again (a notification says only that something may have
    changed). Parked handlers cost nothing while they wait. Waiters live in process memory: a service makes new
    ones when it crashes."""

    __slots__ = ("_wakes",)

    def __init__(self) -> None:
        self._wakes: list[Callable[[], object]] = []  # the host puts a parked handler's wake here

    @types.coroutine
    def wait(self, ms: int) -> Generator[tuple[int, list[Callable[[], object]], int], None, None]:
        """Park the handler until :meth:`notify_all`, or for ``ms`` at most. Server handlers only."""
        yield (WAIT, self._wakes, ms)

    def notify_all(self) -> None:
        """Wake every handler parked here (each goes on after one store round trip)."""
        wakes, self._wakes = self._wakes, []
        for wake in wakes:
            wake()


# --- messages -------------------------------------------------------------------------------------------

def _kind_of(name: str) -> int:
    """A message kind from the class name, stable in every process: it keys the message's random draws."""
    return 16 + hashlib.blake2b(name.encode(), digest_size=2).digest()[0] % 240


@dataclass_transform(frozen_default=True, field_specifiers=(attrs.field,))
def message(cls: type[T]) -> type[T]:
    """Make a class a frozen record for the wire.

    Its ``repr`` names its fields (the trace's digest is made of reprs, so it must be the same in every process)
    and is lean: attrs' own guards against recursion, which costs four times as much. ``describe()`` is what the
    trace shows; define it for a readable trace (default: the repr). A class attribute ``kind`` (a small int) keys
    the message's random draws; without one, it is derived from the class name."""
    kind = cls.__dict__.get("kind")
    cls = attrs.frozen(repr=False)(cls)
    fields = ", ".join(f"{{self.{f.name}!r}}" for f in attrs.fields(cast(Any, cls)))
    namespace: dict[str, Any] = {}
    exec(f"def __repr__(self):\n    return f'{cls.__name__}({fields})'", namespace)  # as attrs generates code
    setattr(cls, "__repr__", namespace["__repr__"])
    if kind is None:
        setattr(cls, "kind", _kind_of(cls.__name__))
    if "describe" not in cls.__dict__ and not hasattr(cls, "describe"):
        setattr(cls, "describe", namespace["__repr__"])
    return cls


# The harness's own requests: people outside the system submit and cancel runs (plan steps
# ``submit`` and ``cancel``). A service that runs work handles them.

@message
class Submit:
    """Create a run and queue it for a worker (plan step ``submit``). The harness sends it to the server and reads
    no answer (the reference answers ``Done``); a run already cancelled is never started."""

    kind = 8
    run: int  # the run's id, chosen by the plan
    work: int  # how long the run's work takes, in virtual ms

    def describe(self) -> str:
        return f"submit run {self.run}"


@message
class Cancel:
    """Cancel a run (plan step ``cancel``), perhaps before its ``Submit`` arrives: it must then never start.
    The harness reads no answer."""

    kind = 9
    run: int  # the run's id

    def describe(self) -> str:
        return f"cancel run {self.run}"


@message
class RunClaim:
    """The handle a worker works under on a run: the run, and the token of the claim it holds."""

    run: int  # the run's id
    token: int  # the claim's token, as reported to ``Facts.claimed``


# --- facts, views and bounds: what the invariants need ------------------------------------------------

class Facts(Protocol):
    """What a model reports as it happens (``env.facts``). Report each change in the same step that makes it; a
    slot count moves only on behalf of a named lease (or visibly of none)."""

    def slots_taken(self, lease: LeaseId, limit: str, n: int) -> None:
        """``n`` slots of ``limit`` were counted as taken, for ``lease``."""

    def slots_returned(self, lease: LeaseId | None, limit: str, n: int) -> None:
        """``n`` slots of ``limit`` were given back; ``lease`` is the lease the operation names (None: it names
        none, as a decrement by limit name does)."""

    def lease_stored(self, lease: LeaseId, holder: str, limit: str, token: int | None = None,
                     target: str | None = None) -> None:
        """A lease was stored; ``token`` is the fencing token it was handed and ``target`` what that token
        fences (give both to have ``unique-tokens``, ``exclusive-seats`` and ``write-progress`` checked)."""

    def lease_renewed(self, lease: LeaseId, limit: str) -> None:
        """A lease's expiry moved (the view's ``expiry(lease)`` says to when)."""

    def lease_removed(self, lease: LeaseId) -> None:
        """A lease was deleted: released, reaped or evicted (its slots are reported apart, with ``slots_returned``)."""

    def write_accepted(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        """The resource accepted a write to ``target`` (the thing its fence guards) with ``token``."""

    def write_refused(self, holder: str, lease: LeaseId, token: int, target: str) -> None:
        """The resource refused a write (report it to have ``write-progress`` checked, and, from a resource that is a
        :class:`ResourceView`, ``fence-only-up`` and ``refused-changes-nothing``)."""

    def run_state(self, run: int, state: str) -> None:
        """A run entered a state: SCHEDULED, RUNNING, CANCELLING, CANCELLED or COMPLETED."""

    def claimed(self, run: int, token: int) -> None:
        """A run was delivered to a worker under a new claim ``token``: report every delivery, redeliveries too."""

    def update_accepted(self, run: int, token: int, what: str) -> None:
        """An ack or terminal write (``what``) under claim ``token`` was accepted."""

    def heartbeat_accepted(self, run: int, token: int) -> None:
        """A heartbeat under claim ``token`` was answered as from the run's owner (report it to have
        ``owner-only-update`` check heartbeats too)."""

    def reached(self, situation: str) -> None:
        """A risky situation the model declares (``Model.situations``) just happened; campaigns count them."""


class LeaseView(Protocol):
    """The authority's lease state, read-only, as the invariants read it."""

    def count(self, limit: str) -> int:
        """The stored slot count of ``limit``."""

    def expiry(self, lease: LeaseId) -> int | None:
        """The lease's expiry if the authority still has it, else None."""

    def lease_ids(self) -> list[LeaseId]:
        """Every lease the authority still has, sorted (``sorted(ids, key=lease_order)`` for ids not all ints)."""


class ClaimView(Protocol):
    """A run's pending claim: the delivery a worker holds and must heartbeat, as ``RunView.claim_of`` gives it."""

    @property
    def token(self) -> int:
        """The claim's token, as reported to ``Facts.claimed``."""

    @property
    def consumer(self) -> str:
        """The worker (a client's name) the run was delivered to."""

    @property
    def idle_since(self) -> int:
        """When the claim last showed life (delivered, or heartbeated), in virtual ms."""


class RunView(Protocol):
    """The authority's run state, read-only."""

    def claim_of(self, run: int) -> ClaimView | None:
        """The run's pending claim, if any."""

    def entered(self, run: int) -> int | None:
        """When the run entered its current state (None: no such run)."""


@runtime_checkable
class ResourceView(Protocol):
    """The protected resource's state, read-only: what a resource may also answer (``System.resource``), to have
    ``fence-only-up`` and ``refused-changes-nothing`` checked. The harness reads a target's state at each write
    reported there (``Facts.write_accepted``, ``write_refused``) and compares it with what the last one left."""

    def fence(self, target: str) -> int | None:
        """The token the resource keeps for ``target`` to compare the next write's with (None: none yet)."""

    def contents(self, target: str) -> object:
        """What the writes to ``target`` have left there (its data, its last writer), compared by equality and
        shown in a violation's message (None: nothing yet)."""


@attrs.frozen
class Bounds:
    """The time bounds the liveness invariants hold the model to, and its resource's contract.
    The harness adds the network's and the store's worst latency to each window."""

    reclaim_within: int = 0  # stranded-slot: a dead holder's lease is reclaimed this soon (TTL + reaper interval)
    transition_within: int = 0  # bounded-transition: CANCELLING lasts at most this long (deadline + sweep)
    claim_timeout: int = 0  # a claim stays current this long after its last heartbeat
    write_checks_lease: bool = False  # fenced-writes: the resource also refuses holders of unrecognised leases
    redeliver_within: int = 0  # at-least-once: a run whose claim went idle reaches a free worker this soon
    renew_every: int = 0  # a holder renews this often: a round trip must fit in it (0: not checked)
    heartbeat_every: int = 0  # a worker heartbeats its claim this often: the same (0: not checked)


# --- the system under test ---------------------------------------------------------------------------------

Handler = Coroutine[Any, Any, Any] | Generator[Any, Any, Any]  # returns the response (None: no reply)


class Service(Protocol):
    """The server's code. Subclass it to inherit the defaults: no background loops, nothing in process
    memory to lose, nothing to recover on boot."""

    def handlers(self) -> Mapping[type, Callable[[Any], Handler]]:
        """Request type -> the handler for it (called once per run). Each request makes one coroutine, whose
        return value is the response (None: no reply, and the client's call times out)."""
        ...

    def loops(self) -> Sequence[tuple[str, int]]:
        """The background loops (a reaper, a sweep), by name, with their intervals in ms. They start
        again, from scratch, after every boot. A loop's handlers go by its name in the trace (``reaper.4.0``:
        the first handler of its fourth tick), so a name is letters, digits, ``_`` and ``-``, from a letter,
        other than ``boot`` (a boot's recovery handlers) and unlike the others even ignoring case."""
        return ()

    def tick(self, loop: str, now: int) -> Iterable[Handler]:
        """One tick of a loop: the handlers to run now, concurrently (one per lease to reap, say)."""
        return ()

    def crash(self) -> None:
        """The process dies: lose whatever lives in process memory (the store survives)."""
        return None  # a real body: a subclass that keeps nothing in memory need not define it

    def boot(self) -> Iterable[Handler]:
        """Recovery handlers to run as the process starts (a startup sweep), concurrently."""
        return ()


class Resource(Protocol):
    """The protected resource (a database, a file) behind the fence: its writes arrive from clients at
    :data:`RESOURCE`. One that is also a :class:`ResourceView` shows the harness what it stores."""

    def write(self, request: Any) -> Any:
        """Apply one protected write atomically, on delivery; return the response."""


class Order(Protocol):
    """A plan step that asks a client for a job: ``action`` (``acquire``, ``serve``) and its arguments
    (``limit``, ``slots``, ``work``, ``writes`` for an acquire). ``wall_clock`` is the client's own wall
    clock: a ``clock_skew`` fault sets it back, as an NTP step or a restored VM does. ``env.clock`` is
    the monotonic time every process shares; the server's clock is the authority."""

    @property
    def action(self) -> str:
        """The plan step's action: ``acquire`` or ``serve``."""

    @property
    def id(self) -> int:
        """The plan step's id: unique in the run, the name a finding gives the step (``step 7``)."""

    @property
    def wall_clock(self) -> Clock:
        """The client's own wall clock, in virtual ms: ``env.clock`` less any ``clock_skew`` it suffered."""

    def arg(self, name: str, default: Any = None) -> Any:
        """One argument of the step (``default`` when it has none): ``limit`` (a name), ``slots`` (a count),
        ``work`` (virtual ms), ``writes`` (a count)."""


Job = Callable[[str, int, Order], Coroutine[Any, Any, str] | Generator[Any, Any, str]]
"""``job(client, incarnation, order)``: the client program for one plan step; returns how it ended."""


@attrs.frozen
class System:
    """What ``build(env)`` returns: the pieces ``dst`` drives and reads."""

    service: Service  # the server's code: its handlers, loops, crash and boot
    job: Job  # ``job(client, incarnation, order)``: one plan step's client program; returns how it ended
    resource: Resource | None = None  # the protected resource (None: none; a write sent to it is never answered)
    leases: LeaseView | None = None  # without it, the lease invariants are not checked
    runs: RunView | None = None  # without it, the run invariants are not checked (and runs cannot be submitted)
    bounds: Bounds = Bounds()  # the liveness invariants' windows: set those your model's checks need
    close: Callable[[], None] | None = None  # called once the run is over, whatever its end: close files, remove them


@attrs.frozen
class Workload:
    """The scenario's workload settings a client program follows."""

    retries: int  # extra tries of a request after a timeout (a retried release is a duplicate release)
    write_time: int  # producing one write, between the lease check and the send
    acquire_patience: int  # how long a job keeps asking for a slot
    active_until: int  # when the plan's active phase ends: workers stop serving once drained after it
    runs: bool  # the plan submits runs (a service may leave its run machinery off without them)


@attrs.frozen
class Env(Generic[O]):
    """What ``build`` receives, fresh for every run."""

    clock: Clock  # the monotonic virtual time every process shares; the server's clock
    facts: Facts  # where the model reports what happens, as it happens
    options: O  # the model's options, read from the scenario's [model] table
    limits: Mapping[str, int]  # limit name -> capacity
    bugs: frozenset[str]  # the model's bug slugs switched on
    workload: Workload  # the scenario's workload settings, for the client program


# --- the model: what a scenario names ----------------------------------------------------------------------

OptionKind = Literal["duration", "positive-duration", "range", "count", "positive-count", "fraction",
                     "probability", "name", "choice", "flag"]


def option(default: Any, kind: OptionKind, *, choices: Sequence[str] = (), help: str = "") -> Any:
    """Declare one option of a model's options class (an ``attrs`` class): its default and how the
    scenario loader reads and writes it. Durations are integer ms; ``choice`` takes one of ``choices``."""
    return attrs.field(default=default, metadata={"dst.kind": kind, "dst.choices": tuple(choices), "dst.help": help})


class OptionError(ValueError):
    """Raised by an options class (``__attrs_post_init__``) for a value that cannot stand with the others."""

    def __init__(self, key: str, expected: str) -> None:
        super().__init__(f"expected {expected}")
        self.key = key


@attrs.frozen
class Bug:
    """A wrong behaviour a model can switch on by its slug, to prove the harness finds it."""

    slug: str
    breaks: tuple[str, ...]  # the invariants it breaks, the one it breaks first leading
    sketch_steps: int = 0  # plan steps in its minimal reproduction (a minimized finding may take one more)
    summary: str = ""  # what is wrong, in a line
    story: str = ""  # its minimal reproduction, told in a few lines; and where the bug class was seen


@attrs.frozen
class Situation:
    """A risky situation a campaign should reach, for its coverage: a model declares its own (reported with
    ``env.facts.reached(id)``), beside those dst sees itself (a holder paused past its expiry, say)."""

    id: str
    statement: str  # what happened, in a line
    tests: tuple[str, ...] = ()  # the invariants that exist for this case
    never: str = ""  # what a campaign that never reached it did not do: "no release was ever repeated"
    parts: frozenset[str] = frozenset()  # the parts of a model it needs ("leases", "runs"; empty: any)


@attrs.frozen
class Model(Generic[O]):
    """What ``[model] impl`` names: how to build a fresh system, its options and its bugs.

    ``scenarios`` is where each bug's scenario lives, ``"package:folder"`` holding ``<slug>.toml``
    (used by ``dst selftest``); a bug without one is hunted on the embedded default scenario."""

    build: Callable[[Env[O]], Any]  # a System; or a dst.aio.System, for an unmodified asyncio service
    options: type[O] | None = None
    bugs: tuple[Bug, ...] = ()
    scenarios: str | None = None
    situations: tuple[Situation, ...] = ()  # the risky situations it reports reaching (campaign coverage)
    description: str = ""
    client_moments: tuple[str, ...] = ()  # the moments its client programs mark (targeted faults aim at them)
    server_moments: tuple[str, ...] = ()  # ... and its handlers

