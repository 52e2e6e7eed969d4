"""The ``dst`` program's entry point. Loading dst's modules takes a moment; Ctrl-C in it ends the program as
Ctrl-C does later (exit 130, no traceback), not with a traceback from whichever import it landed in."""

from __future__ import annotations


def entry() -> None:
    try:
        from .cli import entry as run_dst
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    run_dst()
