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
