"""Imports that fail, failing again at once: while a sandbox is up, ``sys.meta_path``'s path finder is one that
remembers which names it found nowhere on which path.

Libraries try optional imports on the hot path (httpx's ASGI transport asks for ``sniffio`` at every request);
each miss searches every entry of ``sys.path`` again, hundreds of times a seed. The answer is the path finder's
own, remembered for the process: the same name on the same path is not found again (the key holds the path, so
a changed ``sys.path`` asks afresh; ``importlib.invalidate_caches()`` forgets them all). What is found is never
remembered here: the import machinery keeps it in ``sys.modules``.
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec, PathFinder
from typing import Any, Sequence

_missed: set[tuple[str, tuple[str, ...]]] = set()


class _RememberingPathFinder:
    """:class:`importlib.machinery.PathFinder`, remembering its misses. What else is asked of it is the path
    finder's own, as the path finder has it now: the ``importlib_metadata`` backport deletes the path finder's
    ``find_distributions`` when it is imported, and a copy of it here would then fail."""

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: Any = None) -> ModuleSpec | None:
        key = (name, tuple(sys.path if path is None else path))
        if key in _missed:
            return None
        spec = PathFinder.find_spec(name, path, target)
        if spec is None:
            _missed.add(key)
        return spec

    def invalidate_caches(self) -> None:
        _missed.clear()
        PathFinder.invalidate_caches()

    def __getattr__(self, name: str) -> Any:
        return getattr(PathFinder, name)


_REMEMBERING = _RememberingPathFinder()


def remembering() -> tuple[int, Any] | None:
    """Put the remembering finder in the path finder's place; returns how to put it back (None: no path finder)."""
    for i, finder in enumerate(sys.meta_path):
        if finder is PathFinder:
            sys.meta_path[i] = _REMEMBERING
            return i, finder
    return None


def forgetting(saved: tuple[int, Any] | None) -> None:
    """The path finder back where :func:`remembering` found it."""
    if saved is None:
        return
    i, finder = saved
    if i < len(sys.meta_path) and sys.meta_path[i] is _REMEMBERING:
        sys.meta_path[i] = finder
    else:  # moved by someone else meanwhile: put it back wherever ours is now
        for j, entry in enumerate(sys.meta_path):
            if entry is _REMEMBERING:
                sys.meta_path[j] = finder
