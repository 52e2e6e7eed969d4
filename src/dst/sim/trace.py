"""The trace: every meaningful event of a run, its digest, and a plain rendering.

An entry is a tuple ``(time_ms, actor, kind, detail)``. On the hot path ``detail`` is
recorded raw, as a tuple ``(template, *args)``, and only turned into text when someone
reads it: in the template ``@`` is the next argument's ``describe()``, ``#`` a key
(``17.3.0``, ``reaper.4.0``), ``%`` a virtual time in ms (``61.5s``) and ``$`` the argument as it is. Rare events record a plain string. Every
argument is an int, a string or a frozen record whose ``repr`` names its fields, so the
``repr`` of the trace, and so its digest, is the same in every process.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable, Iterator

from ..sut import format_time as format_time  # the `%` placeholder's spelling, handed on: the trace's readers use it

Event = tuple[int, str, str, Any]  # detail: a string, or a raw (template, *args) tuple
RESPONSE = 1 << 63
PROXY_COPY = 1 << 11  # in a request key's n: a retrying proxy's second copy of the request (see dst.sim.network)


# --- the vocabulary -------------------------------------------------------------------------------------
# The templates of raw details, each with what its arguments are. The hosts, the network, the store and the
# asyncio mode's observer write them; the causal slice and ``dst show`` read them back with detail_args.
SENT = "@ to $ (#)"  # (record, destination, key): a client's request, or the server's reply
RECEIVED = "@ from $ (#)"  # (record, source, key): the server received a request
OWN = "@ (#)"  # (record, key): the user sent one (to the server), or a client or the user received one
RESOURCE_WRITE = "@ from $: @"  # (request, source, response): the resource received a write and answered it
CUT = "$->$ #"  # (source, destination, key): a message cut, lost or duplicated by the network
DELAYED = "$->$ # by $"  # (source, destination, key, delay): a message delayed
NETWORK = (CUT, DELAYED)
SERVER_DOWN = "@: server down"  # (record,): a request the server was down for
RESTARTED = "@: its process restarted"  # (record,): a request that waited in a paused process that restarted
SLOW = "# round trip $ slower by $"  # (handler key, round trip, extra): a slow store round trip
STORE_RESET = "# round trip $ $ it ran"  # (handler key, round trip, "before" or "after"): a store connection reset
# What the store did, whoever did it (a reaper's removal, a sweep's cancel, a restart's loss show too): written
# from the facts a model reports (dst.sim.facts), or from what the asyncio mode's observer saw change.
STORED = "L$ stored for $: $ of $ until t=%"  # (lease, holder, slots, limit, expiry ms)
RENEWED = "L$ renewed until t=%"  # (lease, expiry ms)
REMOVED = "L$ removed ($'s, $ of $)"  # (lease, holder, slots, limit)
RUN_STATE = "run $ -> $"  # (run, state)
# The same three for a lease id that is not an int (a UUID, its text): the id as it is, where an int's is L7. An
# int's keep their own templates, so a trace of int ids is the same text, and the same digest, as ever.
STORED_ID, RENEWED_ID, REMOVED_ID = STORED[1:], RENEWED[1:], REMOVED[1:]
STORED_ANY, RENEWED_ANY, REMOVED_ANY = (STORED, STORED_ID), (RENEWED, RENEWED_ID), (REMOVED, REMOVED_ID)


def lease_event(template: str, lease: Any, *args: Any) -> tuple[Any, ...]:
    """The raw detail of a store event about ``lease`` (``template``: STORED, RENEWED or REMOVED), in the template
    that writes its id as dst names it (:func:`dst.sut.lease_name`)."""
    return (template if lease.__class__ is int else template[1:], lease, *args)


def detail_args(event: Event, template: str | tuple[str, ...]) -> tuple[Any, ...] | None:
    """The arguments of a raw event recorded with ``template`` (one of several, for a tuple), or None."""
    detail = event[3]
    if detail.__class__ is str:
        return None
    if detail[0] == template or (isinstance(template, tuple) and detail[0] in template):
        return tuple(detail[1:])
    return None


def digest(events: Iterable[Event]) -> str:
    """The trace's fingerprint: a hash of the ``repr`` of every event, taken in one call so the cost stays in C."""
    return hashlib.blake2b(repr(list(events)).encode(), digest_size=16).hexdigest()


BACKGROUND = 1 << 62  # set in the key of a handler the server starts itself (see background_key)
BOOT = "boot"  # what a boot's recovery handlers go by in their keys, where a loop's handlers have its name

_LOOP = r"[A-Za-z][A-Za-z0-9_-]*"  # a loop's name as it stands in a key
# A key as the trace writes it, less a response's "r": a message's (step.kind.n) or a background handler's
# (loop.tick.index); for what finds keys in text (the causal slice).
KEY = rf"(?:\d+\.\d+\.\d+|{_LOOP}\.\d+\.\d+)"
_PARTS = re.compile(rf"(\d+)\.(\d+)\.(\d+)(r?)|({_LOOP})\.(\d+)\.(\d+)")
_LOOP_NAME = re.compile(_LOOP)


def key_name(key: int) -> str:
    """``17.3.0`` for step 17's first message of kind 3; ``17.3.0r`` for its response; ``reaper.4.0`` for the
    first handler of the reaper loop's fourth tick (``boot.2.0``: the second boot's first recovery handler)."""
    if key >> 64:
        return _name_of(key)
    step, kind, n, response = step_key_parts(key)
    return f"{step}.{kind}.{n}{'r' if response else ''}"


MAX_STEP_ID = (1 << 42) - 1  # a step's id fills the bits of a message's key below BACKGROUND (see message_key)


def message_key(step_id: int, kind: int, n: int) -> int:
    """The key of the ``n``-th message of one kind (a request type's number) sent for plan step
    ``step_id`` (its response's key adds ``RESPONSE``). Counting per kind keeps a release's key, and so
    its draws, the same however many acquire attempts came before it."""
    return (step_id << 20) | (kind << 12) | n


def step_of(key: int) -> int | None:
    """The id of the plan step whose job sent the message ``key`` names (a response's too); None for a background
    handler's key: no step sent it."""
    if is_background(key):
        return None
    return (key & ~RESPONSE) >> 20


def series(key: int) -> int:
    """What the keys of one step's messages of one kind, in one direction, share: ``key`` less its ``n``. Keys of
    one series differ only in their ``n``, and compare as their ``n`` do."""
    return key & ~0xFFF


def request_key(key: int) -> int:
    """The key of the request a response answers (a request's own key for a request)."""
    return key & ~RESPONSE


def response_key(key: int) -> int:
    """The key a response to the request ``key`` goes back under."""
    return key | RESPONSE


def is_background(key: int) -> bool:
    """Whether ``key`` is a background handler's (:func:`background_key`), not a plan step's message."""
    return bool(key & BACKGROUND or key >> 64)


def background_key(loop: str, tick: int, index: int) -> int:
    """The key of the ``index``-th handler that ``loop``'s ``tick``-th tick started (``loop`` :data:`BOOT`:
    the ``tick``-th boot's recovery handlers). The key carries its own name, ``reaper.4.0``, above bit 64,
    so it reads back without knowing the service. Its draws see the 64 bits below: the tick and index under
    a tag, 0 for a boot (as it always was) and for a loop a hash of its name, not its place among the loops."""
    tag = 0 if loop == BOOT else 1 + hashlib.blake2b(loop.encode(), digest_size=1).digest()[0] % 63
    name = f"{loop}.{tick}.{index}".encode()
    return (int.from_bytes(name, "big") << 64) | BACKGROUND | (tag << 56) | (tick << 24) | index


def _name_of(key: int) -> str:
    high = key >> 64
    return high.to_bytes((high.bit_length() + 7) // 8, "big").decode()


def check_loops(names: Iterable[str]) -> None:
    """Raise ``ValueError`` (one line) unless every loop name reads back unambiguously from its handlers' keys:
    letters, digits, ``_`` and ``-``, from a letter (no dot: a key's parts are dotted), and no two the same but
    for case, nor :data:`BOOT`: a key names one loop to a person as well as to the parser."""
    seen = {BOOT: BOOT}
    for name in names:
        if not isinstance(name, str) or not _LOOP_NAME.fullmatch(name):
            raise ValueError(f"loop name {name!r}: expected letters, digits, '_' and '-', starting with a letter "
                             f"(its handlers' keys read as <name>.<tick>.<index>)")
        other = seen.get(name.lower())
        if other is not None:
            why = "names a boot's recovery handlers" if other == BOOT else "is another loop's name"
            case = "" if other == name else " (names that differ only in case would read as one)"
            raise ValueError(f"loop name {name!r}: expected a name of its own, but {other!r} {why}{case}")
        seen[name.lower()] = name


def step_key_parts(key: int) -> tuple[int, int, int, bool]:
    """A plan step's message key as (step id, message kind, n, whether it is the response)."""
    base = key & ~RESPONSE
    return base >> 20, (base >> 12) & 0xFF, base & 0xFFF, bool(key & RESPONSE)


def keys_in(detail: Any) -> Iterator[int]:
    """The message keys a raw detail names (the arguments of its template's ``#``)."""
    if detail.__class__ is str:
        return
    for placeholder, arg in zip((ch for ch in detail[0] if ch in "@#$%"), detail[1:]):
        if placeholder == "#":
            yield arg


def parse_key(name: object) -> int:
    """The key :func:`key_name` wrote as ``name``; ``ValueError`` (one line) for text that is not a key."""
    parts = _PARTS.fullmatch(name) if isinstance(name, str) else None
    if parts is not None and parts[1] is not None and (int(parts[2]) > 0xFF or int(parts[3]) > 0xFFF):
        parts = None  # a message kind above 255, or more than 4096 messages of one kind: no key reads so
    if parts is None:
        raise ValueError(f"expected a key as the trace writes it, such as '17.3.0' (a message), '17.3.0r' (its "
                         f"response) or 'reaper.4.0' (a background handler), got {name!r}")
    step, kind, n, response, loop, tick, index = parts.groups()
    if loop is not None:
        return background_key(loop, int(tick), int(index))
    return message_key(int(step), int(kind), int(n)) | (RESPONSE if response else 0)


def format_detail(detail: Any) -> str:
    if detail.__class__ is str:
        return detail
    template, args = detail[0], iter(detail[1:])
    out = []
    for ch in template:
        if ch == "@":
            arg = next(args)
            describe = getattr(arg, "describe", None)
            out.append(describe() if describe is not None else repr(arg))
        elif ch == "#":
            out.append(key_name(next(args)))
        elif ch == "$":
            out.append(str(next(args)))
        elif ch == "%":
            out.append(format_time(next(args)))
        else:
            out.append(ch)
    return "".join(out)


def formatted(event: Event) -> tuple[int, str, str, str]:
    """The event with its detail as text."""
    return (event[0], event[1], event[2], format_detail(event[3]))


def format_event(event: Event) -> str:
    time, actor, kind, detail = event
    text = f"t={format_time(time):>9} {actor:<8} {kind}"
    detail = format_detail(detail)
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
