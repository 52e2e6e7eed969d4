"""SQL's clock keywords read dst's clock: ``CURRENT_TIMESTAMP`` and its kin are keywords, not functions, so the
search path that sends ``now()`` to ``dst_clock`` does not reach them; the text is rewritten instead.

``CURRENT_TIMESTAMP``, ``CURRENT_TIME``, ``LOCALTIMESTAMP`` and ``LOCALTIME`` (each with an optional precision)
and ``CURRENT_DATE`` become calls of the ``dst_clock`` functions of the same names. A keyword inside a string
('...', E'...', $tag$...$tag$), a quoted identifier or a comment is left as it is, as is a word after ``.`` (a
column) or ``AS`` (an alias).

A search path a session sets keeps ``dst_clock`` ahead of ``pg_catalog``, so ``now()`` and its kin are found
there first: ``SET [SESSION | LOCAL] search_path TO ...`` (and ``ALTER ROLE``, ``ALTER DATABASE``, a function's ``SET
search_path``) and ``set_config('search_path', '...', ...)`` with the path as a literal get ``dst_clock,
pg_catalog`` put in front (``TO DEFAULT`` and ``RESET`` go back to the database's path, which has them)."""

from __future__ import annotations

from functools import lru_cache

_KEYWORDS = {
    "current_timestamp": 'dst_clock."current_timestamp"',
    "current_time": 'dst_clock."current_time"',
    "localtimestamp": 'dst_clock."localtimestamp"',
    "localtime": 'dst_clock."localtime"',
    "current_date": 'dst_clock."current_date"',
}
_TAKES_PRECISION = frozenset(_KEYWORDS) - {"current_date"}
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


_CLOCK_FIRST = "dst_clock, pg_catalog"  # put in front of a search path a session sets
# Statements whose SET search_path sets one: SET itself, ALTER ROLE/DATABASE/FUNCTION ... SET, CREATE FUNCTION ... SET
_SETS_A_PATH = frozenset({"set", "alter", "create"})


def virtual_time(sql: str) -> str:
    """``sql`` with its clock keywords calling dst's clock, and a search path it sets keeping dst's clock first
    (the same text when it has neither)."""
    low = sql.lower()
    if "current_" not in low and "localtime" not in low and "search_path" not in low:
        return sql  # most statements: no scan
    return _rewritten(sql)


@lru_cache(maxsize=512)  # a service sends the same few statements again and again
def _rewritten(sql: str) -> str:
    out: list[str] = []
    at = copied = 0
    n = len(sql)
    previous = ""  # the last word or symbol seen outside strings and comments, lowercased
    before = ""  # the one before it
    first = ""  # the statement's first word
    path = ""  # where a search path being set is: "set" (its TO or = comes), "config" (its literal comes)
    while at < n:
        c = sql[at]
        if c == "'" or (c in "eE" and sql.startswith("'", at + 1) and not _in_word(sql, at)):
            backslash = c != "'"
            start = at
            at = _string_end(sql, at + (2 if backslash else 1), backslash)
            text = sql[start + 1:at - 1].replace("''", "'") if not backslash else None
            if path == "config" and previous == "," and text is not None and not text.startswith("dst_clock"):
                out.append(sql[copied:start])
                out.append("'" + (f"{_CLOCK_FIRST}, {text}" if text.strip() else _CLOCK_FIRST).replace("'", "''") + "'")
                copied, path = at, ""
            elif text is not None and text.lower() == "search_path" and previous == "(" and before == "set_config":
                path = "config"
            previous, before = "'", previous
        elif c == '"':
            end = sql.find('"', at + 1)
            while end != -1 and sql.startswith('"', end + 1):  # "" inside a quoted identifier
                end = sql.find('"', end + 2)
            at = n if end == -1 else end + 1
            previous = '"'
        elif c == "-" and sql.startswith("-", at + 1):
            end = sql.find("\n", at)
            at = n if end == -1 else end + 1
        elif c == "/" and sql.startswith("*", at + 1):
            at = _comment_end(sql, at + 2)
        elif c == "$" and not _in_word(sql, at) and (tag := _dollar_tag(sql, at)) is not None:
            end = sql.find(tag, at + len(tag))
            at = n if end == -1 else end + len(tag)
            previous = "'"
        elif c in _WORD and not c.isdigit():
            start = at
            while at < n and sql[at] in _WORD:
                at += 1
            word = sql[start:at].lower()
            if not first:
                first = word
            if word == "search_path" and first in _SETS_A_PATH and previous in ("set", "session", "local"):
                path = "set"
            elif word == "to" and path == "set":
                copied = _put_clock_first(sql, at, copied, out)
                path = ""
            elif word in _KEYWORDS and previous not in (".", "as"):
                out.append(sql[copied:start])
                out.append(_KEYWORDS[word])
                rest = at
                while rest < n and sql[rest].isspace():
                    rest += 1
                if not (word in _TAKES_PRECISION and sql.startswith("(", rest)):
                    out.append("()")
                copied = at
            previous, before = word, previous
        else:
            at += 1
            if c == "=" and path == "set":
                copied = _put_clock_first(sql, at, copied, out)
                path = ""
            elif c == ";":
                first = path = ""
            if not c.isspace():
                previous, before = c, previous
    out.append(sql[copied:])
    return "".join(out)


def _put_clock_first(sql: str, at: int, copied: int, out: list[str]) -> int:
    """After a SET's TO or = (just before ``at``): dst's clock ahead of the path, unless it is DEFAULT."""
    rest = sql[at:].lstrip()
    if (rest[:7].lower() == "default" and rest[7:8] not in _WORD) or rest.lower().startswith("dst_clock"):
        return copied  # the database's path, which has dst's clock; or dst's clock is first already
    out.append(sql[copied:at])
    out.append(f" {_CLOCK_FIRST},")
    return at


def _in_word(sql: str, at: int) -> bool:
    return at > 0 and sql[at - 1] in _WORD


def _string_end(sql: str, at: int, backslash: bool) -> int:
    """Just past the quote that ends a string whose text begins at ``at`` ('' is a quote; \\' too in E'')."""
    n = len(sql)
    while at < n:
        c = sql[at]
        if backslash and c == "\\":
            at += 2
        elif c == "'":
            if sql.startswith("'", at + 1):
                at += 2
            else:
                return at + 1
        else:
            at += 1
    return n


def _comment_end(sql: str, at: int) -> int:
    """Just past the ``*/`` that closes a comment whose text begins at ``at`` (they nest in PostgreSQL)."""
    depth, n = 1, len(sql)
    while at < n and depth:
        if sql.startswith("/*", at):
            depth, at = depth + 1, at + 2
        elif sql.startswith("*/", at):
            depth, at = depth - 1, at + 2
        else:
            at += 1
    return at


def _dollar_tag(sql: str, at: int) -> str | None:
    """The ``$tag$`` that opens a dollar-quoted string at ``at``, or None ($1 is a parameter)."""
    end = at + 1
    while end < len(sql) and sql[end] in _WORD and sql[end] != "$":
        end += 1
    if end < len(sql) and sql[end] == "$" and not sql[at + 1:end][:1].isdigit():
        return sql[at:end + 1]
    return None
