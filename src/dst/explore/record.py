"""From a violating seed to a finding file: minimize the run, then write it down (once per signature)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import attrs

from ..findings import Finding, fingerprints, signature, title, write
from ..invariants import shape
from ..plan import Step, sort_steps
from ..runner import RunResult, run
from ..scenario import Scenario
from .shrink import Shrunk, scripted, shrink
from .swarm import swarm


@attrs.frozen
class Recorded:
    path: Path
    written: bool  # False when a finding with the same signature was already there
    shrunk: Shrunk


def finding_of(scenario: Scenario, seed: int, result: RunResult, origin: dict[str, Any],
               minimizer: dict[str, Any]) -> Finding:
    """The finding of ``result``, the violating run of ``scenario`` (its plan as steps) under ``seed``."""
    v = result.violation
    assert v is not None
    return Finding(
        scenario=scenario, seed=seed, invariant=v.invariant, message=v.message, time=v.time,
        signature=signature(scenario.model.impl, scenario.bugs, v.invariant, shape(v.message)), digest=result.digest,
        fingerprints=fingerprints(result.raw_trace), title=title(v.invariant, v.message, scenario, result.raw_trace),
        origin=origin, minimizer=minimizer,
    )


def to_finding(shrunk: Shrunk, origin: dict[str, Any]) -> Finding:
    return finding_of(shrunk.scenario, shrunk.seed, shrunk.result, origin,
                      {"steps_before": shrunk.steps_before, "steps_after": shrunk.steps_after, "runs": shrunk.runs,
                       "seconds": round(shrunk.seconds, 2), "stop": shrunk.stop.value})


def save_finding(scenario: Scenario, seed: int, plan: Iterable[Step] | None, folder: str | Path) -> Path:
    """Write the violation of ``plan`` (None: the seed's own plan) under ``scenario`` and ``seed`` as a finding
    file in ``folder``, as it is (not minimized: a plan Hypothesis shrank already is); returns its path.

    ``dst replay`` and the pytest plugin replay it like any finding. As ``dst fuzz`` does, a folder that already
    holds a finding with the same signature keeps that one, whose path is returned. Raises ``ValueError`` (one
    line) when the run violates nothing, and :class:`~dst.findings.FolderError` when ``folder`` cannot take it."""
    given = scenario if plan is None else attrs.evolve(scenario, steps=sort_steps(plan))
    result = run(given, seed)
    v = result.violation
    if v is None:
        how = "its own plan" if plan is None else f"this plan of {len(result.plan)} steps"
        raise ValueError(f"{scenario.name}: seed {seed} with {how} violates nothing (its outcome: {result.outcome}), "
                         f"so there is no finding to save")
    # The file reads as a script (generation settings zeroed) whenever that leaves the run as it was.
    tidy = scripted(scenario, result.plan)
    again = run(tidy, seed)
    recorded, recorded_result = (tidy, again) if again.digest == result.digest else \
        (attrs.evolve(scenario, steps=result.plan), result)
    origin = {"scenario": scenario.source, "seed": seed, "plan": "given" if plan is not None else "generated"}
    finding = finding_of(recorded, seed, recorded_result, origin, {})
    return write(finding, Path(folder))[0]


def campaign_origin(scenario: Scenario, seed: int, use_swarm: bool, key: str) -> dict[str, Any]:
    """Where a campaign's finding came from. Its ``signature`` is the whole signature of the violation as the
    campaign met it (``key``: invariant and shape), before minimizing changed it: the same campaign run again
    finds it in the folder and writes nothing new."""
    invariant, shape_ = key.split(": ", 1)
    return {"scenario": scenario.source, "seed": seed, "swarm": use_swarm,
            "signature": signature(scenario.model.impl, scenario.bugs, invariant, shape_)}


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
