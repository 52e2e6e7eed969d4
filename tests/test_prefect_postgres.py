"""Prefect's own global concurrency limits on a real PostgreSQL server under dst (examples/prefect_limits with
``database = "postgres"``): Prefect's migrations make the template, two acquires that meet in the server are
decided by PostgreSQL's own row locks, and the same seed gives the same run. Needs the prefect extra and a
PostgreSQL server with pg_trgm (Prefect's migrations create it: a system PostgreSQL has it, pgserver's does not),
else skipped; under CI=true, failed."""

from __future__ import annotations

import os
from typing import Any

import attrs
import pytest

from dst.runner import run
from prefect_targets import assert_replays, findings, from_the_root, needs_prefect, scenario as _scenario

pytestmark = [needs_prefect, pytest.mark.slow]  # Prefect end to end: its import and migrations alone take seconds
__all__ = ["from_the_root"]  # the fixture: each test runs from the repository's root


@pytest.fixture(scope="module", autouse=True)
def _server_with_pg_trgm() -> None:
    pytest.importorskip("asyncpg", reason="the postgres extra is not installed (pip install -e '.[postgres]')")
    from dst.aio import stores
    from dst.aio.stores.postgres import embedded

    why = stores.postgres.unavailable()
    if why is None and "pg_trgm" not in embedded.extensions(embedded.postmaster().bin):
        why = f"the PostgreSQL server at {embedded.postmaster().bin} has no pg_trgm, which Prefect's migrations need"
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Prefect on PostgreSQL cannot run under CI: {why}")
        pytest.skip(why)


@pytest.mark.parametrize("path", findings("prefect_limits", "postgres") + findings("prefect_deployments", "postgres"),
                         ids=lambda p: f"{p.parent.parent.name.removeprefix('prefect_')}-{p.stem[:3]}")
def test_each_finding_on_postgres_replays_to_its_violation_with_its_trace(path: Any) -> None:
    assert_replays(path)


def two_acquires(isolation: str) -> Any:
    plan = _scenario("prefect_limits", "postgres-two-acquires")
    return attrs.evolve(plan, model=plan.model.with_options(isolation=isolation))


def events(outcome: Any, kind: str) -> list[str]:
    return [str(e[3]) for e in outcome.trace if e[1] == "prefect-db" and e[2] == kind]


def replies(outcome: Any, client: str) -> list[str]:
    """The status of each reply ``client`` read, in order."""
    return [str(e[3]).split()[0] for e in outcome.trace if e[1] == client and e[2] == "recv"]


def test_at_read_committed_the_second_acquire_waits_for_the_row_re_reads_it_and_is_told_423() -> None:
    outcome = run(two_acquires("read committed"), 1)
    assert outcome.ok and outcome.jobs == {"done": 2}
    waits = events(outcome, "lock")
    assert any("waits for a lock held by" in w and "UPDATE concurrency_limit_v2" in w for w in waits), waits
    assert any("got its lock" in w for w in waits)
    assert not events(outcome, "failed")
    # the waiter re-read the committed row (the first holder's count): its UPDATE matched nothing, a 423 each try
    # until the first holder released
    first, second = sorted((replies(outcome, c) for c in ("c1", "c2")), key=lambda r: r[0] != "200")
    assert first[0] == "200" and second[0] == "423" and "200" in second


def test_at_repeatable_read_the_second_acquire_fails_to_serialize_and_is_never_admitted_past_the_limit() -> None:
    # What Prefect's engine forces READ COMMITTED against (a stricter database default): PostgreSQL does not let
    # the waiting writer judge its stale snapshot, it fails it (40001); Prefect answers 500, the acquire gives up.
    outcome = run(two_acquires("repeatable read"), 1)
    assert outcome.ok  # capacity and slot-accounting hold: nothing admitted past the limit of 1
    assert outcome.jobs == {"done": 1, "gave up acquiring (PrefectHTTPStatusError)": 1}
    failed = events(outcome, "failed")
    assert len(failed) == 1 and "40001 could not serialize access due to concurrent update" in failed[0]
    assert "UPDATE concurrency_limit_v2" in failed[0]
    assert sorted(replies(outcome, "c1") + replies(outcome, "c2")) == ["200", "204", "204", "500"]  # 204: a renewal


def test_a_seed_on_postgres_runs_the_same_twice_and_its_database_is_dropped() -> None:
    from dst.aio.stores.postgres import embedded

    contention = _scenario("prefect_limits", "postgres-contention")
    first, second = run(contention, 3), run(contention, 3)
    assert first.digest == second.digest and first.ok
    assert first.jobs.get("done", 0) >= 3
    left = embedded.postmaster().control.query("SELECT datname FROM pg_database WHERE datname LIKE 'dst\\_%\\_%'")
    assert not [name for (name,) in left if not str(name).startswith("dst_t_")]  # only the templates remain
