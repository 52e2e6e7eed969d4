"""What every invariant is: a unit with a stable id that watches some facts and fails with one line.

An invariant is one class, registered with :func:`invariant`: its ``id`` (stable: it appears in
output, JSON and finding files), a ``title`` (the words a finding file is named with), a
``statement``, the ``parts`` of a model it needs (``leases``, ``runs``), what its violation
``names`` (a cause or a symptom) and ``because`` of what, and a method for each hook it watches.
The ghost calls only the units that define a hook, so a fact nobody watches costs nothing more
than the ghost's own bookkeeping (Trio's instruments, dispatched the same way).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Sequence

from .books import HOOKS, Books
from .user import broke, is_user


class Unit:
    """What the ghost hands facts to: a stable id, the parts of a model it needs, a method per hook."""

    id: ClassVar[str]
    statement: ClassVar[str]
    parts: ClassVar[frozenset[str]]  # the parts of a model it needs: "leases", "runs"

    def __init__(self, ghost: Books) -> None:
        self.g = ghost

    @classmethod
    def watches(cls) -> tuple[str, ...]:
        return tuple(hook for hook in HOOKS if callable(getattr(cls, hook, None)))


# What a violation of an invariant names: the wrong act itself, or a state that many wrong acts lead to.
CAUSE, SYMPTOM = "cause", "symptom"


class Invariant(Unit):
    title: ClassVar[str]  # what a violation looks like, as words of a finding's file name
    # The dst.sut.Bounds field a case of it may take to settle (a reclaim, a redelivery): the quiet period a
    # run ends with must outlast it, or a correct model is accused; "" for a check that needs no quiet period.
    settles_within: ClassVar[str] = ""
    # The ranking of causes and symptoms (docs/findings.md, "Cause and consequences"): CAUSE if it is checked at
    # the wrong act itself (a release that gives back another holder's slot), SYMPTOM if it sees a state that
    # several wrong acts lead to (more holders than the limit). A run whose first violation is a symptom
    # reports the first cause violated after it, within the consequence window (:func:`cause_of`).
    names: ClassVar[str]
    because: ClassVar[str]  # why it is one or the other, in a few words

    def __init__(self, ghost: Books) -> None:
        super().__init__(ghost)
        self.checks = 0

    def fail(self, message: str) -> None:
        """Report a violation: the ghost raises it, or, in a run, notes it and goes on (:meth:`Books.failed`).
        Code after a failure runs on: only the first failure of an invariant counts."""
        self.g.failed(self, message)

    @classmethod
    def titled(cls, message: str) -> str:
        """The words a finding of this violation is named with (a unit may tell its violations apart)."""
        return cls.title


INVARIANTS: list[type[Invariant]] = []  # in registration order: the order ids are listed and checked in
WATCHES: dict[type[Unit], tuple[str, ...]] = {}  # each unit's hooks, worked out once


def register(cls: type[Unit], registry: list[Any], *, allowed: tuple[str, ...] = ()) -> None:
    """Check a unit's methods are hooks (or private), its id is new, and add it to ``registry``."""
    stray = sorted(name for name in vars(cls) if not name.startswith("_") and callable(vars(cls)[name])
                   and name not in HOOKS and name not in ("watches", *allowed))
    assert not stray, f"{cls.__name__}: {stray} are not hooks (hooks: {', '.join(HOOKS)}); make helpers private"
    assert cls.id not in [u.id for u in registry], f"two units are called {cls.id}"
    registry.append(cls)
    WATCHES[cls] = cls.watches()


def invariant(cls: type[Invariant]) -> type[Invariant]:
    """Register an invariant unit (a class decorator)."""
    assert getattr(cls, "names", None) in (CAUSE, SYMPTOM) and getattr(cls, "because", None), \
        f"{cls.__name__}: say what its violation names: names = CAUSE or SYMPTOM, and why (because = ...)"
    register(cls, INVARIANTS, allowed=("titled",))
    return cls


def cause_of(found: Sequence[str]) -> int:
    """Which of a run's violations (invariant ids, in the order they were found) the run reports: the first,
    unless it is a symptom and a cause follows it; then the first cause. A later violation never replaces a
    cause, and never a symptom with a symptom: it is a consequence."""
    names = {unit.id: unit.names for unit in INVARIANTS}
    if not found or names.get(found[0]) != SYMPTOM:
        return 0
    return next((i for i, invariant in enumerate(found) if names.get(invariant) == CAUSE), 0)


_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")


def shape(message: str) -> str:
    """A violation message with its particulars (numbers, leases, clients, times) blanked out: what
    violations of one kind have in common, for grouping them into signatures."""
    message = re.sub(r"\bL\d+\b", "L#", message)
    message = _UUID.sub("#", message)  # a service's own lease ids (str(uuid4())): blanked whole, not digit by digit
    message = re.sub(r"\bc\d+(#\d+)?\b", "c#", message)
    message = re.sub(r"t=\d+(\.\d+)?m?s\b", "t=#", message)
    message = re.sub(r"\d+", "#", message)
    # A list of like items is one shape however long it is (owners: L#(c#)=#, L#(c#)=#, ...): two holders over
    # the limit or three are the same bug.
    return re.sub(r"(?<![^\s:;(])([^\s,;]+)(?:, \1)+(?![^\s,;)])", r"\1, ...", message)


def signed(invariant: str, message: str) -> str:
    """What a violation's signature keeps of it: the shape of its message; for the user's own assertion, what broke
    alone (its name says which): its details never split a campaign's findings of it."""
    return broke(invariant) if is_user(invariant) else shape(message)
