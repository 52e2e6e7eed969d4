"""The ``dst`` program's entry point. Loading dst's modules takes a moment; Ctrl-C in it ends the program as
Ctrl-C does later (exit 130, no traceback), not with a traceback from whichever import it landed in. It runs
supervised (:mod:`._supervise`): what a model's code does to its process ends in one line, not in silence."""

from __future__ import annotations

from ._supervise import supervised


def entry() -> None:
    supervised(_program)


def _program() -> None:
    try:
        from .cli import entry as run_dst
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    run_dst()
