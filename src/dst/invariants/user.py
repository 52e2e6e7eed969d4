"""The user's own invariants: what :mod:`dst.assertions` (``dst.always``, ``dst.sometimes``, ...) records in a run.

An assertion is named by its kind and the user's id, ``always:holders-within-limit``: the name stands where an
invariant's id stands (a violation, a finding's ``invariant``, a signature), and no id of dst's own has a colon, so
the two never collide. A violation is signed by that name alone, never by a line of code or the message's
details: an edit of the adapter leaves its findings' signatures as they were.

:class:`Book` is one run's: it counts every check (times checked, true, false; times reached), hands the first
violation of each name to the run's recorder where it happens (the process that ran is in the message, the
server handler in the report), and keeps the ``eventually`` checks pending until their deadlines. The
*catalogue* (:func:`catalogue`) is every assertion the model's source names with a literal id, found by reading
it (never by running it): what lets a run or a campaign say a ``sometimes`` or a ``reachable`` that no code ever
reached.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
from typing import Any, Callable, Iterable, Mapping

from ..errors import ContractError
from ..sim.kernel import Kernel
from ..sut import format_time
from ..text import format_duration, one_line, shorten

ALWAYS, SOMETIMES, REACHABLE, UNREACHABLE, EVENTUALLY = "always", "sometimes", "reachable", "unreachable", "eventually"
KINDS = (ALWAYS, SOMETIMES, REACHABLE, UNREACHABLE, EVENTUALLY)
VIOLATING = (ALWAYS, UNREACHABLE, EVENTUALLY)  # the kinds whose failure is a violation of the seed
# What a violation of each kind says, in the words of a signature and of a finding's title (never its details).
_BROKE = {ALWAYS: "was false", UNREACHABLE: "was reached", EVENTUALLY: "never held"}
_MAX_ID = 200

Counts = tuple[int, int, int]  # times checked (reached, asked), times true (held), times false (violated)


def name(kind: str, id: str) -> str:
    """An assertion's name: ``always:my-id``."""
    return f"{kind}:{id}"


def kind_of(invariant: str) -> str | None:
    """The kind of a user's assertion named ``invariant`` (None: not a user's, one of dst's own ids)."""
    kind, colon, _ = invariant.partition(":")
    return kind if colon and kind in KINDS else None


def is_user(invariant: str) -> bool:
    return kind_of(invariant) is not None


def broke(invariant: str) -> str:
    """What a violation of the user's assertion named ``invariant`` says, whatever its details: its signature's
    shape."""
    return _BROKE.get(kind_of(invariant) or "", "failed")


def title(invariant: str) -> str:
    """A finding's words for a violation of the user's assertion: ``always-holders-within-limit-was-false``."""
    kind, _, id = invariant.partition(":")
    words = "".join(c if c.isascii() and c.isalnum() else "-" for c in f"{kind} {id} {broke(invariant)}".lower())
    return "-".join(part for part in words.split("-") if part)[:80].strip("-")


def checked_id(function: str, id: object) -> str:
    """The id if it is one (a non-empty string of one printable line); a :class:`ContractError` of one line if not."""
    if not isinstance(id, str):
        raise ContractError(f"dst.{function}(): the id must be a string, got {shorten(id)}")
    if not id.strip() or not id.isprintable() or len(id) > _MAX_ID:
        raise ContractError(f"dst.{function}(): the id must be a non-empty line of at most {_MAX_ID} printable "
                            f"characters, got {shorten(id)}")
    return id


def details_text(details: Mapping[str, object] | None) -> str:
    """``holders=2, limit='db'``: the details of a violation, in the order given."""
    if not details:
        return ""
    return ", ".join(f"{one_line(str(k), 40)}={shorten(v)}" for k, v in details.items())


class Book:
    """One run's user assertions. ``who`` names the process whose code runs now; ``recorder(name, message)`` takes
    a violation (the run's, which notes where it was found); ``refused(line)`` a bad call the model may swallow."""

    def __init__(self, kernel: Kernel, who: Callable[[], str], recorder: Callable[[str, str], None],
                 refused: Callable[[str], None]) -> None:
        self.kernel = kernel
        self.who = who
        self.recorder = recorder
        self.refused = refused
        self.counts: dict[str, list[int]] = {}
        self.violated: set[str] = set()
        self.pending: dict[int, tuple[str, Callable[[], object], int, int, str]] = {}  # eventually: n -> its ask
        self._asked = 0
        self.over = False  # the run's result is made: what its last words do counts no more

    def bad(self, error: ContractError) -> ContractError:
        """A bad call (an id that is none): the model's error, even if its code swallows the exception."""
        self.refused(f"{self.who()}: {error}")
        return error

    def _count(self, assertion: str, true: int, false: int) -> None:
        counts = self.counts.get(assertion)
        if counts is None:
            counts = self.counts[assertion] = [0, 0, 0]
        counts[0] += 1
        counts[1] += true
        counts[2] += false

    def _fail(self, assertion: str, message: str) -> None:
        if assertion not in self.violated:  # the first violation of each assertion, as for dst's own
            self.violated.add(assertion)
            self.recorder(assertion, message)

    def check(self, kind: str, id: str, condition: bool, details: Mapping[str, object] | None) -> None:
        """An ``always``, ``sometimes``, ``reachable`` or ``unreachable`` met now (the last two always true)."""
        if self.over:
            return
        assertion = f"{kind}:{id}"
        counts = self.counts.get(assertion)
        if counts is None:
            counts = self.counts[assertion] = [0, 0, 0]
        counts[0] += 1
        bad = not condition if kind == ALWAYS else kind == UNREACHABLE
        if bad or not condition:
            counts[2] += 1
        else:
            counts[1] += 1
        if bad:
            said, text = "false" if kind == ALWAYS else "reached", details_text(details)
            self._fail(assertion, f"{said} in {self.who()}" + (f": {text}" if text else ""))

    def eventually(self, id: str, condition: Callable[[], object], within: int) -> None:
        """An ``eventually`` asked now: ``condition()`` is called once ``within`` ms have passed (and at the end of
        the quiet period, if the run gets there first); false then is a violation."""
        if self.over:
            return
        self._asked += 1
        self.pending[self._asked] = (id, condition, self.kernel.now, within, self.who())
        self.kernel.after(within, self._due, self._asked)

    def _due(self, asked: int) -> None:
        ask = self.pending.pop(asked, None)
        if ask is not None and not self.over:
            self._judge(ask, "")

    def _judge(self, ask: tuple[str, Callable[[], object], int, int, str], when: str) -> None:
        id, condition, at, within, who = ask
        assertion, held = name(EVENTUALLY, id), bool(condition())
        self._count(assertion, int(held), int(not held))
        if not held:
            self._fail(assertion, f"still false {when or format_duration(within) + ' after'} {who} asked at "
                                  f"t={format_time(at)}")

    def quiet_period_over(self) -> None:
        """The quiet period passed: every ``eventually`` still pending is judged now (the system had the quiet
        period to settle)."""
        pending, self.pending = self.pending, {}
        for asked in sorted(pending):
            self._judge(pending[asked], "at the end of the quiet period, after")

    def tally(self) -> dict[str, Counts]:
        """Each assertion met in the run (its name), with its counts; the book takes no more after this."""
        self.over = True
        asked: dict[str, int] = {}
        for id, *_ in self.pending.values():  # an eventually still pending is asked, but neither true nor false
            asked[name(EVENTUALLY, id)] = asked.get(name(EVENTUALLY, id), 0) + 1
        out: dict[str, Counts] = {}
        for assertion in sorted({*self.counts, *asked}):
            checked, true, false = self.counts.get(assertion, (0, 0, 0))
            out[assertion] = (checked + asked.get(assertion, 0), true, false)
        return out


# --- what was never reached ------------------------------------------------------------------------------

def counted(counts: Mapping[str, Counts], catalogued: Iterable[str] = (), runs: Mapping[str, int] | None = None
            ) -> dict[str, dict[str, int]]:
    """Each assertion's counts as a report holds them (the catalogued ones never met too, at zero): ``checked``
    (times checked, reached or asked), ``true``, ``false``, and with ``runs``, the runs that met it."""
    out = {}
    for assertion in sorted({*counts, *catalogued}):
        checked, true, false = counts.get(assertion, (0, 0, 0))
        out[assertion] = {"checked": checked, "true": true, "false": false}
        if runs is not None:
            out[assertion]["runs"] = runs.get(assertion, 0)
    return out


def never_met(counts: Mapping[str, Mapping[str, int]]) -> list[str]:
    """A line per assertion a run, or a campaign (``counts`` as :func:`counted` gives them, summed over its runs),
    never met as it exists to be met: a ``sometimes`` never true, a ``reachable`` never reached, an ``always`` or an
    ``eventually`` never checked (it tested nothing)."""
    lines = []
    for assertion, count in counts.items():
        kind, checked, true = kind_of(assertion), count.get("checked", 0), count.get("true", 0)
        if kind == SOMETIMES and not true:
            lines.append(f"{assertion} was never true" + (f" (false all {checked:,} times it was checked)"
                                                          if checked else " (never checked)"))
        elif kind == REACHABLE and not checked:
            lines.append(f"{assertion} was never reached")
        elif kind in (ALWAYS, EVENTUALLY) and not checked:
            lines.append(f"{assertion} was never checked")
    return lines


def summary(counts: Mapping[str, Mapping[str, int]]) -> str:
    """``always:x 120/120 true, sometimes:y 3/400 true, reachable:z 12 times``: each assertion's counts in a line."""
    parts = []
    for assertion, count in counts.items():
        kind, checked, true, false = kind_of(assertion), count["checked"], count["true"], count["false"]
        if not checked:
            parts.append(f"{assertion} never {'reached' if kind in (REACHABLE, UNREACHABLE) else 'checked'}")
        elif kind in (REACHABLE, UNREACHABLE):
            parts.append(f"{assertion} reached {checked:,} time{'' if checked == 1 else 's'}")
        else:
            pending = checked - true - false
            parts.append(f"{assertion} {true:,}/{checked:,} true" + (f", {pending:,} not judged" if pending else ""))
    return ", ".join(parts)


# --- the catalogue: what the model's source names ---------------------------------------------------------

def catalogue(impl: str) -> tuple[str, ...]:
    """The assertions the model named ``impl`` names in its source with a literal id (``dst.sometimes("x", ...)``,
    or ``sometimes("x", ...)`` imported from dst): those in its module's file, or in every file of its package's
    folder. Read, not run; an id made at run time is known once a run meets it."""
    from ..models import ModelError, resolve

    try:
        resolve(impl)  # imported already wherever a run or a campaign asks (a report's reader never does)
    except ModelError:
        return ()
    module = sys.modules.get(impl.split(":", 1)[0])
    if module is None:
        return ()
    files: list[str] = []
    for top in getattr(module, "__path__", None) or ():
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            files += sorted(os.path.join(folder, file) for file in names if file.endswith(".py"))
    if not files and getattr(module, "__file__", None):
        files = [module.__file__]  # type: ignore[list-item]
    found: set[str] = set()
    for file in files:
        try:
            found |= _named_in(file, os.stat(file).st_mtime_ns)
        except OSError:
            continue
    return tuple(sorted(found))


@functools.cache
def _named_in(file: str, mtime: int) -> frozenset[str]:
    try:
        with open(file, "rb") as f:
            tree = ast.parse(f.read(), file)
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    local: dict[str, str] = {}  # a name bound to one of dst's assertion functions in this file -> its kind
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("dst", "dst.assertions"):
            local.update({alias.asname or alias.name: alias.name for alias in node.names if alias.name in KINDS})
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func, kind = node.func, None
        if isinstance(func, ast.Attribute) and func.attr in KINDS and isinstance(func.value, ast.Name) \
                and func.value.id == "dst":
            kind = func.attr
        elif isinstance(func, ast.Name):
            kind = local.get(func.id)
        first = node.args[0]
        if kind is not None and isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.add(name(kind, first.value))
    return frozenset(found)
