"""SQL's clock keywords read dst's clock: ``CURRENT_TIMESTAMP`` and its kin are keywords, not functions, so the
search path that sends ``now()`` to ``dst_clock`` does not reach them; the text is rewritten instead.

``CURRENT_TIMESTAMP``, ``CURRENT_TIME``, ``LOCALTIMESTAMP`` and ``LOCALTIME`` (each with an optional precision)
and ``CURRENT_DATE`` become calls of the ``dst_clock`` functions of the same names. A keyword inside a string
('...', E'...', $tag$...$tag$), a quoted identifier or a comment is left as it is, as is a word after ``.`` (a
column) or ``AS`` (an alias)."""

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


def virtual_time(sql: str) -> str:
    """``sql`` with its clock keywords calling dst's clock (the same text when it has none)."""
    low = sql.lower()
    if "current_" not in low and "localtime" not in low:
        return sql  # most statements: no scan
    return _rewritten(sql)


@lru_cache(maxsize=512)  # a service sends the same few statements again and again
def _rewritten(sql: str) -> str:
    out: list[str] = []
    at = copied = 0
    n = len(sql)
    previous = ""  # the last word or symbol seen outside strings and comments, lowercased
    while at < n:
        c = sql[at]
        if c == "'" or (c in "eE" and sql.startswith("'", at + 1) and not _in_word(sql, at)):
            backslash = c != "'"
            at = _string_end(sql, at + (2 if backslash else 1), backslash)
            previous = "'"
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
            if word in _KEYWORDS and previous not in (".", "as"):
                out.append(sql[copied:start])
                out.append(_KEYWORDS[word])
                rest = at
                while rest < n and sql[rest].isspace():
                    rest += 1
                if not (word in _TAKES_PRECISION and sql.startswith("(", rest)):
                    out.append("()")
                copied = at
            previous = word
        else:
            if not c.isspace():
                previous = c
            at += 1
    out.append(sql[copied:])
    return "".join(out)


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
