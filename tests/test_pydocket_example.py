"""pydocket, unmodified, on Redis under simulation (examples/pydocket): what dst found in it replays to its
violation with its trace, and a seed with no pause runs clean. Needs pydocket (the test extra), else skipped."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from dst.findings import REPRODUCES, read, replay

pytestmark = pytest.mark.skipif(importlib.util.find_spec("docket") is None, reason="pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = sorted((ROOT / "examples" / "pydocket" / "findings").glob("[0-9]*.toml"))


@pytest.fixture(autouse=True)
def from_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("path", FINDINGS, ids=lambda p: p.stem[:3])
def test_each_finding_replays_to_its_violation_with_its_trace(path: Path) -> None:
    outcome = replay(read(path))
    assert outcome.status == REPRODUCES, outcome.explain()


def test_the_findings_are_two_executions_and_work_under_a_lapsed_claim() -> None:
    named = [path.stem for path in FINDINGS]
    assert any("run-executed-twice" in name for name in named)
    assert all(read(path).invariant == "single-executor" for path in FINDINGS)


@pytest.mark.slow
def test_a_task_whose_worker_is_not_paused_runs_once_and_is_acknowledged() -> None:
    finding = read(FINDINGS[0])
    steps = tuple(step for step in finding.scenario.steps or () if step.action != "pause")
    from dst.runner import run

    result = run(finding.scenario, finding.seed, steps)
    assert result.ok and result.unjudged is None, result.explain()
    assert any("-> COMPLETED" in str(event[3]) for event in result.trace if event[2] == "store")
