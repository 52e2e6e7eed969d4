"""A campaign's report: the JSON that ``dst fuzz --json`` and ``dst merge --json`` print, and that ``dst merge``,
``--junit`` and ``dst show report.json`` read. This module is its one owner.

Its keys, in the order they are printed, and what each must hold are declared once, below, as typed dicts
whose fields carry their check (:class:`Report` and the entries it lists). :func:`build` makes a report from
a campaign's result; :func:`read` reads one back from a file, checked key by key, and returns it typed, or
raises a :class:`ReportError` in one line naming the file, the key and what was expected. A report stays a
plain dict in key order: the same campaign prints the same bytes (but its wall-clock figures), and a key a
newer dst adds is kept, so ``dst merge`` carries it through (:mod:`dst.explore.merge`).

Every report written so far is format :data:`VERSION` and says so by having no ``version`` key; a format that
older readers must refuse will write one, and this reader refuses any version but its own.
"""

from __future__ import annotations

import functools
import json
import math
import re
import typing
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterable, NotRequired, Sequence, TypedDict, cast

import attrs

from ..errors import UserError
from ..text import shorten
from ..files import read_text, where as file_name
from ..scenario import Scenario
from .fuzz import SEEDS_SHOWN, FuzzResult, Shard

if TYPE_CHECKING:
    from .record import Recorded  # what it imports (the minimizer) is loaded once a campaign writes a finding

VERSION = 1

# What a report says in place of a command when none runs the seed again (its scenario file changed meanwhile).
NO_COMMAND = "none: the scenario file changed since the campaign loaded it"


class ReportError(UserError):
    """A file that is not a campaign's report; ``str()`` is one line naming the file, the key and what was
    expected (exit 2)."""


# --- what each key holds ----------------------------------------------------------------------------

@attrs.frozen
class _Holds:
    """A field's check: ``test`` says whether a JSON value fits, ``what`` says what fits, for the error line."""

    test: Callable[[object], bool]
    what: str


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _or_null(test: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or test(v)


def _list_of(test: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: isinstance(v, list) and all(test(x) for x in v)


def _object_of(test: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: isinstance(v, dict) and all(test(x) for x in v.values())


def _text(v: object) -> bool:
    return isinstance(v, str)


def _flag(v: object) -> bool:
    return isinstance(v, bool)


_SHARD = re.compile(r"([0-9]{1,9}(?:,[0-9]{1,9})*)/([0-9]{1,9})")  # "2/4", or a merge of some shards: "1,3/4"


def parse_shard(text: str) -> tuple[frozenset[int], int] | None:
    """``"K/N"`` (or ``"K,L/N"``, shards merged) as (the indices, N); None if it is neither."""
    m = _SHARD.fullmatch(text)
    if m is None:
        return None
    indices, count = frozenset(int(k) for k in m.group(1).split(",")), int(m.group(2))
    return (indices, count) if all(1 <= k <= count for k in indices) else None


def shard_spec(indices: Iterable[int], count: int) -> str:
    """The shards as the report says them: ``"2/4"``, or ``"1,3,4/4"`` for a merge of some of them."""
    return f"{','.join(str(k) for k in sorted(indices))}/{count}"


def _situation_counts(v: object) -> bool:
    """A situation's counts, and the words that explain it (a report older than them has none)."""
    return (isinstance(v, dict) and all(_count(v.get(key)) for key in ("reached", "runs"))
            and all(_text(v[key]) for key in ("statement", "never") if key in v)
            and ("tests" not in v or _list_of(_text)(v["tests"])))


def _coverage(v: object) -> bool:
    """The shape :meth:`dst.explore.coverage.Coverage.report` writes (a key it may grow is not checked)."""
    return (isinstance(v, dict) and _object_of(_count)(v.get("faults")) and _object_of(_count)(v.get("invariants"))
            and _object_of(_situation_counts)(v.get("situations"))
            and ("scenarios" not in v or _object_of(_count)(v["scenarios"]))
            and ("assertions" not in v or _object_of(_object_of(_count))(v["assertions"])))


_Text = Annotated[str, _Holds(_text, "a string")]
_Count = Annotated[int, _Holds(_count, "a non-negative integer")]
_Flag = Annotated[bool, _Holds(_flag, "true or false")]
_Seeds = Annotated[list[int], _Holds(_list_of(_count), "a list of non-negative integers")]
_Names = Annotated[list[str], _Holds(_list_of(_text), "a list of strings")]


# --- the keys ---------------------------------------------------------------------------------------

class SeedRange(TypedDict):
    """``seeds``: which seeds the campaign was given, and how far it got."""

    first: _Count
    stop: Annotated[int | None, _Holds(_or_null(_count), "a non-negative integer or null")]  # null: no end
    shard: Annotated[str | None, _Holds(_or_null(lambda v: isinstance(v, str) and parse_shard(v) is not None),
                                        "null or 'K/N' with 1 <= K <= N (or 'K,L,.../N')")]  # null: every seed
    last_run: Annotated[int | None, _Holds(_or_null(_count), "a non-negative integer or null")]
    shards_missing: NotRequired[_Seeds]  # a merge of some of the shards: the ones it lacks (said only then)


class Consequence(TypedDict):
    """One entry of a signature's ``consequences``: another invariant its first seed violated, the first time."""

    invariant: _Text
    time_ms: _Count
    message: _Text


class Signature(TypedDict):
    """One entry of ``signatures``: the violations that share a signature (invariant and message's shape)."""

    invariant: _Text
    signature: _Text
    count: _Count
    seeds: _Seeds  # the first SEEDS_SHOWN, in order
    first_seed: _Count
    message: Annotated[str | None, _Holds(_or_null(_text), "a string or null")]
    time_ms: Annotated[int | None, _Holds(_or_null(_count), "an integer or null")]
    # What else the first seed violated (RunResult.consequences); absent from reports older than them: none.
    consequences: NotRequired[list[Consequence]]
    reproduce: _Text  # the dst run command of the first seed, or NO_COMMAND


class Unjudged(TypedDict):
    """One entry of ``unjudged``: the runs that ended, for one reason (``kind``), before they could be judged."""

    kind: _Text
    count: _Count
    seeds: _Seeds
    first_seed: _Count
    why: _Text
    reproduce: _Text  # the dst run command of the first seed, or NO_COMMAND


class FindingEntry(TypedDict):
    """One entry of ``findings``: the finding written for a signature, and how its run was minimized."""

    signature: _Text
    path: _Text
    new: _Flag  # False: a finding of that signature was there already
    steps_before: _Count
    steps_after: _Count
    minimizer_runs: _Count
    minimizer_seconds: Annotated[float, _Holds(_number, "a number")]
    stop: _Text  # why the minimizer stopped


class Report(TypedDict):
    """A campaign's report, its keys in the order they are printed."""

    scenario: _Text  # the scenarios' names, " + " between them
    source: _Text
    model: _Text
    bugs: _Names
    swarm: _Flag
    seeds: SeedRange
    seeds_run: _Count
    # Runs branched off the seeds' at their risky moments (dst.explore.branch); absent from reports older than them: 0.
    branches_run: NotRequired[_Count]
    events: _Count
    violations: _Count
    model_errors: NotRequired[_Count]  # runs the model's own code ended; absent from reports older than it: 0
    interrupted: _Flag
    wall_seconds: Annotated[float, _Holds(_number, "a number")]
    seeds_per_second: Annotated[float | None, _Holds(_or_null(_number), "a number or null")]
    invariants: Annotated[list[str], _Holds(_list_of(_text), "a list of invariant ids")]
    signatures: list[Signature]  # in the order the campaign first met them
    unjudged: list[Unjudged]
    # Faults fired, situations reached, cases each invariant met (dst.explore.coverage). Merged key by key
    # without knowing its keys; absent from reports older than coverage.
    coverage: NotRequired[Annotated[dict[str, Any], _Holds(_coverage, "an object with faults, situations and "
                                                                      "invariants, each an object of counts")]]
    findings: list[FindingEntry]


# The key that names each entry of a list: a report lists each once (dst merge joins by it).
ENTRY_KEY = {"signatures": "signature", "unjudged": "kind", "findings": "signature", "consequences": "invariant"}


# --- building one -----------------------------------------------------------------------------------

def build(result: FuzzResult, scenarios: Sequence[Scenario], *, first: int, stop: int | None, shard: Shard | None,
          interrupted: bool, findings: Sequence[FindingEntry]) -> Report:
    """The report of a campaign over ``scenarios``, given seeds ``first`` up to ``stop`` (None: no end) of
    ``shard``, from its result and the findings it wrote."""
    rate = round(result.seeds_run / result.wall_seconds, 1) if result.wall_seconds > 0 else None
    return {
        "scenario": " + ".join(result.scenarios),
        "source": " + ".join(s.source for s in scenarios),
        "model": scenarios[0].model.impl,
        "bugs": list(scenarios[0].bugs),
        "swarm": result.swarm,
        "seeds": {"first": first, "stop": stop, "shard": None if shard is None else shard_spec([shard.index], shard.count),
                  "last_run": result.last_seed},
        "seeds_run": result.seeds_run,
        "branches_run": result.branches_run,
        "events": result.events,
        "violations": result.violations,
        "model_errors": result.model_errors,
        "interrupted": interrupted,
        "wall_seconds": result.wall_seconds,
        "seeds_per_second": rate,
        "invariants": list(result.invariants),
        "signatures": [{"invariant": g.first.invariant or "", "signature": g.key, "count": g.count,
                        "seeds": list(g.seeds[:SEEDS_SHOWN]), "first_seed": g.first.seed, "message": g.first.message,
                        "time_ms": g.first.time,
                        "consequences": [{"invariant": invariant, "time_ms": time, "message": message}
                                         for invariant, time, message in g.first.consequences],
                        "reproduce": g.reproduce or NO_COMMAND}
                       for g in result.signatures],
        "unjudged": [{"kind": g.key, "count": g.count, "seeds": list(g.seeds[:SEEDS_SHOWN]), "first_seed": g.first.seed,
                      "why": g.first.unjudged[1] if g.first.unjudged else "", "reproduce": g.reproduce or NO_COMMAND}
                     for g in result.unjudged],
        "coverage": result.coverage,
        "findings": list(findings),
    }


def finding_entry(signature: str, recorded: Recorded) -> FindingEntry:
    """The entry of ``findings`` for the finding a campaign wrote (or found there already) for ``signature``."""
    shrunk = recorded.shrunk
    return {"signature": signature, "path": str(recorded.path), "new": recorded.written,
            "steps_before": shrunk.steps_before, "steps_after": shrunk.steps_after, "minimizer_runs": shrunk.runs,
            "minimizer_seconds": round(shrunk.seconds, 2), "stop": shrunk.stop.value}


# --- reading one ------------------------------------------------------------------------------------

@functools.cache
def _fields(shape: type) -> dict[str, tuple[Any, bool]]:
    """A typed dict's keys: each one's type (``Annotated`` with its check, a typed dict, or a list of them)
    and whether a report must have it."""
    hints = typing.get_type_hints(shape, include_extras=True)
    out = {}
    for key, hint in hints.items():
        optional = typing.get_origin(hint) is NotRequired
        out[key] = (typing.get_args(hint)[0] if optional else hint, not optional)
    return out


def _entry_shape(hint: Any) -> type | None:
    """The typed dict a field holds a list of (None: it holds no list of objects)."""
    if typing.get_origin(hint) is list and typing.is_typeddict(arg := typing.get_args(hint)[0]):
        return cast(type, arg)
    return None


def _holds(hint: Any) -> _Holds:
    if typing.is_typeddict(hint):
        return _Holds(lambda v: isinstance(v, dict), f"an object with {_listed(_fields(hint))}")
    if _entry_shape(hint) is not None:
        return _Holds(lambda v: isinstance(v, list), "a list")
    return next(m for m in hint.__metadata__ if isinstance(m, _Holds))


def _listed(fields: dict[str, tuple[Any, bool]]) -> str:
    keys = [key for key, (_, required) in fields.items() if required]
    return f"{', '.join(keys[:-1])} and {keys[-1]}"


def _check(value: object, shape: type, where: str, path: str) -> None:
    """Check ``value`` against the typed dict ``shape``: every key it declares at this level first, then
    what they hold, so the error names the first key that is wrong at the shallowest level."""
    if not isinstance(value, dict):
        raise ReportError(f"{where}: {path or 'the report'}: expected an object, got {shorten(value)}")
    fields = _fields(shape)
    for key, (hint, required) in fields.items():
        at = f"{path}.{key}" if path else key
        holds = _holds(hint)
        if key not in value:
            if required:
                raise ReportError(f"{where}: {at}: expected {holds.what}, but the key is missing (is this a dst fuzz "
                                  f"--json report?)")
        elif not holds.test(value[key]):
            raise ReportError(f"{where}: {at}: expected {holds.what}, got {shorten(value[key])}")
    for key, (hint, _) in fields.items():
        at = f"{path}.{key}" if path else key
        if key not in value:
            continue
        if typing.is_typeddict(hint):
            _check(value[key], hint, where, at)
        elif (entry := _entry_shape(hint)) is not None:
            _check_entries(value[key], entry, ENTRY_KEY[key], where, at)


def _check_entries(entries: list[Any], shape: type, name: str, where: str, path: str) -> None:
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        _check(entry, shape, where, f"{path}[{i}]")
        if entry[name] in seen:
            raise ReportError(f"{where}: {path}[{i}].{name}: expected each {name} once, got {shorten(entry[name])} "
                              f"again")
        seen.add(entry[name])


def check(report: object, where: str) -> Report:
    """``report`` (a JSON value) if it is a campaign's report, else a :class:`ReportError` naming ``where``
    and the key."""
    if isinstance(report, dict) and "version" in report and report["version"] != VERSION:
        raise ReportError(f"{where}: version: expected {VERSION} (or none), got {shorten(report['version'])}: a "
                          f"report of another dst version")
    _check(report, Report, where, "")
    return cast(Report, report)


def parse(text: str, where: str) -> Report:
    """The report in ``text`` (what ``dst fuzz --json`` printed), checked; a :class:`ReportError` otherwise."""
    def refuse(constant: str) -> None:
        raise ReportError(f"{where}: not valid JSON for dst: {constant} is not a number")

    if not text.strip():
        raise ReportError(f"{where}: empty file: expected the JSON report dst fuzz --json prints "
                          f"(did the fuzz job fail before printing it?)")
    try:
        report = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as e:
        raise ReportError(f"{where}: not valid JSON ({e}; is this what dst fuzz --json printed?)") from None
    except RecursionError:
        raise ReportError(f"{where}: not valid JSON for dst: nested too deep") from None
    except ValueError as e:  # int()'s own limit: an integer of over 4,300 digits
        raise ReportError(f"{where}: not valid JSON for dst: {str(e).split(';')[0]}") from None
    try:
        json.dumps(report, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ReportError(f"{where}: not valid JSON for dst: a string holds a lone surrogate (an escape from "
                          f"\\ud800 to \\udfff alone), which is no text") from None
    return check(report, where)


def read(path: str) -> tuple[str, Report]:
    """The report in the file at ``path``, checked, and the file's name as an error line says it."""
    name = file_name(path)
    return name, parse(read_text(path), name)


def dumps(report: Report) -> str:
    """The report as ``--json`` prints it."""
    return json.dumps(report, indent=2)
