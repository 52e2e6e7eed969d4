"""The catalogue's bugs as flags: each slug switches on one wrong behaviour.

The model reads ``bugs.<slug_with_underscores>`` at the one place the wrong code
lives; that line carries a comment naming what it does wrong and its source
(``../shared/CATALOGUE.md``).
"""

from __future__ import annotations

from typing import Iterable

# slug -> the invariants the catalogue says it breaks, the one it breaks first leading.
# Only slugs the model implements.
CATALOGUE: dict[str, tuple[str, ...]] = {
    "anonymous-release": ("no-foreign-release", "slot-accounting", "capacity"),
    "volatile-leases": ("slot-accounting", "stranded-slot"),
    "double-release": ("no-foreign-release", "capacity"),
    "stale-check-increment": ("capacity", "slot-accounting"),
    "unfenced-resource": ("fenced-writes",),
    "volatile-fence-counter": ("fenced-writes",),
    "unchecked-release": ("no-foreign-release", "capacity"),
    "immortal-lease": ("stranded-slot",),
    "renew-expired-lease": ("capacity", "single-executor"),
    "fallback-release": ("no-foreign-release",),
    "continue-after-lost-renewal": ("single-executor",),
    "expiry-boundary": ("capacity", "slot-accounting"),
    "no-cancelling-deadline": ("bounded-transition",),
    "no-startup-sweep": ("bounded-transition",),
    "no-redelivery": ("at-least-once",),
    "reclaim-while-running": ("single-executor",),
    "no-cancel-tombstone": ("cancelled-never-starts",),
    "unconditional-ack": ("owner-only-update",),
}

KNOWN_BUGS: tuple[str, ...] = tuple(CATALOGUE)

# How many plan steps (client actions and faults) each catalogue sketch takes: a minimized
# finding may be at most one longer.
SKETCH_STEPS: dict[str, int] = {
    "anonymous-release": 3, "volatile-leases": 2, "double-release": 3, "stale-check-increment": 2,
    "unfenced-resource": 3, "volatile-fence-counter": 4, "unchecked-release": 4, "immortal-lease": 3,
    "renew-expired-lease": 3, "fallback-release": 4, "continue-after-lost-renewal": 3, "expiry-boundary": 3,
    "no-cancelling-deadline": 4, "no-startup-sweep": 5, "no-redelivery": 3, "reclaim-while-running": 4,
    "no-cancel-tombstone": 3, "unconditional-ack": 4,
}


class Bugs:
    """Which wrong behaviours are on: ``bugs.double_release`` is True when slug
    ``double-release`` is selected. Plain attributes, read on the hot path."""

    def __init__(self, slugs: Iterable[str] = ()) -> None:
        self.on = frozenset(slugs)
        unknown = sorted(self.on - set(KNOWN_BUGS))
        if unknown:
            raise ValueError(f"unknown bug slug {unknown[0]!r}; known: {', '.join(KNOWN_BUGS) or 'none'}")
        for slug in CATALOGUE:
            setattr(self, slug.replace("-", "_"), slug in self.on)

    def __repr__(self) -> str:
        return f"Bugs({sorted(self.on)!r})"

    def __getattr__(self, name: str) -> bool:
        # Every slug's flag is set in __init__; this runs only for a name that is not one (and tells
        # type checkers that the flags are booleans).
        raise AttributeError(f"no bug flag {name!r}; slugs: {', '.join(KNOWN_BUGS)}")
