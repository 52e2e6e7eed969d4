"""Prefect's own global concurrency limit (v2) lease code under dst (examples/prefect_limits): what dst found in it
replays, a quiet seed runs clean, and every run keeps its files apart. Needs the prefect extra, else skipped.

The findings replay with the same digests on Prefect 3.9.1 (the extra's pin) and 3.8.2: no release between them
fixed one (docs/prefect.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dst.findings import read
from dst.runner import run
from dst.scenario import Scenario
from prefect_targets import assert_replays, findings, from_the_root, needs_prefect, scenario as _scenario

pytestmark = [needs_prefect, pytest.mark.slow]  # Prefect end to end: its import and migrations alone take seconds
FINDINGS = findings("prefect_limits")
__all__ = ["from_the_root"]  # the fixture: each test runs from the repository's root


def scenario(name: str) -> Scenario:
    return _scenario("prefect_limits", name)


@pytest.mark.parametrize("path", FINDINGS, ids=lambda p: p.stem[:3])
def test_each_finding_replays_to_its_violation_with_its_trace(path: Path) -> None:
    assert_replays(path)


def test_a_quiet_seed_runs_clean_the_same_twice_and_leaves_no_file() -> None:
    from examples.prefect_limits import settings

    quiet = scenario("quiet")
    first, second = run(quiet, 1), run(quiet, 1)
    assert first.ok and first.jobs.get("done", 0) >= 5
    assert first.digest == second.digest
    assert any(e[2] == "store" and "stored" in str(e[3]) for e in first.trace)  # Prefect's lease storage, observed
    assert not [name for name in os.listdir(settings.FOLDER) if name.startswith("run-")]  # each run's folder is gone


def test_the_filesystem_storage_keeps_the_lease_a_restart_loses_in_memory_and_the_settings_come_back() -> None:
    import attrs

    lost = read(FINDINGS[0]).scenario  # 001: the in-memory storage forgets the lease at the restart
    import prefect.context  # after the example, which sets Prefect's settings before Prefect is imported
    before = prefect.context.GLOBAL_SETTINGS_CONTEXT
    kept = run(attrs.evolve(lost, model=lost.model.with_options(storage="filesystem")), 4)
    assert kept.ok and kept.jobs == {"done": 1}
    assert any(e[2] == "store" and "removed" in str(e[3]) for e in kept.trace)  # read from its files, reaped in time
    assert prefect.context.GLOBAL_SETTINGS_CONTEXT is before  # the run's own settings are put back


def test_the_redis_lease_storage_keeps_the_lease_a_restart_loses_in_memory() -> None:
    # prefect-redis's storage, Prefect's advice for several servers: the leases live in Redis, a process of its
    # own, so 001's restart strands nothing and the release removes the lease it created
    import importlib.util

    import attrs

    # Found, not imported: prefect-redis imports Prefect, which must come after the example (its settings)
    if importlib.util.find_spec("prefect_redis") is None:
        pytest.skip("prefect-redis is not installed (pip install -e '.[prefect]')")
    lost = read(FINDINGS[0]).scenario  # 001
    kept = run(attrs.evolve(lost, model=lost.model.with_options(storage="redis")), 4)
    assert kept.ok and kept.jobs == {"done": 1}
    stored = [str(e[3]) for e in kept.trace if e[2] == "store"]
    assert stored[0].startswith("L1 stored for c1") and stored[-1].startswith("L1 removed"), stored
    assert any(e[1] == "server" and e[2] == "restart" for e in kept.trace)


def test_what_a_restart_removes_is_the_restarts_doing_not_the_request_in_flights() -> None:
    # server-restarts seed 9: the restart comes while c1's request is in the server; the in-memory storage loses
    # c3's lease with it. That is 001's loss (slot-accounting), not a removal by c1's request (removed-before-expiry),
    # which it was reported as while the loop still named the last callback that ran as the one handling.
    from dst.runner.swarm import swarm

    outcome = run(swarm(scenario("server-restarts"), 9), 9)
    assert outcome.violation is not None and outcome.violation.invariant == "slot-accounting", outcome.violation


def test_a_seed_forked_from_a_warm_worker_does_not_run_the_migrations_again() -> None:
    # A campaign's worker warms up once (Prefect's migrations build the SQLite template) and forks each seed from
    # there: a fork that built the template again paid 4 s a seed, most of one.
    from dst.explore.isolate import forked
    from examples.prefect_limits import settings

    built = settings.template()
    assert forked(settings.template) == built
    assert forked(lambda: run(scenario("quiet"), 1).digest) == run(scenario("quiet"), 1).digest


def test_a_second_process_copies_the_template_the_first_migrated() -> None:
    # The migrations cost about 5 CPU s of a process that runs one seed (dst run, dst replay, a campaign's start): the
    # template is kept in dst's cache folder, and a process after the first never runs them.
    import subprocess
    import sys

    from examples.prefect_limits import settings

    built = settings.template()
    code = ("from examples.prefect_limits import settings\n"
            "def refuse(*args, **kwargs): raise AssertionError('migrated again')\n"
            "settings.migrate = refuse\n"
            "print(settings.template())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == built
