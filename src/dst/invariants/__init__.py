"""The invariants, by stable id, and the ghost that keeps the truth they check against.

Each invariant is one unit (:mod:`.leases`, :mod:`.runs`, :mod:`.fencing`); the ids, titles and statements
everywhere else (scenario validation, finding names, docs) come from this registry.
"""

from __future__ import annotations

# Imported for their units, in the order the ids are listed and checked in.
from . import leases  # noqa: F401, I001
from . import runs  # noqa: F401
from . import fencing  # noqa: F401
from .base import CAUSE, INVARIANTS, SYMPTOM, Invariant, cause_of, invariant, shape, signed
from .books import HOOKS, ServerWatch, Violation
from .ghost import Ghost
from .situations import SITUATIONS, Situation

INVARIANT_IDS: tuple[str, ...] = tuple(unit.id for unit in INVARIANTS)
RUN_INVARIANTS: tuple[str, ...] = tuple(unit.id for unit in INVARIANTS if unit.parts == frozenset({"runs"}))
BY_ID: dict[str, type[Invariant]] = {unit.id: unit for unit in INVARIANTS}

__all__ = ["BY_ID", "CAUSE", "HOOKS", "INVARIANTS", "INVARIANT_IDS", "RUN_INVARIANTS", "SYMPTOM", "Ghost", "Invariant",
           "ServerWatch", "SITUATIONS", "Situation", "Violation", "cause_of", "invariant", "shape", "signed"]
