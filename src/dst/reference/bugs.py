"""The catalogue's bugs as flags of the reference model: each slug switches on one wrong behaviour.

A bug is one record here, one line marked ``# wrong:`` in the model where the wrong code lives
(it reads ``bugs.<slug_with_underscores>``), and one scenario, ``scenarios/<slug>.toml``.
``docs/catalogue.md`` tells each one's story and sources.
"""

from __future__ import annotations

from typing import Iterable

from ..sut import Bug

CATALOGUE: tuple[Bug, ...] = (
    # The lease/slot core.
    Bug("anonymous-release", ("no-foreign-release", "slot-accounting", "capacity"), 3,
        "a decrement not tied to the holder's own acquisition"),
    Bug("volatile-leases", ("slot-accounting", "stranded-slot"), 2,
        "leases in process memory, counts in the durable store"),
    Bug("double-release", ("no-foreign-release", "capacity"), 3,
        "release reads the lease, decrements and revokes in separate steps"),
    Bug("stale-check-increment", ("capacity", "slot-accounting"), 2,
        "the capacity check runs on a stale read, then the increment is applied"),
    Bug("unfenced-resource", ("fenced-writes",), 3, "the protected resource checks no token"),
    Bug("volatile-fence-counter", ("unique-tokens", "fenced-writes"), 4, "the fencing counter resets on restart"),
    Bug("unchecked-release", ("no-foreign-release", "capacity"), 4,
        "release compares the owner and deletes by key in separate steps"),
    Bug("immortal-lease", ("stranded-slot",), 3, "a lease whose TTL is effectively infinite is never reclaimed"),
    Bug("renew-expired-lease", ("exclusive-seats", "capacity", "single-executor"), 3,
        "renew checks only that the lease exists, not that it is unexpired"),
    Bug("fallback-release", ("no-foreign-release",), 4, "a release of a missing lease decrements the limit anyway"),
    Bug("continue-after-lost-renewal", ("single-executor",), 3, "the holder keeps working after renewal failed"),
    Bug("expiry-boundary", ("exclusive-seats", "capacity", "slot-accounting"), 3,
        "two places disagree on whether a lease with expiry == now is expired"),
    Bug("strict-fence", ("write-progress",), 1,
        "the resource refuses a token equal to the highest it accepted: a holder's second write is lost"),
    Bug("trusts-client-clock", ("single-executor", "capacity", "exclusive-seats"), 2,
        "the holder judges its lease by the server's expiry against its own wall clock"),
    # Server-owned deadlines.
    Bug("no-cancelling-deadline", ("bounded-transition",), 4,
        "a run in CANCELLING whose worker died waits forever"),
    Bug("no-startup-sweep", ("bounded-transition",), 5, "the CANCELLING deadline lives only in memory"),
    Bug("no-redelivery", ("at-least-once",), 3, "a message read by a consumer that died is never redelivered"),
    Bug("reclaim-while-running", ("single-executor",), 4, "reclaim on a missed heartbeat while the work still runs"),
    Bug("no-cancel-tombstone", ("cancelled-never-starts",), 3,
        "a cancel that arrives before its admission is forgotten"),
    Bug("unconditional-ack", ("owner-only-update",), 4, "a former owner's late ack overwrites its successor's"),
)

KNOWN_BUGS: tuple[str, ...] = tuple(bug.slug for bug in CATALOGUE)


class Bugs:
    """Which wrong behaviours are on: ``bugs.double_release`` is True when slug ``double-release`` is
    switched on. Plain attributes, read on the hot path."""

    def __init__(self, slugs: Iterable[str] = ()) -> None:
        self.on = frozenset(slugs)
        known = [bug.slug for bug in CATALOGUE]
        unknown = sorted(self.on - set(known))
        if unknown:
            raise ValueError(f"unknown bug slug {unknown[0]!r}; known: {', '.join(known)}")
        for slug in known:
            setattr(self, slug.replace("-", "_"), slug in self.on)

    def __repr__(self) -> str:
        return f"Bugs({sorted(self.on)!r})"

    def __getattr__(self, name: str) -> bool:
        # Every slug's flag is set in __init__; this runs only for a name that is not one (and tells
        # type checkers that the flags are booleans).
        raise AttributeError(f"no bug flag {name!r}")
