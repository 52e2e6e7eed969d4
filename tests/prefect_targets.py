"""What the tests of the two Prefect examples share: the skip without the prefect extra, each example's findings
and scenarios, and the replay of a finding to its recorded trace."""

from __future__ import annotations

import importlib.util
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from dst.findings import REPRODUCES, read, replay
from dst.scenario import Scenario, load_scenario

# Looked for, not imported: the adapter sets Prefect's settings before Prefect is imported.
needs_prefect = pytest.mark.skipif(importlib.util.find_spec("prefect") is None, reason="pip install -e '.[prefect]'")

ROOT = Path(__file__).resolve().parents[1]


def findings(example: str, database: str = "sqlite") -> list[Path]:
    """The example's shipped findings on ``database`` (their model's option; read as TOML: no import of Prefect)."""
    found = []
    for path in sorted((ROOT / "examples" / example / "findings").glob("[0-9]*.toml")):
        with path.open("rb") as f:
            if tomllib.load(f)["model"].get("database", "sqlite") == database:
                found.append(path)
    return found


def scenario(example: str, name: str) -> Scenario:
    return load_scenario(str(ROOT / "examples" / example / "scenarios" / f"{name}.toml"))


def assert_replays(path: Path) -> None:
    outcome = replay(read(path))
    assert outcome.status == REPRODUCES, f"Prefect {version('prefect')}: {outcome.explain()}"


@pytest.fixture(autouse=True)
def from_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository's root, as the findings' commands are (imported by each test module)."""
    monkeypatch.chdir(ROOT)
