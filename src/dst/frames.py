"""Whose code a frame is: the user's (their model, or a dependency of theirs), dst's own, the standard library's
or the import machinery's; and where in the user's code an error was raised or a call was made.

A model's error is reported at the innermost frame of the user's code, so that the line shown is theirs, not
the harness's that called it."""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType

from .text import one_line

USER, DST, STDLIB, IMPORTS = "user", "dst", "stdlib", "imports"

_DST_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep  # src/dst/
_STDLIB_DIRS = tuple(sorted({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")}))


def whose(filename: str) -> str:
    """Whose code ``filename`` (a code object's ``co_filename``) is: :data:`USER`, :data:`DST`, :data:`STDLIB` or
    :data:`IMPORTS`."""
    if filename.startswith("<frozen importlib._bootstrap"):
        return IMPORTS
    if filename.startswith("<frozen "):
        return STDLIB
    if filename.startswith("<"):
        return USER  # exec'd or generated code: someone's, not the standard library's
    path = os.path.abspath(filename)
    if path.startswith(_DST_DIR):
        return DST
    for stdlib in _STDLIB_DIRS:
        rest = path[len(stdlib):]
        if path.startswith(stdlib) and not rest.startswith(("site-packages", "dist-packages")):
            return IMPORTS if rest.startswith("importlib" + os.sep + "_bootstrap") else STDLIB
    return USER  # the user's code, or a dependency of theirs (site-packages)


def short(filename: str) -> str:
    """A file's name as a message (and a trace) shows it, the same wherever the packages are installed and
    whichever folder dst runs from: an installed package's file relative to its site-packages
    (``sqlalchemy/engine/base.py``), the project's relative to the import path's entry it lies under (the
    outermost: ``examples/my_service/store.py``, ``tests/models.py``); else relative to the working folder."""
    if filename.startswith("<"):
        return filename
    path, here = os.path.abspath(filename), os.getcwd()
    roots = [root for entry in sys.path if path.startswith(root := os.path.join(os.path.abspath(entry or here), ""))]
    installed = [root for root in roots if root.rstrip(os.sep).endswith(("site-packages", "dist-packages"))]
    root = max(installed, key=len) if installed else min(roots, key=len) if roots else os.path.join(here, "")
    return path[len(root):] if path.startswith(root) else path


def user_line(frame: FrameType | None) -> str:
    """``file:line`` of the innermost frame of the user's code (site-packages included) from ``frame`` outwards."""
    while frame is not None:
        if whose(frame.f_code.co_filename) == USER:
            return f"{short(frame.f_code.co_filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def raised_in(error: BaseException) -> tuple[str, str] | None:
    """``file:line`` and the function's name of the innermost frame of the user's code in ``error``'s traceback
    (where their code raised it, or called what raised it); None when none of its frames is the user's."""
    found, tb = None, error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if whose(code.co_filename) == USER:
            found = (f"{short(code.co_filename)}:{tb.tb_lineno}", code.co_qualname)
        tb = tb.tb_next
    return found


def where_raised(error: BaseException) -> str:
    """``file:line`` of the innermost frame of the user's code in ``error``'s traceback: where their code raised it."""
    found = raised_in(error)
    return "<unknown>" if found is None else found[0]


def described(error: BaseException) -> str:
    """An error of the user's code in one line: its type, its message and where their code raised it."""
    text = one_line(str(error), 200)
    found = raised_in(error)
    at = "" if found is None else f" at {found[0]} in {found[1]}"
    return f"{type(error).__name__}{': ' + text if text else ''}{at}"
