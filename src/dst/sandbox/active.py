"""The sandbox that is up (one at a time), as its patches read it: the thread it acts for, its clocks, its folder,
its entropy, and where the errors a callback cannot raise go."""

from __future__ import annotations

import _thread
import contextlib
import random
from types import FrameType
from typing import Any, Callable, Iterator, Protocol


class _Up(Protocol):
    """What the patches ask of the sandbox that is up (a :class:`~dst.sandbox.Sandbox`)."""

    swallowed: list[BaseException]

    @property
    def refused(self) -> Callable[[Any], None] | None: ...  # handed the Refusal before it is raised

    def _user_line(self, frame: FrameType | None) -> str | None: ...


def _no_clock() -> int:
    raise RuntimeError("dst: no sandbox is up")


_ACTIVE: _Up | None = None
_owner = -1  # the thread that entered it: the only one the patches act for
_wall: Callable[[], int] = _no_clock
_mono: Callable[[], int] = _no_clock
_folder: str | None = None  # where writes may go, resolved, ending with os.sep
_entropy = random.Random(0)  # os.urandom's bytes, unseeded seeds, uuid1's node
_get_ident = _thread.get_ident


def _enter(sandbox: _Up, wall: Callable[[], int], mono: Callable[[], int], folder: str | None) -> None:
    global _ACTIVE, _owner, _wall, _mono, _folder
    _ACTIVE, _owner, _wall, _mono, _folder = sandbox, _get_ident(), wall, mono, folder


def _leave() -> None:
    global _ACTIVE, _owner, _wall, _mono, _folder
    _ACTIVE, _owner, _wall, _mono, _folder = None, -1, _no_clock, _no_clock, None


def _swallow(error: BaseException) -> None:
    if _ACTIVE is not None:
        _ACTIVE.swallowed.append(error)


@contextlib.contextmanager
def own_work() -> Iterator[None]:
    """dst's own work in the middle of a run (a fork at a branch's moment, the watchdog's thread started in the
    child): the patches act for no thread meanwhile, whatever code of the user's is further up the stack."""
    global _owner
    owner, _owner = _owner, -1
    try:
        yield
    finally:
        _owner = owner


def _acting() -> bool:
    """Whether the running thread is the one the sandbox is up for."""
    return _ACTIVE is not None and _get_ident() == _owner
