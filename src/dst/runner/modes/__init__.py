"""Modes: how a kind of built system runs in a world. A mode is a plug-in of the run.

A model's ``build(env)`` returns a system; the first mode that accepts it runs it:

* :mod:`.coroutine`: a :class:`dst.sut.System`, the coroutine seam (handlers and jobs written for dst, which dst
  drives itself);
* :mod:`.aio`: a :class:`dst.aio.System`, a user's unmodified asyncio service on dst's deterministic loop.

A mode makes the system's processes in the :class:`~dst.runner.world.World` (which faults then act on), guards the
run (a sandbox, or the loop running with its patches), says who runs now (what a violation, an error, a stall is
blamed on), and says whether a violation found now is noted at once or where the running callback returns. The
:class:`~dst.runner.simulation.Simulation` composes world, mode and phases, and asks nothing else of the mode.

A third mode (threads under a controlled scheduler, trio) is one new module here and its name in :data:`MODES`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, ContextManager, Mapping, Protocol

from ...scenario import Scenario
from ...sim.process import ClientProcess, ServerProcess
from ..world import World

Job = Callable[[str, int, Any], Any]  # (client, incarnation, plan step) -> the job's coroutine
"""What a mode starts for a client's plan step (the runner's :class:`~dst.sut.Order` around ``system.job``)."""


class Mode(Protocol):
    """How one kind of system runs: made with ``Mode(system, world, scenario, seed)`` for one run."""

    #: One word, for messages ("an asyncio system ...").
    kind: str
    #: Whether its systems are real services, whose seeds cost a hundred times the seam's: a default campaign
    #: starts them in small worlds (:mod:`dst.explore.steer`).
    real_service: bool
    #: The first thing the model did that a simulated run refuses, if the model swallowed the refusal and went on
    #: (time, trace index, line); a mode whose refusals end the run at once keeps None.
    refusal: tuple[int, int, str] | None

    def __init__(self, system: Any, world: World, scenario: Scenario, seed: int) -> None: ...

    def refuse(self, has_runs: bool) -> None:
        """Raise :class:`~dst.models.ModelError` for what this system cannot run (a scenario that submits runs)."""

    def processes(self, clients: list[str], job: Job) -> tuple[ServerProcess, Mapping[str, ClientProcess]]:
        """The server and the clients (named ``clients``) of the system, in the world."""

    def guarded(self) -> ContextManager[None]:
        """What the run is in while it runs: a guest model's sandbox, the asyncio loop running with its patches."""

    def who(self) -> str:
        """The process whose code runs now (or ran last, for an error on its way out)."""

    def handling(self) -> int | None:
        """The key of the server handler whose code runs now (None: not a handler's)."""

    def hold(self) -> bool:
        """A violation is being found now: True when it is to be noted where the running callback returns (the
        mode has asked the kernel to pause there), False when it is noted at once."""

    def stop(self) -> Callable[[], None] | None:
        """What ends the run once code the watchdog interrupted returns, if the mode would otherwise catch it."""

    def close(self) -> None:
        """The run is over (or never started): drop what is still pending. Called once or more."""


MODES = ("coroutine", "aio")  # tried in this order; a mode's module is imported only when it is tried


def mode_for(system: object) -> type[Mode] | None:
    """The mode that runs ``system`` (None: no mode accepts it). The coroutine seam is tried first, so its runs
    import nothing of the asyncio mode."""
    for name in MODES:
        mode: Any = import_module(f"{__name__}.{name}").MODE
        if mode.accepts(system):
            return mode  # type: ignore[no-any-return]
    return None

