"""``dst`` subcommands: the only place that parses arguments and picks exit codes.

Exit codes: 0 no violation (``replay``: every finding reproduces exactly); 1 a violation
(``run --check-determinism``: a run that did not replay identically; ``selftest``: a bug
missed or a false alarm; ``replay``: a finding that no longer reproduces or diverged);
2 a usage or input error (a bad flag, scenario or finding file), or output that cannot be
written (a full disk, an I/O error, standard output closed: said in one line); 130 a campaign
interrupted before it found anything (Ctrl-C; 143 for SIGTERM); 141 a reader that went away
(``dst run --trace | head``: the output stops quietly, as a tool that SIGPIPE ends, and the
verdict is not given: 141 whatever it would have been).

Every error is one line on stderr, ``dst: <file>: <key>: expected ...``, never a traceback; text
from outside dst (names, paths, messages) is printed as text: never read as rich markup, and
with control characters shown as escapes (``\\x1b``) rather than sent to the terminal.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn, Sequence, TextIO, cast

import attrs

from .version import __version__
from .explore.fuzz import (SEEDS_SHOWN, FuzzResult, Outcome, Shard, StopRequest, Tally, Terminated, campaign,
                          count_seeds, drive, ended, pick, seeds, tallied, worker_pool)
from .errors import UserError
from .explore.cluster import ClusterError, ClusterExecutor
from .runner.reproduce import command as reproduce_command
from .runner.swarm import swarm
from .findings import FindingError, ready
from .models import DEFAULT_IMPL, ModelError, resolve
from .plan import parse_duration, shorten
from .runner import RunResult, check, run
from .scenario import Scenario, load_scenario, one_line
from .sim.trace import Event, first_difference, format_event

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool that a closed pipe ended
_LINE_LIMIT = 1000  # characters of an error line, whatever the text it quotes
MAX_WORKERS = 1024
DEFAULT_WORKERS = min(os.cpu_count() or 1, MAX_WORKERS)


class UsageError(UserError):
    """A bad flag or input: one line for the user, exit code 2."""

    prefix = ""  # its message names the command itself


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
        p.add_argument("--scenario", metavar="FILE", help="a scenario TOML file (default: the embedded default)")
        model_option(p, "the scenario")
        p.add_argument("--bug", action="append", default=[], metavar="SLUG",
                       help="switch on one of the model's bugs (repeatable); adds to the scenario's bugs")

    def junit_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--junit", metavar="FILE", type=Path,
                       help="also write the report as JUnit XML to FILE (a failing test case per signature)")

    p = sub.add_parser("run", help="run one seeded simulation of a scenario")
    p.add_argument("--seed", type=_seed, default=1, help="the seed (default 1)")
    scenario_options(p)
    p.add_argument("--swarm", action="store_true", help="let the seed pick which faults are on, as dst fuzz does")
    p.add_argument("--json", action="store_true", help="print one JSON object (identical bytes for identical runs)")
    p.add_argument("--trace", action="store_true", help="also print the whole trace (in --json: a 'trace' array)")
    p.add_argument("--check-determinism", action="store_true",
                   help="run again in a fresh process with another PYTHONHASHSEED and compare the traces")
    p.set_defaults(handler=_cmd_run)

    p = sub.add_parser("fuzz", help="run many seeds and group the violations found")
    scenario_options(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--seeds", type=_seed_range, metavar="A:B", help="seeds A to B-1")
    which.add_argument("--count", type=_positive, metavar="N", help="seeds 1 to N")
    p.add_argument("--time-budget", type=_seconds, metavar="DURATION", help="stop starting seeds after this, e.g. 90s")
    p.add_argument("--shard", type=_shard, metavar="K/N", help="only the seeds s with s %% N == K-1 (CI job K of N)")
    p.add_argument("--workers", type=_workers, metavar="N",
                   help="parallel processes (default: the number of cores); results do not depend on it")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run the seeds on the Dask cluster whose scheduler is at ADDRESS (tcp://HOST:8786) instead "
                        "of local processes; same results (needs the cluster extra; see docs/cluster.md)")
    p.add_argument("--no-swarm", dest="swarm", action="store_false",
                   help="run every seed with the scenario's faults as written (default: each seed picks them)")
    p.add_argument("--stop-on-first", action="store_true", help="stop at the first violation")
    p.add_argument("--findings", metavar="DIR", default="findings",
                   help="where to write a minimized finding per new signature (default: findings)")
    p.add_argument("--no-findings", action="store_true", help="do not minimize or write findings")
    p.add_argument("--shrink-candidates", type=_positive, default=1, metavar="K",
                   help="minimize the first K seeds of each signature and keep the smallest (default 1)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    junit_option(p)
    p.set_defaults(handler=_cmd_fuzz)

    p = sub.add_parser("merge", help="combine the --json reports of a campaign's shards into one report")
    p.add_argument("files", nargs="+", metavar="FILE", help="what 'dst fuzz --shard K/N --json' printed, one per shard")
    p.add_argument("--json", action="store_true", help="print the merged report as JSON (dst fuzz --json's schema)")
    junit_option(p)
    p.set_defaults(handler=_cmd_merge)

    p = sub.add_parser("shrink", help="minimize one violating seed and write it as a finding")
    p.add_argument("--seed", type=_seed, required=True, help="the violating seed")
    scenario_options(p)
    p.add_argument("--swarm", action="store_true", help="the seed's swarm choices, as dst fuzz ran it")
    p.add_argument("--findings", metavar="DIR", default="findings", help="where to write it (default: findings)")
    p.add_argument("--max-runs", type=_positive, default=3000, metavar="N", help="minimizer run budget (default 3000)")
    p.add_argument("--time-budget", type=_seconds, default=120.0, metavar="DURATION",
                   help="minimizer time budget (default 120s)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(handler=_cmd_shrink)

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
    p.set_defaults(handler=_cmd_replay)

    p = sub.add_parser("show", help="draw a finding's replay, one seed's run, or a campaign's report as one "
                                    "self-contained HTML page")
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="a finding file to replay and draw, or a campaign's report (what dst fuzz --json or "
                        "dst merge --json printed, a .json file) to draw its coverage; or give --seed")
    p.add_argument("--seed", type=_seed, help="run this seed and draw it, instead of a finding")
    scenario_options(p)
    p.add_argument("--swarm", action="store_true", help="the seed's swarm choices, as dst fuzz ran it")
    p.add_argument("-o", "--output", metavar="FILE", type=Path,
                   help="where to write the page (default: dst-show-<finding or run>.html in this folder)")
    p.add_argument("--force", action="store_true",
                   help="replace FILE even if it is not a page dst show wrote (one it wrote is always replaced)")
    p.set_defaults(handler=_cmd_show)

    p = sub.add_parser("bugs", help="list the bugs a model can switch on: what each breaks, and its story")
    p.add_argument("--model", metavar="IMPL", default=DEFAULT_IMPL,
                   help="whose bugs (default: the reference model, the bug catalogue)")
    p.add_argument("--json", action="store_true", help="print them as JSON")
    p.set_defaults(handler=_cmd_bugs)

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
    p.set_defaults(handler=_cmd_selftest)
    return parser


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()  # SIGTERM stops dst as Ctrl-C does: cleanly, with what it has so far


def main(argv: Sequence[str] | None = None) -> int:
    """The ``dst`` command; returns its exit code. Standard output is flushed here, not at the interpreter's
    exit, so a write that fails is said (or, for a closed pipe, silenced) while the exit code can still say so."""
    out, err = sys.stdout, sys.stderr
    sys.stderr = _Stream.around(err, "errors") if err is not None else io.StringIO()  # 2>&-: nowhere to say anything
    try:
        if out is None:  # >&-: no result could be seen, so nothing is run
            _error("dst: cannot write output: standard output is closed")
            return EXIT_USAGE
        sys.stdout = _Stream.around(out, "output")
        try:
            code = _main(argv)
            sys.stdout.flush()
            return code
        except _OutputError as e:
            # The interpreter flushes again at exit: that must go nowhere rather than fail with a traceback.
            _silence(out if e.stream == "output" else err)
            if e.broken_pipe:
                return EXIT_BROKEN_PIPE
            _error(f"dst: cannot write {e.stream}: {e.why}")
            return EXIT_USAGE
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: Sequence[str] | None) -> int:
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except SystemExit as e:  # argparse's --help and --version
        return e.code if isinstance(e.code, int) else EXIT_OK
    except UserError as e:  # a bad flag, file, model, folder, page, shard or cluster: one line, exit 2
        _error(e.line())
        return EXIT_USAGE
    except Terminated:
        _error("dst: terminated")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        _error("dst: interrupted")
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)


def _error(line: str) -> None:
    """One line on stderr, safe to print (``one_line``); a stderr that cannot take it has nowhere to say so."""
    try:
        print(one_line(line, _LINE_LIMIT), file=sys.stderr)
        sys.stderr.flush()
    except _OutputError:
        pass


class _OutputError(Exception):
    """Standard output or error cannot take what dst writes: a full disk, an I/O error, a closed pipe."""

    def __init__(self, stream: str, error: OSError) -> None:
        super().__init__(stream, error)
        self.stream, self.why = stream, error.strerror or type(error).__name__
        self.broken_pipe = isinstance(error, BrokenPipeError)


class _Stream:
    """``sys.stdout`` or ``sys.stderr`` as dst writes to it: a character the stream's encoding cannot hold
    is written as its escape (``PYTHONIOENCODING=ascii``), and a failed write is an :class:`_OutputError`,
    told apart from any other OSError a run might raise. Everything else is the stream's own."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self._stream, self._name = stream, name

    @classmethod
    def around(cls, stream: TextIO, name: str) -> TextIO:
        return cast(TextIO, cls(stream, name))  # a TextIO in all it is asked for: write, flush, the rest passed on

    def write(self, text: str) -> int:
        try:
            try:
                return self._stream.write(text)
            except UnicodeEncodeError:  # raised before anything is written: the text again, escaped
                encoding = self._stream.encoding or "utf-8"
                return self._stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        except OSError as e:
            raise _OutputError(self._name, e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            raise _OutputError(self._name, e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _silence(stream: TextIO | None) -> None:
    """Point the stream's descriptor at /dev/null, as the Python docs advise on SIGPIPE: what is still
    buffered then goes nowhere at exit instead of failing again."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):  # not a real file (in-process: a test's capture)
        return
    if fd >= 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped output keeps one event per line (rich would wrap at 80 columns). No markup and no emoji codes
    # in strings: what dst prints with a style is a rich.text.Text, so a name like "[/]" or ":bug:" stays as written.
    return Console(file=stream, highlight=False, markup=False, emoji=False, soft_wrap=True,
                   width=None if stream.isatty() else 200)


def _check_slugs(slugs: list[str], impl: str) -> None:
    try:
        known = [bug.slug for bug in resolve(impl).bugs]
    except ModelError as e:
        raise UsageError(f"dst: --model: {e}") from None
    for slug in slugs:
        if slug not in known:
            raise UsageError(f"dst: --bug: unknown bug slug {slug!r} of {impl}; known: {', '.join(known) or 'none'}")


def _scenario(args: argparse.Namespace) -> Scenario:
    if args.model is not None:
        try:
            resolve(args.model)
        except ModelError as e:
            raise UsageError(f"dst: --model: {e}") from None
    scenario = load_scenario(args.scenario, model=args.model)
    _check_slugs(args.bug, scenario.model.impl)
    scenario = attrs.evolve(scenario, bugs=tuple(dict.fromkeys(scenario.bugs + tuple(args.bug))))
    check(scenario)  # keys that contradict the model's bounds are said now, before any run
    return scenario


# --- dst run --------------------------------------------------------------------------------------

def _cmd_run(args: argparse.Namespace) -> int:
    scenario = _scenario(args)
    if args.swarm:
        scenario = swarm(scenario, args.seed)
    started = time.perf_counter()
    result = run(scenario, args.seed)
    wall = time.perf_counter() - started

    divergence = (_replay_here(scenario, args.seed, result) or _replay_elsewhere(args, result)
                  if args.check_determinism else None)

    if args.json:
        out = result.summary()
        if args.trace:
            out["trace"] = [list(e) for e in result.trace]
        if args.check_determinism:
            out["determinism"] = "identical" if divergence is None else divergence
        print(json.dumps(out, indent=2))
    else:
        from .present.terminal import plain, render_events, render_run

        console = _console()
        if args.trace:
            render_events(console, result.trace)
            console.print()
        render_run(console, scenario, result, wall)
        if not result.ok:
            again = reproduce_command(args.seed, args.scenario, args.bug, args.swarm, args.model)
            console.print()
            console.print(plain("the whole run:  ", (f"{again} --trace", "cyan")))
            console.print(plain("minimize it:    ", (again.replace("dst run", "dst shrink", 1), "cyan")))
        if args.check_determinism:
            if divergence is None:
                console.print(plain(("determinism", "bold green"),
                                    ": a second run in this process, and one in a fresh process with another "
                                    "PYTHONHASHSEED, gave the same trace"))
            else:
                console.print(plain(("determinism", "bold red"), f": {divergence}"))
    if divergence is not None:
        return EXIT_VIOLATION
    return EXIT_OK if result.ok else EXIT_VIOLATION


def _replay_here(scenario: Scenario, seed: int, result: RunResult) -> str | None:
    """Run the same seed again in this process: what a run leaves behind (a module global, a singleton the
    model's build or restart does not reset) shows as a divergence here."""
    again = run(scenario, seed)
    if again.digest == result.digest:
        return None
    return _divergence("a second run in the same process", list(result.trace), list(again.trace),
                       " (state kept between runs: a module global or singleton the model does not reset)")


def _divergence(what: str, mine: list[Any], theirs: list[Any], why: str = "") -> str:
    diff = first_difference(mine, theirs)
    if diff is None:
        return "the trace digests differ but the traces are equal"
    index, a, b = diff

    def show(e: Any) -> str:
        return "(no event)" if e is None else format_event(e)

    return f"{what} diverges at trace event {index}: first run {show(a)} | {what} {show(b)}{why}"


def _replay_elsewhere(args: argparse.Namespace, result: RunResult) -> str | None:
    """Run the same seed in a new interpreter with another hash seed; describe the first difference."""
    command = reproduce_command(args.seed, args.scenario, args.bug, args.swarm, args.model).split()[1:]
    command = [sys.executable, "-m", "dst", *command, "--json", "--trace"]
    env = dict(os.environ, PYTHONHASHSEED=str((args.seed * 7919 + 17) % 4294967295 or 1))
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode not in (EXIT_OK, EXIT_VIOLATION):
        lines = done.stderr.strip().splitlines()
        return f"the second run failed: {lines[-1] if lines else done.returncode}"
    other = json.loads(done.stdout)
    if other["trace_digest"] == result.digest:
        return None
    return _divergence("a fresh process", list(result.trace), [tuple(e) for e in other["trace"]])


# --- dst fuzz -------------------------------------------------------------------------------------

def _campaign_scenarios(args: argparse.Namespace) -> tuple[Scenario, ...]:
    """What a campaign runs: the scenario given; with none (and the reference model), the embedded default
    and the embedded ``runs`` scenario in turns, so the first campaign a user runs covers the whole model."""
    scenario = _scenario(args)
    if args.scenario is not None or args.model is not None:
        return (scenario,)
    return scenario, attrs.evolve(load_scenario("runs"), bugs=scenario.bugs)


def _cmd_fuzz(args: argparse.Namespace) -> int:
    scenarios = _campaign_scenarios(args)
    if args.seeds:
        first, stop = args.seeds
    elif args.count:
        first, stop = 1, args.count + 1
    elif args.time_budget:
        first, stop = 1, None
    else:
        raise UsageError("dst fuzz: say how many seeds: --seeds A:B, --count N or --time-budget DURATION")
    _junit_ready(args)
    recorder = None if args.no_findings else _Recorder(args, scenarios)
    if recorder is not None:
        ready(recorder.directory)  # a folder that cannot take a finding is said now, not after the minimizing
    cluster = _cluster(args)  # after every check of the input: reaching a cluster can take seconds
    workers = cluster.workers if cluster is not None else args.workers or DEFAULT_WORKERS
    started = time.monotonic()
    deadline = None if args.time_budget is None else started + args.time_budget
    total = None if stop is None else count_seeds(first, stop, args.shard)
    tally = Tally()
    interrupted = 0  # the exit code of the signal that stopped the campaign, if one did

    from .present.terminal import FuzzProgress

    progress = FuzzProgress(_console(stderr=True), total=total, budget=args.time_budget, quiet=args.json)
    request = StopRequest()
    noted = workers > 1 or cluster is not None  # a pool or a cluster: a signal is only noted, and the campaign
    if noted:  # stops at its next safe point
        saved = {sig: signal.signal(sig, request) for sig in (signal.SIGINT, signal.SIGTERM)}
    outcomes = campaign(scenarios, seeds(first, stop, args.shard), use_swarm=args.swarm, workers=workers,
                        deadline=deadline, executor=cluster, stop=request)

    def each(outcome: Outcome, tally: Tally) -> bool:
        progress.update(tally, time.monotonic() - started)
        if recorder is not None and outcome.invariant is not None:
            recorder.consider(outcome, tally)
        return bool(args.stop_on_first and tally.violations)

    asked = False
    lost: ClusterError | None = None  # the cluster's failure that ended the campaign early, if one did
    try:
        with progress:
            asked = drive(outcomes, tally, each)
    except KeyboardInterrupt as halt:
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
    report = _fuzz_report(args, scenarios, result, bool(interrupted) or lost is not None, first, stop)
    report["findings"] = [] if recorder is None else recorder.report()
    if not _publish(args, report):
        return EXIT_USAGE
    if lost is not None:
        _error(f"dst: {lost} (the report above is of the seeds it ran before)")
        return EXIT_USAGE
    if tally.violations:
        return EXIT_VIOLATION
    return interrupted or EXIT_OK


def _cluster(args: argparse.Namespace) -> ClusterExecutor | None:
    """The cluster of --cluster, connected and checked; None for local processes."""
    if args.cluster is None:
        return None
    if args.workers is not None:
        raise UsageError("dst fuzz: --cluster and --workers do not go together: the cluster's workers run the seeds")
    from .explore.cluster import connect

    return connect(args.cluster)


def _junit_ready(args: argparse.Namespace) -> None:
    """A --junit file that could not be written is said before any seed runs."""
    from .present.junit import junit_ready

    if args.junit is not None:
        junit_ready(args.junit)


def _publish(args: argparse.Namespace, report: dict[str, Any]) -> bool:
    """Print a campaign's report (``dst fuzz``'s or ``dst merge``'s) and write its --junit file; False (said
    in one line) when that file could not be written."""
    from .present.junit import JUnitError, write_junit

    if args.json:
        print(json.dumps(report, indent=2))
    else:
        from .present.terminal import render_fuzz

        render_fuzz(_console(), report)
    if args.junit is not None:
        try:
            write_junit(args.junit, report)
        except JUnitError as e:
            _error(f"dst: {e}")
            return False
    return True


# What a report says in place of a command when none runs the seed again (its scenario file changed meanwhile).
_NO_COMMAND = "none: the scenario file changed since the campaign loaded it"


def _fuzz_report(args: argparse.Namespace, scenarios: tuple[Scenario, ...], result: FuzzResult, interrupted: bool,
                 first: int, stop: int | None) -> dict[str, Any]:
    return {
        "scenario": " + ".join(result.scenarios),
        "source": " + ".join(s.source for s in scenarios),
        "model": scenarios[0].model.impl,
        "bugs": list(scenarios[0].bugs),
        "swarm": args.swarm,
        "seeds": {"first": first, "stop": stop, "shard": None if args.shard is None else f"{args.shard.index}/{args.shard.count}",
                  "last_run": result.last_seed},
        "seeds_run": result.seeds_run,
        "events": result.events,
        "violations": result.violations,
        "interrupted": bool(interrupted),
        "wall_seconds": result.wall_seconds,
        "seeds_per_second": round(result.seeds_run / result.wall_seconds, 1) if result.wall_seconds > 0 else None,
        "invariants": list(result.invariants),
        "signatures": [
            {
                "invariant": g.first.invariant,
                "signature": g.key,
                "count": g.count,
                "seeds": list(g.seeds[:SEEDS_SHOWN]),
                "first_seed": g.first.seed,
                "message": g.first.message,
                "time_ms": g.first.time,
                "reproduce": g.reproduce or _NO_COMMAND,
            }
            for g in result.signatures
        ],
        "unjudged": [
            {
                "kind": g.key,
                "count": g.count,
                "seeds": list(g.seeds[:SEEDS_SHOWN]),
                "first_seed": g.first.seed,
                "why": g.first.unjudged[1] if g.first.unjudged else "",
                "reproduce": g.reproduce or _NO_COMMAND,
            }
            for g in result.unjudged
        ],
        "coverage": result.coverage,
    }


class _Recorder:
    """Minimizes the first K seeds of each new signature as the campaign finds them, and writes the
    smallest as a finding, so an interrupted campaign keeps every finding it made."""

    def __init__(self, args: argparse.Namespace, scenarios: tuple[Scenario, ...]) -> None:
        self.args = args
        self.scenarios = scenarios
        self.directory = Path(args.findings)
        self.best: dict[str, Any] = {}  # signature -> smallest Shrunk so far
        self.tried: dict[str, int] = {}
        self.written: dict[str, Any] = {}  # signature -> Recorded

    def consider(self, outcome: Outcome, tally: Tally) -> None:
        from .explore.record import minimize

        sig = outcome.signature or ""
        if self.tried.get(sig, 0) >= self.args.shrink_candidates:
            return
        self.tried[sig] = self.tried.get(sig, 0) + 1
        shrunk = minimize(pick(self.scenarios, outcome.seed), outcome.seed, use_swarm=self.args.swarm)
        if shrunk is None:
            return
        best = self.best.get(sig)
        if best is None or shrunk.steps_after < best.steps_after:
            self.best[sig] = shrunk
        if self.tried[sig] == self.args.shrink_candidates or self.args.stop_on_first:
            self._write(sig)

    def _write(self, sig: str) -> None:
        from .explore.record import campaign_origin, record

        shrunk = self.best[sig]
        origin = campaign_origin(pick(self.scenarios, shrunk.seed), shrunk.seed, self.args.swarm, sig)
        self.written[sig] = record(shrunk, self.directory, origin)

    def report(self) -> list[dict[str, Any]]:
        for sig in self.best:  # candidates still pending when the campaign ended
            if sig not in self.written:
                self._write(sig)
        return [{"signature": sig, "path": str(r.path), "new": r.written, "steps_before": r.shrunk.steps_before,
                 "steps_after": r.shrunk.steps_after, "minimizer_runs": r.shrunk.runs,
                 "minimizer_seconds": round(r.shrunk.seconds, 2), "stop": r.shrunk.stop.value}
                for sig, r in self.written.items()]


# --- dst merge ------------------------------------------------------------------------------------

def _cmd_merge(args: argparse.Namespace) -> int:
    from .explore.merge import merge_reports, parse_report
    from .scenario import PATH_LIMIT, read_text

    _junit_ready(args)
    reports = []
    for name in args.files:
        where = one_line(name, PATH_LIMIT)
        reports.append((where, parse_report(read_text(name), where)))
    report = merge_reports(reports)
    if not _publish(args, report):
        return EXIT_USAGE
    return EXIT_VIOLATION if report["violations"] else EXIT_OK


# --- dst shrink -----------------------------------------------------------------------------------

def _cmd_shrink(args: argparse.Namespace) -> int:
    from .explore.record import minimize, record

    scenario = _scenario(args)
    ready(Path(args.findings))
    shrunk = minimize(scenario, args.seed, use_swarm=args.swarm, max_runs=args.max_runs, seconds=args.time_budget)
    if shrunk is None:
        _error(f"dst shrink: seed {args.seed} violates nothing: nothing to minimize")
        return EXIT_OK
    origin = {"scenario": scenario.source, "seed": args.seed, "swarm": args.swarm}
    recorded = record(shrunk, Path(args.findings), origin)
    v = shrunk.result.violation
    assert v is not None  # a shrunk run violates its invariant by construction
    summary = {"path": str(recorded.path), "new": recorded.written, "invariant": v.invariant, "message": v.message,
               "steps_before": shrunk.steps_before, "steps_after": shrunk.steps_after, "runs": shrunk.runs,
               "seconds": round(shrunk.seconds, 2), "stop": shrunk.stop.value}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        from .present.terminal import plain

        console = _console()
        console.print(plain((v.invariant, "bold red"), f": {v.message}"))
        console.print(f"minimized {shrunk.steps_before} steps to {shrunk.steps_after} in {shrunk.runs} runs, "
                      f"{shrunk.seconds:.1f}s ({shrunk.stop.value})")
        for step in shrunk.scenario.steps or ():
            console.print(plain(f"  {step.describe()}"))
        verb = "wrote" if recorded.written else "already known as"
        console.print(plain(f"{verb} ", (str(recorded.path), "cyan")))
    return EXIT_VIOLATION


# --- dst replay -----------------------------------------------------------------------------------

def _cmd_replay(args: argparse.Namespace) -> int:
    from .findings import REPRODUCES, read, replay
    from .present.terminal import plain, render_timeline

    console = _console()
    verdicts: list[dict[str, Any]] = []
    bad_input = False
    for name in args.files:
        try:
            finding = read(name, model=args.model)
        except FindingError as e:
            _error(f"dst: {e}")
            bad_input = True
            continue
        outcome = replay(finding)
        entry = {"file": name, "status": outcome.status, "invariant": finding.invariant,
                 "first_difference": outcome.first_difference, "explanation": outcome.explain()}
        event = outcome.differing_event
        if event is not None:
            entry["differing_event"] = format_event(event)
        verdicts.append(entry)
        if args.json:
            continue
        if not args.quiet:
            console.rule(plain(name))
            render_timeline(console, outcome.result, _replay_events(args, outcome.result))
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
        events = tuple(e for e in events if e[1] in args.actor)
    return events[-args.last:] if args.last else events


# --- dst show -------------------------------------------------------------------------------------

def _cmd_show(args: argparse.Namespace) -> int:
    """Replay a finding (or run a seed) and write it as an HTML page; exit 0 once the page is written."""
    import shlex

    from .present.terminal import plain
    from .present.page import Source, check_output, default_name, page_data, render_page, write_page
    from .sim.trace import format_time

    if args.file is not None and (args.seed is not None or args.scenario is not None or args.bug or args.swarm):
        raise UsageError("dst show: give a finding file, or --seed N (with --scenario, --bug, --swarm), not both")
    if args.file is None and args.seed is None:
        raise UsageError("dst show: give a finding file to replay, or --seed N to run (see 'dst show --help')")
    if args.file is not None and args.file.endswith(".json"):
        return _show_campaign(args)
    if args.file is not None:
        from .findings import read, replay

        finding = read(args.file, model=args.model)
        name = default_name(Path(args.file).stem)
    else:
        scenario = _scenario(args)
        name = default_name(scenario.name, "seed", args.seed, *args.bug, "swarm" if args.swarm else "")
    path = args.output if args.output is not None else Path(name)
    check_output(path, force=args.force)  # said now, before the run
    if args.file is not None:
        outcome = replay(finding)
        result, every_step = outcome.result, True
        again = f"dst replay {shlex.quote(args.file)}" + (f" --model {shlex.quote(args.model)}" if args.model else "")
        source = Source(args.file, again, outcome.explain())
    else:
        result, every_step = run(swarm(scenario, args.seed) if args.swarm else scenario, args.seed), False
        source = Source(f"{scenario.name}, seed {args.seed}",
                        reproduce_command(args.seed, args.scenario, args.bug, args.swarm, args.model))
    data = page_data(result, source, every_step=every_step)
    write_page(path, render_page(data), force=args.force)
    console = _console()
    console.print(plain(("wrote ", "bold"), (str(path), "cyan")))
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
    from .present.campaign_page import campaign_page
    from .explore.merge import parse_report
    from .present.terminal import plain
    from .scenario import PATH_LIMIT, read_text
    from .present.page import default_name, write_page

    where = one_line(args.file, PATH_LIMIT)
    report = parse_report(read_text(args.file), where)
    path = args.output if args.output is not None else Path(default_name(Path(args.file).stem))
    write_page(path, campaign_page(report), force=args.force)
    _console().print(plain(("wrote ", "bold"), (str(path), "cyan")))
    return EXIT_OK


# --- dst bugs -------------------------------------------------------------------------------------

def _cmd_bugs(args: argparse.Namespace) -> int:
    try:
        bugs = resolve(args.model).bugs
    except ModelError as e:
        raise UsageError(f"dst: --model: {e}") from None
    if args.json:
        print(json.dumps([attrs.asdict(bug) for bug in bugs], indent=2))
        return EXIT_OK
    from .present.terminal import render_bugs

    render_bugs(_console(), args.model, bugs)
    return EXIT_OK


# --- dst selftest ---------------------------------------------------------------------------------

def _cmd_selftest(args: argparse.Namespace) -> int:
    from .explore.selftest import find_bug, stay_clean
    from .present.terminal import plain, render_selftest

    _check_slugs(args.bug, args.model)
    if args.findings:
        ready(Path(args.findings))
    slugs = args.bug or [bug.slug for bug in resolve(args.model).bugs]
    if not slugs:
        raise UsageError(f"dst selftest: {args.model} declares no bugs: nothing to hunt")
    console = _console(stderr=True)
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
        render_selftest(_console(), found, clean, recorded, args.model)
    return EXIT_OK if ok else EXIT_VIOLATION


def _selftest_findings(args: argparse.Namespace, found: list[Any], console: Any,
                       options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Minimize each found bug (the smallest of its first K violations) and write it as a finding."""
    from .explore.fuzz import Outcome
    from .explore.record import record
    from .explore.selftest import smallest_finding
    from .findings import signature
    from .invariants import shape
    from .present.terminal import plain

    recorded = {}
    for row in found:
        if not row.ok:
            continue
        if not args.json:
            console.print(plain((f"minimizing {row.slug} ...", "dim")))
        first = Outcome(row.first_seed, 0, row.hit, row.message)
        shrunk = smallest_finding(row.slug, first, impl=args.model, candidates=args.shrink_candidates, **options)
        origin = {"scenario": shrunk.scenario.source, "seed": shrunk.seed, "swarm": args.swarm,
                  "signature": signature(args.model, (row.slug,), row.hit, shape(row.message or ""))}
        r = record(shrunk, Path(args.findings), origin)
        recorded[row.slug] = {"path": str(r.path), "new": r.written, "steps_before": shrunk.steps_before,
                              "steps_after": shrunk.steps_after, "minimizer_runs": shrunk.runs,
                              "minimizer_seconds": round(shrunk.seconds, 2)}
    return recorded
