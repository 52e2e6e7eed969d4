"""Campaigns on a Dask cluster (``dst fuzz --cluster ADDRESS``): an optional extra, ``pip install "dst-harness[cluster]"``.

A cluster is only another executor for :func:`dst.explore.fuzz.campaign`: the campaign cuts the same chunks
of seeds, ships the same ``run_chunk`` to the cluster's workers and consumes the results in submission
order, with the same window of chunks in flight, deadline and Ctrl-C handling as on a local pool. So a
campaign on a cluster reports exactly what one on ``--workers 1`` does. Dask is imported only here, and only
when a cluster is asked for, so dst without the extra works as before. See docs/cluster.md.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import time
import warnings
from concurrent.futures import Executor, Future, InvalidStateError
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..errors import UserError
from ..version import DISTRIBUTION

if TYPE_CHECKING:
    from distributed import Client

T = TypeVar("T")

CONNECT_TIMEOUT = 5.0  # seconds to reach the scheduler and see a worker there, before saying the address is wrong
CLOSE_TIMEOUT = 5.0  # seconds to say goodbye to the scheduler; a campaign's summary does not wait longer
EXTRA_MISSING = '--cluster needs the cluster extra: pip install "dst-harness[cluster]"'


class ClusterError(UserError):
    """The cluster cannot be used, or failed a task: one line for the user (exit 2)."""


def connect(address: str) -> ClusterExecutor:
    """An executor on the Dask scheduler at ``address``, checked to have a worker with this version of dst."""
    timeout = CONNECT_TIMEOUT
    try:
        import distributed
    except ImportError:
        raise ClusterError(EXTRA_MISSING) from None
    _check_address(address)
    _check_scheduler(address, timeout)
    logs = _quiet_logs()
    try:
        with warnings.catch_warnings():
            # A table of mismatched packages on stderr (numpy, say); dst checks its own version on the workers.
            warnings.simplefilter("ignore", distributed.versions.VersionMismatchWarning)
            client = distributed.Client(address, timeout=timeout, set_as_default=False)
    except OSError as e:  # the scheduler went away since it answered
        _restore(logs)
        raise ClusterError(f"--cluster {address}: cannot connect: {e}") from None
    try:
        _check_workers(client, address, timeout)
    except BaseException:
        client.close(timeout=CLOSE_TIMEOUT)
        _restore(logs)
        raise
    return ClusterExecutor(client, address, logs)


def _quiet_logs() -> list[tuple[logging.Handler, int]]:
    """Silence Dask's log handlers (each of its configured loggers has one on stderr): its client logs its
    troubles, a scheduler lost, as tracebacks, and dst says them in one line itself. Returns their levels."""
    saved = []
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (name == "distributed" or name.startswith("distributed.")):
            for handler in logger.handlers:
                saved.append((handler, handler.level))
                handler.setLevel(logging.CRITICAL + 1)
    return saved


def _restore(logs: list[tuple[logging.Handler, int]]) -> None:
    for handler, level in logs:
        handler.setLevel(level)


def _check_address(address: str) -> None:
    """Refuse an address Dask cannot parse before a client is made: one that fails in its constructor
    leaves a half-made client whose cleanup prints a traceback seconds later."""
    from distributed.comm.addressing import parse_address
    from distributed.comm.addressing import parse_host_port
    from distributed.comm.registry import get_backend

    try:
        scheme, location = parse_address(address)
        get_backend(scheme)
        parse_host_port(location)
    except ValueError as e:
        raise ClusterError(f"--cluster: expected a scheduler's address such as tcp://HOST:8786, got {address!r} "
                           f"({e})") from None


def _check_scheduler(address: str, timeout: float) -> None:
    """A Dask scheduler answers at the address within the timeout. Asked before a client is made: the
    client's timeout bounds the connection but not the handshake after it, so a port that accepts and
    never answers as a scheduler (any other server) would hang it."""
    from distributed.core import rpc

    async def identity() -> Any:
        async with rpc(address, timeout=timeout) as scheduler:
            return await scheduler.identity(n_workers=0)

    answer = timeout + 1.0  # past the connection's own timeout, so that a port nobody listens on is said as such
    try:
        who = asyncio.run(asyncio.wait_for(identity(), answer))
    except TimeoutError:
        raise ClusterError(f"--cluster {address}: no Dask scheduler answered within {answer:g} s") from None
    except OSError as e:  # refused, unknown host, no route: Dask retries each until the timeout
        raise ClusterError(f"--cluster {address}: cannot connect: {e}") from None
    except Exception as e:  # what a scheme's connector refuses: tls:// without Dask's TLS settings, inproc://...
        detail = (str(e).splitlines() or [""])[0]
        raise ClusterError(f"--cluster {address}: cannot connect: {type(e).__name__}: {detail}") from None
    if not isinstance(who, dict) or who.get("type") != "Scheduler":
        raise ClusterError(f"--cluster {address}: what answered there is not a Dask scheduler")


def _check_workers(client: Client, address: str, timeout: float) -> None:
    """The cluster has a worker, and each worker has this version of dst: the seeds must run the same model."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise ClusterError(f"--cluster {address}: the scheduler has no worker (waited {timeout:g} s)") from None
    ours = importlib.metadata.version(DISTRIBUTION)
    try:
        theirs: dict[str, str] = client.run(importlib.metadata.version, DISTRIBUTION)  # a stdlib function: no dst needed to call it
    except importlib.metadata.PackageNotFoundError:
        raise ClusterError(f"--cluster {address}: a worker does not have dst installed: install dst {ours} "
                           f"on every worker (docs/cluster.md)") from None
    for worker, version in sorted(theirs.items()):
        if version != ours:
            raise ClusterError(f"--cluster {address}: the worker at {worker} has dst {version}, this is dst {ours}: "
                               f"install the same version on every worker")


class ClusterExecutor(Executor):
    """An executor whose tasks run on a Dask cluster; its futures are ``concurrent.futures`` ones, so a
    campaign waits on them as on a local pool's. A task that fails on the cluster (a worker lost again and
    again, dst not importable there) or that the cluster drops (the scheduler gone) fails its future with a
    :class:`ClusterError`.

    A ``deadline`` keyword argument is an instant on this process's ``time.monotonic``, which means nothing
    on another machine: it travels as wall-clock time and is turned back into the worker's monotonic clock
    there (the machines' wall clocks are assumed to agree, as NTP keeps them). It only decides how long a
    prefix of the seeds gets run, never what a seed does.
    """

    def __init__(self, client: Client, address: str, logs: list[tuple[logging.Handler, int]]) -> None:
        self.address = address
        self._client = client
        self._logs = logs  # Dask's log levels, put back on close
        self._tasks = client.get_executor(pure=False)  # pure=False: each chunk is a task of its own, never merged
        self._stopping = False

    @property
    def workers(self) -> int:
        """How many tasks the cluster runs at once (its workers' threads), at least 1."""
        threads: dict[str, int] = self._client.nthreads()
        return max(1, sum(threads.values()))

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if kwargs.get("deadline") is not None:
            kwargs["deadline"] = time.time() + (kwargs["deadline"] - time.monotonic())
        task = self._tasks.submit(_on_worker_clock, fn, *args, **kwargs)
        future: Future[T] = Future()
        future.add_done_callback(lambda f: f.cancelled() and task.cancel())  # the campaign's cancel reaches the cluster
        task.add_done_callback(lambda t: self._relay(t, future))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Cancel every task not finished (``cancel_futures``, or not ``wait``), or wait for them all; the
        cluster itself stays up. A task already running on a worker runs to its end (Dask cannot stop a
        running task), bounded by its chunk and its deadline; its result is dropped."""
        self._stopping = True
        self._tasks.shutdown(wait=wait and not cancel_futures)

    def close(self) -> None:
        """Cancel what is in flight and disconnect from the scheduler."""
        self.shutdown(wait=False, cancel_futures=True)
        try:
            self._client.close(timeout=CLOSE_TIMEOUT)
        except (OSError, TimeoutError):  # a scheduler gone cannot be said goodbye to; the campaign's report stands
            pass
        finally:
            _restore(self._logs)

    def _relay(self, task: Future[T], future: Future[T]) -> None:
        """Hand a finished task's outcome on to the campaign's future (on the client's thread; never blocks)."""
        try:
            if task.cancelled() and (self._stopping or future.cancelled()):
                if future.cancel():
                    future.set_running_or_notify_cancel()  # wakes a wait() on it
            elif task.cancelled():  # not by us: the client lost the scheduler and gave its tasks up
                future.set_exception(ClusterError(f"--cluster {self.address}: lost the scheduler"))
            elif (error := task.exception()) is not None:
                detail = (str(error).splitlines() or [""])[0]
                future.set_exception(ClusterError(f"--cluster {self.address}: a task failed on the cluster: "
                                                  f"{type(error).__name__}: {detail}".rstrip(": ")))
            else:
                future.set_result(task.result())
        except InvalidStateError:  # the campaign cancelled its future just now: nobody wants this outcome
            pass


def _on_worker_clock(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Runs on a worker: a deadline sent as wall-clock time becomes the same instant on the worker's monotonic clock."""
    if kwargs.get("deadline") is not None:
        kwargs["deadline"] = time.monotonic() + (kwargs["deadline"] - time.time())
    return fn(*args, **kwargs)
