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
from ..plan import Step, is_client
from ..runner import RunResult, Simulation
from ..sandbox import own_work
from ..scenario import Scenario
from ..sim.trace import parse_key, step_of
from .branch import Folder, Sockets
from .isolate import CAN_FORK, Child, Died, Late, fork, raw_answer

_LENGTH = struct.Struct("<Q")
_WORTH = 1_000  # ms of the best run's way a candidate must share for a snapshot to pay for its fork


def diverges(best: Scenario, candidate: Scenario) -> int:
    """The first moment (ms) a run of scripted ``candidate`` may part from one of scripted ``best`` (the same seed):
    the earliest step the two plans do not share, a pinned fault counted at its message's step. 0 where they may
    part from the start: another scenario besides the steps, other clients or workers, another end of the active
    phase, a branch step or a fault pinned on a background handler's message that they do not share."""
    if attrs_differ(best, candidate):
        return 0
    old, new = best.steps or (), candidate.steps or ()
    if _shape(old) != _shape(new):
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


def attrs_differ(best: Scenario, candidate: Scenario) -> bool:
    """The two differ in more than their steps (a limit, the network, the scheduler): they part from the start."""
    return attrs.evolve(best, steps=None) != attrs.evolve(candidate, steps=None)


def _shape(plan: tuple[Step, ...]) -> tuple[Any, ...]:
    """What a run makes of its plan before its first step (its clients, its workers, its active phase's end): two
    plans that differ here part from the start."""
    timed = [s for s in plan if not is_pinned(s)]
    return (sorted({s.actor for s in plan if is_client(s.actor)}),
            sorted({s.actor for s in plan if "serve" in (s.action, s.arg("then"))}),
            max((s.at + 1 for s in timed), default=0),
            any(s.action in ("serve", "submit", "cancel") or s.arg("then") in ("serve", "submit", "cancel")
                for s in plan))


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

    def run(self, best: Scenario, result: RunResult, candidate: Scenario) -> RunResult | None:
        """The run of ``candidate`` (a change of ``best``, whose run gave ``result``), or None: run it from the start."""
        if not self.enabled:
            return None
        at = diverges(best, candidate)
        if at < _WORTH:
            return None
        if at > result.virtual_time:  # the best's run was over before the two could part: the same run
            self.runs += 1
            self.saved += result.virtual_time
            return _as_run_of(result, candidate)
        if self._process is None or best is not self._best or at < self._at:
            self.close()
            self._start(best)
        assert self._process is not None
        _, to, back = self._process
        try:
            _send(to, (at, candidate))
            kind, value = _receive(back)
        except (OSError, EOFError):
            kind, value = "gone", None
        if kind != "result":  # the best's run ended before that moment, or could not be forked there: from the start
            self.close()
            if kind == "unsafe":
                self.enabled = False  # it will not be at the next moment either
            return None
        self._at = at
        try:
            returned, result = pickle.loads(value)
        except Exception:  # noqa: BLE001 - what the forked run could not hand over is run from the start
            return None
        if returned != "returned" or not isinstance(result, RunResult):
            return None
        self.runs += 1
        self.saved += at
        return result

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
        self._process, self._best, self._at = (pid, requests, answers), best, 0

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
    as the candidate's run and hands its result back, and waits for the next."""
    simulation = Simulation(best, seed)
    sockets = Sockets()
    request: tuple[int, Scenario] | None = _receive(requests)

    def at_stop() -> None:
        nonlocal request
        while request is not None and request[0] == simulation.kernel.now:
            with simulation.watch.aside(), own_work():  # dst's own work, not the model's: no stall, no refusal
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
            if request[0] < simulation.kernel.now:
                _send(answers, ("behind", None))
                os._exit(0)
            simulation.pause_at(request[0], at_stop)
            return
        candidate = request[1]  # the child: the candidate's run from here

        def report(result: RunResult) -> None:
            child.answer(("returned", result))

        simulation.forked(report)
        simulation.adopt(candidate)

    if request is None:
        return
    simulation.pause_at(request[0], at_stop)
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

