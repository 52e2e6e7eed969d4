"""Replaying a finding: the same simulator, the same plan, the same seed, compared with what was recorded."""

from __future__ import annotations

import attrs

from ..runner import RunResult, run
from ..runner.watchdog import known_stall
from ..sim.trace import Event, format_time
from .format import Finding, fingerprints

REPRODUCES, NO_LONGER, DIVERGED = "reproduces", "no longer reproduces", "diverged"


@attrs.frozen
class Replay:
    finding: Finding
    status: str  # REPRODUCES, NO_LONGER or DIVERGED
    result: RunResult
    first_difference: int | None  # index of the first trace event that differs from the recording

    @property
    def differing_event(self) -> Event | None:
        i = self.first_difference
        return None if i is None or i >= len(self.result.trace) else self.result.trace[i]

    def explain(self) -> str:
        v = self.result.violation
        if self.status == REPRODUCES:
            return (f"reproduces: {v.invariant} at the same step, same trace digest"  # type: ignore[union-attr]
                    + self._consequences())
        if self.status == NO_LONGER:
            got = "no violation" if v is None else f"a violation of {v.invariant} instead"
            return f"no longer reproduces: expected {self.finding.invariant}, got {got}"
        return (f"diverged: still violates {self.finding.invariant}, but the trace differs from the recording "
                f"from event {self.first_difference} on")


    def _consequences(self) -> str:
        """What else the replay violated, and whether the finding recorded the same (a finding written before
        consequences were recorded has none to compare)."""
        now = [f"{c.invariant} at t={format_time(c.time)}" for c in self.result.consequences]
        recorded = None if self.finding.consequences is None else [
            f"{c.invariant} at t={format_time(c.time)}" for c in self.finding.consequences]
        if not now and not recorded:
            return ""
        said = f"; its consequences: {', '.join(now) or 'none'}"
        if recorded is not None and recorded != now:
            said += f" (recorded: {', '.join(recorded) or 'none'})"
        return said


def replay(finding: Finding, model: str | None = None) -> Replay:
    """Run the finding again (on ``model`` instead of the one it names, if given) and compare."""
    with known_stall(finding.message):
        result = run(finding.scenario, finding.seed, model=model)
    v = result.violation
    if v is None or v.invariant != finding.invariant:
        return Replay(finding, NO_LONGER, result, _first_difference(finding, result))
    if result.digest == finding.digest:
        return Replay(finding, REPRODUCES, result, None)
    return Replay(finding, DIVERGED, result, _first_difference(finding, result))


def _first_difference(finding: Finding, result: RunResult) -> int | None:
    now = fingerprints(result.decided_trace)
    for i, (a, b) in enumerate(zip(now, finding.fingerprints)):
        if a != b:
            return i
    return None if len(now) == len(finding.fingerprints) else min(len(now), len(finding.fingerprints))
