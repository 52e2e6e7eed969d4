"""How the sandbox patches: a builtin function redirected in place (for every reference to it), a C classmethod's
function swapped, a class or module attribute replaced.

How. Rebinding a module attribute (``time.monotonic = fake``) misses every ``from time import monotonic`` done
before, and libraries do that at import. So the builtin function *object* is redirected in place. It is a C
struct: ``m_ml`` points at a ``PyMethodDef`` (the C function and its calling convention), ``m_self`` is handed to
that C function, and ``vectorcall`` is a fast path chosen from the convention. While a sandbox is up, ``m_ml``
points at a ``PyMethodDef`` of ours whose C function is CPython's own ``PyObject_Call`` under the
``METH_VARARGS|METH_KEYWORDS`` convention, ``m_self`` is a Python function of the patches, and ``vectorcall``
is empty (as for any ``METH_VARARGS`` builtin). A call of the builtin is then ``PyObject_Call(our function,
args, kwargs)``: same arguments, and what our function raises reaches the caller unchanged. Every reference
sees it, ``time.monotonic is original`` stays true, and exit writes the three pointers back. The module's
static ``PyMethodDef`` is never written, so a new function object built on it (:func:`~dst.sandbox.real`)
still runs the genuine C code.

``datetime.now``, ``utcnow`` and ``date.today`` are classmethods of a C type: every ``datetime.now`` access
builds a fresh bound object from the type's shared ``PyMethodDef``, with the class as ``m_self``, so there is no
one object to redirect. There the ``PyMethodDef``'s C function pointer itself is swapped for a ctypes callback,
as time-machine does. A ctypes callback cannot raise into its caller: a call the real one would reject
(``datetime.now(5)``) raises ``SystemError`` at the call instead of ``TypeError``, and the error is kept in
:attr:`~dst.sandbox.Sandbox.swallowed`.

Python entry points (``threading.Thread.start``, the executors' ``submit``, ``socket.socket``,
``subprocess.Popen``, ``random.Random.seed``, uuid's module globals) are class or module attributes, set and
put back.

Why not time-machine: it patches C function pointers too, but not ``monotonic`` or ``perf_counter`` (what
asyncio and most timeouts read), so it would be a second mechanism and a dependency for half of the clocks.
The figures behind the choice: ``BENCHMARKS.md``, "The asyncio mode" (``python bench/sandbox.py``).
"""

from __future__ import annotations

import builtins
import ctypes
import sys
import sysconfig
from typing import Any, Callable, Protocol

from . import active
from .active import _get_ident, _swallow


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
                if _get_ident() != active._owner:
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
