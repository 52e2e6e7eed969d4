"""Merging the reports of a sharded campaign: pure functions over the dicts ``dst fuzz --json`` prints.

N jobs that each ran ``dst fuzz --shard K/N`` over the same seeds report disjoint seeds; merged, their
reports give the report one unsharded campaign over those seeds would have printed, field for field,
except the wall-clock figures. Reports are taken in shard order, never in the order they were given,
so the same reports give the same bytes however they are listed.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Iterable, Sequence

from ..errors import UserError
from ..text import shorten
from .fuzz import SEEDS_SHOWN


class MergeError(UserError):
    """A report that is not a ``dst fuzz --json`` report, or reports that do not make one campaign; ``str()``
    is one line naming the file, the key and what was expected."""


# --- reading one report ---------------------------------------------------------------------------

def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _text(v: object) -> bool:
    return isinstance(v, str)


def _texts(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _counts(v: object) -> bool:
    return isinstance(v, list) and all(_count(x) for x in v)


def _or_null(test: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or test(v)


_SHARD = re.compile(r"([0-9]{1,9}(?:,[0-9]{1,9})*)/([0-9]{1,9})")  # "2/4", or a merge of some shards: "1,3/4"
_SHARD_WHAT = "null or 'K/N' with 1 <= K <= N (or 'K,L,.../N')"


def _shard_spec(v: object) -> bool:
    return v is None or isinstance(v, str) and parse_shard(v) is not None


# What each key of a report must hold: (test, what is expected). Keys not listed here (coverage, and
# whatever else a report grows) are merged by :func:`merge_values`, whatever they are called.
_TOP: dict[str, tuple[Callable[[object], bool], str]] = {
    "scenario": (_text, "a string"),
    "source": (_text, "a string"),
    "model": (_text, "a string"),
    "bugs": (_texts, "a list of strings"),
    "swarm": (lambda v: isinstance(v, bool), "true or false"),
    "seeds": (lambda v: isinstance(v, dict), "an object with first, stop, shard and last_run"),
    "seeds_run": (_count, "a non-negative integer"),
    "events": (_count, "a non-negative integer"),
    "violations": (_count, "a non-negative integer"),
    "interrupted": (lambda v: isinstance(v, bool), "true or false"),
    "wall_seconds": (_number, "a number"),
    "seeds_per_second": (_or_null(_number), "a number or null"),
    "invariants": (_texts, "a list of invariant ids"),
    "signatures": (lambda v: isinstance(v, list), "a list"),
    "unjudged": (lambda v: isinstance(v, list), "a list"),
    "findings": (lambda v: isinstance(v, list), "a list"),
}
_SEEDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "first": (_count, "a non-negative integer"),
    "stop": (_or_null(_count), "a non-negative integer or null"),
    "shard": (_shard_spec, _SHARD_WHAT),
    "last_run": (_or_null(_count), "a non-negative integer or null"),
}
_GROUP: dict[str, tuple[Callable[[object], bool], str]] = {
    "count": (_count, "a non-negative integer"),
    "seeds": (_counts, "a list of non-negative integers"),
    "first_seed": (_count, "a non-negative integer"),
    "reproduce": (_text, "a string"),
}
_SIGNATURE = {"invariant": (_text, "a string"), "signature": (_text, "a string"), **_GROUP,
              "message": (_or_null(_text), "a string or null"), "time_ms": (_or_null(_count), "an integer or null")}
_UNJUDGED = {"kind": (_text, "a string"), **_GROUP, "why": (_text, "a string")}
_FINDING: dict[str, tuple[Callable[[object], bool], str]] = {"signature": (_text, "a string"),
                                                             "path": (_text, "a string")}


def parse_shard(text: str) -> tuple[frozenset[int], int] | None:
    """``"K/N"`` (or ``"K,L/N"``, shards merged) as (the indices, N); None if it is neither."""
    m = _SHARD.fullmatch(text)
    if m is None:
        return None
    indices, count = frozenset(int(k) for k in m.group(1).split(",")), int(m.group(2))
    return (indices, count) if all(1 <= k <= count for k in indices) else None


def _check(obj: object, keys: dict[str, tuple[Callable[[object], bool], str]], where: str, path: str) -> None:
    if not isinstance(obj, dict):
        raise MergeError(f"{where}: {path or 'the report'}: expected an object, got {shorten(obj)}")
    for key, (test, what) in keys.items():
        at = f"{path}.{key}" if path else key
        if key not in obj:
            raise MergeError(f"{where}: {at}: expected {what}, but the key is missing (is this a dst fuzz --json report?)")
        if not test(obj[key]):
            raise MergeError(f"{where}: {at}: expected {what}, got {shorten(obj[key])}")


def check_report(report: object, where: str) -> dict[str, Any]:
    """``report`` if it is a ``dst fuzz --json`` report, else a :class:`MergeError` naming ``where`` and the key."""
    _check(report, _TOP, where, "")
    assert isinstance(report, dict)
    _check(report["seeds"], _SEEDS, where, "seeds")
    for list_key, keys, name in (("signatures", _SIGNATURE, "signature"), ("unjudged", _UNJUDGED, "kind"),
                                 ("findings", _FINDING, "signature")):
        seen: set[str] = set()
        for i, entry in enumerate(report[list_key]):
            _check(entry, keys, where, f"{list_key}[{i}]")
            if entry[name] in seen:  # the join below is by this key: one entry each
                raise MergeError(f"{where}: {list_key}[{i}].{name}: expected each {name} once, got "
                                 f"{shorten(entry[name])} again")
            seen.add(entry[name])
    return report


def parse_report(text: str, where: str) -> dict[str, Any]:
    """The report in ``text`` (what ``dst fuzz --json`` printed), checked; a :class:`MergeError` otherwise."""
    def refuse(constant: str) -> None:
        raise MergeError(f"{where}: not valid JSON for dst: {constant} is not a number")

    if not text.strip():
        raise MergeError(f"{where}: empty file: expected the JSON report dst fuzz --json prints "
                         f"(did the fuzz job fail before printing it?)")
    try:
        report = json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as e:
        raise MergeError(f"{where}: not valid JSON ({e}; is this what dst fuzz --json printed?)") from None
    except RecursionError:
        raise MergeError(f"{where}: not valid JSON for dst: nested too deep") from None
    except ValueError as e:  # int()'s own limit: an integer of over 4,300 digits
        raise MergeError(f"{where}: not valid JSON for dst: {str(e).split(';')[0]}") from None
    return check_report(report, where)


# --- merging --------------------------------------------------------------------------------------

def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _name_order(v: Any) -> tuple[str, Any]:
    return (type(v).__name__, v)  # names and numbers sort apart; null sorts with itself


def merge_values(values: Sequence[Any], wheres: Sequence[str], path: str) -> Any:
    """Values of one key across reports, merged without knowing the key: numbers summed, objects merged key
    by key (a key some reports lack counts as absent), lists of names or numbers joined and sorted, anything
    else kept if every report agrees (else a :class:`MergeError`)."""
    first = values[0]
    if all(_is_number(v) for v in values):
        return sum(values)
    if all(isinstance(v, dict) for v in values):
        keys = list(dict.fromkeys(k for v in values for k in v))
        if all(list(v) == sorted(v) for v in values):
            keys.sort()  # each report's keys were sorted: so are the merged ones
        merged = {}
        for key in keys:
            present = [(v[key], w) for v, w in zip(values, wheres) if key in v]
            merged[key] = merge_values([v for v, _ in present], [w for _, w in present], f"{path}.{key}")
        return merged
    if all(isinstance(v, list) for v in values):
        for v, where in zip(values, wheres):
            for item in v:
                if not (item is None or isinstance(item, (str, int, float))):
                    raise MergeError(f"{where}: {path}: expected a list of names or numbers to join, got "
                                     f"{shorten(item)} in it")
        return sorted(set(item for v in values for item in v), key=_name_order)
    for v, where in zip(values, wheres):
        if v != first or type(v) is not type(first):
            raise MergeError(f"{where}: {path}: expected {shorten(first)} as in {wheres[0]}, got {shorten(v)} "
                             f"(numbers sum, objects and lists join; any other value must agree)")
    return first


_SAME_CAMPAIGN = ("scenario", "source", "model", "bugs", "swarm")  # what makes two reports one campaign's shards


def _shard_of(report: dict[str, Any]) -> tuple[frozenset[int], int] | None:
    spec = report["seeds"]["shard"]
    return None if spec is None else parse_shard(spec)


def _in_shard_order(reports: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    def key(item: tuple[str, dict[str, Any]]) -> tuple[int, str]:
        shard = _shard_of(item[1])
        return (0 if shard is None else min(shard[0]), item[0])

    return sorted(reports, key=key)


def _check_one_campaign(reports: Sequence[tuple[str, dict[str, Any]]]) -> tuple[frozenset[int], int] | None:
    """Refuse reports of different campaigns, seed ranges or overlapping shards; return the shards present
    and N (None: one report that ran every seed)."""
    first_where, first = reports[0]
    for where, report in reports[1:]:
        for key in _SAME_CAMPAIGN:
            if report[key] != first[key]:
                raise MergeError(f"{where}: {key}: expected {shorten(first[key])} as in {first_where}, got "
                                 f"{shorten(report[key])}: reports of different campaigns cannot be merged")
        for key in ("first", "stop"):
            if report["seeds"][key] != first["seeds"][key]:
                raise MergeError(f"{where}: seeds.{key}: expected {shorten(first['seeds'][key])} as in {first_where}, "
                                 f"got {shorten(report['seeds'][key])}: shards of different seed ranges cannot be merged")
        for section, theirs, ours in (("", report, first), ("seeds.", report["seeds"], first["seeds"])):
            differ = sorted((set(theirs) ^ set(ours)) - {"shards_missing"})  # shards_missing: said only when true
            if differ:
                has, lacks = (where, first_where) if differ[0] in theirs else (first_where, where)
                raise MergeError(f"{lacks}: {section}{differ[0]}: expected the key, as in {has}, but it is missing "
                                 f"(reports of different dst versions?)")
    shards = [(where, _shard_of(report)) for where, report in reports]
    if len(reports) == 1:
        return shards[0][1]
    owner: dict[int, str] = {}
    count = None
    for where, shard in shards:
        if shard is None:
            other = shards[0][0] if where != shards[0][0] else shards[1][0]
            raise MergeError(f"{where}: seeds.shard: ran every seed of the range (null), so it overlaps {other}: "
                             f"overlapping shards cannot be merged")
        indices, n = shard
        if count is None:
            count = n
        elif n != count:
            raise MergeError(f"{where}: seeds.shard: expected a shard of N = {count} as in {shards[0][0]}, got "
                             f"{shorten(_spec(indices, n))}")
        for k in sorted(indices):
            if k in owner:
                raise MergeError(f"{where}: seeds.shard: shard {k}/{n} is also in {owner[k]}: overlapping shards "
                                 f"cannot be merged")
            owner[k] = where
    assert count is not None
    return frozenset(owner), count


def _spec(indices: Iterable[int], count: int) -> str:
    return f"{','.join(str(k) for k in sorted(indices))}/{count}"


def _seeds(reports: Sequence[dict[str, Any]], wheres: Sequence[str],
           shards: tuple[frozenset[int], int] | None) -> dict[str, Any]:
    first = reports[0]["seeds"]
    runs = [r["seeds"]["last_run"] for r in reports if r["seeds"]["last_run"] is not None]
    out = {"first": first["first"], "stop": first["stop"], "shard": None, "last_run": max(runs, default=None)}
    missing: list[int] = []
    if shards is not None:
        indices, count = shards
        missing = [k for k in range(1, count + 1) if k not in indices]
        out["shard"] = _spec(indices, count) if missing else None  # every shard present: every seed of the range
    for key in first:  # keys a newer report added to this section
        if key not in out and key != "shards_missing":
            out[key] = merge_values([r["seeds"][key] for r in reports], wheres, f"seeds.{key}")
    if missing:
        out["shards_missing"] = missing
    return out


def _groups(reports: Sequence[tuple[str, dict[str, Any]]], list_key: str, name: str) -> list[dict[str, Any]]:
    """Entries joined by ``name``: counts summed, the first seeds in order (as many as a campaign lists),
    and the rest of the entry from the report that holds the smallest first seed."""
    joined: dict[str, dict[str, Any]] = {}
    seeds: dict[str, list[int]] = {}
    for _, report in reports:
        for entry in report[list_key]:
            key = entry[name]
            seeds.setdefault(key, []).extend(entry["seeds"])
            held = joined.get(key)
            if held is None or entry["first_seed"] < held["first_seed"]:
                joined[key] = dict(entry, count=entry["count"] + (0 if held is None else held["count"]))
            else:
                held["count"] += entry["count"]
    for key, entry in joined.items():
        entry["seeds"] = sorted(seeds[key])[:SEEDS_SHOWN]
    return sorted(joined.values(), key=lambda e: (e["first_seed"], e[name]))


def _findings(reports: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One finding per signature: the one written by the shard that met the signature first (paths as written)."""
    best: dict[str, tuple[float, dict[str, Any]]] = {}
    for _, report in reports:
        first_seed = {s["signature"]: s["first_seed"] for s in report["signatures"]}
        for entry in report["findings"]:
            seed = first_seed.get(entry["signature"], math.inf)
            if entry["signature"] not in best or seed < best[entry["signature"]][0]:
                best[entry["signature"]] = (seed, entry)
    return [entry for _, entry in sorted(best.values(), key=lambda item: (item[0], item[1]["signature"]))]


def merge_reports(reports: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One campaign's report from its shards' reports, each given as (the file's name, its checked report).

    Keys are in the order the reports have them, so a merge of every shard prints what the unsharded
    campaign prints. The wall-clock figures say how the shards ran side by side: ``wall_seconds`` is the
    slowest shard's, ``seeds_per_second`` the shards' speeds added up."""
    if not reports:
        raise MergeError("no report to merge")
    ordered = _in_shard_order(reports)
    shards = _check_one_campaign(ordered)
    wheres = [where for where, _ in ordered]
    bodies = [report for _, report in ordered]
    rates = [r["seeds_per_second"] for r in bodies if r["seeds_per_second"] is not None]
    computed: dict[str, Any] = {
        "seeds": _seeds(bodies, wheres, shards),
        "seeds_run": sum(r["seeds_run"] for r in bodies),
        "events": sum(r["events"] for r in bodies),
        "violations": sum(r["violations"] for r in bodies),
        "interrupted": any(r["interrupted"] for r in bodies),
        "wall_seconds": max(r["wall_seconds"] for r in bodies),
        "seeds_per_second": round(sum(rates), 1) if rates else None,
        "invariants": sorted(set(i for r in bodies for i in r["invariants"])),
        "signatures": _groups(ordered, "signatures", "signature"),
        "unjudged": _groups(ordered, "unjudged", "kind"),
        "findings": _findings(ordered),
    }
    merged: dict[str, Any] = {}
    for key in bodies[0]:
        if key in computed:
            merged[key] = computed[key]
        elif key in _SAME_CAMPAIGN:
            merged[key] = bodies[0][key]
        else:  # coverage, and any key a report grows: merged without knowing what it is
            merged[key] = merge_values([r[key] for r in bodies], wheres, key)
    return merged
