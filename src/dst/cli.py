"""``dst`` subcommands: the only place that parses arguments and picks exit codes.

Exit codes: 0 no violation, 1 a violation (or a run that did not replay
identically under ``--check-determinism``), 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Sequence

import attrs

from . import __version__
from .runner import RunResult, run
from .model.bugs import KNOWN_BUGS
from .scenario import Scenario, ScenarioError, load_scenario
from .sim.trace import first_difference, format_event

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A bad flag or input: one line for the user, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not argparse's usage block
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _seed(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer seed, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer seed, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dst", description="Deterministic simulation testing for lease, lock, slot and deadline bookkeeping.")
    parser.add_argument("--version", action="version", version=f"dst {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("run", help="run one seeded simulation of a scenario")
    p.add_argument("--seed", type=_seed, default=1, help="the seed (default 1)")
    p.add_argument("--scenario", metavar="FILE", help="a scenario TOML file (default: the embedded default scenario)")
    p.add_argument("--bug", action="append", default=[], metavar="SLUG",
                   help="switch on a catalogue bug in the model (repeatable); adds to the scenario's bugs")
    p.add_argument("--json", action="store_true", help="print one JSON object (identical bytes for identical runs)")
    p.add_argument("--trace", action="store_true", help="also print the whole trace (in --json: a 'trace' array)")
    p.add_argument("--check-determinism", action="store_true",
                   help="run again in a fresh process with another PYTHONHASHSEED and compare the traces")
    p.set_defaults(handler=_cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except SystemExit as e:  # argparse's --help and --version
        return e.code if isinstance(e.code, int) else EXIT_OK
    except UsageError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    except ScenarioError as e:
        print(f"dst: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("dst: interrupted", file=sys.stderr)
        return 130


# --- dst run --------------------------------------------------------------------------------------

def _with_bugs(scenario: Scenario, slugs: list[str]) -> Scenario:
    for slug in slugs:
        if slug not in KNOWN_BUGS:
            raise UsageError(f"dst: --bug: unknown bug slug {slug!r}; known: {', '.join(KNOWN_BUGS)}")
    return attrs.evolve(scenario, bugs=tuple(dict.fromkeys(scenario.bugs + tuple(slugs))))


def _cmd_run(args: argparse.Namespace) -> int:
    scenario = _with_bugs(load_scenario(args.scenario), args.bug)
    started = time.perf_counter()
    result = run(scenario, args.seed)
    wall = time.perf_counter() - started

    divergence = None
    if args.check_determinism:
        divergence = _replay_elsewhere(args, result)

    if args.json:
        out = result.summary()
        if args.trace:
            out["trace"] = [list(e) for e in result.trace]
        if args.check_determinism:
            out["determinism"] = "identical" if divergence is None else divergence
        print(json.dumps(out, indent=2, sort_keys=False))
    else:
        from rich.console import Console

        from .render import render_events, render_run

        # Piped output keeps one event per line (rich would wrap at 80 columns).
        console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
        if args.trace:
            render_events(console, result.trace)
            console.print()
        render_run(console, scenario, result, wall)
        if args.check_determinism:
            if divergence is None:
                console.print("[bold green]determinism[/]: a fresh process with another PYTHONHASHSEED gave the same trace")
            else:
                console.print(f"[bold red]determinism[/]: {divergence}")
    if divergence is not None:
        return EXIT_VIOLATION
    return EXIT_OK if result.ok else EXIT_VIOLATION


def _replay_elsewhere(args: argparse.Namespace, result: RunResult) -> str | None:
    """Run the same seed in a new interpreter with another hash seed; describe the first difference."""
    command = [sys.executable, "-m", "dst", "run", "--seed", str(args.seed), "--json", "--trace"]
    if args.scenario:
        command += ["--scenario", args.scenario]
    for slug in args.bug:
        command += ["--bug", slug]
    env = dict(os.environ, PYTHONHASHSEED=str((args.seed * 7919 + 17) % 4294967295 or 1))
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode not in (EXIT_OK, EXIT_VIOLATION):
        return f"the second run failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
    other = json.loads(done.stdout)
    if other["trace_digest"] == result.digest:
        return None
    theirs = [tuple(e) for e in other["trace"]]
    diff = first_difference(list(result.trace), theirs)  # type: ignore[arg-type]
    if diff is None:
        return "the trace digests differ but the traces are equal"
    index, mine, their = diff
    show = lambda e: "(no event)" if e is None else format_event(e)  # noqa: E731
    return f"the runs diverge at trace event {index}: first run {show(mine)} | second run {show(their)}"
