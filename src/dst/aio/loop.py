"""An asyncio event loop whose clock is the kernel's and whose ready queue is the seeded scheduler's.

asyncio's own primitives (``sleep``, ``wait_for``, ``timeout``, ``Lock``, ``Queue``, ``TaskGroup``, ...)
need nothing but a loop: ``call_soon``, ``call_at``, ``time``, ``create_future``, ``create_task``. This one
schedules every callback on :class:`~dst.sim.kernel.Kernel`, so virtual time jumps to the next timer when
every task waits, and it never touches a selector, a thread or the wall clock.

* **Time** is the kernel's integer milliseconds; ``loop.time()`` is that in seconds. A timer fires at the
  first millisecond not earlier than its deadline (asyncio's promise: never early; within float error of
  a millisecond counts as on it). Timers due at the
  same millisecond run in the order they were set.
* **Ready callbacks** (``call_soon``: a task's next step, a future's callbacks) run at the same instant,
  in an order drawn from the run's seed, never the insertion order alone: each draws a rank keyed by the
  request it works for and its count there (:data:`REQUEST`, set by the hosts), so deleting another plan
  step leaves the draws of this one as they were. ``pct`` gives each request one priority instead.
* **Processes.** Every handle belongs to the :class:`Process` whose code scheduled it (the one running
  when it was made). A dead process's handles never run; a paused process's wait, in order, until it
  resumes. That is how a crash runs none of a process's code afterwards (no ``finally``, no ``except
  CancelledError``), and how a pause freezes a process with its memory intact.
* **Sets of tasks iterate the same way**: the loop's tasks and futures hash by their number in the run
  (:mod:`.tasks`), not by their address.
* **Nothing real.** Threads, executors, sockets, subprocesses and signals are refused with one line that
  names the call and where it came from (:class:`~dst.sandbox.Refusal`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import itertools
import logging
import sys
import warnings
from asyncio import events
from heapq import heappush
from typing import Any, Callable, Coroutine, Iterator, TypeVar

from ..errors import ModelFault, Stalled
from ..sim.kernel import Kernel, Pause, StopRun
from ..sim.schedule import Strategy
from .handles import Handle, Process, Timer, make
from .tasks import NumberedFuture, NumberedTask, name_of
from ..sandbox import VIRTUAL_EPOCH_MS as VIRTUAL_EPOCH_MS  # re-exported: the loop's wall clock reads it too
from ..sandbox import _EXECUTOR, Refusal, refusal
from .refused import refuse_the_real

T = TypeVar("T")

REQUEST: contextvars.ContextVar[int] = contextvars.ContextVar("dst_request", default=0)
"""The key of the request (or background job) the running code works for: keys its random draws."""



# Typed as Any: asyncio's stubs spell each method's overloads, which the refusals below answer alike.
_LoopBase: Any = asyncio.AbstractEventLoop


class Loop(_LoopBase):  # type: ignore[misc]  # see _LoopBase
    """The deterministic loop. ``process`` is the one whose code runs now (the harness sets it before it calls
    into a process: delivering a message, starting a job)."""

    def __init__(self, kernel: Kernel, strategy: Strategy, *,
                 on_error: Callable[[Process, str, BaseException | None], None] | None = None) -> None:
        self._kernel = kernel
        # Keyed by the request the code works for (REQUEST): each request draws its own sequence of ranks, so
        # deleting another plan step leaves this one's as it was.
        self._strategy = strategy
        self._ranks: dict[int, Callable[[], int]] = {}  # request key -> the draw of its next ready rank
        self.root = Process("main")
        self.process = self.root
        self._on_error = on_error
        self._closed = False
        self._running = False
        self._previous: Any = None
        self._task_factory: Any = None
        self._exception_handler: Any = None
        # What ends the run once the callback that raised it returns: a violation (asyncio would catch it in the
        # task and hand it to the handler's own code), or the first thing refused (the caller may swallow it).
        self.stopping: BaseException | None = None
        self.current: Any = None  # the handle running now (whose request a violation is detected in)
        self.patches: list[Any] = []  # entered with the loop by running(): the sandbox, the aiosqlite drop-in
        self.inline: Any = None  # thread-pool work run inline (InlineThreads), when the system asks for it
        self._run_handle = self._run  # bound once: the hot path passes it to the kernel
        self._numbers = itertools.count(1)  # the hashes of the run's tasks and futures
        # Kernel.soon, inlined in call_soon (a frame less for every ready callback): the kernel's ready heap and
        # its counter, ranked as soon() ranks.
        self._ready, self._counter = kernel._ready, kernel._counter
        self._queue = kernel._queue  # and its main queue, in call_at

    # --- time --------------------------------------------------------------------------------------

    def time(self) -> float:
        return self._kernel.now / 1000

    @property
    def now_ms(self) -> int:
        return self._kernel.now

    # --- scheduling ----------------------------------------------------------------------------------

    def call_soon(self, callback: Callable[..., object], *args: Any,
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        handle = make(Handle, callback, args, self, context, self.process)
        key = REQUEST.get()
        draw = self._ranks.get(key)
        if draw is None:
            draw = self._ranks[key] = self._strategy.ranks(key)
        heappush(self._ready, ((draw() << 40) | next(self._counter), self._run_handle, handle))
        return handle

    def redraw(self) -> None:
        """The run branched (the strategy's streams are the branch's now): each request's ranks are drawn afresh."""
        self._ranks.clear()

    def forked(self) -> None:
        """The run goes on in a process forked in its middle: asyncio forgets its running loop across a fork."""
        if self._running:
            events._set_running_loop(self)

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any,
                   context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        return self.call_at(self._kernel.now / 1000 + delay, callback, *args, context=context)

    def call_at(self, when: float, callback: Callable[..., object], *args: Any,
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        kernel = self._kernel
        x = when * 1000
        ms = int(x)
        if x - ms > 1e-6:  # never early; within float error of a millisecond is on it (0.025 + 0.005 is 30 ms)
            ms += 1
        if ms <= kernel.now:
            # Due now, or a hair after now: now, unless the deadline is later than the clock reads, if only by
            # float error. Then the next millisecond: code that re-arms until loop.time() >= its deadline
            # (anyio's cancel scopes) would otherwise re-arm at this same instant forever.
            ms = kernel.now if when <= kernel.now / 1000 else kernel.now + 1
        timer: Any = make(Timer, callback, args, self, context, self.process)
        timer._when = ms / 1000
        timer._scheduled = False
        timer._seq = seq = next(self._counter)  # Kernel.at, inlined: ms is never before now
        heappush(self._queue, (ms, seq, self._run_timer, timer))
        return timer  # type: ignore[no-any-return]  # a Timer

    def call_after_ms(self, ms: int, rank: int, callback: Callable[..., object], *args: Any) -> asyncio.Handle:
        """``callback`` after ``ms`` virtual ms, ranked among what is due then (a store round trip's draws)."""
        handle = make(Handle, callback, args, self, None, self.process)
        self._kernel.after_ranked(ms, rank, self._run_handle, handle)
        return handle

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        seq = getattr(handle, "_seq", -1)
        if seq >= 0:
            self._kernel.cancel(seq)

    def _run_timer(self, timer: Timer) -> None:
        timer._seq = -1  # fired: a cancel from now on has nothing to take off the queue
        self._run(timer)

    def _run(self, handle: Any) -> None:
        if handle._cancelled:
            return
        process = handle._process
        if process.epoch != handle._epoch:
            return  # its process died: none of its code runs again
        if process.paused_until > self._kernel.now:
            process.frozen.append(handle)
            return
        if process.at_await is not None:
            strike, process.at_await = process.at_await, None
            strike()
            if process.epoch != handle._epoch:
                return  # struck down: this callback belonged to the process that died
            if process.paused_until > self._kernel.now:
                process.frozen.append(handle)  # paused: it runs when the process resumes
                return
        self.process = process
        self.current = handle
        try:  # asyncio's Handle._run, inlined: one frame less per callback
            handle._context.run(handle._callback, *handle._args)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            if isinstance(exc, (ModelFault, Stalled)):
                self.stop_with(exc)  # the watchdog stopped a callback that never returned: the run ends with it
            self.call_exception_handler({"message": f"Exception in callback {handle._callback!r}",
                                         "exception": exc, "handle": handle})
        if process.settle is not None:
            process.settle()
        if self.stopping is not None:
            stopping = self.stopping
            if isinstance(stopping, Pause):
                self.stopping = None  # the kernel stops for a moment; the run goes on
            raise stopping

    def thaw(self, process: Process) -> None:
        """A paused process resumes: what fell due while it was frozen runs now, in the order it fell due."""
        frozen, process.frozen = process.frozen, []
        after = self._kernel.after
        for handle in frozen:
            after(0, self._run_handle, handle)

    # --- futures and tasks -----------------------------------------------------------------------------

    def create_future(self) -> asyncio.Future[Any]:
        future = NumberedFuture(loop=self)
        future._number = next(self._numbers)
        return future

    def create_task(self, coro: Coroutine[Any, Any, T] | Any, *, name: str | None = None,
                    context: contextvars.Context | None = None) -> asyncio.Task[T]:
        if self._task_factory is not None:
            task: asyncio.Task[T] = self._task_factory(self, coro, **({"context": context} if context is not None else {}))
        else:
            # Named for its coroutine (asyncio's Task-N counts every task the process ever made: not a name a
            # second run of the seed would give it, and not one that tells the story).
            task = NumberedTask(coro, loop=self, name=name if name is not None else name_of(coro), context=context,
                                number=next(self._numbers))
        task.add_done_callback(self._task_ended)
        tasks = self.process.tasks
        tasks.append(task)
        if len(tasks) > 64 and len(tasks) & (len(tasks) - 1) == 0:  # now and then, forget the finished ones
            tasks[:] = [t for t in tasks if not t.done()]
        return task

    def _task_ended(self, task: asyncio.Task[Any]) -> None:
        # A task that dies of an exception is worth a line in the story (a reaper that died stops reaping), whether
        # or not someone awaits it later: asyncio itself would only say so when the task is garbage.
        # task._exception, not task.exception(): that would mark it retrieved, and asyncio would keep quiet about it.
        error = None if task.cancelled() else getattr(task, "_exception", None)
        if isinstance(error, (ModelFault, Stalled)):
            self.stop_with(error)  # a task the watchdog stopped (or one that let a refusal out): the run ends with it
        if error is not None and self._on_error is not None and not isinstance(error, StopRun):
            self._on_error(self.process, f"task {task.get_name()} ended with", error)

    def set_task_factory(self, factory: Any) -> None:
        self._task_factory = factory

    def get_task_factory(self) -> Any:
        return self._task_factory

    # --- running -----------------------------------------------------------------------------------------

    def is_running(self) -> bool:
        return self._running

    def is_closed(self) -> bool:
        return self._closed

    def get_debug(self) -> bool:
        return False

    def set_debug(self, enabled: bool) -> None:
        pass

    def running(self) -> contextlib.ExitStack:
        """The loop running, with its patches in place (the sandbox, the drop-ins), for the length of a run."""
        stack = contextlib.ExitStack()
        stack.enter_context(self)
        for patch in self.patches:
            stack.enter_context(patch)
        return stack

    def __enter__(self) -> Loop:
        """The loop is the running loop (``asyncio.get_running_loop()``) inside the block."""
        self._previous = events._get_running_loop()
        events._set_running_loop(self)
        self._running = True
        self._hooks = sys.get_asyncgen_hooks()
        sys.set_asyncgen_hooks(firstiter=None, finalizer=self._finalize_asyncgen)
        return self

    def __exit__(self, *exc: object) -> None:
        self._running = False
        sys.set_asyncgen_hooks(*self._hooks)
        events._set_running_loop(self._previous)

    def _finalize_asyncgen(self, agen: Any) -> None:
        # An async generator dropped unfinished: close it in the process that dropped it, as asyncio's loop does.
        if self._running and not self._closed:
            self.create_task(agen.aclose())

    def run_until_complete(self, future: Any) -> Any:
        """Run until ``future`` (a coroutine or a future) is done; returns its result. Virtual time goes as far
        as it takes; what else is still pending then stays pending."""
        task = asyncio.ensure_future(future, loop=self)
        task.add_done_callback(lambda _: self.stop_with(_Done()))
        with self.running():
            try:
                self._kernel.run(1 << 61)
            except _Done:
                self.stopping = None
        if not task.done():
            raise RuntimeError("every task is waiting and no timer is set: the coroutine can never finish (a deadlock)")
        return task.result()

    def run_forever(self) -> None:
        raise RuntimeError("dst drives this loop itself: use dst.aio.run(coroutine, seed=N), or run it under dst run")

    def stop(self) -> None:
        raise RuntimeError("dst drives this loop itself: it stops when the run ends")

    def close(self, collect: bool = False) -> None:
        """The run is over: every task still pending is dropped, its coroutine closed without a word (a dead
        process's ``finally`` runs now, if at all: after the run, where it can change nothing of it). With
        ``collect``, what the dropped tasks held is collected now too, quietly (the youngest generation only: the
        run holds the cycle collector off, so everything the run made is still young, and the long-lived heap of
        the service's libraries is not scanned again at every run): left to the cycle collector, a
        library's coroutine that was never awaited would warn later, in the middle of whatever comes next."""
        if self._closed:
            return
        self._closed = True
        unraisable = sys.unraisablehook
        sys.unraisablehook = _quiet  # what a closed coroutine's frames let out as they go ("ignored GeneratorExit")
        silenced = logging.root.manager.disable
        logging.disable(logging.CRITICAL)  # and what they log (a web framework's "exception in request")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                stubborn = False  # a coroutine that would not close (it awaited in its finally): closed again at GC
                # A cleanup that schedules (asyncio.shield in an async with's exit) finds this loop running, and what it
                # schedules is closed in turn (see _dropped).
                running = events._get_running_loop()
                events._set_running_loop(self)
                try:
                    for task in self._dropped():
                        stubborn = _close(task) or stubborn
                finally:
                    events._set_running_loop(running)
                if collect:
                    # The youngest generation holds what the run made; a coroutine that would not close may be held
                    # by older objects, and is collected with them now, while its last words are silenced.
                    gc.collect() if stubborn else gc.collect(0)
        finally:
            sys.unraisablehook = unraisable
            logging.disable(silenced)

    def _dropped(self) -> Iterator[asyncio.Task[Any]]:
        """Every task still pending, and then those their cleanup makes as they are closed (SQLAlchemy terminates a
        connection in a task of its own, ``asyncio.shield(...)``): left pending, one would be a coroutine never
        awaited, warning whenever what holds it lets it go. Membership only: the order is the tasks' own."""
        seen: set[asyncio.Task[Any]] = set()
        for _ in range(_CLOSE_TRIES):
            fresh = [task for task in _pending_tasks(self) if task not in seen]
            if not fresh:
                return
            seen.update(fresh)
            yield from fresh

    async def shutdown_asyncgens(self) -> None:
        pass

    async def shutdown_default_executor(self, timeout: float | None = None) -> None:
        pass

    # --- errors ----------------------------------------------------------------------------------------

    def set_exception_handler(self, handler: Any) -> None:
        self._exception_handler = handler

    def get_exception_handler(self) -> Any:
        return self._exception_handler

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        if self._closed or not self._running:
            return  # after the run (a dropped task's last words): nothing to report to
        if isinstance(context.get("exception"), StopRun):
            self.stop_with(context["exception"])
            return
        if self._on_error is not None:
            self._on_error(self.process, str(context.get("message", "")), context.get("exception"))

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        if self._exception_handler is not None and self._running:
            self._exception_handler(self, context)
        else:
            self.default_exception_handler(context)

    def stop_with(self, error: BaseException) -> None:
        """End the run with ``error`` once the running callback returns (the first one stands; an error that
        ends the run stands over a :class:`~dst.sim.kernel.Pause`, which only stops the kernel for a moment)."""
        if self.stopping is None or isinstance(self.stopping, Pause):
            self.stopping = error

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Refused (threads run outside virtual time), unless the system asked for thread-pool work inline."""
        if self.inline is not None and self.inline.active:
            from .inline import inline

            return self.create_task(inline(func, *args), name=getattr(func, "__qualname__", None))
        raise self._refused("loop.run_in_executor()", _EXECUTOR)

    def refuse(self, refusal: Refusal) -> None:
        """Something real was asked for: the run ends with it, even if the caller swallows the exception."""
        self.stop_with(refusal)

    def server_key(self) -> int | None:
        """The key of the server request (or background job) whose callback ran last, if it was the server's."""
        handle = self.current
        if handle is None or handle._process.name != "server":
            return None
        return handle._context.get(REQUEST) or None

    def _refused(self, call: str, instead: str) -> Refusal:
        refused = refusal(call, instead)
        self.refuse(refused)
        return refused


refuse_the_real(Loop)


def _quiet(unraisable: Any) -> None:
    pass


_CLOSE_TRIES = 32  # closes tried on a dropped task's coroutine that awaits as it is closed (an async with's exit)


class _Done(BaseException):
    """The coroutine run_until_complete waits for is done (raised out of the kernel to stop it)."""


def _pending_tasks(loop: Loop) -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks(loop) if not t.done()]


def _close(task: asyncio.Task[Any]) -> bool:
    """Close a dropped task's coroutine without a word; whether it would not close (it awaited in its cleanup)."""
    task._log_destroy_pending = False  # type: ignore[attr-defined]
    coro, stubborn = task.get_coro(), False
    for _ in range(_CLOSE_TRIES):  # one that awaits in its cleanup is closed again at that await
        try:
            coro.close()
            break
        except BaseException:  # noqa: BLE001 - a dead process's last words change nothing
            stubborn = True  # what its cleanup began and dropped is garbage for the full collection
            if getattr(coro, "cr_frame", None) is None:
                break
    return stubborn


__all__ = ["Loop", "Process", "REQUEST"]
