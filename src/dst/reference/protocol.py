"""The reference lease protocol: what its clients send, what its service and resource answer.

A user's service that speaks this protocol can reuse the reference client program
(:func:`dst.reference.client.lease_job`) unchanged. Each request's ``kind`` keys its random draws.
"""

from __future__ import annotations

from ..sut import format_time, message

# --- requests -----------------------------------------------------------------------------------


@message
class Acquire:
    kind = 1
    limit: str
    slots: int
    holder: str
    wait: int = 0  # how long the server may hold the request open for a slot to free (0: answer at once)

    def describe(self) -> str:
        return f"acquire {self.limit} slots={self.slots}" + (f" wait={format_time(self.wait)}" if self.wait else "")


@message
class Renew:
    kind = 2
    lease: int
    holder: str

    def describe(self) -> str:
        return f"renew L{self.lease}"


@message
class Release:
    kind = 3
    lease: int
    holder: str
    limit: str  # what the holder took, as Prefect's fallback_concurrency_limit_ids carry it
    slots: int

    def describe(self) -> str:
        return f"release L{self.lease}"


@message
class Exit:
    """A run that holds no lease leaves its active state (it was never admitted, or gave up waiting)."""

    kind = 4
    limit: str
    slots: int
    holder: str

    def describe(self) -> str:
        return f"exit {self.limit} (no lease)"


@message
class Owner:
    """Which lease occupies a seat: the read half of a read-then-delete release."""

    kind = 5
    limit: str
    seat: int

    def describe(self) -> str:
        return f"owner? {self.limit}/{self.seat}"


@message
class Evict:
    """Delete whatever lease occupies a seat, by key, on behalf of the lease named."""

    kind = 6
    limit: str
    seat: int
    lease: int

    def describe(self) -> str:
        return f"evict {self.limit}/{self.seat} for L{self.lease}"


@message
class Write:
    """A protected write to one seat of a limit (the resource fences each seat on its own)."""

    kind = 7
    token: int
    lease: int
    holder: str
    limit: str
    seat: int

    def describe(self) -> str:
        return f"write {self.limit}/{self.seat} token={self.token} L{self.lease}"


# --- responses ----------------------------------------------------------------------------------

@message
class Granted:
    lease: int
    expiry: int
    token: int
    seat: int

    def describe(self) -> str:
        return f"granted L{self.lease} seat={self.seat} token={self.token} expiry={format_time(self.expiry)}"


@message
class Denied:
    retry_after: int

    def describe(self) -> str:
        return f"denied retry_after={format_time(self.retry_after)}"


@message
class Renewed:
    expiry: int

    def describe(self) -> str:
        return f"renewed expiry={format_time(self.expiry)}"


@message
class Refused:
    """The request named a lease the service does not (or no longer) recognise."""

    reason: str

    def describe(self) -> str:
        return f"refused {self.reason}"


@message
class Occupant:
    lease: int | None

    def describe(self) -> str:
        return f"occupied by L{self.lease}" if self.lease is not None else "free"


@message
class Done:
    what: str

    def describe(self) -> str:
        return self.what
