"""Redis's replies as bytes on the wire (RESP2 and RESP3), for redis-py's own parser to read back: fakeredis
answers with Python values, and the client reads a stream, as over TCP."""

from __future__ import annotations

from typing import Any

from fakeredis._command_args_parsing import Float
from fakeredis._helpers import SimpleError, SimpleString

_NULL = {2: b"$-1\r\n", 3: b"_\r\n"}


def encode(value: Any, protocol: int, push: bool = False) -> bytes:
    """One reply (or, with ``push``, one pushed message: pub/sub's) for a client speaking ``protocol``."""
    out: list[bytes] = []
    if push and protocol == 3 and isinstance(value, list):
        out.append(b">%d\r\n" % len(value))
        for item in value:
            _put(item, protocol, out)
    else:
        _put(value, protocol, out)
    return b"".join(out)


def _put(value: Any, protocol: int, out: list[bytes]) -> None:
    kind = value.__class__
    if kind is bytes:
        out.append(b"$%d\r\n%s\r\n" % (len(value), value))
    elif kind is int:
        if -(2**63) <= value < 2**63:
            out.append(b":%d\r\n" % value)
        elif protocol == 3:
            out.append(b"(%d\r\n" % value)  # a big number
        else:
            _put(b"%d" % value, protocol, out)
    elif value is None:
        out.append(_NULL[protocol])
    elif kind is list or kind is tuple:
        out.append(b"*%d\r\n" % len(value))
        for item in value:
            _put(item, protocol, out)
    elif isinstance(value, SimpleString):
        out.append(b"+%s\r\n" % value.value)
    elif isinstance(value, SimpleError):
        out.append(b"-%s\r\n" % value.value.encode())
    elif kind is bool:
        out.append((b"#t\r\n" if value else b"#f\r\n") if protocol == 3 else (b":1\r\n" if value else b":0\r\n"))
    elif kind is float:
        if protocol == 3:
            out.append(b",%s\r\n" % repr(value).encode())  # inf, -inf and nan as RESP3 spells them
        else:
            _put(Float.encode(value, humanfriendly=False), protocol, out)
    elif kind is str:
        _put(value.encode(), protocol, out)
    elif kind is dict:
        if protocol == 3:
            out.append(b"%%%d\r\n" % len(value))
        else:
            out.append(b"*%d\r\n" % (2 * len(value)))
        for k, v in value.items():
            _put(k, protocol, out)
            _put(v, protocol, out)
    elif isinstance(value, (list, tuple, int, bytes)):  # a subclass: as its base
        _put(list(value) if isinstance(value, (list, tuple)) else (int(value) if isinstance(value, int)
                                                                  else bytes(value)), protocol, out)
    else:
        raise TypeError(f"dst.aio.stores.redis: a reply of type {kind.__name__} has no RESP encoding here")
