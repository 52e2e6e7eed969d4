"""The simulated network: per-message latency, loss, duplication, partitions.

Reordering comes from latency: two messages on one link overtake each other when
the later one draws the shorter delay. Every draw is keyed by the message's key
(and the copy number), never by how many messages went before it.

A message is a tuple ``(src, dst, key, payload)``; ``key`` is unique in the run
and a response carries its request's key with :data:`RESPONSE` set.
"""

from __future__ import annotations

from typing import Callable

from .kernel import Kernel
from .rng import Keyed
from .trace import CUT, DELAYED, Event, format_time


Message = tuple[str, str, int, object]


class Network:
    __slots__ = ("kernel", "rng", "lo", "span", "loss", "duplicate", "trace", "endpoints", "partitioned", "_server",
                 "_loss_below", "_duplicate_below", "_delay_below", "_delay_lo", "_delay_span", "pinned", "drawn")

    def __init__(self, kernel: Kernel, rng: Keyed, *, latency: tuple[int, int], loss: float, duplicate: float,
                 delay: float, delay_by: tuple[int, int], trace: list[Event], server: str) -> None:
        self.kernel = kernel
        self.rng = rng
        self.lo, self.span = latency[0], latency[1] - latency[0] + 1
        self.loss = loss
        self.duplicate = duplicate
        # One 64-bit draw per message: it gives the latency, and three 16-bit fields decide loss,
        # duplication and a long delay (a request that outlives its sender's timeout).
        self._loss_below = int(loss * (1 << 16))
        self._duplicate_below = int(duplicate * (1 << 16))
        self._delay_below = int(delay * (1 << 16))
        self._delay_lo, self._delay_span = delay_by[0], delay_by[1] - delay_by[0] + 1
        self.trace = trace
        self.endpoints: dict[str, Callable[[Message], object]] = {}
        self.partitioned: dict[str, int] = {}  # client -> virtual time the partition heals
        self._server = server
        # Message key -> (lost, extra delay in ms, duplicated): what happens to it whatever the draws say,
        # which is how a finding states the network faults it needs.
        self.pinned: dict[int, tuple[bool, int, bool]] = {}
        # (time, "lose" | "delay" | "duplicate", key, ms): every fault that befell a message, drawn or pinned.
        self.drawn: list[tuple[int, str, int, int]] = []

    def attach(self, name: str, receive: Callable[[Message], object]) -> None:
        self.endpoints[name] = receive

    def cut(self, src: str, dst: str) -> bool:
        """Is the link between these two cut by a partition right now?"""
        partitioned = self.partitioned
        if not partitioned:
            return False
        client = src if dst == self._server else dst if src == self._server else None
        until = partitioned.get(client, -1)  # type: ignore[arg-type]
        if until > self.kernel.now:
            return True
        if until >= 0 and client is not None:
            del partitioned[client]  # healed: later messages need not look  # type: ignore[arg-type]
        return False

    def send(self, message: Message) -> None:
        src, dst, key, payload = message
        kernel = self.kernel
        if self.partitioned and self.cut(src, dst):
            self.trace.append((kernel.now, "net", "cut", (CUT, src, dst, key)))
            return
        if self.pinned and key in self.pinned:
            self._send_pinned(message)
            return
        r = self.rng.bits(key)
        if (r >> 48) < self._loss_below:
            self.drawn.append((kernel.now, "lose", key, 0))
            self.trace.append((kernel.now, "net", "lost", (CUT, src, dst, key)))
            return
        latency = self.lo + r % self.span
        if ((r >> 32) & 0xFFFF) < self._delay_below:
            extra = self._delay_lo + self.rng.bits(key, 2) % self._delay_span
            self.drawn.append((kernel.now, "delay", key, extra))
            latency += extra
            self.trace.append((kernel.now, "net", "delayed", (DELAYED, src, dst, key, format_time(latency))))
        kernel.after(latency, self._deliver, message)
        if ((r >> 16) & 0xFFFF) < self._duplicate_below:
            self.drawn.append((kernel.now, "duplicate", key, 0))
            self.trace.append((kernel.now, "net", "duplicated", (CUT, src, dst, key)))
            kernel.after(self.lo + self.rng.bits(key, 1) % self.span, self._deliver, message)

    def _send_pinned(self, message: Message) -> None:
        """A message whose faults a step pins: the same events the draws would make, whatever they say."""
        src, dst, key, _ = message
        kernel = self.kernel
        lost, extra, twice = self.pinned[key]
        if lost:
            self.drawn.append((kernel.now, "lose", key, 0))
            self.trace.append((kernel.now, "net", "lost", (CUT, src, dst, key)))
            return
        latency = self.lo + self.rng.bits(key) % self.span + extra
        if extra:
            self.drawn.append((kernel.now, "delay", key, extra))
            self.trace.append((kernel.now, "net", "delayed", (DELAYED, src, dst, key, format_time(latency))))
        kernel.after(latency, self._deliver, message)
        if twice:
            self.drawn.append((kernel.now, "duplicate", key, 0))
            self.trace.append((kernel.now, "net", "duplicated", (CUT, src, dst, key)))
            kernel.after(self.lo + self.rng.bits(key, 1) % self.span, self._deliver, message)

    def _deliver(self, message: Message) -> None:
        if self.partitioned and self.cut(message[0], message[1]):
            self.trace.append((self.kernel.now, "net", "cut", (CUT, message[0], message[1], message[2])))
            return
        self.endpoints[message[1]](message)
