"""Prefect's own lease server under dst (examples/prefect_limits): needs the prefect extra, else skipped."""

from __future__ import annotations

from pathlib import Path

import importlib.util

import pytest

from dst.runner import run
from dst.scenario import load_scenario

# Looked for, not imported: the adapter sets Prefect's settings before Prefect is imported.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("prefect") is None, reason="pip install -e '.[prefect]'")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _from_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_prefects_own_server_runs_a_quiet_seed_clean_and_the_same_twice():
    scenario = load_scenario(str(ROOT / "examples" / "prefect_limits" / "scenarios" / "quiet.toml"))
    first, second = run(scenario, 1), run(scenario, 1)
    assert first.ok and first.jobs.get("done", 0) >= 5
    assert first.digest == second.digest
    assert any(e[2] == "store" and "stored" in e[3] for e in first.trace)  # Prefect's lease storage, observed
