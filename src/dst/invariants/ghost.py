"""The ghost: the books (:mod:`.books`) with the invariants and situations a run checks, and ``env.facts``."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from ..sut import Bounds, LeaseView, Resource, ResourceView, RunView
from .base import INVARIANTS, WATCHES, Invariant, Unit
from .books import HOOKS, Books
from .situations import SITUATIONS, Situation


class Ghost(Books):
    """The books, and the units that check them; a failure raises :class:`~dst.invariants.Violation`, or goes to
    the run's ``recorder``."""

    units: tuple[Invariant, ...] = ()
    situations: tuple[Situation, ...] = ()

    def watch(self, invariants: Iterable[str], *, leases: LeaseView | None, runs: RunView | None,
              bounds: Bounds, resource: Resource | None = None, handling: Callable[[], int | None] | None = None,
              senders: Mapping[int, str] | None = None) -> None:
        """Check these invariants (ids), against these views, held to these bounds (and the resource's state, if
        it shows it: a :class:`~dst.sut.ResourceView`). ``handling`` tells the key of the server handler whose step
        runs now, ``senders`` the actor of each plan step (who sent the requests keyed by it): what tells a holder's
        release from the server's own removal."""
        if handling is not None:
            self.handling = handling
        if senders is not None:
            self.senders = senders
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

    A run notes a violation where it is found and goes on (see :meth:`Books.failed`). Under the asyncio mode it
    notes one found inside a callback where that callback returns, as a violation raised there used to end the
    run (asyncio would have caught it in a task), so the traces recorded then keep their digests: a gate that
    :meth:`hold` s counts the calls under way through it in ``ghost.holding``, for the run to tell. Until then
    the hooks are the ghost's own methods: nothing is added to the coroutine seam's path."""

    def __init__(self, ghost: Ghost) -> None:
        self._ghost = ghost
        self._holds = False

    def hold(self) -> None:
        for name in [n for n in vars(self) if not n.startswith("_")]:
            delattr(self, name)  # looked up before: look again, counted
        self._holds = True

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._ghost, name)
        if self._holds and callable(attr):
            hook, ghost = attr, self._ghost

            def attr(*args: Any, **kwargs: Any) -> Any:
                ghost.holding += 1
                try:
                    return hook(*args, **kwargs)
                finally:
                    ghost.holding -= 1

        setattr(self, name, attr)
        return attr
