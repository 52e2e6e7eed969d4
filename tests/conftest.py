"""Shared helpers: build scenarios from plain dicts, run scripts, read traces."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from dst.runner import RunResult, Simulation, run
from dst.scenario import Scenario, parse_scenario

@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The width dst's piped output wraps at is COLUMNS when set; pytest-xdist's workers set it (to 80), a
    plain pytest does not: every test, and every dst it starts, runs without it, so output does not depend on
    how the suite was started. A test of COLUMNS sets it itself."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


# A calm scenario for scripted tests: no random faults, a perfect network, fixed latencies.
CALM: dict[str, Any] = {
    "run": {"duration": "300s", "quiet": "120s"},
    "model": {"limits": {"db": 1}, "ttl": "60s", "reaper_interval": "15s", "store_latency": ["5ms", "5ms"]},
    "workload": {"clients": 3, "jobs": 0, "request_timeout": "2s", "retries": 3},
    "network": {"latency": ["10ms", "10ms"], "loss": 0.0, "duplicate": 0.0},
}


def scenario(overrides: dict[str, Any] | None = None, steps: list[dict[str, Any]] | None = None,
             base: dict[str, Any] = CALM) -> Scenario:
    doc = copy.deepcopy(base)
    for section, values in (overrides or {}).items():
        if isinstance(values, dict):
            doc.setdefault(section, {}).update(values)
        else:
            doc[section] = values
    if steps is not None:
        doc["steps"] = steps
    return parse_scenario(doc, "<test>")


def script(steps: list[dict[str, Any]], seed: int = 1, **overrides: Any) -> RunResult:
    return run(scenario(overrides, steps), seed)


def simulation(steps: list[dict[str, Any]], seed: int = 1, **overrides: Any) -> Simulation:
    return Simulation(scenario(overrides, steps), seed)


def events(result: RunResult, actor: str | None = None, kind: str | None = None) -> list[tuple[int, str, str, str]]:
    return [e for e in result.trace if (actor is None or e[1] == actor) and (kind is None or e[2] == kind)]


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def mypy(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``mypy(file, *flags)``: mypy on one file, as a user's mypy sees it. A worker's runs share a cache for each
    set of flags, so dst's own modules are analysed once, not once per test (about 6 s each)."""
    caches = tmp_path_factory.mktemp("mypy-cache")

    def check(path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
        cache = caches / ("-".join(flag.strip("-") for flag in flags) or "default")
        return subprocess.run([sys.executable, "-m", "mypy", *flags, "--no-error-summary", "--cache-dir", str(cache),
                               str(path)], cwd=ROOT, capture_output=True, text=True)
    return check


@pytest.fixture
def default_scenario() -> Scenario:
    from dst.scenario import load_scenario

    return load_scenario()


def chromium_or_skip() -> tuple[Any, str]:
    """Playwright's sync API and the system Chromium; missing, the test is skipped, except under CI=true,
    where it fails (so CI cannot pass by silently skipping the browser)."""
    reason = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "Playwright is not installed (pip install -e '.[browser]')"
    executable = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if reason is None and executable is None:
        reason = "no Chromium on PATH (apt-get install chromium)"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the browser test cannot run under CI: {reason}")
        pytest.skip(reason)
    return sync_playwright, str(executable)
