"""Scenario files: TOML -> a validated, frozen :class:`Scenario`, and back.

``schema`` declares every key with its default and its kind, ``read`` checks a document into a
:class:`Scenario` (a mistake is a :class:`ScenarioError` of one line), ``write`` turns one back into
a document. The schema is documented in ``docs/scenarios.md``.
"""

from ..invariants import INVARIANT_IDS
from .read import (dropped, embedded_scenarios, load_scenario, load_shipped, parse_scenario, scenario_from_doc,
                   shipped_names, with_model)
from .schema import (EMBEDDED, MAX_RATE, SCHEDULERS, FaultRate, FaultsConfig, ModelConfig, NetworkConfig,
                     RunConfig, RunsConfig, Scenario, ScenarioError, WorkloadConfig, scripted)
from .write import scenario_to_doc

__all__ = ["EMBEDDED", "INVARIANT_IDS", "MAX_RATE", "SCHEDULERS", "FaultRate", "FaultsConfig", "ModelConfig",
           "NetworkConfig", "RunConfig", "RunsConfig", "Scenario", "ScenarioError", "WorkloadConfig",
           "dropped", "embedded_scenarios", "load_scenario", "load_shipped", "parse_scenario", "scenario_from_doc",
           "scenario_to_doc", "scripted", "shipped_names", "with_model"]
