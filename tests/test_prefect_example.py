"""Prefect's own global concurrency limit (v2) lease code under dst (examples/prefect_limits): what dst found in it
replays, a quiet seed runs clean, and every run keeps its files apart. Needs the prefect extra, else skipped.

The findings replay with the same digests on Prefect 3.9.1 (the extra's pin) and 3.8.2: no release between them
fixed one (docs/prefect.md)."""

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
EXAMPLE = ROOT / "examples" / "prefect_limits"
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
    import prefect.context

    lost = read(FINDINGS[0]).scenario  # 001: the in-memory storage forgets the lease at the restart
    before = prefect.context.GLOBAL_SETTINGS_CONTEXT
    kept = run(attrs.evolve(lost, model=lost.model.with_options(storage="filesystem")), 4)
    assert kept.ok and kept.jobs == {"done": 1}
    assert any(e[2] == "store" and "removed" in str(e[3]) for e in kept.trace)  # read from its files, reaped in time
    assert prefect.context.GLOBAL_SETTINGS_CONTEXT is before  # the run's own settings are put back
