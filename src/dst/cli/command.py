"""What every command shares: its exit codes, the error a bad flag is, and the scenario its flags name."""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from ..errors import MODEL_ERROR, UserError
from ..models import ModelError, resolve
from ..runner import RunResult, check
from ..runner.swarm import aimed, enable, world
from ..scenario import Scenario, dropped, load_scenario
from .output import error

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
EXIT_MODEL_ERROR = 3  # the model's own code ended a run (it raised, or did what a simulated run refuses)
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool that a closed pipe ended

# What each code means, whichever command exits with it: docs/cli.md's table of exit codes is written from these
# (python -m dst.cli.reference), and a code without its words here stops that generator.
EXIT_MEANINGS: dict[int, str] = {
    EXIT_OK: "no violation (a run left unjudged included); replay: every finding reproduces exactly; shrink: the "
             "seed violates nothing; show: the page is written",
    EXIT_VIOLATION: "a violation; run --check-determinism: a run that did not replay identically; replay: a finding "
                    "that no longer reproduces or diverged; shrink: a finding written (or already known); selftest: "
                    "a bug missed or hit through an invariant the catalogue does not list for it, or the correct "
                    "model accused",
    EXIT_USAGE: "a usage or input error: a bad flag, scenario, finding or report file, said in one line naming the "
                "file, the key and what was expected, never a traceback; or output that cannot be written (a full "
                "disk, standard output closed)",
    EXIT_MODEL_ERROR: "a model error: the model's own code raised, did what a simulated run refuses (starting a "
                      "thread, say), or broke the seam's contract; a campaign exits with it whatever else it found",
    EXIT_INTERRUPTED: "stopped by Ctrl-C; a campaign prints its summary so far, and exits with 130 only if it had "
                      "found nothing (else 1 or 3)",
    EXIT_BROKEN_PIPE: "the reader went away ('dst run --trace | head'): the output stops quietly, as for a tool that "
                      "SIGPIPE ends, whatever the verdict would have been",
    EXIT_TERMINATED: "the same as 130, for SIGTERM (a CI job's timeout)",
}


def exit_code(result: RunResult) -> int:
    """A run's exit code: 0 no violation, 1 a violation, 3 the model's own error."""
    if result.outcome == MODEL_ERROR:
        return EXIT_MODEL_ERROR
    return EXIT_OK if result.ok else EXIT_VIOLATION


class UsageError(UserError):
    """A bad flag or input: one line for the user, exit code 2."""

    prefix = ""  # its message names the command itself


def check_slugs(slugs: list[str], impl: str) -> None:
    """Refuse a ``--bug`` slug the model does not declare, naming those it does."""
    try:
        known = [bug.slug for bug in resolve(impl).bugs]
    except ModelError as e:
        raise UsageError(f"dst: --model: {e}") from None
    for slug in slugs:
        if slug not in known:
            raise UsageError(f"dst: --bug: unknown bug slug {slug!r} of {impl}; known: {', '.join(known) or 'none'}")


def scenario_from(args: argparse.Namespace, *, checked: bool = True) -> Scenario:
    """The scenario of ``--scenario``, ``--model`` and ``--bug``, checked against the model before any run (builds
    the system once; ``checked=False`` for a command whose first act is a run here, which checks it as it assembles:
    the model is then built once, not twice)."""
    if args.model is not None:
        try:
            resolve(args.model)
        except ModelError as e:
            raise UsageError(f"dst: --model: {e}") from None
    scenario = load_scenario(args.scenario, model=args.model)
    left = dropped(scenario, args.scenario) if args.model is not None else ()
    if left:  # a note, not an error: the run goes on without them
        error(f"dst: note: {args.model} has no {', '.join(left)}: the scenario runs without them (a bug's "
              f"scenario then tests whether your model has that bug)")
    check_slugs(args.bug, scenario.model.impl)
    own = () if args.no_bugs else scenario.bugs
    scenario = attrs.evolve(scenario, bugs=tuple(dict.fromkeys(own + tuple(args.bug))))
    for kind in dict.fromkeys(args.enable):
        scenario = enable(scenario, kind)
    if args.aim:
        scenario = aimed(scenario)
    if args.world is not None:
        scenario = world(scenario, args.world)
    if getattr(args, "branch", None) is not None:
        scenario = attrs.evolve(scenario, branch=args.branch)
    if checked:
        check(scenario)  # keys that contradict the model's bounds are said now, before any run
    return scenario


def reproduce_flags(args: argparse.Namespace) -> tuple[Any, ...]:
    """The flags of ``dst run`` that decide a run, in the order :func:`dst.runner.reproduce.command` takes them."""
    return (args.seed, args.scenario, args.bug, args.swarm, args.model, args.no_bugs, args.aim,
            tuple(dict.fromkeys(args.enable)), args.world, getattr(args, "branch", None))
