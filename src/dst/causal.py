"""The causal slice of a violation: the events of a run that led to it, and nothing else.

A violation's message names what went wrong: leases (``L3``; an id that is not an int, a UUID, as it is),
clients (``c2``), runs (``run 17``), seats (``db/0``). The slice follows those names through the trace:

- a *conversation* (a request, its response, and what the network did to them: one message key,
  ``17.1.0`` and ``17.1.0r``) belongs to the slice when any of its events names a focused lease, run
  or seat; the clients that took part in it join the focus (the holder of a lease is whoever its
  grant went to);
- a seat brings in the leases written under it (the resource names both);
- a focused client's own events (its job steps, pauses, crashes, restarts, partitions) belong, its
  other conversations (polling that was denied, reads that came back empty) do not;
- the server's faults belong (they touch every lease), and so does every event that names a focused
  lease, run, seat or client outside any conversation (an expiry, a reap, a partition).

A finding's steps were minimized, so every step of a finding is kept (``every_step``); a run's own
steps are kept when they concern the focus. The slice is worked out on the formatted trace, after
the run: it costs nothing while a campaign runs.
"""

from __future__ import annotations

import re
from typing import Sequence

from .faults import FAULT_ACTIONS
from .sim.trace import KEY, Event, format_detail

# The kinds of trace event that are the plan's own steps (a job started, a fault applied).
STEP_KINDS = frozenset({"job", "resume", "boot", *FAULT_ACTIONS})

_KEY = re.compile(rf"(?<![\w.-])({KEY})r?(?![\w.])")  # a key; a response's "r" dropped
_LEASE = re.compile(r"\bL\d+\b")
_RUN = re.compile(r"\brun \d+\b")
_SEAT = re.compile(r"(?<![\w.])[A-Za-z_][\w.-]*/\d+\b")  # a limit's seat as the resource names it: db/0
_CLIENT = re.compile(r"\bc\d+\b")
_ROUNDS = 4  # focus expansions: lease -> conversation -> client, seat -> lease -> ...; a fixpoint comes sooner


# A store event of a lease whose id is not an int names it as it is (dst.sim.trace's STORED_ID): its first word.
_STORE_NAMED = re.compile(r"(\S+) (?:stored for |renewed until t=|removed \()")


class _Things:
    """The leases, runs and seats a text names: ``L3``, and the ids of the leases the trace's store events name
    that are not ints (a UUID), as they are."""

    def __init__(self, trace: Sequence[Event], texts: list[str]) -> None:
        named = sorted({m.group(1) for event, text in zip(trace, texts) if event[2] == "store"
                        and (m := _STORE_NAMED.match(text)) is not None and not _LEASE.fullmatch(m.group(1))})
        self.named = re.compile("(?<![\\w-])(?:" + "|".join(map(re.escape, named)) + ")(?![\\w-])") if named else None

    def __call__(self, text: str) -> set[str]:
        found = {*_LEASE.findall(text), *_RUN.findall(text), *_SEAT.findall(text)}
        if self.named is not None:
            found.update(self.named.findall(text))
        return found

    def lease(self, thing: str) -> bool:
        return bool(_LEASE.fullmatch(thing) or (self.named is not None and self.named.fullmatch(thing)))


def _clients(text: str) -> set[str]:
    return set(_CLIENT.findall(text))


def causal_slice(trace: Sequence[Event], message: str, *, during: str | None = None,
                 every_step: bool = False) -> list[int]:
    """Indexes into ``trace`` (in order) of the events that led to a violation with ``message``.

    ``during``: the message key of the server handler the violation was detected in (its conversation
    is the slice's too). ``every_step``: keep every plan step (a finding's steps, already minimized)."""
    texts = [format_detail(event[3]) for event in trace]
    keys = [_conversation(text) for text in texts]
    _things = _Things(trace, texts)
    things, clients = _things(message), _clients(message)
    conversations: set[str] = set()
    if during is not None and (key := _conversation(during)) is not None:
        conversations.add(key)
    for _ in range(_ROUNDS):
        before = (len(things), len(clients), len(conversations))
        for i, text in enumerate(texts):
            named = _things(text)
            if not named & things:
                continue
            if keys[i] is not None:
                conversations.add(keys[i])  # type: ignore[arg-type]
            if trace[i][1] == "resource":
                things |= {t for t in named if _things.lease(t)}  # the leases written under a focused seat
        for i, key in enumerate(keys):
            if key in conversations:
                actor = trace[i][1]
                if _CLIENT.fullmatch(actor):
                    clients.add(actor)
                clients |= _clients(texts[i])
        if (len(things), len(clients), len(conversations)) == before:
            break
    return [i for i, event in enumerate(trace)
            if _belongs(event, texts[i], keys[i], things, clients, conversations, every_step, _things)]


def _conversation(text: str) -> str | None:
    match = _KEY.search(text)
    return match.group(1) if match else None


def _belongs(event: Event, text: str, key: str | None, things: set[str], clients: set[str],
             conversations: set[str], every_step: bool, _things: _Things) -> bool:
    actor, kind = event[1], event[2]
    if key is not None:
        return key in conversations  # a request or response, or the network's doing to one
    if kind in STEP_KINDS or kind in ("aim", "moment", "skip"):
        if every_step or actor == "server" or actor in clients:
            return True
    return bool(_things(text) & things or _clients(text) & clients or (actor in clients and kind != "drop"))

