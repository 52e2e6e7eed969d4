"""HTTP on the server: the ASGI app is called as an HTTP/1.1 server calls it, and answers as it would over TCP."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import pytest

from dst.aio.net import serve_http
from dst.aio.wire import HttpRequest


def test_the_app_gets_the_request_as_a_server_hands_it_over_and_a_disconnect_after_its_response() -> None:
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen["scope"] = scope
        seen["first"] = await receive()
        await send({"type": "http.response.start", "status": 201, "headers": [(b"X-Lease", b"L1")]})
        await send({"type": "http.response.body", "body": b"gran", "more_body": True})
        await send({"type": "http.response.body", "body": b"ted"})
        seen["after"] = await receive()  # a streaming response listens for the client going away

    headers = (("host", "server"), ("content-length", "7"), ("content-type", "application/json"))
    request = HttpRequest("POST", "/v1/leases/a%20b/renew?ttl=30&x=1", headers, b'{"n":1}')
    response = asyncio.run(serve_http(app, request, "c1"))
    scope = seen["scope"]
    assert (scope["type"], scope["http_version"], scope["method"], scope["scheme"]) == ("http", "1.1", "POST", "http")
    assert (scope["path"], scope["raw_path"], scope["query_string"]) == ("/v1/leases/a b/renew", b"/v1/leases/a%20b/renew",
                                                                        b"ttl=30&x=1")
    assert scope["client"] == ("c1", 0) and scope["server"] == ("server", 80)
    assert scope["headers"] == [(b"host", b"server"), (b"content-length", b"7"), (b"content-type", b"application/json")]
    assert seen["first"] == {"type": "http.request", "body": b'{"n":1}', "more_body": False}  # the body at once
    assert seen["after"] == {"type": "http.disconnect"}
    assert (response.status, response.body, response.headers) == (201, b"granted", (("x-lease", "L1"),))


def test_a_compressed_response_is_read_decoded_and_a_head_has_no_body() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        body = gzip.compress(b"x" * 2000)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-encoding", b"gzip"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    got = asyncio.run(serve_http(app, HttpRequest("GET", "/big", (), b""), "c1"))
    assert got.body == b"x" * 2000 and got.headers == ()  # its length and encoding were the wire's, not the body's
    head = asyncio.run(serve_http(app, HttpRequest("HEAD", "/big", (), b""), "c1"))
    assert head.status == 200 and head.body == b""


def test_an_app_that_raises_or_never_completes_its_response_raises_to_the_server() -> None:
    async def raises(scope: dict[str, Any], receive: Any, send: Any) -> None:
        raise LookupError("no such lease")

    async def half(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})

    with pytest.raises(LookupError):
        asyncio.run(serve_http(raises, HttpRequest("GET", "/", (), b""), "c1"))
    with pytest.raises(RuntimeError, match="without completing its response to GET /"):
        asyncio.run(serve_http(half, HttpRequest("GET", "/", (), b""), "c1"))
