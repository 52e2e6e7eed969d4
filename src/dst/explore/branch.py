"""Branching from a risky moment: a seed's run explores several futures of the first risky situation it reaches.

Most of a heavy seed goes on its way to the interesting part: the clients acquire, work and renew for minutes of
virtual time before a holder is paused past its expiry, or the server goes down with leases held. When a campaign's
run first reaches a situation (:mod:`dst.invariants.situations`) that the campaign gives branches to, it stops the
millisecond after, and each branch goes on from there with every draw afresh (:class:`~dst.plan.Branch`): the
latencies, the losses, the order of ready steps, the service's own ``random``. The plan stays the plan. Antithesis
explores many futures from its interesting states; here it is done in-process, so the prefix is paid once.

A branch is a run of its own, addressed by its seed and its branch (``dst run --seed N --branch AT/DRAW``), and runs
the same whether it was forked from the seed's run at the moment or run from the start: forking is how a real
service's worker saves the prefix, never what decides a byte. A worker forks where it can do so safely: a real
service's run (the asyncio mode) whose durable state is its folder, which is put back as it was after each branch,
and no lock on a file or connection to a server held at the moment (the branches would share them with the seed's
run); elsewhere, and for the coroutine seam's models (whose seeds cost milliseconds, and whose files dst does not
know), each branch runs from the start after the seed's own run.

How many branches a moment gets is the campaign's to say, from what it has reached so far
(:meth:`dst.explore.steer.Steering.branches`): a situation the campaign rarely reaches gets more.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Generic, Mapping, NoReturn, TypeVar

from ..plan import Branch
from ..runner import Cut, RunResult
from ..sandbox import own_work
from .isolate import CAN_FORK, Child, Died, Late, answer_of, fork

T = TypeVar("T")

MOST = 4  # the branches a moment of a situation the campaign has rarely reached gets
FEW = 2  # ... of one it reaches now and then, and of every one while the campaign has learned nothing yet


class Branching(Generic[T]):
    """The explorer of one seed's run (:class:`dst.runner.simulation.Explorer`): ``budget`` gives each situation's
    moment its branches; ``summary`` makes what the campaign keeps of a run (its outcome), ``died`` that of a branch
    whose forked process ended without one. After the run, :attr:`answers` holds the forked branches' summaries in
    draw order, and :attr:`cold` the moment whose branches are still to run from the start."""

    def __init__(self, budget: Mapping[str, int], summary: Callable[[RunResult], T],
                 died: Callable[[Branch, str], T], *, deadline: float | None = None, fork: bool = True) -> None:
        self.budget = dict(budget)
        self.summary = summary
        self.died = died
        self.deadline = deadline
        self.may_fork = fork and CAN_FORK
        self.answers: list[T] = []
        self.cold: tuple[Branch, ...] = ()
        self._child: Child | None = None
        self._held = Sockets()  # what the process held before the run: a worker's own pipes and connections

    def fork(self, at: int, branches: int, folder: str | None, forkable: bool) -> Branch | None:
        wanted = tuple(Branch(at, draw) for draw in range(1, branches + 1))
        if not (self.may_fork and forkable and self._held.none_new()):
            self.cold = wanted
            return None
        kept = Folder(folder)
        for branch in wanted:
            with own_work():  # dst's own fork, in the middle of the run (its sandbox up)
                child = fork()
            if isinstance(child, Child):
                self._child = child
                return branch
            try:
                self.answers.append(answer_of(child, self.deadline))
            except Died as e:  # what the model did to its process is that branch's model error
                self.answers.append(self.died(branch, str(e)))
            except Late:
                raise Cut() from None
            finally:
                kept.put_back()
        return None

    def report(self, result: RunResult) -> NoReturn:
        assert self._child is not None, "only a forked branch reports"
        self._child.answer(("returned", self.summary(result)))


class Folder:
    """A run's folder as it was: each file's bytes, put back in place (the same files: the seed's run holds them
    open) after a branch wrote to them, and what the branch made removed."""

    def __init__(self, folder: str | None) -> None:
        self.root = None if folder is None else Path(folder)
        self.files: dict[Path, bytes] = {}
        if self.root is not None and self.root.is_dir():
            self.files = {path: path.read_bytes() for path in sorted(self.root.rglob("*")) if path.is_file()}

    def put_back(self) -> None:
        if self.root is None or not self.root.is_dir():
            return
        for path in sorted(self.root.rglob("*"), reverse=True):  # what the branch made: files, then folders
            if path.is_file() and path not in self.files:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()) and not any(p.is_relative_to(path) for p in self.files):
                path.rmdir()
        for path, data in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "r+b" if path.exists() else "wb") as file:  # in place: the same inode
                file.write(data)
                file.truncate()


class Sockets:
    """What the process holds that a child forked from it would share with it, beyond what it held when this was
    made (before a run): a lock on a file (SQLite holds one while a transaction is open: the child's own could never
    be taken) or a socket (a connection to a database server: both would speak on it)."""

    def __init__(self) -> None:
        self.before = self._sockets()

    @staticmethod
    def _sockets() -> frozenset[str] | None:
        try:
            names = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    names.append(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:
                    continue  # the directory's own descriptor, gone as it was listed
            return frozenset(name for name in names if name.startswith("socket:"))
        except OSError:
            return None  # no /proc: nothing known

    def none_new(self) -> bool:
        """No lock held, and no socket but those held before: a child forked now shares nothing to fight over."""
        now = self._sockets()
        if now is None or self.before is None or not now <= self.before:
            return False
        pid = str(os.getpid())
        try:
            with open("/proc/locks") as locks:
                return not any(len(fields) > 4 and fields[4] == pid for fields in map(str.split, locks))
        except OSError:
            return False
