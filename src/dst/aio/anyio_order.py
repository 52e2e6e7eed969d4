"""anyio's cancel scopes, walked in an order the seed decides.

A cancel scope of anyio's asyncio backend (which Starlette, FastAPI and httpx run on) keeps its child scopes in
a set, and cancelling it walks that set (``for scope in self._child_scopes``). Scopes hash by their memory
address, which depends on what the process allocated before: the same seed, run after another one, cancelled
the children in another order, and a run went another way (a Prefect finding replayed only when run first).
While a simulated run is up, a new scope keeps its children in insertion order instead: the order the run made
them in. Nothing else of anyio changes; outside a run it is as installed.
"""

from __future__ import annotations

import importlib
import sys
from types import TracebackType
from typing import Any


class _InsertionOrdered(dict[Any, None]):
    """The set operations anyio's scopes use (add, remove, discard, iteration), in insertion order."""

    __slots__ = ()

    def add(self, item: Any) -> None:
        self[item] = None

    def remove(self, item: Any) -> None:
        del self[item]

    def discard(self, item: Any) -> None:
        self.pop(item, None)


class scopes_in_order:
    """While active, the scopes anyio's asyncio backend makes keep their children in insertion order (a patch the
    loop enters with a run, beside the sandbox). Does nothing when anyio is not imported."""

    def __init__(self) -> None:
        self._undo: tuple[type, Any] | None = None

    def __enter__(self) -> scopes_in_order:
        if "anyio" not in sys.modules:
            return self  # no code of the run uses anyio (a module that imports it later misses this run's patch)
        backend = importlib.import_module("anyio._backends._asyncio")  # anyio imports it on first use: now
        scope = getattr(backend, "CancelScope", None)
        if scope is None:
            return self
        original = scope.__init__

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if type(getattr(self, "_child_scopes", None)) is set:  # an anyio that keeps them so
                self._child_scopes = _InsertionOrdered()

        setattr(scope, "__init__", __init__)
        self._undo = (scope, original)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._undo is not None:
            scope, original = self._undo
            setattr(scope, "__init__", original)
            self._undo = None
