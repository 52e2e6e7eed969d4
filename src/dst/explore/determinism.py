"""Whether a seed gives one run: the same seed run again, in this process and in a fresh interpreter with another
``PYTHONHASHSEED``, must give the same trace (``dst run --check-determinism``). What a model depends on that the
seed does not decide shows as the first event where the runs part."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from typing import Any, Mapping, Sequence

import attrs

from ..runner import RunResult, run
from ..runner.reproduce import reproduce
from ..scenario import Scenario
from ..sim.trace import Event, digest, first_difference, format_event

HERE = "a second run in the same process"
ELSEWHERE = "a fresh process"
_KEPT = "state kept between runs: a module global or singleton the model does not reset"
_RAN = (0, 1)  # dst run's exit codes for a run that ended (no violation, a violation): any other is a failure


@attrs.frozen
class Divergence:
    """Where a seed's second run parted from its first."""

    second: str  # which second run: HERE or ELSEWHERE
    index: int | None  # the trace event they first differ at; None: the second run failed, or the traces agree
    first_event: Event | None  # the first run's event there (None: its trace had ended)
    second_event: Event | None  # the second run's (None: its trace had ended)
    hint: str = ""  # what commonly makes a run part so
    failure: str | None = None  # the second run could not be made: the last line it said (or its exit code)
    # The traces agree, but the user's assertions counted otherwise (dst.always & co.): the first that differs.
    assertion: tuple[str, Any, Any] | None = None

    def line(self) -> str:
        """One line, as ``dst run --check-determinism`` says it."""
        if self.failure is not None:
            return f"the second run failed: {self.failure}"
        if self.assertion is not None:
            name, mine, theirs = self.assertion
            return (f"{self.second} gives the same trace, but the assertion {name} counted otherwise: first run "
                    f"{_counts(mine)} | {self.second} {_counts(theirs)} (a condition that reads what the seed does "
                    f"not decide: the order of a set, a hash(), the real clock)")
        if self.index is None:
            return "the trace digests differ but the traces are equal"
        hint = f" ({self.hint})" if self.hint else ""
        return (f"{self.second} diverges at trace event {self.index}: first run {_show(self.first_event)} | "
                f"{self.second} {_show(self.second_event)}{hint}")


def check_determinism(scenario: Scenario, seed: int, first: RunResult | None = None, *,
                      command: Sequence[str] | None = None, fresh_process: bool = True) -> Divergence | None:
    """None when seed ``seed`` of ``scenario`` gives ``first``'s trace again (``first``: run now when not given),
    run a second time in this process and, if that agrees, in a fresh interpreter with another hash seed; else
    where the two first part. The whole trace is compared: the consequences after the outcome too.

    ``command``: the words of the ``dst run`` that runs the seed in the fresh process, from ``dst`` on (as
    :func:`dst.runner.reproduce.arguments` gives them); by default the scenario's own, and ``ValueError`` when no
    command line can run it (a scenario built or changed in code: ``fresh_process=False`` checks it here only)."""
    if fresh_process and command is None:
        line = reproduce(scenario, seed)
        if line is None:
            raise ValueError(f"{scenario.name}, seed {seed}: no dst run command runs it in a fresh process (a "
                             f"scenario built or changed in code); check it with fresh_process=False")
        command = shlex.split(line)
    if first is None:
        first = run(scenario, seed)
    here = _replay_here(scenario, seed, first)
    if here is not None or command is None or not fresh_process:
        return here
    return _replay_elsewhere(command, seed, first)


def _replay_here(scenario: Scenario, seed: int, first: RunResult) -> Divergence | None:
    """What a run leaves behind (a module global, a singleton the model's build or restart does not reset) shows
    as a divergence here."""
    again = run(scenario, seed)
    if digest(again.raw_trace) == digest(first.raw_trace):
        return _assertions(HERE, first.assertion_counts(), again.assertion_counts())
    return _divergence(HERE, list(first.trace), list(again.trace), _KEPT)


def _replay_elsewhere(command: Sequence[str], seed: int, first: RunResult) -> Divergence | None:
    if not command or command[0] != "dst":
        raise ValueError(f"expected the words of a dst run command, from 'dst' on, got {list(command)!r}")
    words = [sys.executable, "-m", "dst", *command[1:], "--json", "--trace"]
    env = dict(os.environ, PYTHONHASHSEED=str((seed * 7919 + 17) % 4294967295 or 1))
    done = subprocess.run(words, capture_output=True, text=True, env=env)
    if done.returncode not in _RAN:
        lines = done.stderr.strip().splitlines()
        return Divergence(ELSEWHERE, None, None, None, failure=lines[-1] if lines else str(done.returncode))
    said = json.loads(done.stdout)
    other = [tuple(e) for e in said["trace"]]
    if other == list(first.trace):
        return _assertions(ELSEWHERE, first.assertion_counts(), said.get("assertions", {}))
    return _divergence(ELSEWHERE, list(first.trace), other)


def _assertions(second: str, mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> Divergence | None:
    """Runs with the same trace whose assertions (dst.always & co.) counted otherwise: the first that differs."""
    for name in sorted({*mine, *theirs}):
        if mine.get(name) != theirs.get(name):
            return Divergence(second, None, None, None, assertion=(name, mine.get(name), theirs.get(name)))
    return None


def _counts(counts: Any) -> str:
    if not isinstance(counts, dict):
        return "never met"
    return ", ".join(f"{key} {value}" for key, value in counts.items())


def _divergence(second: str, mine: list[Event], theirs: list[Event], hint: str = "") -> Divergence:
    diff = first_difference(mine, theirs)
    if diff is None:
        return Divergence(second, None, None, None, hint)
    index, a, b = diff
    return Divergence(second, index, a, b, hint)


def _show(event: Event | None) -> str:
    return "(no event)" if event is None else format_event(event)
