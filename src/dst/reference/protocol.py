"""The reference lease protocol: what its clients send, what its service and resource answer.

A user's service that speaks this protocol can reuse the reference client program
(:func:`dst.reference.client.lease_job`) unchanged: it answers ``Acquire``, ``Renew``, ``Release`` and
``Exit``, and a resource that speaks it (:class:`dst.reference.FencedResource`) answers ``Write``.
Times are integer milliseconds of virtual time. Each request's ``kind`` keys its random draws.
``docs/protocol.md`` is written from this module's docstrings and field comments.
"""

from __future__ import annotations

from ..sut import format_time, message

# --- requests -----------------------------------------------------------------------------------


@message
class Acquire:
    """Ask for ``slots`` slots of ``limit``. The reference client sends it until it is granted or its patience
    (``Workload.acquire_patience``) runs out, and then sends ``Exit``. Answer ``Granted`` or ``Denied``
    (the client waits ``retry_after`` and asks again); on any other answer, or none, it waits 1s and asks again."""

    kind = 1
    limit: str  # the limit's name, a key of ``Env.limits``
    slots: int  # how many of its slots, at least 1
    holder: str  # the client asking (``c1``, ``c2``, ...): the lease's holder, named again in Renew, Release and Write
    wait: int = 0  # virtual ms the server may hold the request open for a slot to free (0: answer at once, as a
    # polling client asks); the reference client sends its ``acquire_wait``, cut to its patience (a long poll)

    def describe(self) -> str:
        return f"acquire {self.limit} slots={self.slots}" + (f" wait={format_time(self.wait)}" if self.wait else "")


@message
class Renew:
    """Extend a lease. The reference client renews at ``renew_fraction`` of its TTL after the send of the request
    that last granted or renewed the lease, with ``renew_attempts`` tries. Answer ``Renewed``; on any other
    answer (``Refused``: expired, or not this holder's), or none, the client stops its work and releases."""

    kind = 2
    lease: int  # the lease id ``Granted`` handed out
    holder: str  # who asks: a correct service renews only the holder's own, unexpired lease

    def describe(self) -> str:
        return f"renew L{self.lease}"


@message
class Release:
    """Give a lease back, sent by its holder when its job ends, however it ended. It is retried on a timeout, so
    a service sees repeats and duplicates: give the slots back only once, for the release whose delete removed
    the lease. The client reads no answer (the reference answers ``Done``, or ``Refused`` when the lease is gone)."""

    kind = 3
    lease: int  # the lease to give back
    holder: str  # who gives it back: a correct service releases only the holder's own lease
    limit: str  # what the holder took, as Prefect's fallback_concurrency_limit_ids carry it
    slots: int  # ... and how many: a correct service goes by the lease it stored, not by these two

    def describe(self) -> str:
        return f"release L{self.lease}"


@message
class Exit:
    """A run that holds no lease leaves its active state (it was never admitted, or gave up waiting). The
    reference client sends it once its acquire patience ran out. It held nothing, so a correct service gives
    nothing back: answer ``Done``; the client reads no answer."""

    kind = 4
    limit: str  # the limit it asked for, as in its Acquire
    slots: int  # ... the slots it asked for
    holder: str  # ... and who asked

    def describe(self) -> str:
        return f"exit {self.limit} (no lease)"


@message
class Owner:
    """Which lease occupies a seat: the read half of a read-then-delete release. Only the reference model's client
    with its ``unchecked-release`` bug sends it: a service for ``lease_job`` need not handle it. Answer ``Occupant``."""

    kind = 5
    limit: str  # the seat's limit
    seat: int  # the seat, as ``Granted`` handed it out

    def describe(self) -> str:
        return f"owner? {self.limit}/{self.seat}"


@message
class Evict:
    """Delete whatever lease occupies a seat, by key, on behalf of the lease named: the delete half of a
    read-then-delete release, sent like ``Owner`` only with the ``unchecked-release`` bug. Answer ``Done``,
    or ``Refused`` when the seat is free."""

    kind = 6
    limit: str  # the seat's limit
    seat: int  # the seat
    lease: int  # the lease the caller means to release (whose slots it gives back)

    def describe(self) -> str:
        return f"evict {self.limit}/{self.seat} for L{self.lease}"


@message
class Write:
    """A protected write to one seat of a limit (the resource fences each seat on its own), sent to the resource,
    not the service. The reference client makes the plan step's ``writes`` of them, spread through its work.
    ``FencedResource`` answers ``Done`` to a token at least the highest it accepted for the seat, ``Refused`` to an
    older one (or to a lease no longer valid, when it checks); on any answer but ``Done``, or none, the client
    stops its work and releases."""

    kind = 7
    token: int  # the fencing token ``Granted`` handed out
    lease: int  # the lease it writes under
    holder: str  # who writes
    limit: str  # the target, ``limit/seat``: the limit ...
    seat: int  # ... and the seat ``Granted`` handed out

    def describe(self) -> str:
        return f"write {self.limit}/{self.seat} token={self.token} L{self.lease}"


# --- responses ----------------------------------------------------------------------------------

@message
class Granted:
    """The answer to ``Acquire``: the slots are the holder's, under a new lease. The reference client times the
    lease on its own clock (the send of its request plus its TTL: the server's expiry is never earlier), and
    renews, writes and releases by ``lease``, ``token`` and ``seat``, all of which it requires.

    A service with no seats or tokens of its own makes them up. ``seat``: number the leases of a limit that are
    live at once, each with the lowest number (from 0) no live lease of the limit holds (always 0 for a limit of
    one slot), so no two live leases share a target and one holder's write never turns another's away.
    ``token``: a durable counter that only grows, so each grant's token is above every one handed out before for
    that seat (lease ids from such a counter will do; a counter that restarts will not)."""

    lease: int  # the new lease's id: the holder names it in Renew, Release and Write, and works under it
    expiry: int  # when the service stops recognising the lease unless renewed: virtual ms, on the server's clock
    token: int  # the fencing token, sent with each Write: above every token handed out before for this seat
    seat: int  # which of the limit's seats the lease holds (0 to capacity - 1): the resource fences each on its own

    def describe(self) -> str:
        return f"granted L{self.lease} seat={self.seat} token={self.token} expiry={format_time(self.expiry)}"


@message
class Denied:
    """The answer to ``Acquire`` when the limit has no room: the reference client waits and asks again."""

    retry_after: int  # how long to wait before asking again: a duration in virtual ms, not a time

    def describe(self) -> str:
        return f"denied retry_after={format_time(self.retry_after)}"


@message
class Renewed:
    """The answer to ``Renew``: the lease is extended. The client's new deadline counts from its Renew's send."""

    expiry: int  # the lease's new expiry: virtual ms, on the server's clock

    def describe(self) -> str:
        return f"renewed expiry={format_time(self.expiry)}"


@message
class Refused:
    """The request named a lease the service does not (or no longer) recognise, or the resource turned a write
    away. The reference client takes it as the end of its lease."""

    reason: str  # why, in a few words, for the trace: ``no such lease``, ``expired``, ``stale token 3 < 4``

    def describe(self) -> str:
        return f"refused {self.reason}"


@message
class Occupant:
    """The answer to ``Owner``."""

    lease: int | None  # the lease on the seat (None: the seat is free)

    def describe(self) -> str:
        return f"occupied by L{self.lease}" if self.lease is not None else "free"


@message
class Done:
    """A request carried out: a release, an exit, a write the resource accepted (or a run submitted or cancelled)."""

    what: str  # what was done, in a few words, for the trace: ``released``, ``held nothing``, ``accepted``

    def describe(self) -> str:
        return self.what
