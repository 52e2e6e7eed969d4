"""Fuzz campaigns: many seeds, in parallel processes, grouped into failure signatures.

A campaign runs seeds in order and consumes results in order, so any number of
workers reports exactly what one worker would: the same outcomes for the same seeds.
A time budget only decides how long a prefix of the seeds gets run. ``--shard K/N``
keeps the seeds congruent to K-1 modulo N, so N CI jobs cover disjoint seeds.
"""

from __future__ import annotations

import ctypes
import multiprocessing.process
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor, wait
from typing import Callable, Generator, Iterator, Sequence

import attrs

from ..invariants import shape
from ..runner import Cut, run
from ..scenario import Scenario
from .coverage import Coverage
from .swarm import swarm

_CHUNK = 8  # seeds per task handed to a worker: big enough to amortise the round trip, small enough to stop soon


@attrs.frozen
class Outcome:
    """What one seed did (small, so it crosses process boundaries cheaply)."""

    seed: int
    events: int
    invariant: str | None = None
    message: str | None = None
    time: int | None = None
    unjudged: tuple[str, str] | None = None  # (kind, why): a run that ended before it could be judged
    checked: tuple[str, ...] = ()  # the invariant ids the run checked (a report lists those that held)
    # Coverage, as (name, count) pairs: the faults that struck, the situations reached, the cases each
    # invariant met.
    fired: tuple[tuple[str, int], ...] = ()
    reached: tuple[tuple[str, int], ...] = ()
    cases: tuple[tuple[str, int], ...] = ()

    @property
    def signature(self) -> str | None:
        return None if self.invariant is None else f"{self.invariant}: {shape(self.message or '')}"


@attrs.frozen
class Shard:
    index: int  # 1-based
    count: int

    def keeps(self, seed: int) -> bool:
        return seed % self.count == self.index - 1


def seeds(first: int, stop: int | None, shard: Shard | None) -> Iterator[int]:
    """Seeds ``first, first+1, ...`` below ``stop`` (forever if None) that the shard keeps."""
    seed = first
    while stop is None or seed < stop:
        if shard is None or shard.keeps(seed):
            yield seed
        seed += 1


def count_seeds(first: int, stop: int, shard: Shard | None) -> int:
    """How many seeds :func:`seeds` yields, without yielding them."""
    if stop <= first:
        return 0
    if shard is None:
        return stop - first
    start = first + (shard.index - 1 - first) % shard.count  # the shard's first seed at or after ``first``
    return max(0, (stop - start + shard.count - 1) // shard.count)


def run_seed(scenario: Scenario, seed: int, use_swarm: bool, deadline: float | None = None,
             clock: Callable[[], float] = time.monotonic) -> Outcome:
    """One seed's outcome; past ``deadline`` (on ``clock``) the run stops where it is and raises :class:`Cut`."""
    result = run(swarm(scenario, seed) if use_swarm else scenario, seed, deadline=deadline, clock=clock)
    v, unjudged = result.violation, result.unjudged
    return Outcome(seed, result.events, None if v is None else v.invariant, None if v is None else v.message,
                   None if v is None else v.time, None if unjudged is None else (unjudged.kind, unjudged.why),
                   checked=result.invariants, fired=tuple(result.fired.items()),
                   reached=tuple(result.situations.items()), cases=tuple(result.cases.items()))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the campaign is, as Ctrl-C raises KeyboardInterrupt (exit 143, not 130)."""


class StopRequest:
    """A signal handler for a campaign on a pool: it only notes the signal, and the campaign stops at its
    next safe point (raising from the handler could land inside the pool's own locking and hang it)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum = 0

    def __call__(self, signum: int, frame: object) -> None:
        self.signum = signum
        self.event.set()

    def interrupt(self) -> KeyboardInterrupt:
        return Terminated() if self.signum == signal.SIGTERM else KeyboardInterrupt()


_in_run = False  # in a worker: whether a chunk of seeds is running
_exiting = False  # in a worker: a SIGTERM is already unwinding the run


def _exit_quietly(signum: int, frame: object) -> None:
    global _exiting
    if not _in_run:
        os._exit(128 + signum)  # idle: nothing to close, and a normal exit would wait on the pool's queues
    if not _exiting:  # a second SIGTERM must not interrupt the first one's unwinding (the pool would catch it)
        _exiting = True
        raise SystemExit(128 + signum)  # unwinds: the run in progress closes what it opened (a model's files)


def _worker_setup(parent: int, scratch: str) -> None:
    """A worker ignores Ctrl-C (it reaches the whole process group; the campaign decides), ends cleanly on
    SIGTERM, and gets SIGTERM from the kernel the moment its parent dies, however it dies. Its temporary
    files (a model's, through ``tempfile``) go into the pool's scratch folder."""
    tempfile.tempdir = os.environ["TMPDIR"] = scratch  # TMPDIR: for what a model's own processes write too
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_quietly)
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the line above: nobody will tell us
        os._exit(1)


def _processes(pool: Executor) -> list[multiprocessing.process.BaseProcess]:
    return list((getattr(pool, "_processes", None) or {}).values())  # no public way before Python 3.14


class _Pool(ProcessPoolExecutor):
    """Processes for a campaign, which die with it; their scratch folder goes when they have all ended,
    with whatever a worker stopped by force (or a model that does not close) left there."""

    def __init__(self, workers: int) -> None:
        self.scratch = tempfile.mkdtemp(prefix="dst-workers-")
        super().__init__(max_workers=workers, initializer=_worker_setup, initargs=(os.getpid(), self.scratch))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        processes = _processes(self)
        super().shutdown(wait=wait, cancel_futures=cancel_futures)
        if wait or not any(p.is_alive() for p in processes):
            shutil.rmtree(self.scratch, ignore_errors=True)


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """Processes for a campaign, which die with it, and leave no temporary file behind."""
    return _Pool(workers)


_GRACE = 5.0  # seconds a stopped worker has to close what its run opened


def stop_workers(pool: Executor) -> None:
    """End the pool's processes now, not after the chunks they are running (a seed may take long, or never end).
    Another executor (a cluster's) has no processes here: its shutdown cancels what it has in flight."""
    processes = _processes(pool)
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + _GRACE
    for process in processes:  # a run that will not unwind (a model's close that hangs) is killed
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    pool.shutdown(wait=False, cancel_futures=True)


def pick(scenarios: tuple[Scenario, ...], seed: int) -> Scenario:
    """The scenario a seed runs in a campaign over several: they take turns, seed by seed."""
    return scenarios[seed % len(scenarios)]


def _run_chunk(scenarios: tuple[Scenario, ...], chunk: list[int], use_swarm: bool,
               deadline: float | None) -> tuple[list[Outcome], bool]:
    """The chunk's outcomes in seed order, and whether the deadline cut it short (after the ones returned)."""
    global _in_run
    _in_run = True
    outcomes: list[Outcome] = []
    try:
        for seed in chunk:
            outcomes.append(run_seed(pick(scenarios, seed), seed, use_swarm, deadline))
        return outcomes, False
    except Cut:
        return outcomes, True
    except SystemExit as stop:  # SIGTERM: the run has closed what it opened; the pool would catch this and wait
        os._exit(stop.code if isinstance(stop.code, int) else 1)
    finally:
        _in_run = False


def campaign(scenario: Scenario | Sequence[Scenario], seed_iter: Iterator[int], *, use_swarm: bool, workers: int,
             deadline: float | None = None, clock: Callable[[], float] = time.monotonic,
             executor: Executor | None = None,
             stop: StopRequest | None = None) -> Generator[Outcome, None, None]:
    """Outcomes in seed order until the seeds run out or ``clock()`` passes ``deadline``. Given several
    scenarios, seed ``s`` runs ``pick(scenarios, s)``.

    With one worker the seeds run in this process; with more, in a pool of processes (``executor``,
    or one made here), with a window of ``2 * workers`` chunks in flight. An ``executor`` given is used
    whatever ``workers`` says (a cluster's, :mod:`dst.explore.cluster`, with one worker); it is given a
    chunk's ``deadline`` as a keyword, so that it can carry it to another machine's clock. Ctrl-C (or :class:`Terminated`, or ``stop``
    noting a signal) stops at once: the workers are ended, the outcomes already computed in seed order
    are still handed out, and then the interrupt goes on up. Closing the iterator ends the workers too.
    """
    scenarios = (scenario,) if isinstance(scenario, Scenario) else tuple(scenario)
    if workers <= 1 and executor is None:
        for seed in seed_iter:
            if deadline is not None and clock() >= deadline:
                return
            try:
                yield run_seed(pick(scenarios, seed), seed, use_swarm, deadline, clock)
            except Cut:
                return  # the seed in flight passed the deadline: it has no outcome
        return
    pool = executor or worker_pool(workers)
    pending: list[Future[tuple[list[Outcome], bool]]] = []
    try:
        exhausted = False
        while True:
            while not exhausted and len(pending) < 2 * workers and (deadline is None or clock() < deadline):
                chunk = [seed for _, seed in zip(range(_CHUNK), seed_iter)]
                if not chunk:
                    exhausted = True
                    break
                pending.append(pool.submit(_run_chunk, scenarios, chunk, use_swarm, deadline=deadline))
            if not pending:
                return
            while True:
                if stop is not None and stop.event.is_set():
                    raise stop.interrupt()  # here, where no lock of the pool is held
                if pending[0].done():
                    break
                wait(pending[:1], timeout=0.1)
            outcomes, cut = pending.pop(0).result()
            yield from outcomes
            if cut:
                return  # the seeds after a cut one are not a contiguous prefix: drop them
            if deadline is not None and clock() >= deadline:
                exhausted = True  # the chunks in flight stop at the deadline too; what they finished is kept
    except KeyboardInterrupt:
        stop_workers(pool)
        for future in pending:  # what is already done, as long as the seeds stay in order
            if not future.done() or future.cancelled() or future.exception() is not None:
                break
            outcomes, cut = future.result()
            yield from outcomes
            if cut:
                break
        pending = []
        raise
    finally:
        for future in pending:
            future.cancel()
        if executor is None:
            stop_workers(pool)


SEEDS_SHOWN = 20  # seeds a report lists per signature: the first ones, in seed order


@attrs.define
class Group:
    """Violations that share a signature (invariant plus the shape of the message)."""

    signature: str
    invariant: str
    first: Outcome
    seeds: list[int] = attrs.Factory(list)


@attrs.define
class Tally:
    """A campaign's running totals, fed one outcome at a time."""

    seeds_run: int = 0
    events: int = 0
    violations: int = 0
    groups: dict[str, Group] = attrs.Factory(dict)
    last_seed: int | None = None
    unjudged: dict[str, Group] = attrs.Factory(dict)  # by kind: runs that ended before they could be judged
    checked: set[str] = attrs.Factory(set)  # invariant ids any run checked
    coverage: Coverage = attrs.Factory(Coverage)

    def add(self, outcome: Outcome) -> Group | None:
        """Count an outcome; returns its group when it is a violation with a new signature."""
        self.seeds_run += 1
        self.events += outcome.events
        self.checked.update(outcome.checked)
        self.coverage.add(outcome.fired, outcome.reached, outcome.cases)
        self.last_seed = outcome.seed
        if outcome.unjudged is not None:
            kind = outcome.unjudged[0]
            self.unjudged.setdefault(kind, Group(kind, "", outcome)).seeds.append(outcome.seed)
        signature = outcome.signature
        if signature is None:
            return None
        self.violations += 1
        group = self.groups.get(signature)
        if group is None:
            group = self.groups[signature] = Group(signature, outcome.invariant or "", outcome)
            group.seeds.append(outcome.seed)
            return group
        group.seeds.append(outcome.seed)
        return None
