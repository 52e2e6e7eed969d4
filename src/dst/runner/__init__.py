"""One run: its plan from the seed, the simulation that composes scenario, model, faults and invariants, and
the result it returns (with the command line that runs it again)."""

from ..errors import MODEL_ERROR
from .result import RunResult, Unjudged, ViolationReport
from .entry import check, on_model, real_service, run
from .simulation import Cut, Simulation

__all__ = ["MODEL_ERROR", "Cut", "RunResult", "Simulation", "Unjudged", "ViolationReport", "check", "on_model", "real_service", "run"]
