"""The ``dst`` command's argument tree and its flag types: one line for a bad flag, never argparse's usage block."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import NoReturn

from ..version import __version__
from ..explore.fuzz import Shard
from ..models import DEFAULT_IMPL
from ..plan import Branch
from ..runner.swarm import DENSER_AT_MOST, ENABLE, ENABLE_CHANCE, ENABLE_RATE, WORLDS
from ..text import parse_duration, shorten
from .command import UsageError

MAX_WORKERS = 1024
DEFAULT_WORKERS = min(os.cpu_count() or 1, MAX_WORKERS)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


# --- argument types ---------------------------------------------------------------------------------

def _whole(text: str) -> int | None:
    """A number in decimal digits, or None (other characters, or more digits than Python converts: 4,300)."""
    if not re.fullmatch(r"[0-9]+", text):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _seed(text: str) -> int:
    seed = _whole(text)
    if seed is None:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer seed, got {shorten(text)}")
    return seed


def _positive(text: str) -> int:
    n = _whole(text)
    if n is None or n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {shorten(text)}")
    return n


def _count(text: str) -> int:
    n = _whole(text)
    if n is None or n > 64:  # each a run: a slip of a digit is not a request for more
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 64, got {shorten(text)}")
    return n


def _workers(text: str) -> int:
    n = _whole(text)
    if n is None or not 1 <= n <= MAX_WORKERS:  # each is a process: a slip of a digit is not a request for more
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to {MAX_WORKERS:,}, got {shorten(text)}")
    return n


def _seed_range(text: str) -> tuple[int, int]:
    first, _, stop = text.partition(":")
    a, b = _whole(first), _whole(stop)
    if a is None or b is None or a >= b:
        raise argparse.ArgumentTypeError(f"expected A:B with A < B (seeds A up to B-1), got {shorten(text)}")
    return a, b


def _shard(text: str) -> Shard:
    index, _, count = text.partition("/")
    k, n = _whole(index), _whole(count)
    if k is None or n is None or not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N, got {shorten(text)}")
    return Shard(k, n)


def _branch(text: str) -> Branch:
    try:
        return Branch.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _seconds(text: str) -> float:
    try:
        ms = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if ms <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration above zero, got {text!r}")
    return ms / 1000


# --- the parser ---------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dst",
                     description="Deterministic simulation testing for lease, lock, slot and deadline bookkeeping.")
    parser.add_argument("--version", action="version", version=f"dst {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def model_option(p: argparse.ArgumentParser, what: str) -> None:
        p.add_argument("--model", metavar="IMPL",
                       help=f"run this model instead of the one {what} names: an importable name such as "
                            f"'package.module:model' (importing it runs its code)")

    def scenario_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--scenario", metavar="FILE",
                       help="a scenario TOML file, or the name of a scenario shipped with dst: 'default', 'runs' or a "
                            "bug's slug (default: the embedded default, scenarios/default.toml)")
        model_option(p, "the scenario")
        p.add_argument("--bug", action="append", default=[], metavar="SLUG",
                       help="switch on one of the model's bugs (repeatable); adds to the scenario's bugs ('dst bugs' "
                            "lists them)")
        p.add_argument("--no-bugs", action="store_true",
                       help="switch off the bugs the scenario names (--bug still switches its own on): a shipped "
                            "bug's scenario run on the correct model, as the default campaign runs it")
        p.add_argument("--enable", action="append", default=[], metavar="KIND", choices=ENABLE,
                       help=f"turn on a fault kind the scenario leaves off (repeatable; {', '.join(ENABLE)}), as the "
                            f"default campaign of a model of your own runs it: a scheduled kind at "
                            f"{ENABLE_RATE:g} a minute, a pinned one (the slow store, a store reset, a reset, a "
                            f"retrying proxy) at a chance of {ENABLE_CHANCE:g} a round trip or request")
        p.add_argument("--aim", action="store_true",
                       help="aim half of each fault kind the scenario enables (and leaves unaimed) at the model's "
                            "sensitive moments, as the default campaign runs half its scenarios")
        p.add_argument("--world", choices=tuple(WORLDS), metavar="SIZE",
                       help=f"run the scenario in a smaller world ({', '.join(WORLDS)}: at most "
                            + ", ".join(f"{c} clients, {j} jobs, {ms // 1000} s" for c, j, ms in WORLDS.values())
                            + f"; as many faults as the full run, at most {DENSER_AT_MOST} times as dense), as "
                            "the default campaign of a model of your own starts")

    def branch_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--branch", type=_branch, metavar="AT/DRAW",
                       help="run the seed's branch DRAW (1, 2, ...) off its own run at AT (183457ms): every draw from "
                            "then on afresh, as a campaign explores the futures of a risky moment")

    def junit_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--junit", metavar="FILE", type=Path,
                       help="also write the report as JUnit XML to FILE (a failing test case per signature)")

    p = sub.add_parser("run", help="run one seeded simulation of a scenario")
    p.add_argument("--seed", type=_seed, default=1, help="the seed: a non-negative integer (default 1)")
    scenario_options(p)
    p.add_argument("--swarm", action="store_true",
                   help="let the seed pick which of the scenario's faults are on, how often, and the server's "
                        "scheduler, as dst fuzz does (the commands a campaign prints to reproduce a seed carry it)")
    branch_option(p)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object instead: no wall-clock figures in it, so two runs of a seed print "
                        "identical bytes")
    p.add_argument("--trace", action="store_true",
                   help="also print every event of the run, not only those that led to a violation (in --json: a "
                        "'trace' array)")
    p.add_argument("--check-determinism", action="store_true",
                   help="run the seed again in this process (state a model keeps between runs shows here), then in "
                        "a fresh interpreter with another PYTHONHASHSEED, and compare the traces; on a divergence, "
                        "name the first differing event and exit 1")

    p = sub.add_parser("fuzz", help="run many seeds and group the violations found")
    scenario_options(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--seeds", type=_seed_range, metavar="A:B", help="seeds A to B-1")
    which.add_argument("--count", type=_positive, metavar="N", help="seeds 1 to N")
    p.add_argument("--time-budget", type=_seconds, metavar="DURATION",
                   help="stop starting seeds after this, e.g. 90s (those running finish); alone, seeds from 1 "
                        "until it passes")
    p.add_argument("--shard", type=_shard, metavar="K/N", help="only the seeds s with s %% N == K-1 (CI job K of N)")
    p.add_argument("--workers", type=_workers, metavar="N",
                   help="parallel processes (default: the number of cores); results do not depend on it")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run the seeds on the Dask cluster whose scheduler is at ADDRESS (tcp://HOST:8786) instead "
                        "of local processes; same results (needs the cluster extra; see docs/cluster.md)")
    p.add_argument("--no-swarm", dest="swarm", action="store_false",
                   help="run every seed with the scenario's faults as written (default: each seed picks which are "
                        "on, how often, and the server's scheduler: swarm testing)")
    p.add_argument("--branches", type=_count, metavar="N",
                   help="the most branches each seed's first risky moment gets, run from there with new draws (a "
                        "situation the campaign rarely reaches gets N, a common one fewer); 0: none. Default: 4 for a "
                        "real service (an asyncio system), 0 for a model of the coroutine seam")
    p.add_argument("--stop-on-first", action="store_true", help="stop at the first violation")
    p.add_argument("--findings", metavar="DIR", default="findings",
                   help="where to write a minimized finding per new signature (default: findings)")
    p.add_argument("--no-findings", action="store_true", help="do not minimize or write findings")
    p.add_argument("--shrink-candidates", type=_positive, default=1, metavar="K",
                   help="minimize the first K seeds of each signature and keep the smallest (default 1)")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON: the schema dst merge reads and dst show draws")
    junit_option(p)

    p = sub.add_parser("merge", help="combine the --json reports of a campaign's shards into one report")
    p.add_argument("files", nargs="+", metavar="FILE", help="what 'dst fuzz --shard K/N --json' printed, one per shard")
    p.add_argument("--json", action="store_true", help="print the merged report as JSON, in the schema of 'dst fuzz --json'")
    junit_option(p)

    p = sub.add_parser("shrink", help="minimize one violating seed and write it as a finding")
    p.add_argument("--seed", type=_seed, required=True, help="the violating seed")
    scenario_options(p)
    p.add_argument("--swarm", action="store_true", help="the seed's swarm choices, as dst fuzz ran it")
    branch_option(p)
    p.add_argument("--findings", metavar="DIR", default="findings", help="where to write it (default: findings)")
    p.add_argument("--max-runs", type=_positive, default=3000, metavar="N",
                   help="the minimizer's budget of runs (default 3000)")
    p.add_argument("--time-budget", type=_seconds, default=120.0, metavar="DURATION",
                   help="the minimizer's time budget (default 120s)")
    p.add_argument("--verbose", action="store_true",
                   help="also what each pass of the minimizer did: candidates tried, kept, and their time")
    p.add_argument("--json", action="store_true", help="print a JSON summary")

    p = sub.add_parser("replay", help="re-run findings exactly and say whether they still reproduce")
    p.add_argument("files", nargs="+", metavar="FILE", help="finding files (findings/NNN-....toml)")
    model_option(p, "each finding")
    p.add_argument("--quiet", action="store_true", help="only the verdicts, no timelines")
    p.add_argument("--all", action="store_true",
                   help="every event of the run (default: the events that led to the violation, its causal slice)")
    p.add_argument("--actor", action="append", default=[], metavar="NAME",
                   help="only the events of this actor (c1, server, net, resource, user; repeatable)")
    p.add_argument("--last", type=_positive, metavar="N", help="only the last N events shown")
    p.add_argument("--json", action="store_true", help="print a JSON report")

    p = sub.add_parser("show", help="draw a finding's replay, one seed's run, or a campaign's report as one "
                                    "self-contained HTML page")
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="a finding file to replay and draw, or a campaign's report (what 'dst fuzz --json' or "
                        "'dst merge --json' printed, a .json file) to draw its coverage; or give --seed")
    p.add_argument("--seed", type=_seed, help="run this seed and draw it, instead of a finding")
    scenario_options(p)
    p.add_argument("--swarm", action="store_true", help="the seed's swarm choices, as dst fuzz ran it")
    branch_option(p)
    p.add_argument("-o", "--output", metavar="FILE", type=Path,
                   help="where to write the page; '-' for standard output (default: "
                        "'dst-show-<finding or run>.html' in this folder)")
    p.add_argument("--force", action="store_true",
                   help="replace FILE even if it is not a page dst show wrote (one it wrote is always replaced)")

    p = sub.add_parser("bugs", help="list the bugs a model can switch on: what each breaks, and its story")
    p.add_argument("--model", metavar="IMPL", default=DEFAULT_IMPL,
                   help="whose bugs (default: the reference model, the bug catalogue)")
    p.add_argument("--json", action="store_true", help="print them as JSON")

    p = sub.add_parser("selftest", help="prove every bug of a model is found and its correct form is never accused")
    p.add_argument("--model", metavar="IMPL", default=DEFAULT_IMPL,
                   help="whose bugs to hunt: an importable name (default: the reference model, "
                        "the bug catalogue); importing it runs its code")
    p.add_argument("--bug", action="append", default=[], metavar="SLUG", help="only these slugs (repeatable)")
    p.add_argument("--max-seeds", type=_positive, default=2000, metavar="N", help="seeds per bug (default 2000)")
    p.add_argument("--time-budget", type=_seconds, default=60.0, metavar="DURATION",
                   help="wall time per bug (default 60s)")
    p.add_argument("--clean-seeds", type=_positive, default=100, metavar="N",
                   help="seeds per scenario with its bug switched off (default 100)")
    p.add_argument("--workers", type=_workers, default=DEFAULT_WORKERS, metavar="N",
                   help="parallel processes (default: the number of cores)")
    p.add_argument("--no-swarm", dest="swarm", action="store_false", help="run the scenarios as written")
    p.add_argument("--findings", metavar="DIR", help="also minimize each bug's violation and write it as a finding here")
    p.add_argument("--shrink-candidates", type=_positive, default=3, metavar="K",
                   help="with --findings: minimize the first K violations of each bug, keep the smallest (default 3)")
    p.add_argument("--json", action="store_true", help="print a JSON report")
    return parser

