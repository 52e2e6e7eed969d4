"""Assertions of your own, checked as dst checks its invariants: ``dst.always``, ``dst.sometimes``, ``dst.reachable``,
``dst.unreachable`` and ``dst.eventually``, called from anywhere in a model's code while a run is under way (a
handler, a job, a view, a hook; in either mode).

Each is named by an id of yours (a non-empty line of text), never by where it stands in the code: a violation's
finding is signed ``always:my-id`` and keeps its signature, and replays, after any edit that leaves the run as it
was. A violation is noted where the call is made, blamed on the process whose code made it, and followed by its
causal slice, as dst's own are; every call is counted in the run's and the campaign's coverage.

Outside a run (a unit test of the adapter's code, a plain ``python``) they check nothing: a false ``always``, an
``unreachable`` reached or a bad id still say so, with a ``RuntimeWarning`` (a bad id raises, as in a run).
"""

from __future__ import annotations

import warnings
from typing import Callable, Mapping

from .errors import ContractError
from .invariants.user import ALWAYS, REACHABLE, SOMETIMES, UNREACHABLE, Book, checked_id
from .text import shorten

__all__ = ["always", "sometimes", "reachable", "unreachable", "eventually"]

book: Book | None = None  # the book of the run under way in this process (dst.runner sets it), if any


_valid: set[str] = set()  # ids checked already: a hot assertion checks its id once


def _id(function: str, id: object) -> str:
    if id.__class__ is str and id in _valid:
        return id
    try:
        checked = checked_id(function, id)
    except ContractError as e:
        raise e if book is None else book.bad(e) from None
    _valid.add(checked)
    return checked


def _details(function: str, details: object) -> Mapping[str, object] | None:
    if details is None or details.__class__ is dict or isinstance(details, Mapping):
        return details
    error = ContractError(f"dst.{function}(): details must be a mapping (or None), got {shorten(details)}")
    raise error if book is None else book.bad(error)


def _outside(function: str, id: str, said: str) -> None:
    warnings.warn(f"dst.{function}({id!r}) {said} outside a dst run: nothing checks it there", RuntimeWarning,
                  stacklevel=3)


def always(id: str, condition: bool, details: Mapping[str, object] | None = None) -> None:
    """``condition`` holds every time this is called: a run in which it is false violates ``always:<id>``
    (``details``, a few named values, go in the violation's message)."""
    id, details = _id("always", id), _details("always", details)
    if book is not None:
        book.check(ALWAYS, id, bool(condition), details)
    elif not condition:
        _outside("always", id, "was false")


def sometimes(id: str, condition: bool) -> None:
    """``condition`` holds at least once, somewhere in a campaign: never a violation of a seed, but a run and a
    campaign in which it never held name ``sometimes:<id>`` as never true (what they did not exercise)."""
    id = _id("sometimes", id)
    if book is not None:
        book.check(SOMETIMES, id, bool(condition), None)


def reachable(id: str) -> None:
    """This line is reached at least once in a campaign: one that never reaches it names ``reachable:<id>``."""
    id = _id("reachable", id)
    if book is not None:
        book.check(REACHABLE, id, True, None)


def unreachable(id: str, details: Mapping[str, object] | None = None) -> None:
    """This line is never reached: a run that reaches it violates ``unreachable:<id>``."""
    id, details = _id("unreachable", id), _details("unreachable", details)
    if book is not None:
        book.check(UNREACHABLE, id, True, details)
    else:
        _outside("unreachable", id, "was reached")


def eventually(id: str, condition: Callable[[], bool], within_ms: int) -> None:
    """``condition()`` holds ``within_ms`` of virtual time after this call: it is called once they have passed,
    and false then violates ``eventually:<id>``. One still waiting when the run's quiet period ends is judged
    there (the system had the quiet period to settle); one still waiting when a run ends sooner is neither."""
    id = _id("eventually", id)
    if not callable(condition) or isinstance(within_ms, bool) or not isinstance(within_ms, int) or within_ms < 0:
        error = ContractError(f"dst.eventually({id!r}): expected a callable condition and within_ms a "
                              f"non-negative integer of milliseconds, got {type(condition).__name__} and "
                              f"{shorten(within_ms)}")
        raise error if book is None else book.bad(error)
    if book is not None:
        book.eventually(id, condition, within_ms)
