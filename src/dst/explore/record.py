"""From a violating seed to a finding file: minimize the run, then write it down (once per signature)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import attrs

from ..findings import Finding, finding_of, signature, write
from ..runner import run
from ..runner.swarm import swarm
from ..runner.watchdog import known_stall
from ..scenario import Scenario
from .fuzz import Outcome
from .report import FindingEntry, finding_entry
from .shrink import NotDeterministic, Shrunk, shrink


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


class Recorder:
    """A campaign's findings: minimizes the first ``candidates`` seeds of each new signature as the campaign finds
    them, and writes the smallest as a finding, so an interrupted campaign keeps every finding it made.

    ``stopped``: a stop was asked for (a signal noted); the minimizing in hand ends with what it has, and no more
    begins. ``on_error``: the one line that says a seed's finding was not written (its runs were not deterministic),
    as the campaign goes on. With ``stop_on_first``, a signature's finding is written as soon as it is minimized."""

    def __init__(self, directory: Path, scenarios: tuple[Scenario, ...], *, candidates: int, use_swarm: bool,
                 stop_on_first: bool, stopped: Callable[[], bool], on_error: Callable[[str], None]) -> None:
        self.directory = directory
        self.scenarios = scenarios
        self.candidates = candidates
        self.use_swarm = use_swarm
        self.stop_on_first = stop_on_first
        self.stopped = stopped
        self.on_error = on_error
        self.best: dict[str, Shrunk] = {}  # signature -> smallest so far
        self.ran: dict[str, Scenario] = {}  # signature -> the scenario its smallest's seed ran
        self.tried: dict[str, int] = {}
        self.written: dict[str, Recorded] = {}

    def consider(self, outcome: Outcome) -> None:
        """A violating seed the campaign counted: minimized if it is among its signature's first candidates."""
        sig = outcome.signature or ""
        if self.tried.get(sig, 0) >= self.candidates or self.stopped():
            return
        self.tried[sig] = self.tried.get(sig, 0) + 1
        try:
            with known_stall(outcome.message):  # a seed that stalled: its candidates are stopped sooner
                shrunk = minimize(self.scenarios[outcome.arm], outcome.seed, use_swarm=self.use_swarm,
                                  stopped=self.stopped)
        except NotDeterministic as e:  # said, and the campaign goes on: a finding of it would not replay
            self.on_error(f"{e.line()}; no finding written for seed {outcome.seed}")
            return
        if shrunk is None:
            return
        best = self.best.get(sig)
        if best is None or shrunk.steps_after < best.steps_after:
            self.best[sig], self.ran[sig] = shrunk, self.scenarios[outcome.arm]
        if self.tried[sig] == self.candidates or self.stop_on_first:
            self._write(sig)

    def _write(self, sig: str) -> None:
        shrunk = self.best[sig]
        origin = campaign_origin(self.ran[sig], shrunk.seed, self.use_swarm, sig)
        self.written[sig] = record(shrunk, self.directory, origin)

    def findings(self) -> list[FindingEntry]:
        """The report's ``findings``: what was written, once the candidates still pending are."""
        for sig in self.best:  # candidates still pending when the campaign ended
            if sig not in self.written:
                self._write(sig)
        return [finding_entry(sig, recorded) for sig, recorded in self.written.items()]
