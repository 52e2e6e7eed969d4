"""Queues in the asyncio mode: runs submitted to an asyncio service and served by workers that poll it, with the
run facts derived from what its store holds (a RunTable), several tasks of one worker at once, and workers idle
between polls that keep no drain open."""

from __future__ import annotations

import aio_models
from dst.runner import run
from dst.scenario import parse_scenario


def queue_scenario(model: str, **runs: object) -> object:
    return parse_scenario({"model": {"impl": f"aio_models:{model}"}, "run": {"duration": "60s", "quiet": "120s"},
                           "network": {"loss": 0.0, "duplicate": 0.0, "delay": 0.0},
                           "workload": {"clients": 1, "jobs": 0},
                           "runs": {"submissions": 4, "workers": 2, "work": ["1s", "5s"], "cancel": 0.0,
                                    "cancel_early": 0.0, **runs}}, "<test>")


def test_a_queue_of_an_asyncio_service_runs_its_runs_and_its_idle_workers_let_the_run_drain():
    result = run(queue_scenario("queue"), 1)
    assert result.ok and result.unjudged is None, result.explain()  # workers still polling do not hold it open
    assert "at-least-once" in result.invariants and "single-executor" in result.invariants
    states = [e[3] for e in result.trace if e[2] == "store" and "-> COMPLETED" in str(e[3])]
    assert len(states) == 4  # each run's acknowledgement, as the store showed it


def test_a_worker_that_runs_one_run_twice_at_once_is_two_executions():
    result = run(queue_scenario("queue_twice"), 1)
    assert result.violation is not None and result.violation.invariant == "single-executor"
    assert "two executions" in result.violation.message
    assert "execution under claim 1" in result.violation.message  # the same worker, its first delivery still running


def test_workers_that_poll_for_good_without_an_idle_hook_leave_the_run_undrained_not_accused():
    result = run(queue_scenario("queue_never_idle"), 1)
    assert result.ok and result.unjudged is not None and result.unjudged.kind == "undrained"
    assert "c2" in result.unjudged.why  # a worker's job never ends: nothing is judged after the quiet period
