"""HTTP between processes over dst's network, with httpx on both ends.

A client's ``httpx.AsyncClient`` gets a transport (:class:`Transport`) that turns each request into one
message on dst's network (so a request can be lost, duplicated, delayed or cut off, and a finding can pin
that), and waits for the response up to the request's read timeout: ``httpx.ReadTimeout`` when none came.
On the server the request runs the service's ASGI app (FastAPI, Starlette) through httpx's own ASGI
support, in a task of the server process; an exception the app lets out is logged in the trace and
answered with a 500, as a real server would.
"""

from __future__ import annotations

from typing import Any

import httpx

from ..sut import SERVER
from .wire import HttpRequest, HttpResponse

# Not carried on the wire: the hop-by-hop headers, and the content encoding, since the body is read decoded (a
# gzipped response, as Prefect's GZipMiddleware sends past 1000 bytes, would otherwise be decoded twice).
_HOP_BY_HOP = {"content-length", "transfer-encoding", "connection", "content-encoding"}


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
        if not isinstance(response, HttpResponse):
            raise httpx.RemoteProtocolError(f"{destination} answered {response!r}, not an HTTP response",
                                            request=request)
        return httpx.Response(response.status, headers=list(response.headers), content=response.body, request=request)


async def serve_http(app: Any, wire: HttpRequest, client: str) -> HttpResponse:
    """Run one request through the ASGI ``app`` (in the calling task) and return its response for the wire."""
    transport = httpx.ASGITransport(app=app, client=(client, 0))
    request = httpx.Request(wire.method, f"http://{SERVER}{wire.path}", headers=list(wire.headers), content=wire.body)
    response = await transport.handle_async_request(request)
    body = await response.aread()
    headers = tuple((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in response.headers.raw
                    if k.decode("latin-1").lower() not in _HOP_BY_HOP)
    return HttpResponse(response.status_code, headers, body)
