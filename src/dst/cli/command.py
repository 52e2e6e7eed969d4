"""What every command shares: its exit codes, the error a bad flag is, and the scenario its flags name."""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from ..errors import MODEL_ERROR, UserError
from ..models import ModelError, resolve
from ..runner import RunResult, check
from ..runner.swarm import aimed
from ..scenario import Scenario, dropped, load_scenario
from .output import error

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
EXIT_MODEL_ERROR = 3  # the model's own code ended a run (it raised, or did what a simulated run refuses)
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool that a closed pipe ended


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
    if args.aim:
        scenario = aimed(scenario)
    if checked:
        check(scenario)  # keys that contradict the model's bounds are said now, before any run
    return scenario


def reproduce_flags(args: argparse.Namespace) -> tuple[Any, ...]:
    """The flags of ``dst run`` that decide a run, in the order :func:`dst.runner.reproduce.command` takes them."""
    return args.seed, args.scenario, args.bug, args.swarm, args.model, args.no_bugs, args.aim
