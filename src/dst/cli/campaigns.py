"""The commands of a campaign: ``dst fuzz`` (many seeds, their violations grouped, a finding per new
signature) and ``dst merge`` (the reports of a campaign's shards as one report)."""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path

import attrs

from .._supervise import stopping
from ..explore.cluster import ClusterError, ClusterExecutor
from ..explore import report
from ..explore.fuzz import Outcome, Tally, campaign, count_seeds, drive, ended, seeds, tallied
from ..explore.pool import StopRequest, Terminated
from ..explore.recorder import Recorder
from ..explore.steer import Roster, default_campaign, one_scenario
from ..findings import ready
from ..scenario import Scenario
from .command import (EXIT_INTERRUPTED, EXIT_MODEL_ERROR, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE, EXIT_VIOLATION, UsageError,
                      scenario_from)
from .output import error, rich_console
from .parser import DEFAULT_WORKERS


# --- dst fuzz -------------------------------------------------------------------------------------

def _campaign_roster(args: argparse.Namespace) -> Roster:
    """What a campaign runs: the scenario given; with none, the default campaign (the embedded default and every
    scenario shipped for the model, steered by coverage), so the first campaign a user runs covers the whole model."""
    scenario = scenario_from(args)
    roster = one_scenario(scenario) if args.scenario is not None else default_campaign(scenario)
    return roster if args.branches is None else attrs.evolve(roster, branches=args.branches)


def dst_fuzz(args: argparse.Namespace) -> int:
    roster = _campaign_roster(args)
    scenarios = roster.scenarios
    if args.seeds:
        first, stop = args.seeds
    elif args.count:
        first, stop = 1, args.count + 1
    elif args.time_budget:
        first, stop = 1, None
    else:
        raise UsageError("dst fuzz: say how many seeds: --seeds A:B, --count N or --time-budget DURATION")
    _junit_ready(args)
    request = StopRequest()
    recorder = None if args.no_findings else _recorder(args, scenarios, request)
    cluster = _cluster(args)  # after every check of the input: reaching a cluster can take seconds
    workers = cluster.workers if cluster is not None else args.workers or DEFAULT_WORKERS
    started = time.monotonic()
    deadline = None if args.time_budget is None else started + args.time_budget
    total = None if stop is None else count_seeds(first, stop, args.shard)
    tally = Tally()
    interrupted = 0  # the exit code of the signal that stopped the campaign, if one did

    from ..present.terminal import FuzzProgress

    progress = FuzzProgress(rich_console(stderr=True), total=total, budget=args.time_budget, quiet=args.json)
    noted = workers > 1 or cluster is not None  # a pool or a cluster: a signal is only noted, and the campaign
    if noted:  # stops at its next safe point
        saved = {sig: signal.signal(sig, request) for sig in (signal.SIGINT, signal.SIGTERM)}
    outcomes = campaign(scenarios, seeds(first, stop, args.shard), use_swarm=args.swarm, workers=workers,
                        deadline=deadline, executor=cluster, stop=request, broad=roster.broad,
                        worlds=roster.worlds, branches=roster.branches)

    def each(outcome: Outcome, tally: Tally) -> bool:
        progress.update(tally, time.monotonic() - started)
        if recorder is not None and outcome.invariant is not None:
            recorder.consider(outcome)
        return bool(args.stop_on_first and (tally.violations or tally.model_errors))

    asked = False
    lost: ClusterError | None = None  # the cluster's failure that ended the campaign early, if one did
    try:
        with progress:
            asked = drive(outcomes, tally, each)
    except KeyboardInterrupt as halt:
        stopping()  # out of the model's code: closing the pool or the cluster and reporting is dst's own work
        interrupted = EXIT_TERMINATED if isinstance(halt, Terminated) else EXIT_INTERRUPTED
    except ClusterError as e:  # the cluster failed mid-campaign: what it ran, and the findings, are still reported
        lost = e
    finally:
        if cluster is not None:
            cluster.close()
        if noted:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
    wall = time.monotonic() - started

    result = tallied(tally, scenarios, args.swarm, ended(asked, deadline), wall)
    campaign_report = report.build(result, scenarios, first=first, stop=stop, shard=args.shard,
                                   interrupted=bool(interrupted) or lost is not None,
                                   findings=[] if recorder is None else recorder.findings())
    if not _publish(args, campaign_report):
        return EXIT_USAGE
    if lost is not None:
        error(f"{lost.line()} (the report above is of the seeds it ran before)")
        return EXIT_USAGE
    if tally.model_errors:
        return EXIT_MODEL_ERROR
    if tally.violations:
        return EXIT_VIOLATION
    return interrupted or EXIT_OK


def _recorder(args: argparse.Namespace, scenarios: tuple[Scenario, ...], request: StopRequest) -> Recorder:
    """What writes the campaign's findings, in a folder that can take them (said now, not after the minimizing)."""
    recorder = Recorder(Path(args.findings), scenarios, candidates=args.shrink_candidates, use_swarm=args.swarm,
                        stop_on_first=args.stop_on_first, stopped=request.is_set, on_error=error)
    ready(recorder.directory)
    return recorder


def _cluster(args: argparse.Namespace) -> ClusterExecutor | None:
    """The cluster of --cluster, connected and checked; None for local processes."""
    if args.cluster is None:
        return None
    if args.workers is not None:
        raise UsageError("dst fuzz: --cluster and --workers do not go together: the cluster's workers run the seeds")
    from ..explore.cluster import connect

    return connect(args.cluster)


def _junit_ready(args: argparse.Namespace) -> None:
    """A --junit file that could not be written is said before any seed runs."""
    from ..present.junit import junit_ready

    if args.junit is not None:
        junit_ready(args.junit)


def _publish(args: argparse.Namespace, campaign_report: report.Report) -> bool:
    """Print a campaign's report (``dst fuzz``'s or ``dst merge``'s) and write its --junit file; False (said
    in one line) when that file could not be written."""
    from ..present.junit import JUnitError, write_junit

    if args.json:
        print(report.dumps(campaign_report))
    else:
        from ..present.terminal import render_fuzz

        render_fuzz(rich_console(), campaign_report)
    if args.junit is not None:
        try:
            write_junit(args.junit, campaign_report)
        except JUnitError as e:
            error(e.line())
            return False
    return True


# --- dst merge ------------------------------------------------------------------------------------

def dst_merge(args: argparse.Namespace) -> int:
    from ..explore.merge import merge_reports

    _junit_ready(args)
    merged = merge_reports([report.read(name) for name in args.files])
    if not _publish(args, merged):
        return EXIT_USAGE
    if merged.get("model_errors", 0):
        return EXIT_MODEL_ERROR
    return EXIT_VIOLATION if merged["violations"] else EXIT_OK


