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

# The public names are _PUBLIC's, below; these are what type checkers read instead, each import "as" its own name
# (what mypy --strict takes for an export). tests/test_public_api.py holds them, and docs/api.md's table, to _PUBLIC.
if TYPE_CHECKING:
    from . import strategies as strategies
    from .assertions import (always as always, eventually as eventually, reachable as reachable,
                             sometimes as sometimes, unreachable as unreachable)
    from .explore.fuzz import FuzzResult as FuzzResult, Group as Group, Outcome as Outcome, fuzz as fuzz
    from .findings.make import save_finding as save_finding
    from .explore.shrink import Shrunk as Shrunk, shrink as shrink
    from .findings.format import Finding as Finding, FindingError as FindingError, read as _read
    from .findings.replay import Replay as Replay, replay as replay
    from .errors import UserError as UserError
    from .models import ModelError as ModelError
    from .plan import Branch as Branch, Step as Step
    from .runner import RunResult as RunResult, ViolationReport as ViolationReport, run as run
    from .scenario import (Scenario as Scenario, ScenarioError as ScenarioError, load_scenario as load_scenario,
                           parse_scenario as parse_scenario)
    from .sut import Bounds as Bounds, Bug as Bug, Env as Env, Model as Model, System as System

    read_finding = _read  # a name of its own: an import "as" another name is no export to mypy

from .version import __version__ as __version__

# The one table of public names: what __all__ lists, and where each is imported from on first use.
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
    "Branch": "dst.plan",
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
    "always": "dst.assertions",
    "sometimes": "dst.assertions",
    "reachable": "dst.assertions",
    "unreachable": "dst.assertions",
    "eventually": "dst.assertions",
}

# Out of type checkers' sight: an __all__ they cannot evaluate exports nothing to them (mypy: a star import of dst
# finds no name); with none, they export the imports above.
if not TYPE_CHECKING:
    __all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str) -> Any:
    where = _PUBLIC.get(name)
    if where is None:
        raise AttributeError(f"module 'dst' has no attribute {name!r}")
    module, attr = (where, name) if isinstance(where, str) else where
    value = import_module(module) if attr is None else getattr(import_module(module), attr)
    globals()[name] = value
    return value
