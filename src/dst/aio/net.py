"""HTTP between processes over dst's network: httpx on the client, an ASGI server on the server.

A client's ``httpx.AsyncClient`` gets a transport (:class:`Transport`) that turns each request into one
message on a connection of dst's network, and waits for the response up to the request's read timeout:
``httpx.ReadTimeout`` when none came (the request cut off, or its response lost after the server ran it). A
request lost before the server is ``httpx.ConnectError``, a reset connection ``httpx.ReadError``; the network
never delivers a request twice (only the client's own retries, or a retrying proxy, send one again), and a
finding pins each of these.
On the server the request runs the service's ASGI app (FastAPI, Starlette) as an HTTP/1.1 server such as
uvicorn calls it (:func:`serve_http`: the request's body in one ``http.request`` message, then
``http.disconnect`` once the response is complete), in a task of the server process; an exception the app
lets out is logged in the trace and answered with a 500, as a real server would.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import unquote

import httpx

from ..sim.network import Broken
from ..sut import SERVER
from .wire import HttpRequest, HttpResponse

# Not carried on the wire: the hop-by-hop headers. A response also loses its length and content encoding: the
# client reads its body decoded (a gzipped response, as Prefect's GZipMiddleware sends past 1000 bytes, would
# otherwise be decoded twice), and httpx sets the length of what it is handed.
_HOP_BY_HOP = {"transfer-encoding", "connection"}
_NOT_ANSWERED = _HOP_BY_HOP | {"content-length", "content-encoding"}


class Transport(httpx.AsyncBaseTransport):
    """An httpx transport from one client process; the URL's host names the destination (``http://server``)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        path = request.url.raw_path.decode("ascii")
        headers = tuple((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in request.headers.raw
                        if k.decode("latin-1").lower() not in _HOP_BY_HOP)
        wire = HttpRequest(request.method, path, headers, body)
        timeout = request.extensions.get("timeout", {}).get("read")
        destination = request.url.host or SERVER
        try:
            response = await self._client.call(destination, wire, None if timeout is None else int(timeout * 1000))
        except TimeoutError:
            raise httpx.ReadTimeout(f"no response from {destination} within the timeout", request=request) from None
        if response.__class__ is Broken:
            if response.how == "refused":  # the request never reached the server
                raise httpx.ConnectError(f"connection to {destination} refused", request=request)
            raise httpx.ReadError(f"connection to {destination} reset by peer", request=request)
        if not isinstance(response, HttpResponse):
            raise httpx.RemoteProtocolError(f"{destination} answered {response!r}, not an HTTP response",
                                            request=request)
        return httpx.Response(response.status, headers=list(response.headers), content=response.body, request=request)


async def serve_http(app: Any, wire: HttpRequest, client: str) -> HttpResponse:
    """Run one request through the ASGI ``app`` (in the calling task) and return its response for the wire; an
    exception the app lets out before its response is complete is raised here."""
    raw_path, _, query = wire.path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": wire.method, "scheme": "http", "path": unquote(raw_path), "raw_path": raw_path.encode("ascii"),
             "query_string": query.encode("ascii"), "root_path": "", "server": (SERVER, 80), "client": (client, 0),
             "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in wire.headers]}
    done = asyncio.get_running_loop().create_future()  # the response is complete: the connection may close
    received = False
    status: int | None = None
    headers: list[tuple[bytes, bytes]] = []
    body: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": wire.body, "more_body": False}
        await done
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            if wire.method != "HEAD":
                body.append(message.get("body", b""))
            if not message.get("more_body", False) and not done.done():
                done.set_result(None)

    await app(scope, receive, send)
    if status is None or not done.done():
        raise RuntimeError(f"the ASGI app returned without completing its response to {wire.method} {raw_path}")
    answered = tuple((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in headers)
    content = b"".join(body)
    if any(k == "content-encoding" for k, _ in answered):  # decoded once, here, as the client would read it
        content = httpx.Response(status, headers=list(answered), content=content).read()
    return HttpResponse(status, tuple((k, v) for k, v in answered if k not in _NOT_ANSWERED), content)
