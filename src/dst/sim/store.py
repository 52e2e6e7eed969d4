"""Store round trips: how long each one takes, and which same-instant step goes first.

One owner for the draws both server hosts make (the coroutine seam's and the asyncio mode's): a round
trip's latency is a keyed draw (the handler's key and the round trip's number), so deleting another
plan step leaves it as it was. It is slow with probability ``slow`` by a drawn extra latency (a lock
wait, a checkpoint), or by a pinned amount: how a finding states the slow round trips it needs.

A round trip on a connection store's connection (a Redis write: :meth:`RoundTrips.connection_delay`) can
also be reset, with probability ``reset`` or where a step pins it: ``before`` the store ran the write, or
``after`` (its reply lost). Either way the client reads the end of the stream. Any other round trip (the
coroutine seam's, a SQLite or PostgreSQL drop-in's) is on no connection dst resets: a pinned reset there is
traced as not made.

The run's scheduling strategy (:mod:`.schedule`: ``uniform``, ``pct``) draws a round trip's latency and its rank
among the steps due at the same instant.
"""

from __future__ import annotations

from .kernel import Kernel
from .rng import Keyed
from .schedule import Strategy
from .trace import SLOW, STORE_RESET, Event, format_time, key_name

_SLOW = 1 << 40  # salts the draw that decides whether a store round trip is slow
_RESET = 1 << 41  # ... and the one that decides whether its connection is reset
WHEN = ("before", "after")  # when a reset strikes: before the store ran the write, or after


class RoundTrips:
    __slots__ = ("kernel", "rng", "trace", "lo", "span", "strategy", "_trip", "_slow_below", "_slow_lo", "_slow_span", "pinned",
                 "drawn", "slowing", "_reset_below", "pinned_resets", "resetting", "resets")

    def __init__(self, kernel: Kernel, rng: Keyed, trace: list[Event], *, latency: tuple[int, int], strategy: Strategy,
                 slow: float = 0.0, slow_by: tuple[int, int] = (0, 0), reset: float = 0.0) -> None:
        self.kernel = kernel
        self.rng = rng
        self.trace = trace
        self.lo, self.span = latency[0], latency[1] - latency[0] + 1
        self.strategy = strategy
        self._trip = strategy.trip  # bound once: asked at every round trip
        self._slow_below = int(slow * (1 << 16))
        self._slow_lo, self._slow_span = slow_by[0], slow_by[1] - slow_by[0] + 1
        self.pinned: dict[tuple[int, int], int] = {}  # (handler key, round trip) -> its extra latency
        self.slowing = self._slow_below > 0  # can any round trip be slow: one test per round trip when not
        self.drawn: list[tuple[int, int, int, int]] = []  # (time, handler key, round trip, ms): every slow round trip
        self._reset_below = int(reset * (1 << 16))
        self.pinned_resets: dict[tuple[int, int], str] = {}  # (handler key, round trip) -> "before" or "after"
        self.resetting = self._reset_below > 0  # can a connection's round trip be reset: no draw when not
        self.resets: list[tuple[int, int, int, str]] = []  # (time, handler key, round trip, when): every reset

    def delay(self, key: int, n: int) -> tuple[int, int]:
        """The ``n``-th round trip (from 1) of the handler keyed ``key``: its latency and its rank among the
        steps due at the same instant (for :meth:`Kernel.after_ranked`)."""
        if self.pinned_resets and (key, n) in self.pinned_resets:
            self.trace.append((self.kernel.now, "server", "not reset",
                               f"{key_name(key)} round trip {n}: not on a connection dst resets"))
        extra = self.slow(key, n) if self.slowing else 0
        ms, rank = self._trip(key, n, self.lo, self.span)
        return ms + extra, rank

    def connection_delay(self, key: int, n: int) -> tuple[int, int, str]:
        """:meth:`delay` for a round trip on a connection store's connection, and whether the connection is reset at
        it: ``""`` (no), ``"before"`` the store ran the write, or ``"after"`` (its reply is lost)."""
        extra = self.slow(key, n) if self.slowing else 0
        ms, rank = self._trip(key, n, self.lo, self.span)
        return ms + extra, rank, self.reset(key, n) if self.resetting else ""

    def pin_slow(self, key: int, n: int, ms: int) -> None:
        """The handler of ``key`` takes ``ms`` longer over its ``n``-th store round trip, whatever the draws say."""
        self.pinned[(key, n)] = ms
        self.slowing = True

    def pin_reset(self, key: int, n: int, when: str) -> None:
        """The connection of the handler of ``key``'s ``n``-th store round trip is reset ``when`` (one of
        :data:`WHEN`), whatever the draws say."""
        self.pinned_resets[(key, n)] = when
        self.resetting = True

    def slow(self, key: int, n: int) -> int:
        """The extra latency of a handler's ``n``-th store round trip (0: none), and its trace event."""
        extra = self.pinned.get((key, n), 0)
        if not extra and self._slow_below:
            r = self.rng.bits(key, n | _SLOW)
            if (r >> 48) < self._slow_below:
                extra = self._slow_lo + r % self._slow_span
        if extra:
            self.drawn.append((self.kernel.now, key, n, extra))
            self.trace.append((self.kernel.now, "server", "slow", (SLOW, key, n,
                                                                   format_time(extra))))
        return extra

    def reset(self, key: int, n: int) -> str:
        """Whether the connection of a handler's ``n``-th store round trip is reset, and when (``""``: it is not),
        and its trace event."""
        when = self.pinned_resets.get((key, n), "")
        if not when and self._reset_below:
            r = self.rng.bits(key, n | _RESET)
            if (r >> 48) < self._reset_below:
                when = WHEN[r & 1]
        if when:
            self.resets.append((self.kernel.now, key, n, when))
            self.trace.append((self.kernel.now, "server", "store-reset", (STORE_RESET, key, n, when)))
        return when
