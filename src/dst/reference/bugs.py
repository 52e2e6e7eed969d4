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
        "a decrement not tied to the holder's own acquisition",
        story="A acquires (count 1). B, which never took a slot, leaves its active state and decrements by the limit's name (count 0). C acquires: A and C both hold. Seen in Prefect's POST /decrement and PR #19845, docket #223."),
    Bug("volatile-leases", ("slot-accounting", "stranded-slot"), 2,
        "leases in process memory, counts in the durable store",
        story="A acquires (count 1, the lease in memory). The server restarts: the lease is gone, the count stays. Nothing can release or reap it; the limit is full for good. Seen in Prefect's in-memory lease storage (PR #20090)."),
    Bug("double-release", ("no-foreign-release", "capacity"), 3,
        "release reads the lease, decrements and revokes in separate steps",
        story="A and B acquire (limit 2). A's release is retried (a timeout, a duplicate); both tries read the lease before either revokes it; both decrement: count 0 while B holds. Seen in Prefect's /decrement-with-lease; TLA+ ReadPresentRelease."),
    Bug("stale-check-increment", ("capacity", "slot-accounting"), 2,
        "the capacity check runs on a stale read, then the increment is applied",
        story="Two acquires both read 0 slots in use, both pass the check, both increment: 2 holders on a limit of 1. Seen as active_slots=2 on a limit of 1 (Prefect discussion #20520)."),
    Bug("unfenced-resource", ("fenced-writes",), 3, "the protected resource checks no token",
        story="A acquires (token 1) and pauses; its lease expires and is reaped; B acquires (token 2) and writes; A wakes and writes: accepted. Kleppmann's fencing argument; etcd's lock docs."),
    Bug("volatile-fence-counter", ("unique-tokens", "fenced-writes", "fence-only-up"), 4, "the fencing counter resets on restart",
        story="A gets token 5 and writes. The server restarts and its counter starts over: B is handed token 1, a token already given out; A's late write with 5 now beats B's 1. Seen in docket's generation counter."),
    Bug("unchecked-release", ("no-foreign-release", "capacity", "removed-before-expiry"), 4,
        "release compares the owner and deletes by key in separate steps",
        story="A holds and reads 'the seat is mine'; A pauses; its lease expires; B takes the seat; A deletes by key: B's lease is gone; C acquires: B and C hold. redis-py does it right, in one Lua script."),
    Bug("immortal-lease", ("stranded-slot",), 3, "a lease whose TTL is effectively infinite is never reclaimed",
        story="A acquires with a TTL of a hundred years and crashes: the reaper never frees the slot; B waits for ever. Seen in Prefect v1 tag limits (#9895)."),
    Bug("renew-expired-lease", ("exclusive-seats", "capacity", "single-executor"), 3,
        "renew checks only that the lease exists, not that it is unexpired",
        story="A pauses past its expiry; B takes its seat; A wakes and renews: accepted, so two leases the authority recognises hold one seat. Seen in Prefect #22983; TLA+ StaleReap."),
    Bug("renew-stale-stamp", ("expiry-only-forward",), 3,
        "renew stamps the new expiry with the time the request arrived, and writes it a round trip later",
        story="A's renewal is sent twice (a retry after a timeout, or a duplicate on the wire). The copy that arrived first meets a slow store and writes last: its expiry, stamped on arrival, is earlier than the one the second copy wrote, and the lease's expiry moves back. A holder that counted on its renewal has less time than it was told. Seen wherever a handler reads the clock at entry (a request timestamp) and uses it in a later UPDATE."),
    Bug("fallback-release", ("no-foreign-release",), 4, "a release of a missing lease decrements the limit anyway",
        story="A stops renewing; the reaper frees its slot; B acquires; A finishes and releases a lease that is gone, and the fallback decrements anyway: C acquires, B and C hold. Seen in Prefect #21797."),
    Bug("continue-after-lost-renewal", ("single-executor",), 3, "the holder keeps working after renewal failed",
        story="A is partitioned from the server at 45 s; its renewals fail and it works on; its lease expires and is reaped; B acquires: A and B both work. Seen in Prefect's lease renewal ('execution will continue')."),
    Bug("expiry-boundary", ("exclusive-seats", "capacity", "slot-accounting"), 3,
        "two places disagree on whether a lease with expiry == now is expired",
        story="A lease expiring exactly at a reaper tick is expired to admission and live to renewal (or the other way round): a successor is seated while the renewal keeps the first holder. Seen where Prefect's memory and Redis lease stores compare with < and <=."),
    Bug("strict-fence", ("write-progress",), 1,
        "the resource refuses a token equal to the highest it accepted: a holder's second write is lost",
        story="A acquires (token 1) and writes: accepted, the highest is 1. A writes again with the same token: refused, though its lease is current. An off-by-one in the fence's comparison."),
    Bug("fence-after-write", ("fence-only-up", "refused-changes-nothing", "fenced-writes"), 3,
        "the resource applies a write, then compares its token: a stale write lowers the fence and is refused",
        story="A acquires (token 1) and pauses before its write; its lease expires; B acquires (token 2) and writes: the fence is 2. A wakes and writes with token 1: the resource stores it, fence 1, then compares 1 with the 2 it read and answers refused. A is told no; the fence now lets any token from 1 in. Seen wherever the check is made after the write (an UPDATE that returns the old fence, compared in code) with nothing to roll it back."),
    Bug("refused-write-applied", ("refused-changes-nothing",), 3,
        "the resource writes the data before it compares the token, and keeps it when it refuses the write",
        story="A acquires (token 1) and pauses before its write; its lease expires; B acquires (token 2) and writes. A wakes and writes with token 1: the resource upserts A's data, then compares the token and refuses it, leaving the fence at 2. A is told no, yet its stale data replaced B's. Seen where the data and the fence live in two tables written one after the other, outside one transaction."),
    Bug("trusts-client-clock", ("single-executor", "capacity", "exclusive-seats"), 2,
        "the holder judges its lease by the server's expiry against its own wall clock",
        story="A acquires; its wall clock is set back 30 s; it judges its lease by the server's expiry against that clock, renews late and works on after the authority let the lease go. A client cannot extend a hold by changing its clock."),
    # Server-owned deadlines.
    Bug("no-cancelling-deadline", ("bounded-transition",), 4,
        "a run in CANCELLING whose worker died waits forever",
        story="A runs holding the slot; the run is cancelled (CANCELLING); A's worker is killed; nothing ever writes CANCELLED. Seen in Prefect #17563, fixed by a server-owned deadline (#22238)."),
    Bug("no-startup-sweep", ("bounded-transition",), 5, "the CANCELLING deadline lives only in memory",
        story="A run enters CANCELLING; the server restarts before its deadline fires and nothing sweeps on startup: it is stuck for good. Prefect #22238's perpetual sweep."),
    Bug("no-redelivery", ("at-least-once",), 3, "a message read by a consumer that died is never redelivered",
        story="A message is enqueued; a worker reads it and crashes before acknowledging; nothing reclaims the pending entry: at-least-once became at-most-once. docket's get_redeliveries (XAUTOCLAIM)."),
    Bug("reclaim-while-running", ("single-executor",), 4, "reclaim on a missed heartbeat while the work still runs",
        story="W1 claims J and is partitioned but keeps working; J is reclaimed on the missed heartbeat; W2 runs J: two executions. Seen in docket #250, #211."),
    Bug("no-cancel-tombstone", ("cancelled-never-starts",), 3,
        "a cancel that arrives before its admission is forgotten",
        story="An admission is sent and delayed; its cancel arrives first and finds nothing to cancel; the admission arrives and the cancelled run starts. docket's cancel-then-add."),
    Bug("unconditional-ack", ("owner-only-update",), 4, "a former owner's late ack overwrites its successor's",
        story="W1 reserves M and pauses; the reservation expires; W2 reserves M and acknowledges; W1 wakes and marks M done with its old claim, over W2's. Seen in docket #335."),
    Bug("redelivery-keeps-token", ("claim-token-changes", "single-executor"), 3,
        "a redelivery hands the run to a new worker under the claim's old token",
        story="W1 reads run R (claim 1) and dies or stalls; the redelivery timeout passes; W2 reads R and is handed it under claim 1 again. W1's late ack or heartbeat, made under claim 1, now passes for W2's. Seen in Redis streams: XAUTOCLAIM hands a pending entry to a new consumer under its same message id, and XACK takes that id from any consumer of the group."),
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
