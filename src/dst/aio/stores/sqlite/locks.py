"""What a statement locks, as SQLite's busy handler cares: the kind of a statement, the statements of a script
(each waits for its lock on its own), and whether an error is one that waiting may clear."""

from __future__ import annotations

import re
import sqlite3

# The lock a statement takes, as far as the busy handler cares: none (BEGIN DEFERRED, SELECT 1), SQLite's read
# lock, its write lock, or a COMMIT (which may wait for readers to leave whatever the connection held).
_NONE, _READ, _WRITE, _COMMIT = 0, 1, 2, 3
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`(?:[^`]|``)*`|\[[^\]]*\]|--[^\n]*|/\*.*?(?:\*/|\Z)", re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9$]*")
_WRITES = frozenset(("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER", "REINDEX", "ANALYZE",
                     "VACUUM"))
_KINDS: dict[str, int] = {}  # SQL text -> its kind (apps issue few distinct texts; cleared if one keeps making new ones)
_CACHE_MAX = 4096


def _kind(sql: str) -> int:
    kind = _KINDS.get(sql)
    if kind is None:
        kind = _classify(sql)
        if len(_KINDS) >= _CACHE_MAX:
            _KINDS.clear()
        _KINDS[sql] = kind
    return kind


def _classify(sql: str) -> int:
    bare = _QUOTED.sub(" ", sql)  # literals, quoted names and comments say nothing of what the statement locks
    words = [w.upper() for w in _WORD.findall(bare)]
    if not words:
        return _NONE
    first = words[0]
    if first == "BEGIN":
        return _WRITE if len(words) > 1 and words[1] in ("IMMEDIATE", "EXCLUSIVE") else _NONE
    if first in ("COMMIT", "END", "RELEASE"):
        return _COMMIT
    if first in ("ROLLBACK", "SAVEPOINT", "ATTACH", "DETACH"):
        return _NONE
    if first == "WITH" and any(w in ("INSERT", "UPDATE", "DELETE") or (w == "REPLACE" and nxt == "INTO")
                               for w, nxt in zip(words, words[1:] + [""])):
        return _WRITE
    if first in ("SELECT", "VALUES", "WITH"):
        return _READ if "FROM" in words else _NONE  # SELECT 1 reads no table: it takes no lock
    if first == "PRAGMA":
        return _WRITE if "=" in bare else _READ
    return _WRITE if first in _WRITES else _READ


def _is_busy(error: sqlite3.OperationalError) -> bool:
    """The database is locked (SQLITE_BUSY), and waiting may help (not BUSY_SNAPSHOT: a stale WAL snapshot
    never gets fresh by waiting, so SQLite does not wait for it either)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:
        return "database is locked" in str(error)
    return bool(code & 0xFF == 5 and code != 517)  # SQLITE_BUSY, SQLITE_BUSY_SNAPSHOT


def _split(script: str) -> tuple[tuple[str, int], ...]:
    """The statements of a script with their kinds (cached): each waits for a lock on its own, as in SQLite."""
    statements = _SCRIPTS.get(script)
    if statements is None:
        found: list[tuple[str, int]] = []
        start = 0
        end = script.find(";")
        while end >= 0:
            text = script[start:end + 1]
            if sqlite3.complete_statement(text):  # not a ';' inside a literal, a comment or a trigger's body
                if _WORD.search(_QUOTED.sub(" ", text)):
                    found.append((text, _kind(text)))
                start = end + 1
            end = script.find(";", end + 1)
        rest = script[start:]
        if _WORD.search(_QUOTED.sub(" ", rest)):
            found.append((rest, _kind(rest)))
        statements = tuple(found)
        if len(_SCRIPTS) >= 256:
            _SCRIPTS.clear()
        _SCRIPTS[script] = statements
    return statements


_SCRIPTS: dict[str, tuple[tuple[str, int], ...]] = {}
