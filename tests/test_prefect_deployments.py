"""Prefect's own deployment concurrency under dst (examples/prefect_deployments): what dst found in it replays on
Prefect 3.9.1 (the extra's pin) with the same trace digests, and a quiet seed runs clean, with every slot given
back by the lease that took it (the TLA+ model's claims, kept by the adapter's ledger). Needs the prefect extra,
else skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dst.runner import run
from dst.scenario import Scenario
from prefect_targets import assert_replays, findings, from_the_root, needs_prefect, scenario as _scenario

pytestmark = needs_prefect
FINDINGS = findings("prefect_deployments")
__all__ = ["from_the_root"]  # the fixture: each test runs from the repository's root


def scenario(name: str) -> Scenario:
    return _scenario("prefect_deployments", name)


@pytest.mark.parametrize("path", FINDINGS, ids=lambda p: p.stem[:3])
def test_each_finding_replays_to_its_violation_with_its_trace(path: Path) -> None:
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
