"""What a simulated run refuses, and where the call came from: :class:`Refusal` and what to use instead, the
innermost frame of the user's code, and the checks of the paths a call would write."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from ..errors import ModelFault
from ..frames import user_line
from . import active
from .active import _Up, _acting, _get_ident


class Refusal(ModelFault, RuntimeError):
    """A call a simulated run cannot allow. ``str()`` is one line: what was called, where from (``file:line``
    of the user's code) and what to use instead."""


# What to use instead, by kind of call.
_THREADS = ("threads run outside virtual time; use asyncio tasks (asyncio.create_task), or, for work handed to a "
            "thread pool (FastAPI's plain def endpoints, asyncio.to_thread), dst.aio.System(inline_threads=True)")
_EXECUTOR = ("an executor runs work on real threads or processes, outside virtual time; make the work a coroutine "
             "and await it, run it beside with asyncio.create_task, or run it inline with "
             "dst.aio.System(inline_threads=True)")
_SOCKETS = ("real sockets leave the simulation; call other hosts through dst's network (dst.aio.call, or the "
            "httpx client dst.aio.http gives)")
_LOOKUPS = ("name lookups ask the real network; reach other hosts by name through dst's network (dst.aio.call, "
            "dst.aio.http)")
_PROCESSES = "a subprocess runs outside the simulation; model it as a host, or as a coroutine"
_SIGNALS = "signals belong to dst while it runs; a crash or a restart is a fault in the scenario"


# --- refusing ----------------------------------------------------------------------------------------------------

def _refuse(call: str, instead: str) -> None:
    """Raise a :class:`Refusal` of ``call``, unless dst itself or the import machinery made it (then return)."""
    sandbox = active._ACTIVE
    if sandbox is None or _get_ident() != active._owner:
        return
    where = sandbox._user_line(sys._getframe(1))
    if where is None:
        return
    raise _refusal(sandbox, call, where, instead)


def _refusal(sandbox: _Up | None, call: str, where: str, instead: str) -> Refusal:
    refusal = Refusal(f"{call} called at {where} cannot run in a simulated run: {instead}")
    if sandbox is not None and sandbox.refused is not None:
        sandbox.refused(refusal)  # first: the run ends with it even if the caller swallows the exception
    return refusal


def refusal(call: str, instead: str) -> Refusal:
    """A :class:`Refusal` of ``call`` made by the code that called the caller (the event loop's refusals), handed
    to the running sandbox's ``refused``; the caller raises it."""
    return _refusal(active._ACTIVE, call, user_line(sys._getframe(2)), instead)


def _refusing(call: str, instead: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``make`` for a call refused outright (threads, sockets, processes, signals)."""
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            _refuse(call, instead)
            return original(*args, **kwargs)
        return refused
    return make


# --- files written outside the folder ----------------------------------------------------------------------------

def _files() -> str:
    where = active._folder.rstrip(os.sep) if active._folder else None
    if where is None:
        return ("a file written outside the run outlives it and leaks into the next run; keep the data in memory, "
                "or give the run a folder")
    return f"a file written outside the run's folder outlives it and leaks into the next run; write under {where}"


def _shown(path: Any) -> str:
    """A path as the message shows it: the string, not ``PosixPath('...')``."""
    try:
        return repr(os.fspath(path))
    except TypeError:
        return repr(path)


def _inside(path: Any, dir_fd: Any = None) -> bool:
    """Whether writing ``path`` stays in the run's folder. A path that is no path is let through: the real call
    raises what it raises."""
    if isinstance(path, int):
        return True  # a descriptor: already open
    try:
        name = os.fspath(path)
    except TypeError:
        return True
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    folder = active._folder
    if folder is None:
        return False
    base = os.getcwd()
    if dir_fd is not None and not os.path.isabs(name):
        try:
            base = os.readlink(f"/proc/self/fd/{int(dir_fd)}")
        except (OSError, TypeError, ValueError):
            return False
    full = os.path.realpath(os.path.join(base, name))
    return full.startswith(folder) or full + os.sep == folder


def _checking_paths(call: str, count: int, names: tuple[str, ...], fds: tuple[str, ...]
                    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``make`` for os functions that write the ``count`` paths they take first (``os.mkdir``, ``os.rename``)."""
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def checked(*args: Any, **kwargs: Any) -> Any:
            if _acting():
                for i in range(count):
                    path = args[i] if len(args) > i else kwargs.get(names[i])
                    if path is not None and not _inside(path, kwargs.get(fds[i])):
                        _refuse(f"{call}({_shown(path)})", _files())
            return original(*args, **kwargs)
        return checked
    return make


_WRITE_MODES = frozenset("wax+")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _open(original: Callable[..., Any]) -> Callable[..., Any]:
    def open(*args: Any, **kwargs: Any) -> Any:
        if _acting():
            file = args[0] if args else kwargs.get("file")
            mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
            if isinstance(mode, str) and not _WRITE_MODES.isdisjoint(mode) and not _inside(file):
                _refuse(f"open({_shown(file)}, {mode!r})", _files())
        return original(*args, **kwargs)
    return open


def _os_open(original: Callable[..., Any]) -> Callable[..., Any]:
    def os_open(*args: Any, **kwargs: Any) -> Any:
        if _acting():
            path = args[0] if args else kwargs.get("path")
            flags = args[1] if len(args) > 1 else kwargs.get("flags", 0)
            if isinstance(flags, int) and flags & _WRITE_FLAGS and not _inside(path, kwargs.get("dir_fd")):
                _refuse(f"os.open({_shown(path)})", _files())
        return original(*args, **kwargs)
    return os_open


def _sqlite_connect(original: Callable[..., Any]) -> Callable[..., Any]:
    def connect(*args: Any, **kwargs: Any) -> Any:
        if _acting():
            database = args[0] if args else kwargs.get("database")
            uri = args[7] if len(args) > 7 else kwargs.get("uri", False)
            path: Any = database
            if isinstance(database, str) and uri and database.startswith("file:"):
                path, _, query = database[5:].partition("?")
                if "mode=memory" in query or "mode=ro" in query:
                    path = None
            if path not in (None, "", ":memory:") and not _inside(path):
                _refuse(f"sqlite3.connect({_shown(database)})", _files())
            connection = original(*args, **kwargs)
            # No flush to the disk at each commit: a simulated run crashes processes, never the OS, so what
            # committed is in the page cache for the next process all the same (a service that sets its own
            # synchronous level after connecting keeps it, and pays its fsyncs in wall time only).
            connection.execute("PRAGMA synchronous=OFF")
            return connection
        return original(*args, **kwargs)
    return connect
