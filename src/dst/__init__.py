"""dst: deterministic simulation testing for lease, lock, slot and deadline bookkeeping.

The public API is what ``__all__`` names; everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .invariants import Violation
from .plan import Step
from .runner import RunResult, ViolationReport, run
from .scenario import Scenario, ScenarioError, load_scenario

__all__ = [
    "RunResult",
    "Scenario",
    "ScenarioError",
    "Step",
    "Violation",
    "ViolationReport",
    "__version__",
    "load_scenario",
    "run",
]
