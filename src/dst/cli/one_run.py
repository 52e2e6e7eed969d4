"""The commands of one run: ``dst run`` (a seed, and whether it replays identically), ``dst shrink`` (a
violating seed minimized into a finding) and ``dst replay`` (findings run again, and their verdicts)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Sequence

from ..explore.determinism import check_determinism
from ..runner.reproduce import arguments as reproduce_arguments, command as reproduce_command
from ..runner.swarm import swarm
from ..findings import FindingError, ready
from ..runner import RunResult, run
from ..sim.trace import Event, format_event
from ..present.terminal import lane_order
from ..text import one_line
from .command import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION, UsageError, exit_code, reproduce_flags, scenario_from
from .output import error, rich_console


# --- dst run --------------------------------------------------------------------------------------

def dst_run(args: argparse.Namespace) -> int:
    scenario = scenario_from(args, checked=False)  # the run checks it: one build
    if args.swarm:
        scenario = swarm(scenario, args.seed)
    started = time.perf_counter()
    result = run(scenario, args.seed)
    wall = time.perf_counter() - started

    divergence = (check_determinism(scenario, args.seed, result, command=reproduce_arguments(*reproduce_flags(args)))
                  if args.check_determinism else None)

    if args.json:
        out = result.summary()
        if args.trace:
            out["trace"] = [list(e) for e in result.trace]
        if args.check_determinism:
            out["determinism"] = "identical" if divergence is None else divergence.line()
        print(json.dumps(out, indent=2))
    else:
        from ..present.terminal import plain, render_events, render_run

        console = rich_console()
        if args.trace:
            render_events(console, result.events_with_logs())
            console.print()
        render_run(console, scenario, result, wall)
        if not result.ok:
            again = reproduce_command(*reproduce_flags(args))
            console.print()
            console.print(plain("the whole run:  ", (f"{again} --trace", "cyan")))
            console.print(plain("minimize it:    ", (again.replace("dst run", "dst shrink", 1), "cyan")))
        if args.check_determinism:
            if divergence is None:
                console.print(plain(("determinism", "bold green"),
                                    ": a second run in this process, and one in a fresh process with another "
                                    "PYTHONHASHSEED, gave the same trace"))
            else:
                console.print(plain(("determinism", "bold red"), f": {divergence.line()}"))
    if divergence is not None:
        return EXIT_VIOLATION
    return exit_code(result)


# --- dst shrink -----------------------------------------------------------------------------------

def dst_shrink(args: argparse.Namespace) -> int:
    from ..explore.record import minimize, record

    scenario = scenario_from(args)
    ready(Path(args.findings))
    shrunk = minimize(scenario, args.seed, use_swarm=args.swarm, max_runs=args.max_runs, seconds=args.time_budget)
    if shrunk is None:
        error(f"dst shrink: seed {args.seed} violates nothing: nothing to minimize")
        return EXIT_OK
    origin = {"scenario": scenario.source, "seed": args.seed, "swarm": args.swarm}
    recorded = record(shrunk, Path(args.findings), origin)
    v = shrunk.result.violation
    assert v is not None  # a shrunk run violates its invariant by construction
    summary = {"path": str(recorded.path), "new": recorded.written, "invariant": v.invariant, "message": v.message,
               "steps_before": shrunk.steps_before, "steps_after": shrunk.steps_after, "runs": shrunk.runs,
               "seconds": round(shrunk.seconds, 2), "stop": shrunk.stop.value,
               "consequences": [{"invariant": c.invariant, "time_ms": c.time, "message": c.message}
                                for c in shrunk.result.consequences]}
    if args.verbose:
        summary["passes"] = [{"pass": p.name, "tried": p.tried, "kept": p.kept, "seconds": round(p.seconds, 3),
                              "from_snapshot": p.snapshots} for p in shrunk.passes]
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        from ..present.terminal import plain, render_consequences

        console = rich_console()
        console.print(plain((v.invariant, "bold red"), f": {v.message}"))
        render_consequences(console, shrunk.result)
        console.print(f"minimized {shrunk.steps_before} steps to {shrunk.steps_after} in {shrunk.runs} runs, "
                      f"{shrunk.seconds:.1f}s ({shrunk.stop.value})")
        for step in shrunk.scenario.steps or ():
            console.print(plain(f"  {step.describe()}"))
        if args.verbose:
            console.print("passes (candidates tried, kept, their time; those run from a snapshot of the best run):")
            for p in shrunk.passes:
                console.print(plain(f"  {p.name:<18} {p.tried:>5} tried {p.kept:>4} kept {p.seconds:>7.2f}s"
                                    + (f" {p.snapshots:>5} from a snapshot" if p.snapshots else "")))
        verb = "wrote" if recorded.written else "already known as"
        console.print(plain(f"{verb} ", (str(recorded.path), "cyan")))
    return exit_code(shrunk.result)


# --- dst replay -----------------------------------------------------------------------------------

def dst_replay(args: argparse.Namespace) -> int:
    from ..findings import REPRODUCES, read, replay
    from ..present.terminal import plain, render_consequences, render_timeline

    console = rich_console()
    verdicts: list[dict[str, Any]] = []
    bad_input = False
    for name in args.files:
        try:
            finding = read(name, model=args.model)
        except FindingError as e:
            error(e.line())
            bad_input = True
            continue
        outcome = replay(finding)
        entry = {"file": name, "status": outcome.status, "invariant": finding.invariant,
                 "first_difference": outcome.first_difference, "explanation": outcome.explain(),
                 "consequences": [{"invariant": c.invariant, "time_ms": c.time, "message": c.message}
                                  for c in outcome.result.consequences]}
        event = outcome.differing_event
        if event is not None:
            entry["differing_event"] = format_event(event)
        verdicts.append(entry)
        if args.json:
            continue
        if not args.quiet:
            console.rule(plain(name))
            render_timeline(console, outcome.result, _replay_events(args, outcome.result))
            render_consequences(console, outcome.result)
        style = "bold green" if outcome.status == REPRODUCES else "bold red"
        console.print(plain((f"{name}: {outcome.explain()}", style)))
        if event is not None:
            console.print(plain(f"  first differing event ({outcome.first_difference}): {format_event(event)}"))
    if args.json:
        print(json.dumps(verdicts, indent=2))
    if bad_input:
        return EXIT_USAGE
    return EXIT_OK if all(v["status"] == REPRODUCES for v in verdicts) else EXIT_VIOLATION


def _replay_events(args: argparse.Namespace, result: RunResult) -> Sequence[Event]:
    """What a replay shows: the causal slice with every step of the finding (or, with ``--all`` or when
    nothing is violated any more, every event), narrowed to ``--actor`` and ``--last``."""
    events = result.trace if args.all or result.violation is None else result.causal(every_step=True)
    if args.actor:
        unknown = sorted(set(args.actor) - {e[1] for e in result.trace})
        if unknown:
            actors = ", ".join(sorted({e[1] for e in result.trace}, key=lane_order))
            raise UsageError(f"dst replay: --actor {one_line(unknown[0], 40)}: expected one of the run's actors "
                             f"({actors})")
        events = tuple(e for e in events if e[1] in args.actor)
    return events[-args.last:] if args.last else events


