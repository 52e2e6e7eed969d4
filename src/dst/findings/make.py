"""From a run that violated an invariant to a finding: the scenario with the plan as its steps, and what
identifies the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from ..invariants import signed
from ..runner import RunResult, run
from ..scenario import scripted
from .folder import write
from .format import Consequence, Finding, fingerprints, signature, title


def finding_of(result: RunResult, origin: dict[str, Any], minimizer: dict[str, Any] | None = None) -> Finding:
    """``result``'s violation as a finding (``origin``: where it came from; ``minimizer``: the figures of the
    shrinking that made it)."""
    v, ran = result.violation, result.ran
    if v is None:
        raise ValueError("only the result of a run that violated an invariant is a finding")
    scenario = ran if ran.steps == result.plan else attrs.evolve(ran, steps=result.plan)
    led = result.decided_trace  # what the digest covers: the trace up to the outcome
    return Finding(
        scenario=scenario, seed=result.seed, invariant=v.invariant, message=v.message, time=v.time,
        signature=signature(scenario.model.impl, scenario.bugs, v.invariant, signed(v.invariant, v.message)), digest=result.digest,
        fingerprints=fingerprints(led), title=title(v.invariant, v.message, scenario, led),
        origin=origin, minimizer=minimizer or {},
        consequences=tuple(Consequence(c.invariant, c.time, c.message) for c in result.consequences),
    )


def save_finding(result: RunResult, folder: str | Path) -> Path:
    """Write ``result``'s violation as a finding file in ``folder``, as it is (not minimized: a plan that
    Hypothesis or :func:`dst.shrink` made small already is); returns its path.
    A finding with the same signature already in ``folder`` is kept, and its path returned. Raises
    ``ValueError`` for a run that violated nothing."""
    if result.violation is None:
        how = "this plan" if result.plan_given else "its own plan"
        raise ValueError(f"{result.scenario}: seed {result.seed} with {how} of {len(result.plan)} steps violates "
                         f"nothing (its outcome: {result.outcome}), so there is no finding to save")
    # The file reads as a script (generation settings zeroed) whenever that leaves the run as it was.
    tidy = run(scripted(result.ran, result.plan), result.seed)
    recorded = tidy if tidy.digest == result.digest else result
    origin = {"scenario": result.ran.source, "seed": result.seed, "plan": "given" if result.plan_given else "generated"}
    return write(finding_of(recorded, origin), Path(folder))[0]


