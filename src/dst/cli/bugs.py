"""The commands of a model's bugs: ``dst bugs`` (what each breaks, and its story) and ``dst selftest`` (every
bug found by fuzzing its scenario, and its correct form never accused)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import attrs

from ..explore.pool import worker_pool
from ..findings import ready
from ..models import ModelError, resolve
from .command import EXIT_OK, EXIT_VIOLATION, UsageError, check_slugs
from .output import rich_console


# --- dst bugs -------------------------------------------------------------------------------------

def dst_bugs(args: argparse.Namespace) -> int:
    try:
        bugs = resolve(args.model).bugs
    except ModelError as e:
        raise UsageError(f"dst: --model: {e}") from None
    if args.json:
        print(json.dumps([attrs.asdict(bug) for bug in bugs], indent=2))
        return EXIT_OK
    from ..present.terminal import render_bugs

    render_bugs(rich_console(), args.model, bugs)
    return EXIT_OK


# --- dst selftest ---------------------------------------------------------------------------------

def dst_selftest(args: argparse.Namespace) -> int:
    from ..explore.selftest import find_bug, stay_clean
    from ..present.terminal import plain, render_selftest

    check_slugs(args.bug, args.model)
    if args.findings:
        ready(Path(args.findings))
    slugs = args.bug or [bug.slug for bug in resolve(args.model).bugs]
    if not slugs:
        raise UsageError(f"dst selftest: {args.model} declares no bugs: nothing to hunt")
    console = rich_console(stderr=True)
    executor = worker_pool(args.workers) if args.workers > 1 else None
    options = dict(use_swarm=args.swarm, workers=args.workers, executor=executor)
    try:
        found = []
        for slug in slugs:
            if not args.json:
                console.print(plain((f"hunting {slug} ...", "dim")))
            found.append(find_bug(slug, impl=args.model, max_seeds=args.max_seeds, seconds=args.time_budget, **options))
        recorded = {}
        if args.findings:
            recorded = _selftest_findings(args, found, console, options)
        clean = []
        for slug in slugs:
            if not args.json:
                console.print(plain((f"checking {slug} with its bug off ...", "dim")))
            clean.append(stay_clean(slug, impl=args.model, count=args.clean_seeds, **options))
    finally:
        if executor is not None:
            executor.shutdown(cancel_futures=True)
    ok = all(row.ok for row in found) and all(row.ok for row in clean)
    if args.json:
        print(json.dumps({
            "ok": ok,
            "model": args.model,
            "swarm": args.swarm,
            "bugs": [attrs.asdict(row) | {"ok": row.ok, "seconds": round(row.seconds, 3),
                                          "finding": recorded.get(row.slug)} for row in found],
            "clean": [{"slug": r.slug, "seeds": r.seeds, "violations": [attrs.asdict(v) for v in r.violations],
                       "seconds": round(r.seconds, 3), "ok": r.ok} for r in clean],
        }, indent=2))
    else:
        render_selftest(rich_console(), found, clean, recorded, args.model)
    return EXIT_OK if ok else EXIT_VIOLATION


def _selftest_findings(args: argparse.Namespace, found: list[Any], console: Any,
                       options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Minimize each found bug (the smallest of its first K violations) and write it as a finding."""
    from ..explore.fuzz import Outcome
    from ..explore.record import record
    from ..explore.selftest import smallest_finding
    from ..findings import signature
    from ..invariants import signed
    from ..present.terminal import plain

    recorded = {}
    for row in found:
        if not row.ok:
            continue
        if not args.json:
            console.print(plain((f"minimizing {row.slug} ...", "dim")))
        first = Outcome(row.first_seed, 0, row.hit, row.message)
        shrunk = smallest_finding(row.slug, first, impl=args.model, candidates=args.shrink_candidates, **options)
        origin = {"scenario": shrunk.scenario.source, "seed": shrunk.seed, "swarm": args.swarm,
                  "signature": signature(args.model, (row.slug,), row.hit, signed(row.hit or "", row.message or ""))}
        r = record(shrunk, Path(args.findings), origin)
        recorded[row.slug] = {"path": str(r.path), "new": r.written, "steps_before": shrunk.steps_before,
                              "steps_after": shrunk.steps_after, "minimizer_runs": shrunk.runs,
                              "minimizer_seconds": round(shrunk.seconds, 2)}
    return recorded
