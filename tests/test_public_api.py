"""The public API is small and explicit: a change to it is a deliberate one."""

from __future__ import annotations

import subprocess
import sys

import dst


def test_the_public_names_are_pinned():
    assert sorted(dst.__all__) == sorted([
        "Finding", "FindingError", "Replay", "RunResult", "Scenario", "ScenarioError", "Step", "ViolationReport",
        "__version__", "load_scenario", "parse_scenario", "read_finding", "replay", "run", "shrink",
    ])
    for name in dst.__all__:
        assert hasattr(dst, name)


def test_the_simulator_core_does_not_import_rich_or_the_cli():
    code = ("import sys, dst, dst.runner, dst.explore.fuzz, dst.findings; "
            "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.') or m == 'dst.cli'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_pytest_plugin_is_light_to_import():
    code = "import sys, dst.pytest_plugin; print(sorted(m for m in sys.modules if m.startswith('dst')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['dst', 'dst.pytest_plugin']"


def test_the_library_runs_a_seed():
    result = dst.run(dst.load_scenario(), 1)
    assert result.ok and result.events > 0 and len(result.digest) == 32
