"""Virtual time, seeded randomness and refusals for a simulated asyncio run: ``with Sandbox(...):``.

What changes inside the ``with``, for the thread that entered it (other threads keep the real behaviour):

* **Clocks.** ``time.time``, ``time_ns``, ``monotonic``, ``monotonic_ns``, ``perf_counter``,
  ``perf_counter_ns``; ``localtime``, ``gmtime``, ``ctime``, ``asctime`` and ``strftime`` without a time
  argument; ``clock_gettime(_ns)`` of the real-time and monotonic clocks; ``datetime.datetime.now`` (with and
  without ``tz``), ``utcnow``, ``datetime.date.today`` (so ``datetime.datetime.today``). The wall clock is
  ``wall_ms()`` ms since the Unix epoch, the monotonic clocks ``monotonic_ms()`` ms. The time zone is UTC
  (``TZ``, ``time.tzset()``), so local times do not depend on the host.
* **Randomness.** The ``random`` module's functions draw from its hidden instance, seeded from ``seed`` (its
  state is put back on exit); ``random.Random()`` and ``random.seed()`` without a seed draw the seed from the
  sandbox; ``os.urandom`` (which is ``random._urandom``, so ``SystemRandom`` and ``secrets``, and ``uuid4``)
  returns seeded bytes; ``uuid1`` reads the virtual clock and a node drawn from the seed.
* **Refusals** (:class:`Refusal`): threads and executors, sockets and name lookups, subprocesses, ``fork``,
  ``exec``, ``system``, signals (``signal.signal``, ``alarm``, ``setitimer``, ``os.kill``), and writing a file
  (``open``, ``os.open``, ``mkdir``, ``rename``, ``remove``, a ``sqlite3`` database) outside ``folder``. Reading files is allowed. A call is refused when the user's code
  (or a dependency of theirs) is on the stack between it and the ``with`` that entered the sandbox; it is named
  as the innermost such frame. dst's own calls, and the import machinery writing bytecode caches, go through.

How. Rebinding a module attribute (``time.monotonic = fake``) misses every ``from time import monotonic`` done
before, and libraries do that at import. So the builtin function *object* is redirected in place. It is a C
struct: ``m_ml`` points at a ``PyMethodDef`` (the C function and its calling convention), ``m_self`` is handed to
that C function, and ``vectorcall`` is a fast path chosen from the convention. While a sandbox is up, ``m_ml``
points at a ``PyMethodDef`` of ours whose C function is CPython's own ``PyObject_Call`` under the
``METH_VARARGS|METH_KEYWORDS`` convention, ``m_self`` is a Python function of this module, and ``vectorcall``
is empty (as for any ``METH_VARARGS`` builtin). A call of the builtin is then ``PyObject_Call(our function,
args, kwargs)``: same arguments, and what our function raises reaches the caller unchanged. Every reference
sees it, ``time.monotonic is original`` stays true, and exit writes the three pointers back. The module's
static ``PyMethodDef`` is never written, so a new function object built on it (:func:`real`) still runs the
genuine C code.

``datetime.now``, ``utcnow`` and ``date.today`` are classmethods of a C type: every ``datetime.now`` access
builds a fresh bound object from the type's shared ``PyMethodDef``, with the class as ``m_self``, so there is no
one object to redirect. There the ``PyMethodDef``'s C function pointer itself is swapped for a ctypes callback,
as time-machine does. A ctypes callback cannot raise into its caller: a call the real one would reject
(``datetime.now(5)``) raises ``SystemError`` at the call instead of ``TypeError``, and the error is kept in
:attr:`Sandbox.swallowed`.

Python entry points (``threading.Thread.start``, the executors' ``submit``, ``socket.socket``,
``subprocess.Popen``, ``random.Random.seed``, uuid's module globals) are class or module attributes, set and
put back.

Why not time-machine: it patches C function pointers too, but not ``monotonic`` or ``perf_counter`` (what
asyncio and most timeouts read), so it would be a second mechanism and a dependency for half of the clocks.
The figures behind the choice: ``BENCHMARKS.md``, "The asyncio mode" (``python bench/sandbox.py``).

Needs CPython 3.11 or later with the GIL; entering checks the struct layout and refuses otherwise.
"""

from __future__ import annotations

import _io
import _socket
import _thread
import builtins
import concurrent.futures
import ctypes
import datetime
import importlib
import operator
import os
import random
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import uuid
from types import FrameType, TracebackType
from typing import Any, Callable, Protocol

__all__ = ["Refusal", "Sandbox", "real"]

_signal: Any = importlib.import_module("_signal")  # signal.signal wraps _signal.signal


class Refusal(RuntimeError):
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


def _files() -> str:
    where = _folder.rstrip(os.sep) if _folder else None
    if where is None:
        return ("a file written outside the run outlives it and leaks into the next run; keep the data in memory, "
                "or give the run a folder")
    return f"a file written outside the run's folder outlives it and leaks into the next run; write under {where}"


# --- the C structs (CPython 3.11+, checked by _unsupported) ---------------------------------------------------

_HEAD = object.__basicsize__  # ob_refcnt, ob_type (and the debug links of a Py_TRACE_REFS build)
_PTR = ctypes.sizeof(ctypes.c_void_p)
# PyCFunctionObject: PyObject_HEAD, m_ml, m_self, m_module, m_weakreflist, vectorcall
_M_ML, _M_SELF, _M_MODULE, _VECTORCALL = _HEAD, _HEAD + _PTR, _HEAD + 2 * _PTR, _HEAD + 4 * _PTR
_METH_VARARGS, _METH_KEYWORDS, _METH_NOARGS, _METH_O = 0x1, 0x2, 0x4, 0x8
_METH_FASTCALL, _METH_METHOD = 0x80, 0x200
_CONVENTION = _METH_VARARGS | _METH_KEYWORDS | _METH_NOARGS | _METH_O | _METH_FASTCALL | _METH_METHOD
_BUILTIN = type(len)


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_void_p)]


# Private prototypes: setting argtypes on ctypes.pythonapi's shared attributes would change them for everyone.
_incref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", ctypes.pythonapi))
_new_cfunction = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_void_p)(("PyCMethod_New", ctypes.pythonapi))
_PYOBJECT_CALL = ctypes.cast(ctypes.pythonapi.PyObject_Call, ctypes.c_void_p).value
_OBJECTS = ctypes.POINTER(ctypes.py_object)
# Callbacks for a classmethod's C function: (cls, unused) and (cls, args, nargs, kwnames); NULL means error.
_NOARGS = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)
_FASTCALL = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_void_p)


def _pointer(address: int) -> ctypes.c_void_p:
    return ctypes.c_void_p.from_address(address)


def _unsupported() -> str | None:
    """Why this interpreter's builtin functions cannot be redirected, or None when they can."""
    if sys.implementation.name != "cpython" or sys.version_info < (3, 11):
        return f"it needs CPython 3.11 or later, not {sys.implementation.name} {sys.version.split()[0]}"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return "it needs a CPython build with the GIL (this one is free-threaded)"
    # The layout seen on len: its struct size, its m_self (the builtins module) and its def's name.
    if _BUILTIN.__basicsize__ != _HEAD + 5 * _PTR or _pointer(id(len) + _M_SELF).value != id(builtins):
        return "this CPython's builtin function objects are laid out differently"
    ml = _pointer(id(len) + _M_ML).value
    if ml is None or ctypes.string_at(_MethodDef.from_address(ml).name) != b"len":
        return "this CPython's builtin function objects are laid out differently"
    return None


class _Patch(Protocol):
    def install(self) -> None: ...

    def remove(self) -> None: ...


class _Redirect:
    """A builtin function object (``time.monotonic``) that calls a Python function instead while installed."""

    def __init__(self, fn: Any, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        if type(fn) is not _BUILTIN:
            raise TypeError(f"dst: {fn!r} is not a builtin function")
        address = id(fn)
        self.fn = fn  # held: the pointers below are into it
        self._ml, self._self = _pointer(address + _M_ML), _pointer(address + _M_SELF)
        self._vectorcall = _pointer(address + _VECTORCALL)
        ml = self._ml.value
        assert ml is not None
        original = _MethodDef.from_address(ml)
        if original.flags & _METH_METHOD:
            raise TypeError(f"dst: cannot redirect {fn!r} (METH_METHOD)")
        # The genuine C code, callable while the object is redirected: a new function object on the same def.
        self.real: Callable[..., Any] = _new_cfunction(ml, self._self.value, _pointer(address + _M_MODULE).value,
                                                       None)
        self.to = make(self.real)
        # Same name and docstring, so the builtin still reads as itself.
        self._def = _MethodDef(original.name, _PYOBJECT_CALL, _METH_VARARGS | _METH_KEYWORDS, original.doc)
        self._def_address = ctypes.addressof(self._def)
        _incref(self.to)  # the reference m_self owns while installed; kept for good (self.to lives as long)
        self._to_address = id(self.to)
        # What remove() writes back, valid from the start: an install cut short (KeyboardInterrupt) is undone too.
        self._saved: tuple[int | None, int | None, int | None] = (ml, self._self.value, self._vectorcall.value)

    def install(self) -> None:
        ml, self_, vectorcall = self._ml, self._self, self._vectorcall
        self._saved = (ml.value, self_.value, vectorcall.value)
        # In this order, another thread calling in between meets a TypeError or the original, never a C function
        # called with another convention's arguments.
        vectorcall.value = None
        ml.value = self._def_address
        self_.value = self._to_address

    def remove(self) -> None:
        ml, self_, vectorcall = self._saved
        self._self.value = self_
        self._ml.value = ml
        self._vectorcall.value = vectorcall


class _Swap:
    """A C classmethod's shared ``PyMethodDef`` (``datetime.datetime.now``) whose C function is a ctypes callback
    while installed. ``to(cls, *args, **kwargs)`` answers; what it raises is kept in the sandbox and the caller
    gets ``SystemError``: a callback cannot raise."""

    def __init__(self, bound: Any, to: Callable[..., Any]) -> None:
        ml = _pointer(id(bound) + _M_ML).value
        assert ml is not None
        self._meth = _pointer(ml + _MethodDef.meth.offset)
        original = _MethodDef.from_address(ml)
        convention = original.flags & _CONVENTION
        owner = bound.__self__
        # The genuine C code, for real() and for other threads: bound to the class by a def of our own.
        self._real_def = _MethodDef(original.name, original.meth, original.flags, original.doc)
        self.real_def = real_address = ctypes.addressof(self._real_def)
        self.real: Callable[..., Any] = _new_cfunction(real_address, id(owner), None, None)

        def answer(cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
            try:
                if _get_ident() != _owner:
                    result = (self.real if cls is owner else _new_cfunction(real_address, id(cls), None, None))(
                        *args, **kwargs)
                else:
                    result = to(cls, *args, **kwargs)
            except BaseException as error:  # nothing may escape a ctypes callback
                _swallow(error)
                return None
            _incref(result)  # the caller owns the reference it is handed
            return id(result)

        def noargs(cls: Any, unused: int | None) -> int | None:
            return answer(cls, (), {})

        def fastcall(cls: Any, args: int | None, nargs: int, kwnames: int | None) -> int | None:
            try:
                names: tuple[str, ...] = () if kwnames is None else ctypes.cast(kwnames, ctypes.py_object).value
                values = ctypes.cast(args or 0, _OBJECTS)[:nargs + len(names)] if nargs or names else []
                positional, keywords = tuple(values[:nargs]), dict(zip(names, values[nargs:]))
            except BaseException as error:
                _swallow(error)
                return None
            return answer(cls, positional, keywords)

        if convention == _METH_NOARGS:
            self._callback: Any = _NOARGS(noargs)
        elif convention == _METH_FASTCALL | _METH_KEYWORDS:
            self._callback = _FASTCALL(fastcall)
        else:
            raise RuntimeError(f"dst: {bound!r} has a calling convention the sandbox does not handle ({convention:#x})")
        self._address = ctypes.cast(self._callback, ctypes.c_void_p).value
        self._saved = self._meth.value

    def install(self) -> None:
        self._saved = self._meth.value
        self._meth.value = self._address

    def remove(self) -> None:
        self._meth.value = self._saved


_MISSING: Any = object()


class _Attribute:
    """A class or module attribute, replaced by ``make(original)`` while installed."""

    def __init__(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        self.owner, self.name, self.make = owner, name, make
        self._saved: Any = owner.__dict__.get(name, _MISSING)

    def install(self) -> None:
        self._saved = self.owner.__dict__.get(self.name, _MISSING)  # inherited: delete ours on exit
        setattr(self.owner, self.name, self.make(getattr(self.owner, self.name)))

    def remove(self) -> None:
        if self._saved is _MISSING:
            if self.name in self.owner.__dict__:
                delattr(self.owner, self.name)
        else:
            setattr(self.owner, self.name, self._saved)


# --- the state of the sandbox that is up (one at a time) -------------------------------------------------------

def _no_clock() -> int:
    raise RuntimeError("dst: no sandbox is up")


_ACTIVE: Sandbox | None = None
_owner = -1  # the thread that entered it: the only one the patches act for
_wall: Callable[[], int] = _no_clock
_mono: Callable[[], int] = _no_clock
_folder: str | None = None  # where writes may go, resolved, ending with os.sep
_entropy = random.Random(0)  # os.urandom's bytes, unseeded seeds, uuid1's node
_get_ident = _thread.get_ident
# uuid1 takes the time from time.time_ns() when these are None (not from libuuid), and the node from _node.
_UUID_GLOBALS = ("_generate_time_safe", "_UuidCreate", "_node", "_last_timestamp")


def _swallow(error: BaseException) -> None:
    if _ACTIVE is not None:
        _ACTIVE.swallowed.append(error)


# --- where a call came from --------------------------------------------------------------------------------------

_DST_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB_DIRS = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})
_USER, _DST, _STDLIB, _IMPORTS = "user", "dst", "stdlib", "imports"
_KINDS: dict[str, str] = {}


def _classify(filename: str) -> str:
    if filename.startswith("<frozen importlib._bootstrap"):
        return _IMPORTS
    if filename.startswith("<frozen "):
        return _STDLIB
    if filename.startswith("<"):
        return _USER  # exec'd or generated code: someone's, not the standard library's
    path = os.path.abspath(filename)
    if path.startswith(_DST_DIR):
        return _DST
    for stdlib in _STDLIB_DIRS:
        rest = path[len(stdlib):]
        if path.startswith(stdlib) and not rest.startswith(("site-packages", "dist-packages")):
            return _IMPORTS if rest.startswith("importlib" + os.sep + "_bootstrap") else _STDLIB
    return _USER  # the user's code, or a dependency of theirs (site-packages)


def _short(filename: str) -> str:
    here = os.getcwd() + os.sep
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    return path[len(here):] if path.startswith(here) else path


# --- refusing ----------------------------------------------------------------------------------------------------

def _refuse(call: str, instead: str) -> None:
    """Raise a :class:`Refusal` of ``call``, unless dst itself or the import machinery made it (then return)."""
    sandbox = _ACTIVE
    if sandbox is None or _get_ident() != _owner:
        return
    where = sandbox._user_line(sys._getframe(1))
    if where is None:
        return
    raise _refusal(sandbox, call, where, instead)


def _refusal(sandbox: Sandbox | None, call: str, where: str, instead: str) -> Refusal:
    refusal = Refusal(f"{call} called at {where} cannot run in a simulated run: {instead}")
    if sandbox is not None and sandbox.refused is not None:
        sandbox.refused(refusal)  # first: the run ends with it even if the caller swallows the exception
    return refusal


def refusal(call: str, instead: str) -> Refusal:
    """A :class:`Refusal` of ``call`` made by the code that called the caller (the event loop's refusals), handed
    to the running sandbox's ``refused``; the caller raises it."""
    return _refusal(_ACTIVE, call, user_line(sys._getframe(2)), instead)


def user_line(frame: FrameType | None) -> str:
    """``file:line`` of the innermost frame of the user's code (site-packages included) from ``frame`` outwards."""
    while frame is not None:
        if _classify(frame.f_code.co_filename) == _USER:
            return f"{_short(frame.f_code.co_filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def where_raised(error: BaseException) -> str:
    """``file:line`` of the innermost frame of the user's code in ``error``'s traceback: where their code raised it."""
    found, tb = "<unknown>", error.__traceback__
    while tb is not None:
        if _classify(tb.tb_frame.f_code.co_filename) == _USER:
            found = f"{_short(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def _acting() -> bool:
    """Whether the running thread is the one the sandbox is up for."""
    return _ACTIVE is not None and _get_ident() == _owner


def _refusing(call: str, instead: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``make`` for a call refused outright (threads, sockets, processes, signals)."""
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            _refuse(call, instead)
            return original(*args, **kwargs)
        return refused
    return make


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
    if _folder is None:
        return False
    base = os.getcwd()
    if dir_fd is not None and not os.path.isabs(name):
        try:
            base = os.readlink(f"/proc/self/fd/{int(dir_fd)}")
        except (OSError, TypeError, ValueError):
            return False
    full = os.path.realpath(os.path.join(base, name))
    return full.startswith(_folder) or full + os.sep == _folder


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
        return original(*args, **kwargs)
    return connect


# --- virtual clocks ---------------------------------------------------------------------------------------------

def _clock(value: Callable[[], Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``make`` for a clock that takes no argument."""
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def clock() -> Any:
            return value() if _get_ident() == _owner else original()
        return clock
    return make


def _seconds() -> int:
    return int(_wall()) // 1000


def _now_arg(original: Callable[..., Any], fill: Callable[[], Any]) -> Callable[..., Any]:
    """``localtime(secs=None)``, ``gmtime``, ``ctime``: without ``secs`` (or with None), the virtual second."""
    def at(*args: Any, **kwargs: Any) -> Any:
        if _get_ident() == _owner and not kwargs and (not args or (len(args) == 1 and args[0] is None)):
            return original(fill())
        return original(*args, **kwargs)
    return at


def _struct_arg(original: Callable[..., Any], before: int) -> Callable[..., Any]:
    """``strftime(format, t=now)``, ``asctime(t=now)``: without ``t``, the virtual local time."""
    def at(*args: Any, **kwargs: Any) -> Any:
        if _get_ident() == _owner and not kwargs and len(args) == before:
            return original(*args, _real_localtime(_seconds()))
        return original(*args, **kwargs)
    return at


_WALL_CLOCKS = frozenset(getattr(time, name) for name in ("CLOCK_REALTIME", "CLOCK_TAI") if hasattr(time, name))
_MONOTONIC_CLOCKS = frozenset(getattr(time, name) for name in ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW",
                                                             "CLOCK_BOOTTIME", "CLOCK_UPTIME") if hasattr(time, name))


def _clock_gettime(ns: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def clock_gettime(*args: Any, **kwargs: Any) -> Any:
            if _get_ident() == _owner and len(args) == 1 and not kwargs and type(args[0]) is int:
                if args[0] in _WALL_CLOCKS:
                    return int(_wall()) * 1_000_000 if ns else _wall() / 1000
                if args[0] in _MONOTONIC_CLOCKS:
                    return int(_mono()) * 1_000_000 if ns else _mono() / 1000
            return original(*args, **kwargs)
        return clock_gettime
    return make


_FROMTIMESTAMP = datetime.datetime.__dict__["fromtimestamp"]  # the C classmethod, not a subclass's override


def _datetime_now(cls: Any, tz: Any = None) -> Any:
    if tz is not None and not isinstance(tz, datetime.tzinfo):
        raise TypeError(f"tzinfo argument must be None or of a tzinfo subclass, not type '{type(tz).__name__}'")
    seconds, ms = divmod(int(_wall()), 1000)  # whole seconds, then the ms: exact where a float would round
    return _FROMTIMESTAMP.__get__(None, cls)(seconds, tz).replace(microsecond=ms * 1000)


def _datetime_utcnow(cls: Any) -> Any:
    seconds, ms = divmod(int(_wall()), 1000)
    utc = _FROMTIMESTAMP.__get__(None, cls)(seconds, datetime.timezone.utc)
    return utc.replace(tzinfo=None, microsecond=ms * 1000)


def _date_today(cls: Any) -> Any:
    seconds, ms = divmod(int(_wall()), 1000)
    today = cls.fromtimestamp(seconds)  # through the class's fromtimestamp, as date.today does
    return today.replace(microsecond=ms * 1000) if isinstance(today, datetime.datetime) else today


# --- randomness ---------------------------------------------------------------------------------------------------

def _urandom(original: Callable[..., Any]) -> Callable[..., Any]:
    def urandom(size: Any) -> bytes:
        if _get_ident() != _owner:
            return bytes(original(size))
        n = operator.index(size)
        if n < 0:
            raise ValueError("negative argument not allowed")
        return _entropy.randbytes(n)
    return urandom


def _random_seed(original: Callable[..., Any]) -> Callable[..., Any]:
    def seed(self: random.Random, a: Any = None, version: int = 2) -> None:
        if a is None and _acting():
            a = _entropy.getrandbits(128)  # instead of the OS's entropy
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
    redirect(time.time, _clock(lambda: _wall() / 1000))
    redirect(time.time_ns, _clock(lambda: int(_wall()) * 1_000_000))
    for fn in (time.monotonic, time.perf_counter):
        redirect(fn, _clock(lambda: _mono() / 1000))
    for fn in (time.monotonic_ns, time.perf_counter_ns):
        redirect(fn, _clock(lambda: int(_mono()) * 1_000_000))
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
    return patches


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


# --- the sandbox -------------------------------------------------------------------------------------------------

class Sandbox:
    """Virtual clocks, seeded randomness and :class:`Refusal` of what a simulated run cannot allow, for the
    length of a ``with`` block (see the module's docstring for what exactly).

    ``wall_ms()`` is the wall clock in ms since the Unix epoch, ``monotonic_ms()`` the monotonic clock in ms
    (both ints); ``seed`` seeds every random draw; files may be written under ``folder`` only (no file at all
    when None); ``refused(refusal)`` is called before a :class:`Refusal` is raised; ``tz`` is the time zone
    local times are in (None: the host's). Sandboxes do not nest. One may be entered again after it exits.
    """

    def __init__(self, *, wall_ms: Callable[[], int], monotonic_ms: Callable[[], int], seed: int,
                 folder: str | None = None, refused: Callable[[Refusal], None] | None = None,
                 tz: str | None = "UTC") -> None:
        self.wall_ms = wall_ms
        self.monotonic_ms = monotonic_ms
        self.seed = seed
        self.folder = folder
        self.refused = refused
        self.tz = tz
        self.swallowed: list[BaseException] = []  # errors raised where a callback could not pass them on
        self._entered_at: FrameType | None = None
        self._outer: tuple[list[FrameType], set[int]] | None = None
        self._undo: list[Callable[[], None]] = []  # what to put back, besides the patches
        self._installed = 0  # how many of the patches are in

    def __enter__(self) -> Sandbox:
        global _ACTIVE, _owner, _wall, _mono, _folder
        if _ACTIVE is not None:
            raise RuntimeError("dst: a sandbox is already up; sandboxes do not nest (exit the first one before "
                               "entering another)")
        patches = _patches()
        self._entered_at = sys._getframe(1)
        self._outer = None
        self.swallowed = []
        undo = self._undo = []
        _ACTIVE, _owner, _wall, _mono = self, _get_ident(), self.wall_ms, self.monotonic_ms
        _folder = None if self.folder is None else os.path.join(os.path.realpath(self.folder), "")
        try:
            state = random.getstate()
            undo.append(lambda: random.setstate(state))
            random.seed(f"dst.random:{self.seed}")  # str seeds hash with sha512: the same in every process
            _entropy.seed(f"dst.entropy:{self.seed}")
            saved_uuid: dict[str, Any] = {name: uuid.__dict__[name] for name in _UUID_GLOBALS if name in uuid.__dict__}
            undo.append(lambda: uuid.__dict__.update(saved_uuid))
            # A random node has the multicast bit set (RFC 4122, 4.5).
            uuid.__dict__.update({name: None for name in saved_uuid})
            uuid._node = _entropy.getrandbits(48) | (1 << 40)  # type: ignore[attr-defined]
            self._set_tz(undo)
            for patch in patches:
                self._installed += 1  # counted first: remove() puts back a patch that was cut short too
                patch.install()
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if _ACTIVE is not self:
            raise RuntimeError("dst: this sandbox is not up")
        self._restore()

    def _set_tz(self, undo: list[Callable[[], None]]) -> None:
        if self.tz is None or not hasattr(time, "tzset") or os.environ.get("TZ") == self.tz:
            return
        saved = os.environ.get("TZ")

        def put_back() -> None:
            if saved is None:
                os.environ.pop("TZ", None)
            else:
                os.environ["TZ"] = saved
            time.tzset()

        undo.append(put_back)
        os.environ["TZ"] = self.tz
        time.tzset()

    def _restore(self) -> None:
        """Undo everything done, last first; every step is tried, and the first error is raised at the end."""
        global _ACTIVE, _owner, _wall, _mono, _folder
        first: BaseException | None = None
        for patch in reversed(_PATCHES[:self._installed]):
            try:
                patch.remove()
            except BaseException as error:  # the rest must still be put back
                first = first or error
        self._installed = 0
        while self._undo:
            try:
                self._undo.pop()()
            except BaseException as error:  # the rest must still be put back
                first = first or error
        _ACTIVE, _owner, _wall, _mono, _folder = None, -1, _no_clock, _no_clock, None
        self._entered_at = self._outer = None
        if first is not None:
            raise first

    def _user_line(self, frame: FrameType | None) -> str | None:
        """``file:line`` of the innermost frame of the user's code, from ``frame`` outwards within the sandbox;
        None when there is none (dst itself made the call) or the import machinery made it."""
        if self._outer is None:
            # The frames on the stack when the sandbox was entered (held, so that their ids stay theirs): the
            # walk stops there, as what called the sandbox is not what runs inside it.
            held: list[FrameType] = []
            outer = self._entered_at
            while outer is not None:
                held.append(outer)
                outer = outer.f_back
            self._outer = (held, {id(f) for f in held})
        outer_ids = self._outer[1]
        while frame is not None:
            filename = frame.f_code.co_filename
            kind = _KINDS.get(filename)
            if kind is None:
                kind = _KINDS[filename] = _classify(filename)
            if kind is _USER:
                return f"{_short(filename)}:{frame.f_lineno}"
            if kind is _IMPORTS or id(frame) in outer_ids:
                return None
            frame = frame.f_back
        return None
