"""The runner's entry points: one run of a scenario (on its own model or another), and a scenario checked against
its model's bounds without a run."""

from __future__ import annotations

import time
from typing import Any, Callable

from ..models import name_of, resolve
from ..plan import Step
from ..scenario import Scenario, with_model
from ..sut import Model, System
from .result import RunResult
from .simulation import Simulation


def run(scenario: Scenario, seed: int, plan: tuple[Step, ...] | None = None, *,
        model: str | Model[Any] | Callable[..., System] | None = None, deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic) -> RunResult:
    """Run one seeded simulation of ``scenario`` (its script, ``plan``, or a plan generated from the seed).

    ``model`` runs another model than the scenario names: an importable name (``"package.module:model"``)
    or the object bound to one (a finding records the name); one that cannot be found raises
    :class:`~dst.models.ModelError`. A scenario whose keys contradict the model's
    bounds raises :class:`~dst.scenario.ScenarioError`. ``deadline`` (on ``clock``) stops the run where it
    is once passed, raising :class:`Cut`: it never changes what a finished run did."""
    if model is not None:
        scenario = on_model(scenario, model)
    return Simulation(scenario, seed, plan, deadline=deadline, clock=clock).run()


def on_model(scenario: Scenario, model: str | Model[Any] | Callable[..., System]) -> Scenario:
    """``scenario`` run on ``model`` (an importable name, or the object bound to one): a model that cannot
    be found raises :class:`~dst.models.ModelError`, one whose options the scenario contradicts
    :class:`~dst.scenario.ScenarioError`."""
    name = name_of(model)
    resolve(name)
    return with_model(scenario, name)


def check(scenario: Scenario) -> None:
    """Raise :class:`~dst.scenario.ScenarioError` if ``scenario`` contradicts its model's bounds (builds the
    system once, and closes it)."""
    Simulation(scenario, 0, ()).close()


def real_service(scenario: Scenario) -> bool:
    """Whether ``scenario``'s system runs in a mode of real services (the asyncio mode), whose seeds are costly;
    builds the system once, and closes it (raises as :func:`check` does; False where the build failed)."""
    simulation = Simulation(scenario, 0, ())
    try:
        return simulation.build_error is None and simulation.mode.real_service
    finally:
        simulation.close()
