"""The asyncio mode: a user's unmodified asyncio service under simulation.

The service's own code (its ``asyncio`` locks, ``wait_for`` timeouts, a reaper on ``asyncio.sleep``,
aiosqlite or SQLAlchemy, an ASGI app) runs unchanged on dst's deterministic loop. What dst needs is an
*adapter*, a module of its own beside the service, whose ``build(env)`` returns a :class:`System`:

* ``server``: an ``async`` factory that builds the service in the server process and returns its app: an
  ASGI app (FastAPI, Starlette) that clients reach over HTTP, or a mapping of request type -> ``async``
  handler (RPC). It runs at every boot, after every restart too, over the durable state the run's folder
  keeps; whatever module globals or singletons the service keeps, it resets first (``reset`` runs when the
  process dies);
* ``job``: the client program for one plan step, ``async def job(client, incarnation, order) -> str``,
  which uses the service's own client code through :func:`http` (an ``httpx.AsyncClient`` over dst's
  network) or :func:`call`, marks protected work with :func:`work`, and returns how it ended;
* the views, the resource, the bounds and ``close``, as in :class:`dst.sut.System`; facts are reported to
  ``env.facts`` as in the coroutine seam.

:func:`run` runs a single coroutine on the loop, as ``asyncio.run`` does, in virtual time.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, TypeVar

import attrs

from ..sut import SERVER, Bounds, LeaseView, Order, Resource, RunView
from ..sim.kernel import Kernel
from ..sim.rng import Streams
from ..sim.schedule import strategy
from .anyio_order import scopes_in_order
from .cache import cache_folder, cached_file
from .loop import VIRTUAL_EPOCH_MS, Loop
from .observe import LeaseRow, LeaseTable, RunRow, RunTable
from .wire import HttpRequest, HttpResponse, RemoteError

if TYPE_CHECKING:
    import httpx

__all__ = ["System", "run", "call", "http", "transport", "work", "moment", "background", "round_trip", "on_crash", "process_name", "lifespan",
           "virtual_ms", "cached_file", "cache_folder", "LeaseRow", "LeaseTable", "RunRow", "RunTable", "RemoteError", "HttpRequest", "HttpResponse", "VIRTUAL_EPOCH_MS"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T], *, seed: int, scheduler: str = "uniform", folder: str | None = None,
        check: Callable[[], object] | None = None) -> T:
    """Run ``main`` on a fresh deterministic loop in virtual time, as ``asyncio.run`` runs it on a real one, inside
    dst's sandbox (:class:`dst.sandbox.Sandbox`), as a simulated run's processes are: the clocks read virtual time
    (``time.time()`` is 2026-01-01T00:00:00Z at t=0), ``random``, ``os.urandom`` and ``uuid4`` draw from ``seed``,
    and threads, sockets, subprocesses and writing a file outside ``folder`` (none without one) are refused
    (:class:`dst.sandbox.Refusal` is raised from here). The same seed gives the same interleaving, the same draws,
    the same result, and no wall time spent waiting.

    ``check``, if given, is called after every callback of the run (an invariant of the test): what it raises
    ends the run and is raised from here, at the virtual moment the state first broke it."""
    if not asyncio.iscoroutine(main):
        raise TypeError(f"dst.aio.run() expects a coroutine, got {type(main).__name__}")
    from ..sandbox import Sandbox

    rng = Streams(seed).keyed("scheduling")
    kernel = Kernel()
    loop = Loop(kernel, strategy(scheduler, rng, rng))
    loop.patches = [Sandbox(wall_ms=lambda: VIRTUAL_EPOCH_MS + kernel.now, monotonic_ms=lambda: kernel.now, seed=seed,
                            folder=folder, refused=loop.refuse),
                    scopes_in_order()]  # anyio's cancel scopes in the run's order, as in a simulated run
    if check is not None:
        invariant = check

        def settle() -> None:
            invariant()

        loop.root.settle = settle
    try:
        result: T = loop.run_until_complete(main)
        return result
    finally:
        loop.close()


App = Any  # an ASGI application, or a Mapping[type, Callable[[request], Awaitable[response]]]


@attrs.frozen
class System:
    """What an asyncio adapter's ``build(env)`` returns."""

    server: Callable[[], Awaitable[App]]  # builds the service in the server process, at every boot: its app
    job: Callable[[str, int, Order], Awaitable[str]]  # ``job(client, incarnation, order)``: one plan step's program
    resource: Resource | None = None
    leases: LeaseView | None = None
    runs: RunView | None = None
    bounds: Bounds = Bounds()
    close: Callable[[], None] | None = None
    reset: Callable[[], None] | None = None  # the server process died: forget what it kept in module globals
    # The service reports no facts: derive them from ``leases`` (a LeaseTable) after every server step.
    observe: bool = False
    # With observe: check the counts whenever the store changes. False checks them only when a lease changes, for a
    # service whose counts and leases live in two stores updated one after the other (Prefect: the database, then
    # the lease storage), where every operation opens a window between the two.
    recount: bool = True
    # With observe: the service's stores agree only between its operations (Prefect: a release decrements the count
    # in its database, then revokes the lease in its lease storage). What changed is checked only at a settled
    # moment: the server has no request in flight and ``settled()`` says its own background work is between passes.
    settled: Callable[[], bool] | None = None
    folder: str | None = None  # the run's own folder (its durable state): the only place files may be written
    # Run what the service hands to a thread pool (FastAPI's plain-def dependencies and endpoints through
    # anyio.to_thread, loop.run_in_executor, asyncio.to_thread) inline on the loop, after a yield: see dst.aio.inline.
    inline_threads: bool = False
    # A worker between tasks: ``idle(client)`` is True when that client's job, still running (a queue's worker
    # serves for good), only waits for work (a long poll on its queue). Such a client keeps no drain open while it
    # has no work slice and no call in flight. None: a client is idle only once its jobs are done.
    idle: Callable[[str], bool] | None = None


def _process() -> Any:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("dst.aio: called outside a simulated run (no dst loop is running)") from None
    if not isinstance(loop, Loop):
        raise RuntimeError("dst.aio: called on a real asyncio loop; this runs only under dst run")
    return loop.process


def process_name() -> str:
    """The name of the process whose code is running (``server``, ``c1``, ...)."""
    return str(_process().name)


async def call(request: Any, *, to: str = SERVER, timeout: int | None = None) -> Any:
    """Send ``request`` (a :func:`dst.sut.message` record) from this client to ``to`` and return the response;
    raises :class:`TimeoutError` after ``timeout`` ms (default: the scenario's request timeout), and
    :class:`RemoteError`'s error again as ``RuntimeError`` when the handler raised."""
    response = await _process().call(to, request, timeout)
    if isinstance(response, RemoteError):
        raise RuntimeError(f"{to} raised {response.type}: {response.message}")
    return response


def http(base_url: str = f"http://{SERVER}", **kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose requests go over dst's network from this client process."""
    import httpx

    return httpx.AsyncClient(base_url=base_url, transport=transport(), **kwargs)


def transport() -> httpx.AsyncBaseTransport:
    """An httpx transport over dst's network from this client process, for a client library that makes its own
    ``httpx.AsyncClient`` and takes a transport (``PrefectClient(api, httpx_settings={"transport": ...})``)."""
    from .net import Transport

    return Transport(_process())


async def work(handle: Any, ms: int) -> int:
    """Protected work under ``handle`` (a lease id of the service's own kind: an int, a UUID, its text) for ``ms``
    of virtual time; returns the ms not done (a pause cut the slice: check the lease before going on)."""
    return int(await _process().work(handle, ms))


async def moment(name: str, until: float | None = None) -> None:
    """A sensitive moment (just after a grant, just before a write): a targeted fault aimed at it strikes here.
    ``until`` is the deadline the program reckons it has there, in the loop's time (``loop.time()`` seconds: its
    lease's expiry as it computes it); a fault aimed with ``past`` lasts until that long after it."""
    await _process().moment(name, None if until is None else round(until * 1000))


def background(name: str) -> contextvars.Context:
    """A context to run the server's own background job ``name`` in (a scheduler's task, a clean-up check: pass it to
    ``loop.create_task(..., context=)`` or ``loop.call_later(..., context=)``): its store round trips are keyed by
    the job (``name.<boot>.<n>``), not by the boot's work or the request that scheduled it, so a job that runs or not
    leaves the draws of every other as they were. ``name``: letters, digits, ``_`` and ``-``. The server only."""
    process = _process()
    if not hasattr(process, "background"):
        raise RuntimeError("dst.aio.background: a job of the server's own; this is a client")
    return process.background(name)  # type: ignore[no-any-return]


async def round_trip() -> None:
    """One store round trip of the server process (what each statement of ``dst.aio.stores.sqlite`` costs)."""
    await _process().round_trip()


def on_crash(fn: Callable[[], None]) -> None:
    """Call ``fn`` when this process (the server, or a client) dies, before its memory is gone: close what it holds
    open."""
    _process().on_crash.append(fn)


def virtual_ms(wall_seconds: float) -> int:
    """A wall-clock time the service wrote (``time.time()`` seconds during a run) as virtual ms, the time the
    views speak (every process's wall clock reads :data:`VIRTUAL_EPOCH_MS` at t=0, less its skew)."""
    return round(wall_seconds * 1000) - VIRTUAL_EPOCH_MS


async def lifespan(app: Any) -> None:
    """Run an ASGI app's lifespan startup (FastAPI's ``lifespan``, ``on_event("startup")``) in this process and
    return once it completed. Its shutdown never runs: a crash gives a process no time for it."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = loop.create_future()
    await inbox.put({"type": "lifespan.startup"})

    async def receive() -> dict[str, Any]:
        return await inbox.get()

    async def send(message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.complete" and not started.done():
            started.set_result(None)
        elif kind == "lifespan.startup.failed" and not started.done():
            started.set_exception(RuntimeError(f"the app's lifespan startup failed: {message.get('message', '')}"))

    async def serve() -> None:
        try:
            await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
        except BaseException as e:
            if not started.done():
                started.set_exception(e)
            raise

    loop.create_task(serve())
    await started
