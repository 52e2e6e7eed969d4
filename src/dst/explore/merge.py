"""Merging the reports of a sharded campaign: pure functions over the reports ``dst fuzz --json`` prints
(:mod:`dst.explore.report`, read and checked there).

N jobs that each ran ``dst fuzz --shard K/N`` over the same seeds report disjoint seeds; merged, their
reports give the report one unsharded campaign over those seeds would have printed, field for field,
except the wall-clock figures. Reports are taken in shard order, never in the order they were given,
so the same reports give the same bytes however they are listed.
"""

from __future__ import annotations

import math
from typing import Any, Sequence, cast

from ..errors import UserError
from ..text import shorten
from .fuzz import SEEDS_SHOWN
from .report import ENTRY_KEY, Report, parse_shard, shard_spec


class MergeError(UserError):
    """Reports that do not make one campaign; ``str()`` is one line naming the file, the key and what was
    expected."""


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
                             f"{shorten(shard_spec(indices, n))}")
        for k in sorted(indices):
            if k in owner:
                raise MergeError(f"{where}: seeds.shard: shard {k}/{n} is also in {owner[k]}: overlapping shards "
                                 f"cannot be merged")
            owner[k] = where
    assert count is not None
    return frozenset(owner), count


def _seeds(reports: Sequence[dict[str, Any]], wheres: Sequence[str],
           shards: tuple[frozenset[int], int] | None) -> dict[str, Any]:
    first = reports[0]["seeds"]
    runs = [r["seeds"]["last_run"] for r in reports if r["seeds"]["last_run"] is not None]
    out = {"first": first["first"], "stop": first["stop"], "shard": None, "last_run": max(runs, default=None)}
    missing: list[int] = []
    if shards is not None:
        indices, count = shards
        missing = [k for k in range(1, count + 1) if k not in indices]
        out["shard"] = shard_spec(indices, count) if missing else None  # every shard present: every seed of the range
    for key in first:  # keys a newer report added to this section
        if key not in out and key != "shards_missing":
            out[key] = merge_values([r["seeds"][key] for r in reports], wheres, f"seeds.{key}")
    if missing:
        out["shards_missing"] = missing
    return out


def _groups(reports: Sequence[tuple[str, dict[str, Any]]], list_key: str) -> list[dict[str, Any]]:
    """Entries joined by the key that names them (``ENTRY_KEY``): counts summed, the first seeds in order (as many as a campaign lists),
    and the rest of the entry from the report that holds the smallest first seed."""
    name = ENTRY_KEY[list_key]
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


def merge_reports(reports: Sequence[tuple[str, Report]]) -> Report:
    """One campaign's report from its shards' reports, each given as (the file's name, its checked report).

    Keys are in the order the reports have them, so a merge of every shard prints what the unsharded
    campaign prints. The wall-clock figures say how the shards ran side by side: ``wall_seconds`` is the
    slowest shard's, ``seeds_per_second`` the shards' speeds added up."""
    if not reports:
        raise MergeError("no report to merge")
    # Merged key by key, whatever the keys (a newer dst's too): the reports as the plain dicts they are.
    ordered = _in_shard_order(cast(Sequence[tuple[str, dict[str, Any]]], reports))
    shards = _check_one_campaign(ordered)
    wheres = [where for where, _ in ordered]
    bodies = [report for _, report in ordered]
    rates = [r["seeds_per_second"] for r in bodies if r["seeds_per_second"] is not None]
    computed: dict[str, Any] = {
        "seeds": _seeds(bodies, wheres, shards),
        "seeds_run": sum(r["seeds_run"] for r in bodies),
        "branches_run": sum(r.get("branches_run", 0) for r in bodies),
        "events": sum(r["events"] for r in bodies),
        "violations": sum(r["violations"] for r in bodies),
        "model_errors": sum(r.get("model_errors", 0) for r in bodies),
        "interrupted": any(r["interrupted"] for r in bodies),
        "wall_seconds": max(r["wall_seconds"] for r in bodies),
        "seeds_per_second": round(sum(rates), 1) if rates else None,
        "invariants": sorted(set(i for r in bodies for i in r["invariants"])),
        "signatures": _groups(ordered, "signatures"),
        "unjudged": _groups(ordered, "unjudged"),
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
    return cast(Report, merged)
