"""What the sandbox patches: virtual clocks, seeded randomness and what is refused, each as a patch of
:mod:`.cfunctions`; the list is built once per process, at the first entry."""

from __future__ import annotations

import _io
import _socket
import _thread
import concurrent.futures
import datetime
import importlib
import operator
import os
import random
import socket
import ssl
import subprocess
import threading
import time
from typing import Any, Callable

from . import active
from .active import _acting, _get_ident
from .cfunctions import (_BUILTIN, _M_ML, _Attribute, _Patch, _Redirect, _Swap, _new_cfunction, _pointer,
                         _unsupported)
from .refusals import (_EXECUTOR, _LOOKUPS, _PROCESSES, _SIGNALS, _SOCKETS, _THREADS, _checking_paths, _open,
                       _os_open, _refusing, _sqlite_connect)

_signal: Any = importlib.import_module("_signal")  # signal.signal wraps _signal.signal


# --- virtual clocks ---------------------------------------------------------------------------------------------

def _clock(value: Callable[[], Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``make`` for a clock that takes no argument."""
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def clock() -> Any:
            return value() if _get_ident() == active._owner else original()
        return clock
    return make


def _seconds() -> int:
    return int(active._wall()) // 1000


def _now_arg(original: Callable[..., Any], fill: Callable[[], Any]) -> Callable[..., Any]:
    """``localtime(secs=None)``, ``gmtime``, ``ctime``: without ``secs`` (or with None), the virtual second."""
    def at(*args: Any, **kwargs: Any) -> Any:
        if _get_ident() == active._owner and not kwargs and (not args or (len(args) == 1 and args[0] is None)):
            return original(fill())
        return original(*args, **kwargs)
    return at


def _struct_arg(original: Callable[..., Any], before: int) -> Callable[..., Any]:
    """``strftime(format, t=now)``, ``asctime(t=now)``: without ``t``, the virtual local time."""
    def at(*args: Any, **kwargs: Any) -> Any:
        if _get_ident() == active._owner and not kwargs and len(args) == before:
            return original(*args, _real_localtime(_seconds()))
        return original(*args, **kwargs)
    return at


_WALL_CLOCKS = frozenset(getattr(time, name) for name in ("CLOCK_REALTIME", "CLOCK_TAI") if hasattr(time, name))
_MONOTONIC_CLOCKS = frozenset(getattr(time, name) for name in ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW",
                                                             "CLOCK_BOOTTIME", "CLOCK_UPTIME") if hasattr(time, name))


def _clock_gettime(ns: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def clock_gettime(*args: Any, **kwargs: Any) -> Any:
            if _get_ident() == active._owner and len(args) == 1 and not kwargs and type(args[0]) is int:
                if args[0] in _WALL_CLOCKS:
                    return int(active._wall()) * 1_000_000 if ns else active._wall() / 1000
                if args[0] in _MONOTONIC_CLOCKS:
                    return int(active._mono()) * 1_000_000 if ns else active._mono() / 1000
            return original(*args, **kwargs)
        return clock_gettime
    return make


_FROMTIMESTAMP = datetime.datetime.__dict__["fromtimestamp"]  # the C classmethod, not a subclass's override


def _datetime_now(cls: Any, tz: Any = None) -> Any:
    if tz is not None and not isinstance(tz, datetime.tzinfo):
        raise TypeError(f"tzinfo argument must be None or of a tzinfo subclass, not type '{type(tz).__name__}'")
    seconds, ms = divmod(int(active._wall()), 1000)  # whole seconds, then the ms: exact where a float would round
    return _FROMTIMESTAMP.__get__(None, cls)(seconds, tz).replace(microsecond=ms * 1000)


def _datetime_utcnow(cls: Any) -> Any:
    seconds, ms = divmod(int(active._wall()), 1000)
    utc = _FROMTIMESTAMP.__get__(None, cls)(seconds, datetime.timezone.utc)
    return utc.replace(tzinfo=None, microsecond=ms * 1000)


def _date_today(cls: Any) -> Any:
    seconds, ms = divmod(int(active._wall()), 1000)
    today = cls.fromtimestamp(seconds)  # through the class's fromtimestamp, as date.today does
    return today.replace(microsecond=ms * 1000) if isinstance(today, datetime.datetime) else today


# --- randomness ---------------------------------------------------------------------------------------------------

def _urandom(original: Callable[..., Any]) -> Callable[..., Any]:
    def urandom(size: Any) -> bytes:
        if _get_ident() != active._owner:
            return bytes(original(size))
        n = operator.index(size)
        if n < 0:
            raise ValueError("negative argument not allowed")
        return active._entropy.randbytes(n)
    return urandom


def _random_seed(original: Callable[..., Any]) -> Callable[..., Any]:
    def seed(self: random.Random, a: Any = None, version: int = 2) -> None:
        if a is None and _acting():
            a = active._entropy.getrandbits(128)  # instead of the OS's entropy
        original(self, a, version)
    return seed


# --- what is patched (built once per process, at the first entry) -------------------------------------------------

_PATCHES: list[_Patch] = []
_REAL: dict[int, Callable[..., Any]] = {}  # id of a redirected builtin -> the genuine one
_REAL_DEFS: dict[int, int] = {}  # address of a swapped classmethod's def -> of a def with the genuine C function
_real_localtime: Callable[..., Any] = time.localtime


def _build() -> list[_Patch]:
    global _real_localtime
    # Imported now rather than left to the service, so that the first run patches them as every later one does.
    import concurrent.futures.process
    import concurrent.futures.thread

    def optional(name: str) -> Any:
        try:
            return importlib.import_module(name)
        except ImportError:  # a Python built without sqlite3; not POSIX
            return None

    sqlite, posixsubprocess = optional("_sqlite3"), optional("_posixsubprocess")

    patches: list[_Patch] = []

    def redirect(fn: Any, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> _Redirect:
        patch = _Redirect(fn, make)
        _REAL[id(fn)] = patch.real
        patches.append(patch)
        return patch

    def refuse(owner: Any, names: tuple[str, ...], label: str, instead: str) -> None:
        for name in names:
            fn = getattr(owner, name, None)
            if fn is not None:
                redirect(fn, _refusing(f"{label}.{name}()", instead))

    # Clocks.
    redirect(time.time, _clock(lambda: active._wall() / 1000))
    redirect(time.time_ns, _clock(lambda: int(active._wall()) * 1_000_000))
    for fn in (time.monotonic, time.perf_counter):
        redirect(fn, _clock(lambda: active._mono() / 1000))
    for fn in (time.monotonic_ns, time.perf_counter_ns):
        redirect(fn, _clock(lambda: int(active._mono()) * 1_000_000))
    _real_localtime = redirect(time.localtime, lambda real: _now_arg(real, _seconds)).real
    redirect(time.gmtime, lambda real: _now_arg(real, _seconds))
    redirect(time.ctime, lambda real: _now_arg(real, _seconds))
    redirect(time.asctime, lambda real: _struct_arg(real, 0))
    redirect(time.strftime, lambda real: _struct_arg(real, 1))
    if hasattr(time, "clock_gettime"):
        redirect(time.clock_gettime, _clock_gettime(ns=False))
        redirect(time.clock_gettime_ns, _clock_gettime(ns=True))
    for bound, to in ((datetime.datetime.now, _datetime_now), (datetime.datetime.utcnow, _datetime_utcnow),
                      (datetime.date.today, _date_today)):
        swap = _Swap(bound, to)
        _REAL_DEFS[_pointer(id(bound) + _M_ML).value or 0] = swap.real_def
        patches.append(swap)
    # Randomness.
    redirect(os.urandom, _urandom)  # random._urandom is the same object
    patches.append(_Attribute(random.Random, "seed", _random_seed))
    patches.append(_Attribute(random, "seed", lambda original: random._inst.seed))
    # Threads and executors.
    patches.append(_Attribute(threading.Thread, "start", _refusing("threading.Thread.start()", _THREADS)))
    refuse(_thread, ("start_new_thread", "start_joinable_thread"), "_thread", _THREADS)
    for executor in (concurrent.futures.ThreadPoolExecutor, concurrent.futures.ProcessPoolExecutor):
        patches.append(_Attribute(executor, "submit", _refusing(
            f"concurrent.futures.{executor.__name__}.submit()", _EXECUTOR)))
    # Sockets and name lookups.
    patches.append(_Attribute(socket.socket, "__init__", _refusing("socket.socket()", _SOCKETS)))
    for name in ("connect", "connect_ex"):
        patches.append(_Attribute(socket.socket, name, _refusing(f"socket.socket.{name}()", _SOCKETS)))
    patches.append(_Attribute(socket, "create_connection", _refusing("socket.create_connection()", _SOCKETS)))
    refuse(_socket, ("getaddrinfo", "getnameinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"), "socket",
           _LOOKUPS)
    # Processes and signals.
    patches.append(_Attribute(subprocess.Popen, "__init__", _refusing("subprocess.Popen()", _PROCESSES)))
    refuse(os, ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp", "execv", "execve"), "os", _PROCESSES)
    if posixsubprocess is not None:
        refuse(posixsubprocess, ("fork_exec",), "_posixsubprocess", _PROCESSES)
    refuse(_signal, ("signal", "alarm", "setitimer"), "signal", _SIGNALS)
    refuse(os, ("kill", "killpg"), "os", _SIGNALS)
    # Files written outside the folder.
    redirect(_io.open, _open)  # builtins.open and io.open are this object
    redirect(os.open, _os_open)
    for name in ("mkdir", "rmdir", "remove", "unlink"):
        redirect(getattr(os, name), _checking_paths(f"os.{name}", 1, ("path",), ("dir_fd",)))
    for name in ("rename", "replace"):
        redirect(getattr(os, name), _checking_paths(f"os.{name}", 2, ("src", "dst"), ("src_dir_fd", "dst_dir_fd")))
    if sqlite is not None:
        redirect(sqlite.connect, _sqlite_connect)
    # What a simulated run does without: a disk's flush (dst crashes processes, never the OS, and after a process
    # crash what was written is in the page cache: fsync changes no outcome, only the wall time), and a TLS
    # context's certificates (sockets are refused: no handshake ever reads them).
    for name in ("fsync", "fdatasync"):
        if hasattr(os, name):
            redirect(getattr(os, name), _skipped)
    for name in ("load_verify_locations", "load_default_certs", "set_default_verify_paths"):
        patches.append(_Attribute(ssl.SSLContext, name, _skipped))
    return patches


def _skipped(original: Callable[..., Any]) -> Callable[..., Any]:
    """``make`` for a call a simulated run does without: it does nothing there, and runs as ever elsewhere."""
    def skipped(*args: Any, **kwargs: Any) -> Any:
        if _acting():
            return None
        return original(*args, **kwargs)
    return skipped


def _patches() -> list[_Patch]:
    if not _PATCHES:
        reason = _unsupported()
        if reason is not None:
            raise RuntimeError(f"dst: the sandbox cannot patch this interpreter: {reason}")
        _PATCHES.extend(_build())
    return _PATCHES


def real(fn: Any) -> Any:
    """The genuine C implementation behind a builtin the sandbox redirects: ``real(time.monotonic)()`` reads the
    host's clock, inside a sandbox too. Anything else is returned as it is. (``date.today``'s C code asks
    ``time.time()``, so ``real(date.today)`` inside a sandbox still reads the virtual day.)"""
    _patches()
    if type(fn) is _BUILTIN:
        if id(fn) in _REAL:
            return _REAL[id(fn)]
        real_def = _REAL_DEFS.get(_pointer(id(fn) + _M_ML).value or 0)
        if real_def is not None:  # a classmethod (datetime.today is date.today's def): bound to fn's own class
            return _new_cfunction(real_def, id(getattr(fn, "__self__")), None, None)
    return fn
