"""dst: deterministic simulation testing for lease, lock, slot and deadline bookkeeping.

The public API is what ``__all__`` names (``docs/api.md``); everything else is internal and may change.

    from dst import load_scenario, run
    result = run(load_scenario(), seed=1)      # one seeded simulation
    result.ok, result.violation, result.digest
    print(result)                              # a violation explains itself: its causal slice, how to run it again

    campaign = fuzz(load_scenario(), range(1, 1001), workers=2)     # many seeds, grouped by signature

    result = run(load_scenario(), seed=1, model="my_service.dst_adapter:model")   # your own service

The seam a service author implements is :mod:`dst.sut` (its main names are exported here too).

Names are imported on first use, so ``import dst.pytest_plugin`` (which every pytest session in a
project with dst installed does) stays cheap; type checkers see the real names below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import strategies
    from .explore.fuzz import FuzzResult, Group, Outcome, fuzz
    from .findings.make import save_finding
    from .explore.shrink import Shrunk, shrink
    from .findings.format import Finding, FindingError, read as read_finding
    from .findings.replay import Replay, replay
    from .errors import UserError
    from .models import ModelError
    from .plan import Step
    from .runner import RunResult, ViolationReport, run
    from .scenario import Scenario, ScenarioError, load_scenario, parse_scenario
    from .sut import Bounds, Bug, Env, Model, System

from .version import __version__

_PUBLIC: dict[str, str | tuple[str, str | None]] = {  # name: its module, or (module, name there; None: the module)
    "Finding": "dst.findings",
    "FindingError": "dst.findings",
    "Replay": "dst.findings",
    "replay": "dst.findings",
    "read_finding": ("dst.findings", "read"),
    "ModelError": "dst.models",
    "UserError": "dst.errors",
    "RunResult": "dst.runner",
    "ViolationReport": "dst.runner",
    "run": "dst.runner",
    "Scenario": "dst.scenario",
    "ScenarioError": "dst.scenario",
    "load_scenario": "dst.scenario",
    "parse_scenario": "dst.scenario",
    "Step": "dst.plan",
    "shrink": "dst.explore.shrink",
    "Shrunk": "dst.explore.shrink",
    "fuzz": "dst.explore.fuzz",
    "FuzzResult": "dst.explore.fuzz",
    "Group": "dst.explore.fuzz",
    "Outcome": "dst.explore.fuzz",
    "save_finding": "dst.findings.make",
    "strategies": ("dst.strategies", None),  # Hypothesis strategies: imports hypothesis, so only when asked for
    "Bounds": "dst.sut",
    "Bug": "dst.sut",
    "Env": "dst.sut",
    "Model": "dst.sut",
    "System": "dst.sut",
}

__all__ = [  # a literal list: type checkers read it as what the package exports (mypy --strict too)
    "Bounds", "Bug", "Env", "Finding", "FindingError", "FuzzResult", "Group", "Model", "ModelError",
    "Outcome", "Replay", "RunResult", "Scenario", "ScenarioError", "Shrunk", "Step", "System", "UserError",
    "ViolationReport", "__version__", "fuzz", "load_scenario", "parse_scenario", "read_finding", "replay",
    "run", "save_finding", "shrink", "strategies",
]


def __getattr__(name: str) -> Any:
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module 'dst' has no attribute {name!r}")
    module, attr = (where, name) if isinstance(where, str) else where
    value = import_module(module) if attr is None else getattr(import_module(module), attr)
    globals()[name] = value
    return value
