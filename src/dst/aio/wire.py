"""What asyncio processes send each other over dst's network: HTTP requests and responses, and an RPC error.

HTTP travels on connections, RPC records as datagrams (:mod:`dst.sim.network` says what each can suffer).

Each is a frozen record whose ``repr`` names its fields (the trace's digest is made of reprs) and whose
``kind`` keys the message's random draws. An HTTP request's kind comes from its method and the shape of
its path (numbers and ids replaced), so ``POST /leases/7/renew`` and ``POST /leases/9/renew`` draw alike.
"""

from __future__ import annotations

import hashlib
import re

from ..sim.network import CONNECTIONS
from ..sut import message

_ID = re.compile(r"/(?:[0-9]+|[0-9a-fA-F-]{32,36})(?=/|$)")


def _kind(text: str) -> int:
    return 16 + hashlib.blake2b(text.encode(), digest_size=2).digest()[0] % 240


def _short(body: bytes, limit: int = 120) -> str:
    text = body.decode("utf-8", "backslashreplace")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class HttpRequest:
    """An HTTP request on the wire: method, path (with its query), headers and body."""

    __slots__ = ("method", "path", "headers", "body", "kind")

    def __init__(self, method: str, path: str, headers: tuple[tuple[str, str], ...], body: bytes) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.kind = _kind(f"{method} {_ID.sub('/*', path.split('?', 1)[0])}")

    def __repr__(self) -> str:
        return f"HttpRequest({self.method!r}, {self.path!r}, {self.body!r})"

    def describe(self) -> str:
        return f"{self.method} {self.path}" + (f" {_short(self.body)}" if self.body else "")


class HttpResponse:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: tuple[tuple[str, str], ...], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def __repr__(self) -> str:
        return f"HttpResponse({self.status!r}, {self.body!r})"

    def describe(self) -> str:
        return f"{self.status}" + (f" {_short(self.body)}" if self.body else "")


CONNECTIONS.update((HttpRequest, HttpResponse))  # HTTP runs on TCP: never duplicated by the network


@message
class RemoteError:
    """An RPC handler raised: the caller gets this error back (``dst.aio.call`` raises it again)."""

    type: str
    message: str

    def describe(self) -> str:
        return f"error {self.type}: {self.message}"
