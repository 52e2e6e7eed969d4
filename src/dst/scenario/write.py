"""Writing a scenario back out: every key by its kind, as a TOML document (``dst.text.toml_value`` writes
its values as text)."""

from __future__ import annotations

from typing import Any

import attrs

from .schema import SECTIONS, Scenario, kind_of


def scenario_to_doc(scenario: Scenario) -> dict[str, Any]:
    """The whole scenario as a TOML document (every key written out), for findings to embed.
    ``parse_scenario(scenario_to_doc(s), source)`` gives ``s`` back."""

    def section(config: Any) -> dict[str, Any]:
        return {f.name: kind_of(f).write(getattr(config, f.name)) for f in attrs.fields(type(config))
                if f.name != "options"}

    doc: dict[str, Any] = {"name": scenario.name, "description": scenario.description, "bugs": list(scenario.bugs),
                           "invariants": list(scenario.invariants)}
    doc["model"] = section(scenario.model)
    options = scenario.model.settings()
    if options is not None:
        doc["model"] |= section(options)
    doc |= {name: section(getattr(scenario, name)) for name in SECTIONS}
    doc["faults"] = {kind: section(rate) for kind, rate in scenario.faults.kinds()}
    if scenario.steps is not None:
        doc["steps"] = [step.to_dict() for step in scenario.steps]
    return doc

