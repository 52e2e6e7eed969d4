"""Snapshots for the minimizer: a candidate that agrees with the best run so far up to a moment starts there.

Most of the minimizer's candidates change the best plan late: a step deleted, shortened or moved, a pinned fault
taken out. Draws are keyed by step, so up to the first moment the candidate's plan differs (:func:`diverges`), its
run is the best's, event for event. For a real service, whose run costs a second, :class:`Snapshots` keeps a
process of the best's run stopped at the last candidate's moment; the next candidate that parts from it no sooner
starts from there, in a child forked off it, which takes the candidate's plan (:meth:`Simulation.adopt
<dst.runner.Simulation.adopt>`) and runs only the rest. A candidate that parts sooner, or a new best, starts a new
process. The run is the one the candidate's plan gives from the start, byte for byte: the snapshot only saves the
way there. Where the run cannot be forked safely at the moment (see :mod:`dst.explore.branch`), the candidate runs
from the start, in the minimizer's own process, as every candidate of a model of the coroutine seam does.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
from typing import Any

import attrs

from ..faults import fault_of, is_pinned
from ..runner import RunResult, Simulation
from ..runner.simulation import Outline
from ..sandbox import own_work
from ..scenario import Scenario
from ..sim.trace import parse_key, step_of
from .branch import Folder, Sockets
from .isolate import CAN_FORK, Child, Died, Late, fork, raw_answer

_LENGTH = struct.Struct("<Q")
_WORTH = 1_000  # ms of the best run's way a candidate must share for a snapshot to pay for its fork
# Seconds a run from the start takes below which a snapshot does not pay: the fork, the hand-over of the result and
# the new process of each new best cost tens of milliseconds (the minimizer's runs shrink to that as it goes).
WORTH_SECONDS = 0.25


def diverges(best: Scenario, candidate: Scenario) -> int:
    """The first moment (ms) a run of scripted ``candidate`` may part from one of scripted ``best`` (the same seed):
    the earliest step the two plans do not share, a pinned fault counted at its message's step. 0 where they may
    part from the start: another scenario besides the steps, other clients or workers, another end of the active
    phase, a branch step or a fault pinned on a background handler's message that they do not share."""
    if _differ_besides_steps(best, candidate):
        return 0
    old, new = best.steps or (), candidate.steps or ()
    if Outline.of(best, old) != Outline.of(candidate, new):
        return 0
    at = {s.id: s.at for s in (*old, *new) if not is_pinned(s)}
    first = 1 << 62
    for step in set(old) ^ set(new):
        if step.action == "branch":
            return 0
        if is_pinned(step):
            sender = step_of(parse_key(step.text("message")))
            if sender is None or sender not in at:
                return 0
            first = min(first, at[sender])
        else:
            first = min(first, step.at)
    return first


def _differ_besides_steps(best: Scenario, candidate: Scenario) -> bool:
    """The two differ in more than their steps (a limit, the network, the scheduler): they part from the start."""
    return attrs.evolve(best, steps=None) != attrs.evolve(candidate, steps=None)


class Snapshots:
    """The minimizer's process of its best run (see the module's text): :meth:`run` a candidate from the moment it
    parts from the best, or None where it must run from the start. Close it when the minimizing ends."""

    def __init__(self, seed: int, *, enabled: bool = True) -> None:
        self.seed = seed
        self.enabled = enabled and CAN_FORK
        self.runs = 0  # candidates run from a snapshot
        self.saved = 0  # ms of virtual time they did not run again
        self._best: Scenario | None = None
        self._at = 0  # where the process of the best stands
        self._process: tuple[int, int, int] | None = None  # its pid, the pipe to it, the pipe from it
        self._served: Scenario | None = None  # the candidate it ran last, from where it stands

    def run(self, best: Scenario, result: RunResult, candidate: Scenario, seconds: float) -> RunResult | None:
        """The run of ``candidate`` (a change of ``best``, whose run gave ``result``), or None: run it from the start
        (as a run from the start takes ``seconds`` now)."""
        if not self.enabled or seconds < WORTH_SECONDS:
            return None
        at = diverges(best, candidate)
        if at < _WORTH:
            return None
        if at > result.virtual_time:  # the best's run was over before the two could part: the same run
            self.runs += 1
            self.saved += result.virtual_time
            return _as_run_of(result, candidate)
        if best is not self._best and best is self._served and self._process is not None:
            # The candidate it ran last is the best now: it shares the old best's run up to where the process stands,
            # so the process goes on as its run from there, and needs no new start.
            if self._ask("adopt", self._at, best)[0] == "adopted":
                self._best = best
        if self._process is None or best is not self._best or at < self._at:
            self.close()
            self._start(best)
        kind, value = self._ask("run", at, candidate)
        if kind != "result":  # the best's run ended before that moment, or could not be forked there: from the start
            self.close()
            if kind == "unsafe":
                self.enabled = False  # it will not be at the next moment either
            return None
        self._at, self._served = at, candidate
        try:
            returned, result = pickle.loads(value)
        except Exception:  # noqa: BLE001 - what the forked run could not hand over is run from the start
            return None
        if returned != "returned" or not isinstance(result, RunResult):
            return None
        self.runs += 1
        self.saved += at
        return result

    def _ask(self, kind: str, at: int, scenario: Scenario) -> tuple[str, Any]:
        """Ask the process of the best run to ``run`` a candidate from ``at``, or to ``adopt`` the new best there."""
        assert self._process is not None
        _, to, back = self._process
        try:
            _send(to, (kind, at, scenario))
            answer: tuple[str, Any] = _receive(back)
            return answer
        except (OSError, EOFError):
            return "gone", None

    def _start(self, best: Scenario) -> None:
        to_child, requests = os.pipe()
        answers, to_parent = os.pipe()
        with own_work():
            child = fork()
        if isinstance(child, Child):
            os.close(requests)
            os.close(answers)
            try:
                _serve(best, self.seed, to_child, to_parent)
            finally:
                os._exit(0)
        os.close(to_child)
        os.close(to_parent)
        pid, read, beats = child
        os.close(read)  # it answers on its own pipe, candidate after candidate
        beats.close()
        self._process, self._best, self._at, self._served = (pid, requests, answers), best, 0, None

    def close(self) -> None:
        if self._process is None:
            return
        pid, to, back = self._process
        self._process = None
        for fd in (to, back):
            os.close(fd)
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _as_run_of(result: RunResult, scenario: Scenario) -> RunResult:
    """``result`` as the run of ``scenario``, which ran the same: its plan, and the pinned faults it counts."""
    faults = dict(result.faults)
    for plan, sign in ((result.plan, -1), (scenario.steps or (), 1)):
        for step in plan:
            if is_pinned(step):
                name = fault_of(step).name  # type: ignore[union-attr]  # a pinned step is a fault's
                faults[name] = faults.get(name, 0) + sign
    return attrs.evolve(result, ran=scenario, plan=scenario.steps or (), faults={k: n for k, n in faults.items() if n})


def _serve(best: Scenario, seed: int, requests: int, answers: int) -> None:
    """The process of the best's run: it goes forward to each candidate's moment, forks a child there that goes on
    as the candidate's run and hands its result back, and waits for the next; told that a candidate it ran is the
    best now, it goes on as that candidate's run from where it stands."""
    simulation = Simulation(best, seed)
    sockets = Sockets()
    request: tuple[str, int, Scenario] | None = _receive(requests)

    def at_stop() -> None:
        nonlocal request
        while request is not None and request[1] == simulation.kernel.now:
            kind, _, scenario = request
            with simulation.watch.aside(), own_work():  # dst's own work, not the model's: no stall, no refusal
                if kind == "adopt":
                    simulation.adopt(scenario)
                    _send(answers, ("adopted", None))
                    request = _receive(requests)
                    continue
                if not sockets.none_new():
                    _send(answers, ("unsafe", None))
                    os._exit(0)
                kept = Folder(getattr(simulation.system, "folder", None))
                child = fork()
                if isinstance(child, Child):
                    break
                try:
                    answer: tuple[str, Any] = ("result", raw_answer(child, None))
                except (Died, Late) as e:
                    answer = ("died", str(e))
                kept.put_back()
                _send(answers, answer)
                request = _receive(requests)
        else:
            if request is None:
                os._exit(0)
            if request[1] < simulation.kernel.now:
                _send(answers, ("behind", None))
                os._exit(0)
            simulation.pause_at(request[1], at_stop)
            return
        candidate = request[2]  # the child: the candidate's run from here

        def report(result: RunResult) -> None:
            child.answer(("returned", result))

        simulation.forked(report)
        simulation.adopt(candidate)

    if request is None:
        return
    simulation.pause_at(request[1], at_stop)
    simulation.run()
    _send(answers, ("ended", None))  # the best's run ended before the moment asked for


def _send(fd: int, value: Any) -> None:
    data = pickle.dumps(value)
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _receive(fd: int) -> Any:
    head = _read(fd, _LENGTH.size)
    return pickle.loads(_read(fd, _LENGTH.unpack(head)[0]))


def _read(fd: int, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        select.select([fd], [], [])
        chunk = os.read(fd, n - len(chunks))
        if not chunk:
            raise EOFError("the other end closed")
        chunks += chunk
    return bytes(chunks)

