"""The simulated network: per-message latency, loss, duplication, partitions, and connections.

Reordering comes from latency: two messages on one link overtake each other when
the later one draws the shorter delay. Every draw is keyed by the message's key
(and the copy number), never by how many messages went before it.

A message is a tuple ``(src, dst, key, payload)``; ``key`` is unique in the run
and a response carries its request's key with :data:`RESPONSE` set.

Two transports. A message is a *datagram* (the RPC records of the coroutine seam and of ``dst.aio.call``)
unless its payload's class is in :data:`CONNECTIONS` (HTTP, registered by the asyncio mode's wire). A
datagram can be lost, duplicated or delayed. A message on a *connection* (TCP) is never duplicated by the
network; what it can suffer is what TCP lets through to the program:

* a request lost before the server: the client reads a refused connection (``Broken("refused")``, which an
  HTTP client raises as a connect error) after the latency, and the server never sees the request;
* a response lost after the server ran the request: silence, the client's read timeout (the uncertain outcome);
* a reset (``network.reset``): the client reads a reset connection after the latency, before the server saw
  the request, or after it ran it (again uncertain);
* a delay, as a datagram's.

A request reaches the server twice only when someone sends it twice: the client's own retries (a new
request, keyed as the client's next), or a retrying proxy in front of the server (``network.proxy_retry``,
the pinned ``proxy-retry``): it forwards the request, and when no response has come back within its upstream
timeout it closes that upstream connection (the first attempt's response is dropped) and sends the request
again, keyed with :data:`~dst.sim.trace.PROXY_COPY`; the client is answered with the second attempt's response.
"""

from __future__ import annotations

from typing import Callable

import attrs

from .kernel import Kernel
from .rng import Keyed
from .trace import CUT, DELAYED, PROXY_COPY, RESPONSE, Event, format_time, key_name as _name


Message = tuple[str, str, int, object]

CONNECTIONS: set[type] = set()
"""The payload classes that travel on a connection (HTTP requests and responses): see the module's doc."""


@attrs.frozen
class Broken:
    """What the client of a connection reads where the network broke it: ``refused`` (the request never reached
    the server) or ``reset`` (the connection was reset: the server may or may not have run the request)."""

    how: str

    def describe(self) -> str:
        return f"connection {self.how}"


class Network:
    __slots__ = ("kernel", "rng", "lo", "span", "loss", "duplicate", "trace", "endpoints", "partitioned", "_server",
                 "_loss_below", "_duplicate_below", "_delay_below", "_delay_lo", "_delay_span", "pinned", "drawn",
                 "_reset_below", "_proxy_below", "_proxy_lo", "_proxy_span", "proxied")

    def __init__(self, kernel: Kernel, rng: Keyed, *, latency: tuple[int, int], loss: float, duplicate: float,
                 delay: float, delay_by: tuple[int, int], trace: list[Event], server: str, reset: float = 0.0,
                 proxy_retry: float = 0.0, proxy_timeout: tuple[int, int] = (0, 0)) -> None:
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
        # A connection's message reads its reset where a datagram reads its duplication (the same 16 bits of the
        # same draw); a request's retrying proxy has a draw of its own, made only when the scenario has one.
        self._reset_below = int(reset * (1 << 16))
        self._proxy_below = int(proxy_retry * (1 << 16))
        self._proxy_lo, self._proxy_span = proxy_timeout[0], proxy_timeout[1] - proxy_timeout[0] + 1
        # Request key -> whether the proxy has sent it again: a request a retrying proxy forwarded, its response
        # not yet back.
        self.proxied: dict[int, bool] = {}
        self.trace = trace
        self.endpoints: dict[str, Callable[[Message], object]] = {}
        self.partitioned: dict[str, int] = {}  # client -> virtual time the partition heals
        self._server = server
        # Message key -> (lost, extra delay in ms, duplicated, reset, the proxy's upstream timeout in ms or 0): what
        # happens to it whatever the draws say, which is how a finding states the network faults it needs.
        self.pinned: dict[int, tuple[bool, int, bool, bool, int]] = {}
        # (time, a pinned fault kind's action, key, ms): every fault that befell a message, drawn or pinned.
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
        if payload.__class__ in CONNECTIONS:
            self._on_connection(message)
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
        lost, extra, twice, _, _ = self.pinned[key]
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

    def _on_connection(self, message: Message) -> None:
        """A request or response on a connection: lost, reset or delayed, never duplicated (the module's doc)."""
        src, dst, key, payload = message
        kernel, now, trace = self.kernel, self.kernel.now, self.trace
        response = bool(key & RESPONSE)
        if response:
            asked = key & ~RESPONSE
            if asked & PROXY_COPY:  # the proxy's second attempt answered: the client hears this, as its answer
                message = (src, dst, key ^ PROXY_COPY, payload)
            elif self.proxied and asked in self.proxied and self.proxied.pop(asked):
                trace.append((now, "net", "abandoned", (CUT, src, dst, key)))  # the proxy closed that attempt
                return
        r = self.rng.bits(key)
        pinned = self.pinned.get(key) if self.pinned else None
        if pinned is None:
            lost, reset = (r >> 48) < self._loss_below, ((r >> 16) & 0xFFFF) < self._reset_below
            extra = (self._delay_lo + self.rng.bits(key, 2) % self._delay_span
                     if ((r >> 32) & 0xFFFF) < self._delay_below else 0)
            proxy = 0
            if self._proxy_below and not response:
                p = self.rng.bits(key, 3)
                if (p >> 48) < self._proxy_below:
                    proxy = self._proxy_lo + (p & 0xFFFFFFFF) % self._proxy_span
        else:
            lost, extra, twice, reset, proxy = pinned
            if twice:
                trace.append((now, "net", "not duplicated", f"{_name(key)}: a connection delivers a message once"))
        latency = self.lo + r % self.span
        if lost or reset:
            self.drawn.append((now, "lose" if lost else "reset", key, 0))
            trace.append((now, "net", "lost" if lost else "reset", (CUT, src, dst, key)))
            if reset or not response:  # the client reads it; a lost response is silence until its read timeout
                notice = ((src, message[1]) if response else (dst, src)) + (message[2] | RESPONSE,
                                                                            Broken("reset" if reset else "refused"))
                kernel.after(latency, self._deliver, notice)
            return
        if extra:
            latency += extra
            self.drawn.append((now, "delay", key, extra))
            trace.append((now, "net", "delayed", (DELAYED, src, dst, key, format_time(latency))))
        kernel.after(latency, self._deliver, message)
        if proxy:
            self.proxied[key] = False
            kernel.after(latency + proxy, self._proxy_retry, (message, proxy))

    def _proxy_retry(self, arg: tuple[Message, int]) -> None:
        """The proxy's upstream timeout for a request: if its response has not come back, it is sent again."""
        message, timeout = arg
        src, dst, key, payload = message
        if self.proxied.get(key) is not False:
            return  # answered in time: the proxy passed the response on
        self.proxied[key] = True
        now = self.kernel.now
        self.drawn.append((now, "proxy-retry", key, timeout))
        self.trace.append((now, "net", "proxy-retried", (CUT, src, dst, key)))
        copy = (src, dst, key | PROXY_COPY, payload)
        self.kernel.after(self.lo + self.rng.bits(key, 1) % self.span, self._from_proxy, copy)

    def _from_proxy(self, message: Message) -> None:
        """The proxy's copy reaches the server: the proxy stands beside it, past any partition of the client."""
        self.endpoints[message[1]](message)

    def _deliver(self, message: Message) -> None:
        if self.partitioned and self.cut(message[0], message[1]):
            self.trace.append((self.kernel.now, "net", "cut", (CUT, message[0], message[1], message[2])))
            return
        self.endpoints[message[1]](message)
