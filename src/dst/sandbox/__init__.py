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
  (``open``, ``os.open``, ``mkdir``, ``rename``, ``remove``, a ``sqlite3`` database) outside ``folder``.
  Reading files is allowed. A call is refused when the user's code (or a dependency of theirs) is on the stack
  between it and the ``with`` that entered the sandbox; it is named as the innermost such frame. dst's own
  calls, and the import machinery writing bytecode caches, go through.
* **Logging.** With ``logs``, a record the ``logging`` module would hand to its handlers (a ``StreamHandler``
  a library set up, the last-resort one that prints warnings) goes to ``logs(text)`` instead, as one line of
  text with no time in it (``WARNING httpx: retrying (1 of 3)``): the user's log lines never print between
  dst's own, and the run keeps them. Other threads' records reach their handlers as ever.
* **What a run does without.** ``os.fsync`` and ``os.fdatasync`` do nothing, and a ``sqlite3`` connection is
  opened with ``PRAGMA synchronous=OFF``: dst crashes processes, never the operating system, and after a process
  crash what it wrote is in the page cache for the next one, so a flush changes no outcome, only wall time. An
  ``ssl.SSLContext`` loads no certificates (sockets are refused: no handshake reads them). An import that failed
  fails again at once, without searching the path (a library that tries an optional import on every call).

Needs CPython 3.11 or later with the GIL; entering checks the struct layout and refuses otherwise.

The parts: :mod:`.cfunctions` (how a builtin is redirected in place, and why so), :mod:`.patches` (what is
patched: the clocks, randomness, what is refused, what a run does without), :mod:`.imports` (failed imports
remembered), :mod:`.refusals` (:class:`Refusal`, where a call came from,
the checks of written paths), :mod:`.active` (the sandbox that is up, as the patches read it); :class:`Sandbox`
here.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import time
import uuid
from _thread import get_ident
from types import FrameType, TracebackType
from typing import Any, Callable

from . import active, imports
from .active import own_work
from .patches import _patches, real
from ..frames import IMPORTS, USER, short, whose
from .refusals import Refusal
# What the event loop and the host import from here ("as": re-exported).
from .refusals import (_EXECUTOR as _EXECUTOR, _PROCESSES as _PROCESSES, _SIGNALS as _SIGNALS,
                       _SOCKETS as _SOCKETS, refusal as refusal)

__all__ = ["VIRTUAL_EPOCH_MS", "Refusal", "Sandbox", "own_work", "real", "run_seed"]

VIRTUAL_EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: what a simulated process's wall clock reads at t=0

_WHOSE: dict[str, str] = {}  # file name -> whose code it is: asked for on every refusable call


def run_seed() -> int | None:
    """The seed of the sandbox that is up (None: none is), for a drop-in that draws where Python's own draws
    cannot reach (a database server's ``random()``) and must not take from the run's stream to do it."""
    up = active._ACTIVE
    return up.seed if isinstance(up, Sandbox) else None

# uuid1 takes the time from time.time_ns() when these are None (not from libuuid), and the node from _node.
_UUID_GLOBALS = ("_generate_time_safe", "_UuidCreate", "_node", "_last_timestamp")


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
                 tz: str | None = "UTC", logs: Callable[[str], None] | None = None) -> None:
        self.wall_ms = wall_ms
        self.monotonic_ms = monotonic_ms
        self.seed = seed
        self.folder = folder
        self.refused = refused
        self.tz = tz
        self.logs = logs
        self.swallowed: list[BaseException] = []  # errors raised where a callback could not pass them on
        self._entered_at: FrameType | None = None
        self._outer: tuple[list[FrameType], set[int]] | None = None
        self._undo: list[Callable[[], None]] = []  # what to put back, besides the patches
        self._installed = 0  # how many of the patches are in

    def __enter__(self) -> Sandbox:
        if active._ACTIVE is not None:
            raise RuntimeError("dst: a sandbox is already up; sandboxes do not nest (exit the first one before "
                               "entering another)")
        patches = _patches()
        self._entered_at = sys._getframe(1)
        self._outer = None
        self.swallowed = []
        undo = self._undo = []
        active._enter(self, self.wall_ms, self.monotonic_ms,
                      None if self.folder is None else os.path.join(os.path.realpath(self.folder), ""))
        try:
            state = random.getstate()
            undo.append(lambda: random.setstate(state))
            random.seed(f"dst.random:{self.seed}")  # str seeds hash with sha512: the same in every process
            active._entropy.seed(f"dst.entropy:{self.seed}")
            saved_uuid: dict[str, Any] = {name: uuid.__dict__[name] for name in _UUID_GLOBALS if name in uuid.__dict__}
            undo.append(lambda: uuid.__dict__.update(saved_uuid))
            # A random node has the multicast bit set (RFC 4122, 4.5).
            uuid.__dict__.update({name: None for name in saved_uuid})
            uuid._node = active._entropy.getrandbits(48) | (1 << 40)  # type: ignore[attr-defined]
            self._set_tz(undo)
            if self.logs is not None:
                self._keep_logs(self.logs, undo)
            finder = imports.remembering()
            undo.append(lambda: imports.forgetting(finder))
            for patch in patches:
                self._installed += 1  # counted first: remove() puts back a patch that was cut short too
                patch.install()
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if active._ACTIVE is not self:
            raise RuntimeError("dst: this sandbox is not up")
        self._restore()

    def branch(self, draw: int) -> None:
        """The run branches (:class:`dst.plan.Branch`): ``random``, ``os.urandom`` and ``uuid4`` draw as branch
        ``draw`` of what they drew so far, in any process."""
        random.seed(f"dst.random:{self.seed}:{random.getrandbits(64)}:branch {draw}")
        active._entropy.seed(f"dst.entropy:{self.seed}:{active._entropy.getrandbits(64)}:branch {draw}")

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

    @staticmethod
    def _keep_logs(sink: Callable[[str], None], undo: list[Callable[[], None]]) -> None:
        handlers = logging.Logger.callHandlers
        owner = active._owner

        def kept(logger: logging.Logger, record: logging.LogRecord) -> None:
            if get_ident() != owner:
                handlers(logger, record)
                return
            try:
                said = record.getMessage()
            except Exception:  # noqa: BLE001 - a bad format is the service's, and logging would only complain
                said = str(record.msg)
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                said += f" ({type(error).__name__}: {error})"
            sink(f"{record.levelname} {record.name}: {said}")

        setattr(logging.Logger, "callHandlers", kept)
        undo.append(lambda: setattr(logging.Logger, "callHandlers", handlers))

    def _restore(self) -> None:
        """Undo everything done, last first; every step is tried, and the first error is raised at the end."""
        first: BaseException | None = None
        for patch in reversed(_patches()[:self._installed]):
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
        active._leave()
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
            kind = _WHOSE.get(filename)
            if kind is None:
                kind = _WHOSE[filename] = whose(filename)
            if kind is USER:
                return f"{short(filename)}:{frame.f_lineno}"
            if kind is IMPORTS or id(frame) in outer_ids:
                return None
            frame = frame.f_back
        return None
