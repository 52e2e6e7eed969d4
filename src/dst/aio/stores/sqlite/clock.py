"""SQLite's clock: ``'now'`` in its date functions, and ``CURRENT_TIMESTAMP`` and the like, read the virtual wall
clock, and SQLite's own implementation does the rest."""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

WallMs = Callable[[], int]


def _system_wall_ms() -> int:
    # Read at each call: dst's sandbox patches time.time during a simulated run (round: ms/1000*1000 may not be whole).
    return round(time.time() * 1000)


_wall_ms: WallMs = _system_wall_ms  # the clock of the connections opened now (installed() sets it)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# name -> the positions of its time values ('now' counts there only, as in SQLite).
_DATE_FUNCTIONS: dict[str, tuple[int, ...]] = {
    "julianday": (0,), "date": (0,), "time": (0,), "datetime": (0,), "unixepoch": (0,), "strftime": (1,),
    "timediff": (0, 1)}


class _Reference:
    """SQLite's own date functions, on a private in-memory connection: the overrides hand every call to them,
    with the virtual time written in place of 'now'."""

    def __init__(self) -> None:
        # check_same_thread off: one per process, and each call is a single synchronous query.
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.names = tuple(name for name in _DATE_FUNCTIONS if self._has(name))
        self.sql: dict[tuple[str, int], str] = {}
        # How to write 'now' so the modifiers treat it as this SQLite treats 'now': newer ones know 'now' is UTC
        # (the 'utc' modifier leaves it as it is), as they know a time written with 'Z' is; older ones take it as a
        # time without a zone. Compared in one statement: the outcome does not depend on the
        # time it reads, only on the time zone (and where that is UTC, the two ways agree).
        real, plain, zulu = self.conn.execute(
            "SELECT datetime('now', 'utc'), datetime(strftime('%Y-%m-%d %H:%M:%f', 'now'), 'utc'), "
            "datetime(strftime('%Y-%m-%d %H:%M:%fZ', 'now'), 'utc')").fetchone()
        self.zone = "Z" if real != plain and real == zulu else ""

    def _has(self, name: str) -> bool:
        try:
            self.conn.execute(f"SELECT {name}(?, ?)", ("%Y" if name == "strftime" else "2000-01-01", "2000-01-01"))
        except sqlite3.OperationalError:  # an older SQLite than the function (timediff is 3.43's)
            return False
        return True

    def call(self, name: str, args: tuple[Any, ...]) -> Any:
        key = (name, len(args))
        sql = self.sql.get(key)
        if sql is None:
            sql = self.sql[key] = f"SELECT {name}({', '.join('?' * len(args))})"
        return self.conn.execute(sql, args).fetchone()[0]


_reference: _Reference | None = None


def _the_reference() -> _Reference:
    global _reference
    if _reference is None:
        _reference = _Reference()
    return _reference


class _Clock:
    """The virtual wall clock as SQLite reads 'now': 'YYYY-MM-DD HH:MM:SS.SSS' (milliseconds, as SQLite's own)."""

    __slots__ = ("wall_ms", "reference", "ms", "text")

    def __init__(self, wall_ms: WallMs, reference: _Reference) -> None:
        self.wall_ms = wall_ms
        self.reference = reference
        self.ms: int | None = None
        self.text = ""

    def now(self) -> str:
        ms = int(self.wall_ms())
        if ms != self.ms:
            moment = _EPOCH + timedelta(milliseconds=ms)
            self.ms, self.text = ms, f"{moment:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d}{self.reference.zone}"
        return self.text

    def function(self, name: str, positions: tuple[int, ...]) -> Callable[..., Any]:
        call = self.reference.call
        now = self.now
        leading = 1 if name == "strftime" else 0  # strftime(format) alone, like date() alone, means 'now'

        def dated(*args: Any) -> Any:
            n = len(args)
            if n == leading and (n > 0 or name != "timediff"):
                args = args + (now(),)
            else:
                for i in positions:
                    if i < n:
                        value = args[i]
                        if value.__class__ is str and len(value) == 3 and value.lower() == "now":
                            args = args[:i] + (now(),) + args[i + 1:]
            return call(name, args)

        return dated

    def install(self, conn: sqlite3.Connection) -> None:
        for name in self.reference.names:
            # deterministic: SQLite allows the built-ins it overrides in indexes and generated columns. The same
            # number of arguments as the built-in (timediff takes two), so a wrong call fails as it does there.
            conn.create_function(name, 2 if name == "timediff" else -1, self.function(name, _DATE_FUNCTIONS[name]),
                                 deterministic=True)
        now = self.now
        conn.create_function("current_timestamp", 0, lambda: now()[:19], deterministic=True)
        conn.create_function("current_date", 0, lambda: now()[:10], deterministic=True)
        conn.create_function("current_time", 0, lambda: now()[11:19], deterministic=True)
