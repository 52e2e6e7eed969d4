"""From a violating seed to a finding file: minimize the run, then write it down (once per signature)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import attrs

from ..findings import Finding, finding_of, signature, write
from ..runner import run
from ..runner.swarm import swarm
from ..scenario import Scenario
from .shrink import Shrunk, shrink


@attrs.frozen
class Recorded:
    path: Path
    written: bool  # False when a finding with the same signature was already there
    shrunk: Shrunk


def to_finding(shrunk: Shrunk, origin: dict[str, Any]) -> Finding:
    return finding_of(shrunk.result, origin, {"steps_before": shrunk.steps_before, "steps_after": shrunk.steps_after,
                                          "runs": shrunk.runs, "seconds": round(shrunk.seconds, 2),
                                          "stop": shrunk.stop.value})


def campaign_origin(scenario: Scenario, seed: int, use_swarm: bool, key: str) -> dict[str, Any]:
    """Where a campaign's finding came from. Its ``signature`` is the whole signature of the violation as the
    campaign met it (``key``: invariant and shape), before minimizing changed it: the same campaign run again
    finds it in the folder and writes nothing new."""
    invariant, shape_ = key.split(": ", 1)
    return {"scenario": scenario.source, "seed": seed, "swarm": use_swarm,
            "signature": signature(scenario.model.impl, scenario.bugs, invariant, shape_)}


def minimize(scenario: Scenario, seed: int, *, use_swarm: bool, max_runs: int = 3000,
             seconds: float = 120.0, stopped: Callable[[], bool] = lambda: False) -> Shrunk | None:
    """Minimize seed ``seed`` of ``scenario`` (as ``dst run --seed N [--swarm]`` runs it); None if it passes."""
    effective = swarm(scenario, seed) if use_swarm else scenario
    first = run(effective, seed)
    if first.violation is None:
        return None
    return shrink(effective, seed, first.plan, first.violation.invariant, max_runs=max_runs, seconds=seconds,
                  stopped=stopped)


def record(shrunk: Shrunk, directory: Path, origin: dict[str, Any]) -> Recorded:
    v = shrunk.result.violation
    assert v is not None
    path, written = write(to_finding(shrunk, origin), directory)
    return Recorded(path, written, shrunk)
