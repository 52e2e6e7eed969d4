"""From a violating seed to a finding file: minimize the run, then write it down (once per signature)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from ..findings import Finding, fingerprints, signature, title, write
from ..invariants import shape
from ..runner import run
from ..scenario import Scenario
from .shrink import Shrunk, shrink
from .swarm import swarm


@attrs.frozen
class Recorded:
    path: Path
    written: bool  # False when a finding with the same signature was already there
    shrunk: Shrunk


def to_finding(shrunk: Shrunk, origin: dict[str, Any]) -> Finding:
    v = shrunk.result.violation
    assert v is not None
    return Finding(
        scenario=shrunk.scenario, seed=shrunk.seed, invariant=v.invariant, message=v.message, time=v.time,
        signature=signature(shrunk.scenario.model.impl, shrunk.scenario.bugs, v.invariant, shape(v.message)), digest=shrunk.result.digest,
        fingerprints=fingerprints(shrunk.result.raw_trace),
        title=title(v.invariant, v.message, shrunk.scenario, shrunk.result.raw_trace), origin=origin,
        minimizer={"steps_before": shrunk.steps_before, "steps_after": shrunk.steps_after, "runs": shrunk.runs,
                   "seconds": round(shrunk.seconds, 2), "stop": shrunk.stop.value},
    )


def minimize(scenario: Scenario, seed: int, *, use_swarm: bool, max_runs: int = 3000,
             seconds: float = 120.0) -> Shrunk | None:
    """Minimize seed ``seed`` of ``scenario`` (as ``dst run --seed N [--swarm]`` runs it); None if it passes."""
    effective = swarm(scenario, seed) if use_swarm else scenario
    first = run(effective, seed)
    if first.violation is None:
        return None
    return shrink(effective, seed, first.plan, first.violation.invariant, max_runs=max_runs, seconds=seconds)


def record(shrunk: Shrunk, directory: Path, origin: dict[str, Any]) -> Recorded:
    v = shrunk.result.violation
    assert v is not None
    path, written = write(to_finding(shrunk, origin), directory)
    return Recorded(path, written, shrunk)
