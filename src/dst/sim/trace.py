"""The trace: every meaningful event of a run, its digest, and a plain rendering.

An entry is a tuple ``(time_ms, actor, kind, detail)`` of ints and strings only,
so its ``repr`` (and so the digest) is the same in every process.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

Event = tuple[int, str, str, str]


class Trace:
    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: list[Event] = []

    def digest(self) -> str:
        return digest(self.events)

    def __len__(self) -> int:
        return len(self.events)


def digest(events: Iterable[Event]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for event in events:
        h.update(repr(event).encode())
        h.update(b"\n")
    return h.hexdigest()


def format_time(ms: int) -> str:
    """``76s``, ``1.25s``, ``250ms``: the shortest exact form of a virtual time."""
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    if ms < 1000:
        return f"{ms}ms"
    seconds, millis = divmod(ms, 1000)
    return f"{seconds}.{millis:03d}".rstrip("0") + "s"


def format_event(event: Event) -> str:
    time, actor, kind, detail = event
    text = f"t={format_time(time):>9} {actor:<8} {kind}"
    return f"{text} {detail}" if detail else text


def first_difference(a: list[Event], b: list[Event]) -> tuple[int, Event | None, Event | None] | None:
    """Index and the two events where two traces first differ, or None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i, x, y
    if len(a) != len(b):
        i = min(len(a), len(b))
        return i, (a[i] if i < len(a) else None), (b[i] if i < len(b) else None)
    return None
