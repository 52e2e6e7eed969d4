"""Prefect's own deployment concurrency under dst (examples/prefect_deployments): what dst found in it replays on
Prefect 3.9.1 (the extra's pin) with the same trace digests, and a quiet seed runs clean, with every slot given
back by the lease that took it (the TLA+ model's claims, kept by the adapter's ledger). Needs the prefect extra,
else skipped."""

from __future__ import annotations

import importlib.util
import os
from importlib.metadata import version
from pathlib import Path

import pytest

from dst.findings import REPRODUCES, read, replay
from dst.runner import run
from dst.scenario import Scenario, load_scenario

# Looked for, not imported: the adapter sets Prefect's settings before Prefect is imported.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("prefect") is None, reason="pip install -e '.[prefect]'")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "prefect_deployments"
FINDINGS = sorted((EXAMPLE / "findings").glob("[0-9]*.toml"))


@pytest.fixture(autouse=True)
def _from_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def scenario(name: str) -> Scenario:
    return load_scenario(str(EXAMPLE / "scenarios" / f"{name}.toml"))


@pytest.mark.parametrize("path", FINDINGS, ids=lambda p: p.stem[:3])
def test_each_finding_replays_to_its_violation_with_its_trace(path: Path) -> None:
    outcome = replay(read(path))
    assert outcome.status == REPRODUCES, f"Prefect {version('prefect')}: {outcome.explain()}"


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
