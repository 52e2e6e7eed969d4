"""The ghost: the books (:mod:`.books`) with the invariants and situations a run checks, and ``env.facts``."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..sim.kernel import StopRun
from ..sut import Bounds, LeaseView, Resource, ResourceView, RunView
from .base import INVARIANTS, WATCHES, Invariant, Unit
from .books import HOOKS, Books
from .situations import SITUATIONS, Situation


class Ghost(Books):
    """The books, and the units that check them; raises :class:`~dst.invariants.Violation`."""

    units: tuple[Invariant, ...] = ()
    situations: tuple[Situation, ...] = ()

    def watch(self, invariants: Iterable[str], *, leases: LeaseView | None, runs: RunView | None,
              bounds: Bounds, resource: Resource | None = None) -> None:
        """Check these invariants (ids), against these views, held to these bounds (and the resource's state, if
        it shows it: a :class:`~dst.sut.ResourceView`)."""
        if leases is not None:
            self.view = leases
        self.runs_view = runs
        self.resource = resource if isinstance(resource, ResourceView) else None
        self.bounds = bounds
        chosen = set(invariants)
        parts = {"leases"} if leases is not None else set()
        if runs is not None:
            parts.add("runs")
        self.units = tuple(unit(self) for unit in INVARIANTS if unit.id in chosen)
        self.situations = tuple(unit(self) for unit in SITUATIONS if unit.parts & parts)
        # A situation hears a fact before the invariants, which may end the run on it.
        heard: tuple[Unit, ...] = (*self.situations, *self.units)
        self._watchers = {hook: tuple(getattr(u, hook) for u in heard if hook in WATCHES[type(u)]) for hook in HOOKS}
        self._bind()

    @property
    def checks(self) -> int:
        return sum(u.checks for u in self.units)

    def situations_reached(self) -> dict[str, int]:
        """How often each situation came up in the run: dst's own and the model's."""
        counts = {u.id: u.count for u in self.situations if u.count}
        counts.update(self.model_reached)
        return dict(sorted(counts.items()))


class FactsGate:
    """``env.facts``: the ghost's hooks as a model calls them, looked up once per name.

    A violation ends the run by raising out of the hook. Under the asyncio mode that would be raised inside a
    task, where asyncio catches it and hands it to the service's own code (an ASGI app answers 500 and goes
    on); there the gate :meth:`hold` s it instead, passing it to the loop, which raises it once the callback
    returns. Until then the hooks are the ghost's own methods: nothing is added to the coroutine seam's path."""

    def __init__(self, ghost: Ghost) -> None:
        self._ghost = ghost
        self._held: Callable[[BaseException], None] | None = None

    def hold(self, stop_with: Callable[[BaseException], None]) -> None:
        for name in [n for n in vars(self) if not n.startswith("_")]:
            delattr(self, name)  # looked up before: look again, gated
        self._held = stop_with

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._ghost, name)
        held = self._held
        if held is not None and callable(attr):
            hook = attr

            def attr(*args: Any, **kwargs: Any) -> Any:
                try:
                    return hook(*args, **kwargs)
                except StopRun as stop:
                    held(stop)
                    return None

        setattr(self, name, attr)
        return attr
