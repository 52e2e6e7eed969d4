"""Where a command writes: standard output and error as dst writes to them, the one error line, the console.

A failed write (a full disk, a closed pipe) is an :class:`OutputError`, told apart from any other OSError,
so that :func:`dst.cli.main` can say it in one line (or, for a closed pipe, stop quietly).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO, cast

from ..text import one_line

_LINE_LIMIT = 1000  # characters of an error line, whatever the text it quotes


def error(line: str) -> None:
    """One line on stderr, safe to print (``one_line``); a stderr that cannot take it has nowhere to say so."""
    try:
        print(one_line(line, _LINE_LIMIT), file=sys.stderr)
        sys.stderr.flush()
    except OutputError:
        pass


class OutputError(Exception):
    """Standard output or error cannot take what dst writes: a full disk, an I/O error, a closed pipe."""

    def __init__(self, stream: str, error: OSError) -> None:
        super().__init__(stream, error)
        self.stream, self.why = stream, error.strerror or type(error).__name__
        self.broken_pipe = isinstance(error, BrokenPipeError)


class Stream:
    """``sys.stdout`` or ``sys.stderr`` as dst writes to it: a character the stream's encoding cannot hold
    is written as its escape (``PYTHONIOENCODING=ascii``), and a failed write is an :class:`OutputError`,
    told apart from any other OSError a run might raise. Everything else is the stream's own."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self._stream, self._name = stream, name

    @classmethod
    def around(cls, stream: TextIO, name: str) -> TextIO:
        return cast(TextIO, cls(stream, name))  # a TextIO in all it is asked for: write, flush, the rest passed on

    def write(self, text: str) -> int:
        try:
            try:
                return self._stream.write(text)
            except UnicodeEncodeError:  # raised before anything is written: the text again, escaped
                encoding = self._stream.encoding or "utf-8"
                return self._stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        except OSError as e:
            raise OutputError(self._name, e) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            raise OutputError(self._name, e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def silence(stream: TextIO | None) -> None:
    """Point the stream's descriptor at /dev/null, as the Python docs advise on SIGPIPE: what is still
    buffered then goes nowhere at exit instead of failing again."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError):  # not a real file (in-process: a test's capture)
        return
    if fd >= 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


_PIPED_WIDTH = 200  # piped output keeps one event per line (rich would wrap at 80 columns) unless COLUMNS says


def rich_console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # No markup and no emoji codes in strings: what dst prints with a style is a rich.text.Text, so a name like
    # "[/]" or ":bug:" stays as written.
    if stream.isatty():
        return Console(file=stream, highlight=False, markup=False, emoji=False, soft_wrap=True)
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and 20 <= int(columns) <= 10_000 else _PIPED_WIDTH
    return Console(file=cast(TextIO, _Trimmed(stream)), highlight=False, markup=False, emoji=False, soft_wrap=True, width=width)


class _Trimmed:
    """A piped stream without the spaces rich pads a table's rows with to the console's width: a line ends
    where its text does."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._spaces = ""  # trailing spaces held back: the next write says whether a line ended after them

    def write(self, text: str) -> int:
        held = self._spaces + text
        body = held.rstrip(" ")
        self._spaces = held[len(body):]
        self._stream.write("\n".join(line.rstrip(" ") for line in body.split("\n")))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._stream.fileno()


