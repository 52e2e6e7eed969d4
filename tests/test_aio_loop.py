"""The deterministic asyncio loop: asyncio's own primitives on virtual time, a seeded order, nothing real."""

from __future__ import annotations

import asyncio
import contextvars
import time

import pytest
from hypothesis import given, settings, strategies as st

from dst import aio
from dst.aio import run
from dst.aio.loop import Loop
from dst.sim.kernel import Kernel
from dst.sim.schedule import Uniform
from dst.sim.rng import Streams


async def _primitives() -> dict[str, object]:
    loop = asyncio.get_running_loop()
    out: dict[str, object] = {}
    start = loop.time()
    await asyncio.sleep(2.5)
    out["slept"] = loop.time() - start
    try:
        await asyncio.wait_for(asyncio.sleep(60), timeout=0.5)
    except TimeoutError:
        out["wait_for"] = "timed out"
    async with asyncio.timeout(1):
        await asyncio.sleep(0.25)
    out["shield"] = await asyncio.shield(asyncio.sleep(0.1, result="shielded"))
    out["gather"] = await asyncio.gather(*(asyncio.sleep(d / 10, result=d) for d in (3, 1, 2)))
    done, pending = await asyncio.wait([asyncio.ensure_future(asyncio.sleep(d, result=d)) for d in (1, 9)],
                                       return_when=asyncio.FIRST_COMPLETED)
    out["wait"] = ([t.result() for t in done], len(pending))
    for task in pending:
        task.cancel()
    lock, event, condition, semaphore, queue = (asyncio.Lock(), asyncio.Event(), asyncio.Condition(),
                                                asyncio.Semaphore(2), asyncio.Queue())
    inside = []

    async def guarded(i: int) -> None:
        async with semaphore:
            async with lock:
                inside.append(i)
                await asyncio.sleep(0.01)

    async with asyncio.TaskGroup() as group:
        for i in range(4):
            group.create_task(guarded(i))
    out["locked"] = sorted(inside)
    loop.call_later(0.3, event.set)
    await event.wait()

    async def notify() -> None:
        async with condition:
            condition.notify_all()

    async with condition:
        loop.create_task(notify())
        await condition.wait()
    for i in range(3):
        queue.put_nowait(i)
    out["queue"] = [await queue.get() for _ in range(3)]
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("outer")

    async def read() -> str:
        return var.get()

    out["contextvar"] = await loop.create_task(read())
    marks: list[str] = []
    loop.call_soon(marks.append, "soon")
    loop.call_at(loop.time() + 1, marks.append, "at")
    await asyncio.sleep(2)
    out["callbacks"] = sorted(marks)
    out["elapsed"] = round(loop.time() - start, 3)
    return out


def test_asyncio_primitives_run_unmodified_in_virtual_time():
    wall = time.perf_counter()
    out = run(_primitives(), seed=1)
    assert time.perf_counter() - wall < 2  # 15 s of virtual time, no waiting
    assert out["slept"] == 2.5
    assert out["wait_for"] == "timed out"
    assert out["shield"] == "shielded"
    assert out["gather"] == [3, 1, 2]
    assert out["wait"] == ([1], 1)
    assert out["locked"] == [0, 1, 2, 3]
    assert out["queue"] == [0, 1, 2]
    assert out["contextvar"] == "outer"
    assert out["callbacks"] == ["at", "soon"]
    assert out["elapsed"] == 6.99  # 2.5 + 0.5 + 0.25 + 0.1 + 0.3 + 1 + 4 x 0.01 under the lock + 0.3 + 2


async def _order(workers: int = 5) -> list[int]:
    order: list[int] = []

    async def worker(i: int) -> None:
        for _ in range(3):
            order.append(i)
            await asyncio.sleep(0)

    await asyncio.gather(*(worker(i) for i in range(workers)))
    return order


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_one_seed_gives_one_interleaving(seed):
    assert run(_order(), seed=seed) == run(_order(), seed=seed)


def test_the_seed_chooses_the_order_of_ready_callbacks():
    orders = {tuple(run(_order(), seed=seed)) for seed in range(20)}
    assert len(orders) > 10  # not insertion order: 20 seeds, many interleavings


def test_timers_due_at_the_same_millisecond_run_in_the_order_they_were_set():
    async def main() -> list[int]:
        loop, fired = asyncio.get_running_loop(), []
        for i in range(10):
            loop.call_at(loop.time() + 0.5, fired.append, i)
        await asyncio.sleep(1)
        return fired

    for seed in range(5):
        assert run(main(), seed=seed) == list(range(10))


def test_a_timer_never_fires_early_and_float_error_does_not_make_it_late():
    async def main() -> list[float]:
        loop, seen = asyncio.get_running_loop(), []
        for _ in range(10):
            await asyncio.sleep(0.005)
            seen.append(loop.time())
        await asyncio.sleep(0.0001)  # under a millisecond: the next one
        seen.append(loop.time())
        return seen

    seen = run(main(), seed=1)
    assert seen[:10] == [round(0.005 * i, 3) for i in range(1, 11)]
    assert seen[10] == 0.051


def test_a_deadlock_is_said_not_hung():
    async def main() -> None:
        await asyncio.Event().wait()

    with pytest.raises(RuntimeError, match="deadlock"):
        run(main(), seed=1)


def test_the_running_loop_is_restored_after_a_run():
    assert asyncio.get_event_loop_policy() is not None
    run(asyncio.sleep(1), seed=1)
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


def test_the_loop_runs_asyncio_run_until_complete_and_refuses_run_forever():
    rng = Streams(1).keyed("scheduling")
    loop = Loop(Kernel(), Uniform(rng, rng))
    assert loop.run_until_complete(asyncio.sleep(3, result="x")) == "x"
    assert loop.time() == 3
    with pytest.raises(RuntimeError, match="drives this loop itself"):
        loop.run_forever()
    loop.close()


def test_a_timer_re_armed_until_the_clock_reaches_its_deadline_does_not_spin():
    # anyio's cancel scopes re-arm until loop.time() >= deadline; a deadline a float hair past a millisecond
    # must not be rounded onto it, or the timer fires at the same instant forever.
    async def main() -> float:
        loop = asyncio.get_running_loop()
        deadline = 278.561 + 1e-10  # 278561.0000001 ms: within float error of 278,561 ms
        fired = loop.create_future()

        checks = []

        def check() -> None:
            checks.append(loop.time())
            if loop.time() >= deadline or len(checks) > 100:  # the cap: a spin fails the test, not hangs it
                fired.set_result(loop.time())
            else:
                loop.call_at(deadline, check)

        loop.call_at(deadline, check)
        return await fired

    assert run(main(), seed=1) == 278.562


async def _set_order(padding: list[object], spacing: int) -> list[str]:
    """Tasks and futures made with unrelated objects allocated between them, iterated as asyncio and anyio do
    (``asyncio.wait``'s sets, a cancel scope's ``for task in self._tasks``)."""
    loop = asyncio.get_running_loop()
    made: set[object] = set()
    for i in range(40):
        padding.extend(object() for _ in range(spacing * (i % 7)))
        made.add(loop.create_task(asyncio.sleep(0, result=f"task {i}"), name=f"task {i}"))
        padding.extend([0.5] * (spacing * (i % 3)))
        future = loop.create_future()
        future.set_result(f"future {i}")
        made.add(future)
    await asyncio.sleep(0)
    return [thing.get_name() if isinstance(thing, asyncio.Task) else thing.result() for thing in made]


def test_a_set_of_tasks_and_futures_iterates_the_same_whatever_the_process_allocated_before():
    # An object's default hash is its address: without the loop's own numbering the order below follows
    # the allocator, which a second run of the seed (after another finding, with other output) does not repeat.
    padding: list[object] = []
    orders = [run(_set_order(padding, spacing), seed=1) for spacing in (0, 1, 5, 40)]
    assert all(order == orders[0] for order in orders)


async def _child_scope_order(padding: list[object], spacing: int) -> list[int]:
    """Tasks of an anyio task group, each in a cancel scope of its own, made with unrelated objects allocated
    between them: the order the group's scope walks its child scopes in when it is cancelled."""
    import anyio

    made: dict[int, int] = {}

    async def child(i: int) -> None:
        padding.extend(object() for _ in range(spacing * (i % 5)))
        with anyio.CancelScope() as scope:
            made[id(scope)] = i
            await anyio.sleep(60)

    async with anyio.create_task_group() as group:
        for i in range(30):
            group.start_soon(child, i)
        await anyio.sleep(1)
        def label(scope: anyio.CancelScope) -> int:  # a child's own scope, or the task's scope around it
            return made[id(scope)] if id(scope) in made else label(next(iter(scope._child_scopes)))

        walked = [label(scope) for scope in group.cancel_scope._child_scopes]  # what cancelling iterates
        group.cancel_scope.cancel()
    return walked


def test_anyio_cancel_scopes_walk_their_children_in_an_order_the_seed_decides():
    padding: list[object] = []
    orders = [run(_child_scope_order(padding, spacing), seed=1) for spacing in (0, 3, 17, 40)]
    assert sorted(orders[0]) == list(range(30)) and all(order == orders[0] for order in orders)


def test_aio_run_is_the_sandbox_one_seed_one_result():
    import random
    import threading
    import time
    import uuid

    from dst.sandbox import Refusal

    async def draws() -> tuple[float, float, str, float]:
        await asyncio.sleep(1.5)
        return random.random(), time.time(), str(uuid.uuid4()), time.monotonic()

    first = aio.run(draws(), seed=7)
    assert aio.run(draws(), seed=7) == first != aio.run(draws(), seed=8)
    assert first[1] == aio.VIRTUAL_EPOCH_MS / 1000 + 1.5 and first[3] == 1.5  # virtual clocks, not the real ones

    async def threaded() -> None:
        threading.Thread(target=print).start()

    with pytest.raises(Refusal, match=r"threading.Thread.start\(\) called at tests/test_aio_loop.py"):
        aio.run(threaded(), seed=1)


def test_aio_run_checks_an_invariant_after_every_callback():
    state = {"held": 0}

    async def holder() -> None:
        state["held"] += 1
        await asyncio.sleep(0.5)
        state["held"] -= 1

    async def main() -> None:
        await asyncio.gather(holder(), holder())

    def at_most_one() -> None:
        assert state["held"] <= 1, f"{state['held']} holders at t={asyncio.get_running_loop().time()}s"

    with pytest.raises(AssertionError, match=r"2 holders at t=0.0s"):
        aio.run(main(), seed=1, check=at_most_one)


def test_a_task_a_dropped_task_starts_as_it_is_closed_is_closed_too():
    # SQLAlchemy's async engine, closed mid-statement, invalidates its connection and terminates it with
    # asyncio.shield(conn._terminate_graceful_close()): a task made while the loop drops the dead ones, and held
    # by the engine's greenlet long after. Left pending, its coroutine was never awaited, and warned when it was
    # collected, at exit, under dst's report.
    import inspect

    made: list[asyncio.Task[None]] = []  # what holds it past the run

    async def cleanup() -> None:
        pass

    async def holder(loop: asyncio.AbstractEventLoop) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            made.append(loop.create_task(cleanup()))

    async def main() -> None:
        asyncio.get_running_loop().create_task(holder(asyncio.get_running_loop()))
        await asyncio.sleep(0.001)  # the holder waits

    run(main(), seed=1)
    assert [inspect.getcoroutinestate(task.get_coro()) for task in made] == ["CORO_CLOSED"]
