"""A campaign's findings as it finds them: the first few seeds of each new signature minimized, the smallest
written, so an interrupted campaign keeps every finding it made (the recording policy of ``dst fuzz``)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..runner.watchdog import known_stall
from ..scenario import Scenario
from .fuzz import Outcome
from .record import Recorded, campaign_origin, minimize, record
from .report import FindingEntry, finding_entry
from .shrink import NotDeterministic, Shrunk


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
