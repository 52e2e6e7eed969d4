"""The event loop: time order, FIFO ties, cancellation, stopping, and a clock that never runs back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dst.sim.kernel import NEVER, Kernel, StopRun


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3)), max_size=60))
def test_events_run_in_time_order_and_ties_first_scheduled_first(schedule):
    kernel = Kernel()
    seen: list[tuple[int, int]] = []
    for i, (time, _) in enumerate(schedule):
        kernel.at(time, lambda arg: seen.append((kernel.now, arg)), i)
    kernel.run(100)
    expected = sorted(((time, i) for i, (time, _) in enumerate(schedule)))
    assert seen == expected
    assert kernel.now == 100


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=60))
def test_cancelled_events_never_run_and_the_rest_do(schedule):
    kernel = Kernel()
    ran: list[int] = []
    for i, (time, cancel) in enumerate(schedule):
        handle = kernel.at(time, ran.append, i)
        if cancel:
            kernel.cancel(handle)
    kernel.run(100)
    assert ran == sorted((i for i, (_, c) in enumerate(schedule) if not c), key=lambda i: (schedule[i][0], i))
    assert kernel.pending() == 0


def test_events_scheduled_while_running_run_in_the_same_pass():
    kernel = Kernel()
    ran = []

    def chain(n):
        ran.append((kernel.now, n))
        if n < 3:
            kernel.after(0 if n % 2 else 5, chain, n + 1)

    kernel.at(1, chain, 0)
    kernel.run(50)
    assert ran == [(1, 0), (6, 1), (6, 2), (11, 3)]
    assert kernel.events == 4


def test_run_stops_at_until_and_resumes_later():
    kernel = Kernel()
    ran = []
    for t in (5, 10, 15):
        kernel.at(t, ran.append, t)
    kernel.run(10)
    assert ran == [5, 10] and kernel.now == 10
    kernel.run(20)
    assert ran == [5, 10, 15]


def test_stop_run_propagates_with_the_clock_at_the_event():
    kernel = Kernel()

    def stop(_):
        raise StopRun("enough")

    kernel.at(7, stop)
    kernel.at(9, lambda _: None)
    with pytest.raises(StopRun):
        kernel.run(100)
    assert kernel.now == 7


def test_the_clock_refuses_to_go_backwards():
    kernel = Kernel()
    kernel.run(10)
    with pytest.raises(ValueError):
        kernel.at(9, print)


def test_the_checkpoint_is_called_at_the_counts_it_asks_for_and_can_end_the_run() -> None:
    seen: list[int] = []

    def checkpoint(events: int) -> int:
        seen.append(events)
        if events >= 25:
            raise StopRun("budget")
        return events + 10

    kernel = Kernel(checkpoint, 5)
    for t in range(100):
        kernel.at(t, lambda _: None)
    with pytest.raises(StopRun):
        kernel.run(1_000)
    assert seen == [5, 15, 25] and kernel.events == 25 and kernel.now == 24


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3), st.booleans()), max_size=60))
def test_stepping_runs_the_same_events_in_the_same_order_as_run(schedule):
    # Two kernels, one run and one stepped: the same events at the same times, peek() naming each one's time
    # before it runs, ranked events due now first, cancelled ones never.
    def load(kernel: Kernel, seen: list[tuple[int, int]]) -> None:
        def fire(i: int) -> None:
            seen.append((kernel.now, i))
            if i % 5 == 0 and i < 1000:
                kernel.soon(i % 3, fire, i + 1000)  # due now, ranked: before the clock moves again

        for i, (time, rank, cancel) in enumerate(schedule):
            handle = kernel.at(time, fire, i) if rank else kernel.after_ranked(time, 7, fire, i)
            if cancel:
                kernel.cancel(handle)

    ran, stepped = Kernel(), Kernel()
    by_run: list[tuple[int, int]] = []
    by_step: list[tuple[int, int]] = []
    load(ran, by_run)
    load(stepped, by_step)
    ran.run(100)
    while True:
        due = stepped.peek()
        before = len(by_step)
        if not stepped.step():
            break
        if len(by_step) > before:  # a cancelled event at the head runs nothing; what runs is never early
            assert by_step[-1][0] >= due and stepped.now == by_step[-1][0]
    assert by_step == by_run
    assert stepped.events == ran.events
    assert stepped.peek() == NEVER


def test_peek_names_the_next_event_and_step_moves_the_clock_to_it():
    kernel = Kernel()
    assert kernel.peek() == NEVER and not kernel.step()
    kernel.at(7, lambda _: None)
    handle = kernel.at(3, lambda _: None)
    assert kernel.peek() == 3
    kernel.cancel(handle)
    assert kernel.step() and kernel.now == 7  # the cancelled one is skipped
    assert kernel.peek() == NEVER
