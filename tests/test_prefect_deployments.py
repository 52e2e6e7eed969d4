"""Prefect's own deployment concurrency under dst (examples/prefect_deployments): what dst found in it replays on
Prefect 3.9.1 (the extra's pin) with the same trace digests, and a quiet seed runs clean, with every slot given
back by the lease that took it (the TLA+ model's claims, kept by the adapter's ledger). Needs the prefect extra,
else skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dst.findings import REPRODUCES, read, replay
from dst.runner import run
from dst.scenario import Scenario
from prefect_targets import assert_replays, findings, from_the_root, needs_prefect, scenario as _scenario

pytestmark = [needs_prefect, pytest.mark.slow]  # Prefect end to end: its import and migrations alone take seconds
FINDINGS = findings("prefect_deployments")
__all__ = ["from_the_root"]  # the fixture: each test runs from the repository's root


def scenario(name: str) -> Scenario:
    return _scenario("prefect_deployments", name)


# 004's second revoke of one lease needs a repossessor that schedules its revokes unkeyed: Prefect 3.8's. Prefect 3.9
# keys them by the lease, and pydocket 0.27.2 takes an add of a key whose task is running as a no-op
# (tests/test_aio_redis.py holds pydocket to that), so on 3.9 the finding does not happen.
UNKEYED_ONLY = "004"


@pytest.mark.parametrize("path", FINDINGS, ids=lambda p: p.stem[:3])
def test_each_finding_replays_to_its_violation_with_its_trace(path: Path) -> None:
    from examples.prefect_limits.server import KEYED

    if path.stem.startswith(UNKEYED_ONLY) and KEYED:
        outcome = replay(read(path))
        assert outcome.status != REPRODUCES and outcome.result.violation is None, outcome.explain()
        return
    assert_replays(path)


def test_a_quiet_seed_runs_clean_through_the_orchestration_rules_and_leaves_no_file() -> None:
    from examples.prefect_limits import settings

    quiet = scenario("quiet")
    first, second = run(quiet, 1), run(quiet, 1)
    assert first.ok and first.jobs.get("completed", 0) >= 5, first.jobs
    assert first.digest == second.digest
    # Every slot the rules counted was given back by the lease that took it: no decrement without a claim.
    assert not [name for name in first.situations if name.endswith("-without-claim")], first.situations
    assert any(e[2] == "store" and "removed" in str(e[3]) for e in first.trace)  # released at COMPLETED
    assert not [name for name in os.listdir(settings.FOLDER) if name.startswith("run-")]  # each run's folder is gone


def test_a_run_whose_worker_never_reports_cancelled_is_cancelled_by_prefects_cancelling_timeout() -> None:
    """Prefect's CANCELLING timeout (handle_cancelling_timeout, 300 s) runs as docket runs it: c1's run is cancelled
    half way and c1 is paused before its engine reports CANCELLED; the server sets CANCELLED 300 s after CANCELLING.
    By then c1's lease has expired and been reaped and c2's run holds the slot: that CANCELLED's release finds the
    lease gone and its fallback gives back c2's slot (the fallback, from the clean-up service)."""
    import attrs

    from dst.plan import make_step

    quiet = scenario("quiet")
    steps = (make_step(1, 0, "c1", "acquire", limit="deploy", slots=1, work=100_000, writes=1),
             make_step(2, 55_500, "c1", "pause", **{"for": 400_000}),
             make_step(3, 318_000, "c2", "acquire", limit="deploy", slots=1, work=200_000, writes=0))
    plan = attrs.evolve(quiet, steps=steps, model=attrs.evolve(quiet.model, store_latency=(1, 1)))
    result = run(plan, 1)
    cancelling = [e[0] for e in result.trace if e[1] == "server" and e[2] == "recv" and '"CANCELLING"' in str(e[3])]
    cancelled_sent = [e[0] for e in result.trace if e[2] == "send" and '"CANCELLED"' in str(e[3])]
    assert len(cancelling) == 1 and result.violation is not None, result.jobs
    assert result.violation.invariant == "no-foreign-release" and "naming no lease" in result.violation.message
    # The server's own CANCELLED, 300 s after CANCELLING, while no client had sent one.
    assert 0 <= result.violation.time - (cancelling[0] + 300_000) < 1_000, (cancelling, result.violation.time)
    assert not [t for t in cancelled_sent if t <= result.violation.time]
