"""``dst show``: a finding's replay, one seed's run, or a campaign's report, written as one HTML page."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ..runner.reproduce import command as reproduce_command
from ..runner.swarm import swarm
from ..runner import run
from .command import EXIT_OK, UsageError, reproduce_flags, scenario_from
from .output import rich_console


# --- dst show -------------------------------------------------------------------------------------

def dst_show(args: argparse.Namespace) -> int:
    """Replay a finding (or run a seed) and write it as an HTML page; exit 0 once the page is written."""
    import shlex

    from ..present.terminal import plain
    from ..present.page import Source, check_output, default_name, page_data, render_page
    from ..sut import format_time

    if args.file is not None and (args.seed is not None or args.scenario is not None or args.bug or args.swarm):
        raise UsageError("dst show: give a finding file, or --seed N (with --scenario, --bug, --swarm), not both")
    if args.file is None and args.seed is None:
        raise UsageError("dst show: give a finding file to replay, or --seed N to run (see 'dst show --help')")
    if args.file is not None and args.file.endswith(".json"):
        return _show_campaign(args)
    if args.file is not None:
        from ..findings import read, replay

        finding = read(args.file, model=args.model)
        name = default_name(Path(args.file).stem)
    else:
        scenario = scenario_from(args)
        name = default_name(scenario.name, "seed", args.seed, *args.bug, "swarm" if args.swarm else "")
    path = args.output if args.output is not None else Path(name)
    if path != STDOUT:
        check_output(path, force=args.force)  # said now, before the run
    if args.file is not None:
        outcome = replay(finding)
        result, every_step = outcome.result, True
        again = f"dst replay {shlex.quote(args.file)}" + (f" --model {shlex.quote(args.model)}" if args.model else "")
        source = Source(args.file, again, outcome.explain())
    else:
        result, every_step = run(swarm(scenario, args.seed) if args.swarm else scenario, args.seed), False
        source = Source(f"{scenario.name}, seed {args.seed}",
                        reproduce_command(*reproduce_flags(args)))
    data = page_data(result, source, every_step=every_step)
    console = _deliver(path, render_page(data), args.force)
    v = result.violation
    bars = Counter(bar["what"] for bar in data["leases"])
    counts = [(len(data["events"]), "event"), (bars["lease"], "lease"), *([(bars["claim"], "claim")] if bars["claim"] else []),
              (len(data["faults"]), "fault"), (len(data["arrows"]), "message")]
    drawn = ", ".join(f"{n:,} {word}{'' if n == 1 else 's'}" for n, word in counts) + "; "
    said = f"{v.invariant} at t={format_time(v.time)}" if v is not None else result.outcome
    console.print(plain(drawn + said + (f" ({source.verdict})" if source.verdict else "")))
    return EXIT_OK


def _show_campaign(args: argparse.Namespace) -> int:
    """A campaign's report as a page: its coverage, what it never reached, what it found."""
    from ..explore import report
    from ..present.campaign_page import campaign_page
    from ..present.page import default_name

    _, campaign = report.read(args.file)
    path = args.output if args.output is not None else Path(default_name(Path(args.file).stem))
    _deliver(path, campaign_page(campaign), args.force)
    return EXIT_OK


STDOUT = Path("-")  # -o -: the page on standard output, and what dst says of it on standard error


def _deliver(path: Path, page: str, force: bool) -> Any:
    """Write the page where ``-o`` says, and say so; returns the console that said it (stderr when the page
    itself went to standard output)."""
    from ..present.page import write_page
    from ..present.terminal import plain

    if path == STDOUT:
        sys.stdout.write(page)
        sys.stdout.flush()
        return rich_console(stderr=True)
    write_page(path, page, force=force)
    console = rich_console()
    console.print(plain(("wrote ", "bold"), (str(path), "cyan")))
    return console


