"""Faults that follow what they were about, when a minimizing change moves it.

A fault a finding pins is about something: a lost message about a request (the reply that handed out
run 15), a pause about where its client was (20 s into the work its lease was granted for). Deleting
another step can move that: a worker serves fewer runs, so its reads shift; a contender is gone, so a
lease is granted sooner. Kept where it was, the fault then strikes something else and the violation
is lost. :func:`followed` moves each fault after what it was about, as a person rewriting the story
would; the minimizer tries a candidate so moved once, as its pass ``re_aim``.
"""

from __future__ import annotations

import re

import attrs

from ..faults import fault_of, is_pinned
from ..plan import is_client, sort_steps
from ..runner import RunResult
from ..scenario import Scenario
from ..sim.trace import SENT, format_detail, is_background, key_name, parse_key, series

_DIGITS = re.compile(r"(\d+)")


def followed(candidate: Scenario, result: RunResult, before: RunResult | None) -> Scenario | None:
    """``candidate`` (which ran as ``result`` and lost the violation ``before`` had) with its faults made to follow
    what they were about, or None if nothing moved: a pinned fault its request (:func:`reaimed`), a timed fault
    on a client the last reply that client had heard before it (:func:`retimed`)."""
    aimed = reaimed(candidate, result, before)
    timed = retimed(aimed or candidate, result, before) if before is not None else None
    return timed or aimed


def retimed(candidate: Scenario, result: RunResult, before: RunResult) -> Scenario | None:
    """``candidate`` with each timed fault on a client moved by as much as the last reply its client had heard
    before it moved: deleting a step that contended for a slot has a client granted its lease sooner, and a
    pause 20 s into its work, kept at its old time, strikes after the work is done. A person moves the pause with
    the grant; this does. None if no such reply moved."""
    heard_before, heard_now = _heard(before), _heard(result)
    steps, changed = list(candidate.steps or ()), False
    for index, step in enumerate(steps):
        kind = fault_of(step)
        if kind is None or kind.target != "client" or kind.pinned or step.arg("moment") is not None:
            continue
        last = None
        for at, key in heard_before.get(step.actor, ()):
            if at > step.at:
                break
            last = (at, key)
        if last is None:
            continue
        now = next((at for at, key in heard_now.get(step.actor, ()) if key == last[1]), None)
        if now is not None and now != last[0]:
            steps[index], changed = attrs.evolve(step, at=max(0, step.at + now - last[0])), True
    return attrs.evolve(candidate, steps=sort_steps(steps)) if changed else None


def _heard(result: RunResult) -> dict[str, list[tuple[int, int]]]:
    """What each client received in a run: (time, key), in time order."""
    heard: dict[str, list[tuple[int, int]]] = {}
    for at, actor, what, detail in result.raw_trace:
        if what == "recv" and is_client(actor) and isinstance(detail, tuple) and len(detail) == 3:
            heard.setdefault(actor, []).append((at, detail[2]))
    return heard


def reaimed(candidate: Scenario, result: RunResult, before: RunResult | None = None) -> Scenario | None:
    """``candidate`` with its pinned faults aimed again at the requests they were about, or None if none moved. A
    fault is about a request of its step (a job, a worker's shift), its kind and its direction; a deletion can
    change how many of those there are before it (a retry fewer where nothing contends, a worker's reads shifted
    by the runs it no longer serves), so the ordinal it names may now be another message, or none. Where the
    message it struck in ``before`` (the run it was kept on) now carries something else, it follows what that
    message carried (the reply that handed out run 15) to the nearest of its request's messages that carries the
    same; where its message was never sent, it goes to the nearest before it (else the first after)."""
    sent = _carried(result)
    was = _carried(before) if before is not None else {}
    steps, changed = list(candidate.steps or ()), False
    for index, step in enumerate(steps):
        message = step.arg("message") if is_pinned(step) else None
        if not isinstance(message, str):
            continue
        key = parse_key(message)
        if is_background(key):
            continue
        same = sorted(k for k in sent if series(k) == series(key))  # the same step, kind and direction
        what = was.get(key)
        if what is not None and sent.get(key) != what:
            best = max((_likeness(sent[k], what) for k in same), default=())
            if best:  # the message most like it (the nearest of those): its own, under a renumbered claim
                nearest = min((k for k in same if _likeness(sent[k], what) == best), key=lambda k: (abs(k - key), k))
                steps[index], changed = step.with_arg("message", key_name(nearest)), True
                continue
        if same and key not in sent:
            nearest = max((k for k in same if k < key), default=same[0])
            steps[index], changed = step.with_arg("message", key_name(nearest)), True
    return attrs.evolve(candidate, steps=sort_steps(steps)) if changed else None


def _likeness(text: str, like: str) -> tuple[bool, ...]:
    """How much ``text`` says what ``like`` says: nothing unless both are the same words around their numbers;
    then whether they are the same, and which numbers they share in place, the first first (what a message names
    first is what it is about: ``delivered run 15 claim 2`` is more like ``delivered run 15 claim 3`` than
    ``delivered run 14 claim 3`` is; claims renumber when a deletion takes one away, runs do not)."""
    words, numbers = _DIGITS.split(text), _DIGITS.split(like)
    if words[0::2] != numbers[0::2]:
        return ()
    return (True, text == like, *(a == b for a, b in zip(words[1::2], numbers[1::2])))


def _carried(result: RunResult) -> dict[int, str]:
    """What each message of a run carried (its request or reply, as the trace shows it), by key."""
    carried = {}
    for _, _, _, detail in result.raw_trace:
        if isinstance(detail, tuple) and detail and detail[0] == SENT:
            try:
                carried[detail[3]] = format_detail(("@", detail[1]))
            except Exception:  # a user's record that cannot say itself: its fault goes by ordinal alone
                continue
    return carried
