"""What a run's page draws, read from its raw trace: a bar per lease and per claim (from its grant, or the
store's own record, to its release, expiry, loss or removal), a mark per fault, an arrow per message."""

from __future__ import annotations

import functools
import re
from typing import Any, Iterable, Iterator, Sequence

import attrs

from ..faults import FAULTS, FaultKind, fault_of
from ..plan import is_client
from ..sim.trace import (NETWORK, OWN, RECEIVED, REMOVED_ANY, RENEWED_ANY, RESOURCE_WRITE, SENT, STORED_ANY, Event,
                        detail_args, request_key, response_key)
from ..sut import LeaseId, lease_name


# --- reading the raw trace ------------------------------------------------------------------------
# The hosts and the network record a message event as a raw ``(template, *args)`` tuple; the templates and
# what their arguments are belong to dst.sim.trace, the vocabulary's one owner.
# The one fact read from formatted text: when a partition heals (its event says "until t=<ms>").
_UNTIL = re.compile(r"until t=(\d+)$")

# The reference protocol's records, read by their fields (a model that speaks it, such as the SQLite
# example, is drawn the same way): a response with ``lease``, ``token`` and ``expiry`` grants a lease;
# one with only ``expiry``, to a request naming a ``lease``, renews it; a response with neither
# ``expiry`` nor ``reason`` (a refusal) to a request naming a ``lease`` releases it, or, when the
# request names a ``seat`` too, evicts whichever lease holds that seat.

_HELD_AT_END = "held when the run ended"

MESSAGE_KINDS = frozenset({"send", "recv", "reply"})
# The network events after which a message is never delivered: a partition's cut, and a message
# fault that says what a partition says (a loss).
LOST = frozenset({*(kind.cuts_as for kind in FAULTS if kind.cuts_as),
                  *(kind.drawn_as for kind in FAULTS if kind.target == "net" and kind.merges_into)})


def _field(record: Any, name: str) -> Any:
    return None if isinstance(record, (str, int)) else getattr(record, name, None)


# --- leases ---------------------------------------------------------------------------------------

@attrs.frozen
class LeaseBar:
    """A lease as the authority saw it: granted to ``holder``, valid over ``spans`` (a renewal extends the
    last span; one that came after the lease had lapsed opens another). It ends where the store removed it
    (a release, the reaper, a restart that lost it), or at its expiry if that came first: from then on the
    authority no longer recognised it."""

    lease: str  # "L3" (a UUID id: as it is); a claim: "run 3"
    holder: str  # the client the grant went to
    token: int | None
    seat: int | None
    limit: str | None  # what the request that it answers asked for
    spans: tuple[tuple[int, int], ...]
    ended: str  # "released", "evicted", "expired" or "held when the run ended"; a claim's: see claim_bars
    renewals: tuple[int, ...]  # a claim's: its heartbeats the server answered
    events: tuple[int, ...]  # trace indexes: its grant, renewals and its end, if the trace says it
    what: str = "lease"  # or "claim": a worker's claim on a run
    renewed_to: tuple[int, ...] = ()  # a lease's: the expiry each of its renewals set (a claim's: none)

    @property
    def start(self) -> int:
        return self.spans[0][0]

    @property
    def end(self) -> int:
        return self.spans[-1][1]


@attrs.define
class _Lease:
    lease: LeaseId
    holder: str
    token: int | None
    seat: int | None
    limit: str | None
    spans: list[list[int]]
    ended: str = ""
    renewals: list[int] = attrs.Factory(list)
    events: list[int] = attrs.Factory(list)
    renewed_to: list[int] = attrs.Factory(list)  # the expiry each renewal set


def _server_replies(raw_trace: Sequence[Event]) -> Iterator[tuple[int, int, Any, Any, str]]:
    """Each reply the server sent: its trace index, time, the request it answers (None for one the trace
    does not show received), the response, and the client it went to."""
    requests: dict[int, Any] = {}  # request key -> the record the server received
    for i, event in enumerate(raw_trace):
        if event[1] != "server":
            continue
        received = detail_args(event, RECEIVED)
        if received is not None:
            requests[received[2]] = received[0]
            continue
        reply = detail_args(event, SENT)
        if reply is not None:
            response, client, key = reply
            yield i, event[0], requests.get(request_key(key)), response, client


def lease_bars(raw_trace: Sequence[Event], run_end: int) -> list[LeaseBar]:
    """Every lease the server granted, in grant order: from what the store did, when the trace says it, with
    the token and seat its grant's reply names; else from the server's replies (see the protocol note above)."""
    stored = _stored_leases(raw_trace)
    if stored:
        grants = {_field(response, "lease"): response for _, _, _, response, _ in _server_replies(raw_trace)
                  if _field(response, "token") is not None}
        for lease in stored:
            lease.token, lease.seat = _field(grants.get(lease.lease), "token"), _field(grants.get(lease.lease), "seat")
        return [_bar(lease, run_end) for lease in stored]
    live: dict[int, _Lease] = {}  # lease id -> its latest grant
    leases: list[_Lease] = []
    for i, now, request, response, client in _server_replies(raw_trace):
        lease_id, expiry = _field(response, "lease"), _field(response, "expiry")
        if lease_id is not None and expiry is not None and _field(response, "token") is not None:
            lease = _Lease(lease_id, client, _field(response, "token"), _field(response, "seat"),
                           _field(request, "limit"), [[now, expiry]], events=[i])
            live[lease_id] = lease
            leases.append(lease)
            continue
        named = live.get(_field(request, "lease"))
        if named is None or lease_id is not None:
            continue
        if expiry is not None:  # a renewal
            last = named.spans[-1]
            if named.ended or now >= last[1]:
                named.spans.append([now, expiry])  # it had lapsed: valid again from the renewal
                named.ended = ""
            else:
                last[1] = expiry
            named.renewals.append(now)
            named.renewed_to.append(expiry)
            named.events.append(i)
        elif _field(response, "reason") is None:  # done: a release, or an evict of a seat's holder
            seat = _field(request, "seat")
            target = named if seat is None else _occupant(leases, _field(request, "limit"), seat, now)
            if target is not None:
                _end(target, now, "released" if seat is None else "evicted", i)
    return [_bar(lease, run_end) for lease in leases]


def _stored_leases(raw_trace: Sequence[Event]) -> list[_Lease]:
    """The leases the store held, from the observer's events: stored, renewed, removed (by a release or the
    reaper: the store does not say which)."""
    live: dict[LeaseId, _Lease] = {}
    leases: list[_Lease] = []
    for i, event in enumerate(raw_trace):
        if event[2] != "store":
            continue
        if (args := detail_args(event, STORED_ANY)) is not None:
            lease_id, holder, _, limit, expiry = args
            live[lease_id] = lease = _Lease(lease_id, holder, None, None, limit, [[event[0], expiry]], events=[i])
            leases.append(lease)
        elif (args := detail_args(event, RENEWED_ANY)) is not None and args[0] in live:
            lease, (start, end) = live[args[0]], live[args[0]].spans[-1]
            if event[0] >= end:
                lease.spans.append([event[0], args[1]])  # it had lapsed: valid again from the renewal
            else:
                lease.spans[-1] = [start, args[1]]
            lease.renewals.append(event[0])
            lease.renewed_to.append(args[1])
            lease.events.append(i)
        elif (args := detail_args(event, REMOVED_ANY)) is not None and args[0] in live:
            _end(live.pop(args[0]), event[0], "removed", i)
    return leases


def _occupant(leases: list[_Lease], limit: str | None, seat: int, now: int) -> _Lease | None:
    for lease in reversed(leases):
        if lease.seat == seat and lease.limit == limit and not lease.ended and lease.spans[-1][1] > now:
            return lease
    return None


def _end(lease: _Lease, now: int, why: str, index: int) -> None:
    last = lease.spans[-1]
    if lease.ended or now >= last[1]:
        return  # it had expired already: ended, as far as the authority was concerned
    last[1] = now
    lease.ended = why
    lease.events.append(index)


def _bar(lease: _Lease, run_end: int, what: str = "lease") -> LeaseBar:
    spans = [(start, end) for start, end in lease.spans if start <= run_end]
    ended = lease.ended or "expired"
    if spans[-1][1] > run_end:
        spans[-1], ended = (spans[-1][0], run_end), _HELD_AT_END
    return LeaseBar(lease_name(lease.lease) if what == "lease" else f"run {lease.lease}", lease.holder, lease.token,
                    lease.seat, lease.limit, tuple(spans), ended, tuple(lease.renewals), tuple(lease.events), what,
                    tuple(lease.renewed_to))


# The runs part of the reference protocol, read the same way: a reply with ``run``, ``token`` and ``work``
# (a delivery) hands its worker a claim on the run; a request naming the claim's ``run`` and ``token``
# answered with ``cancel`` (a heartbeat's beat) keeps it; answered with ``what`` (an ack's "completed" or
# "cancelled") ends it so; answered with a ``reason`` (refused) means it was lost. The trace does not say
# when a claim lapsed: a claim the run was delivered again under ends at that delivery.

def claim_bars(raw_trace: Sequence[Event], run_end: int) -> list[LeaseBar]:
    """Every claim the server handed a worker, in delivery order, from its replies (see the note above)."""
    current: dict[int, _Lease] = {}  # run -> its latest claim
    claims: list[_Lease] = []
    for i, now, request, response, worker in _server_replies(raw_trace):
        run, token = _field(response, "run"), _field(response, "token")
        if run is not None and token is not None and _field(response, "work") is not None:
            earlier = current.get(run)
            if earlier is not None:
                _end(earlier, now, "the run was delivered again", i)
            current[run] = _Lease(run, worker, token, None, None, [[now, run_end + 1]], events=[i])
            claims.append(current[run])
            continue
        claim = current.get(_field(request, "run"))
        if claim is None or claim.token != _field(request, "token") or claim.ended:
            continue
        if _field(response, "reason") is not None:
            _end(claim, now, "lost (refused)", i)
        elif _field(response, "what") is not None:
            _end(claim, now, str(_field(response, "what")), i)
        elif _field(response, "cancel") is not None:
            claim.renewals.append(now)
            claim.events.append(i)
    return [_bar(claim, run_end, "claim") for claim in claims]


# --- faults ---------------------------------------------------------------------------------------

@attrs.frozen
class FaultMark:
    """A fault as the trace shows it: a span (``end`` set) or a mark at ``start``, on ``actor``'s lane."""

    kind: str  # the fault kind's name (dst.faults)
    actor: str
    start: int
    end: int | None
    event: int  # the trace index of the event that says it


# The network's events, by the kind of fault they come from (a pinned kind's draws; a partition's cuts).
_NETWORK_FAULTS: dict[str, FaultKind] = {**{kind.drawn_as: kind for kind in FAULTS if kind.target == "net"},
                                         **{kind.cuts_as: kind for kind in FAULTS if kind.cuts_as}}
# Faults drawn as spans until a later event of the same actor (``ends_on``). A fault with a duration
# and no such event (a partition) says in its event when it ends; a slow store round trip's extra
# latency is on the server's record.
_SPAN_ENDS: dict[str, tuple[str, ...]] = {kind.name: kind.ends_on for kind in FAULTS if kind.ends_on}


@attrs.frozen
class _Said:
    """A trace event read as a plan step would say it: ``fault_of`` tells its kind."""

    actor: str
    action: str


@functools.cache  # a few actors and kinds, asked once per event
def fault_kind(actor: str, kind: str) -> FaultKind | None:
    """The kind of fault a trace event of ``actor`` says happened (None: the event is not a fault)."""
    if actor == "net":
        return _NETWORK_FAULTS.get(kind)
    if actor != "server" and not is_client(actor):
        return None
    return fault_of(_Said(actor, kind))


def fault_marks(raw_trace: Sequence[Event], run_end: int,
                slow_round_trips: Iterable[tuple[int, int, int, int]] = ()) -> list[FaultMark]:
    """Every fault the trace shows, in order: pauses, restarts of the server and partitions as spans
    (a pause until its resume; a server restart until its boot; a partition until it heals), a slow
    store round trip as a span of its extra latency (``slow_round_trips``: the server's record of them,
    ``RunResult.befell[1]``), the rest as marks."""
    slow = iter(list(slow_round_trips))
    marks: list[FaultMark] = []
    open_spans: dict[str, list[int]] = {}  # actor -> indexes into marks of its spans still open
    for i, (now, actor, kind, detail) in enumerate(raw_trace):
        for j in open_spans.get(actor, ()):
            if kind in _SPAN_ENDS[marks[j].kind] and marks[j].end is None:
                marks[j] = attrs.evolve(marks[j], end=now)
        if actor in open_spans:
            open_spans[actor] = [j for j in open_spans[actor] if marks[j].end is None]
        fault = fault_kind(actor, kind)
        if fault is None:
            continue
        end: int | None = None
        if fault.pinned and fault.duration_arg and fault.target == "server":  # a slow store round trip
            drawn = next(slow, None)
            end = None if drawn is None else now + drawn[3]
        elif fault.duration_arg and not fault.ends_on and actor != "net":  # its event says until when
            healed = _UNTIL.search(str(detail))
            end = min(int(healed.group(1)), run_end) if healed else run_end
        marks.append(FaultMark(fault.name, actor, now, end, i))
        if fault.name in _SPAN_ENDS:
            open_spans.setdefault(actor, []).append(len(marks) - 1)
    return [attrs.evolve(m, end=run_end) if m.end is None and m.kind in _SPAN_ENDS else m for m in marks]


# --- messages -------------------------------------------------------------------------------------

@attrs.frozen
class Arrow:
    """A message from the event that sent it to the one that received it (or, ``lost``, to the
    network's event that lost or cut it). Indexes into the trace."""

    sent: int
    received: int
    lost: bool = False


def message_arrows(raw_trace: Sequence[Event]) -> list[Arrow]:
    """Every delivery the trace shows (a duplicated message arrives twice; a response its client no longer
    waited for is not traced, so not drawn), and every message lost or cut, in order of arrival."""
    sender: dict[int, int] = {}  # message key -> the event that sent it
    key_of: dict[int, int] = {}  # a sending event -> its message's key
    to_resource: dict[str, list[int]] = {}  # client -> its sends to the resource
    arrows: list[Arrow] = []

    def sent(i: int, key: int) -> None:
        sender[key] = i
        key_of[i] = key

    def arrived(key: int, i: int, lost: bool = False) -> None:
        j = sender.get(key)
        if j is not None:
            arrows.append(Arrow(j, i, lost))

    for i, event in enumerate(raw_trace):
        actor, kind = event[1], event[2]
        if (args := detail_args(event, SENT)) is not None:
            sent(i, args[2])
            if args[1] == "resource":
                to_resource.setdefault(actor, []).append(i)
        elif (args := detail_args(event, RECEIVED)) is not None:
            arrived(args[2], i)
        elif (args := detail_args(event, OWN)) is not None:
            if kind == "send":
                sent(i, args[1])
            else:
                arrived(args[1], i)
        elif (args := detail_args(event, RESOURCE_WRITE)) is not None:
            request, client = args[0], args[1]
            # The resource's event names no key: the write is the client's latest send of this request.
            j = next((j for j in reversed(to_resource.get(client, ())) if raw_trace[j][3][1] == request), None)
            if j is not None:
                arrows.append(Arrow(j, i))
                sent(i, response_key(key_of[j]))  # its answer goes back under the request's key
        elif kind in LOST and (args := detail_args(event, NETWORK)) is not None:
            arrived(args[2], i, lost=True)
    return arrows
