"""Text, once: durations written and read, a value or a user's text made short and safe for one line,
and TOML's spelling of a string, a key and a value.

It imports nothing of ``dst``. The spelling of a virtual time in a trace (``format_time``) belongs to
the seam a model is written against, :mod:`dst.sut`, which imports nothing of ``dst`` at all.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

_DAY = 86_400_000
MAX_DURATION = 365 * _DAY  # virtual time a scenario may ask for; a run is bounded by a few of these

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


# --- durations ----------------------------------------------------------------------------------------

def parse_duration(value: object) -> int:
    """``"60s"``, ``"250ms"``, ``"1.5m"`` or a number of seconds -> integer milliseconds.

    Raises ``ValueError`` with what was expected.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration such as '60s' or '250ms'")
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"expected a finite duration, got {shorten(value)}")
        ms = Decimal(str(value)) * 1000  # via str: 0.1 s is 100 ms, not 100.00000000000001
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        ms = Decimal(m.group(1)) * _UNIT_MS[m.group(2)]
    else:
        raise ValueError(f"expected a duration such as '60s' or '250ms', got {shorten(value)}")
    if ms > MAX_DURATION:  # before int(): "1e999999999s" would be a billion digits
        raise ValueError(f"expected a duration of at most {MAX_DURATION // _DAY} days, got {shorten(value)}")
    if ms < 0 or ms != int(ms):
        raise ValueError(f"expected a non-negative whole number of milliseconds, got {shorten(value)}")
    return int(ms)


def format_duration(ms: int) -> str:
    """``76s`` or ``1250ms``: a duration as a scenario file writes it (whole seconds, else milliseconds)."""
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"


# --- one line -----------------------------------------------------------------------------------------

def shorten(value: object) -> str:
    """A value for an error message: never more than a line's worth, however long it is."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} characters)"


def one_line(text: str, limit: int | None = None) -> str:
    """User text made safe to print, in an error line or in rich output: every character a terminal would
    act on rather than show (ESC, CR, a line break, a bidi override, a lone surrogate) written as its
    Python escape (``\\x1b``), and a text longer than ``limit`` cut in the middle (so a path keeps its
    file name). Markup is not this function's business: rich output passes it on as ``rich.text.Text``."""
    shown = text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if limit is None or len(shown) <= limit:
        return shown
    keep = max(1, (limit - 25) // 2)
    return f"{shown[:keep]}...({len(text):,} characters)...{shown[-keep:]}"


def key_name(key: str) -> str:
    """A key of a user's file as an error line names it: bare when TOML would write it bare, quoted (and
    escaped, so one line) when not; a long one shortened, as a value is."""
    return key if len(key) <= 40 and _BARE_KEY.fullmatch(key) else shorten(key)


# --- TOML ---------------------------------------------------------------------------------------------

def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: every character as it is but the ones TOML asks to escape (quote,
    backslash, control characters, DEL). A lone surrogate, which no TOML string can hold, becomes U+FFFD."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\uFFFD")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def toml_key(key: str) -> str:
    """``key`` as TOML writes it: bare when it can be, else a basic string."""
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def toml_value(value: Any) -> str:
    """A value as TOML writes it inline: a string, a number, a flag, an array or a table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in value.items()) + " }" if value else "{}"
    raise TypeError(f"cannot write {value!r} as TOML")
