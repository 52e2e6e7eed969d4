"""A user's files, read and written safely, in one place.

A read takes a regular file only (a FIFO would block, a device might never end) and no more than a size
cap, as UTF-8. A write goes to a temporary file in the same folder, onto the disk, and only then takes
its name in one step, so a reader sees the old file or the whole new one; it never replaces what is not
a regular file. Whatever a user's path does wrong ends as one line naming it (a :class:`FileError`, or
the caller's own error through :func:`why`).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import tomllib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .errors import UserError
from .text import one_line

PATH_LIMIT = 160  # characters of a file's name in an error line: its start, and its end that names the file
MAX_FILE_BYTES = 64 << 20  # far past any scenario, finding or report: a stray huge file is not read whole


class FileError(UserError):
    """A file cannot be read as asked; ``str()`` is the one line to show the user."""


def where(path: str | Path) -> str:
    """A file or folder as an error line names it."""
    return one_line(str(path), PATH_LIMIT)


def from_here(path: str | Path) -> str:
    """``path`` as a command typed in the working folder names it: relative to that folder when it lies inside,
    whole when it lies outside (``../../x`` reads worse than ``/home/x``)."""
    whole = os.path.abspath(path)
    try:
        near = os.path.relpath(whole)
    except ValueError:  # another drive
        return whole
    return whole if near.startswith(os.pardir) else near


def why(error: OSError | ValueError) -> str:
    """What the system said, for an error line's parentheses (a ValueError: a NUL in a path)."""
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return str(error)


def not_regular(path: str | Path) -> str | None:
    """What stands at ``path`` if it is something other than a regular file (``"a folder"``), else None
    (a regular file, or nothing); an ``OSError`` or a ``ValueError`` if that cannot be known."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    return None if stat.S_ISREG(mode) else _kind(mode)


def _kind(mode: int) -> str:
    return "a folder" if stat.S_ISDIR(mode) else "a FIFO, socket or device"


def _refused(what: str) -> OSError:
    return OSError(errno.EINVAL, f"it is {what}, not a regular file")


# --- reading ------------------------------------------------------------------------------------------

def read_bytes(path: str | Path, limit: int) -> bytes:
    """Up to ``limit`` bytes from the start of a regular file; an ``OSError`` (or a ``ValueError``: a NUL
    in the path) otherwise. A FIFO is refused at once, never waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer opens at once (to be refused)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refused(_kind(mode))
        with open(fd, "rb", closefd=False) as f:
            return f.read(limit)
    finally:
        os.close(fd)


def read_text(path: str | Path, *, missing: str = "no such file") -> str:
    """The UTF-8 text of a regular file, or a :class:`FileError` naming the file and what is wrong
    (``missing`` says what a name that is not there is)."""
    try:
        data = read_bytes(path, MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise FileError(f"{where(path)}: {missing}") from None
    except (OSError, ValueError) as e:
        raise FileError(f"{where(path)}: cannot read the file ({why(e)})") from None
    if len(data) > MAX_FILE_BYTES:
        raise FileError(f"{where(path)}: cannot read the file (larger than {MAX_FILE_BYTES >> 20} MiB)")
    try:
        return data.decode("utf-8-sig")  # -sig: a byte-order mark some editors write is not an error
    except UnicodeDecodeError as e:
        raise FileError(f"{where(path)}: cannot read the file (not UTF-8 text: byte {e.start + 1} is "
                        f"{data[e.start]:#04x})") from None


def read_toml(path: str | Path, *, missing: str = "no such file") -> dict[str, Any]:
    """The TOML document in a file, or a :class:`FileError` naming the file and what is wrong."""
    text = read_text(path, missing=missing)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FileError(f"{where(path)}: not valid TOML: {e}") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and inline tables
        raise FileError(f"{where(path)}: not valid TOML for dst: arrays or inline tables nested too deep") from None
    except ValueError as e:  # int()'s own limit, which tomllib lets through: an integer of over 4,300 digits
        raise FileError(f"{where(path)}: not valid TOML for dst: {str(e).split(';')[0]}") from None


# --- writing ------------------------------------------------------------------------------------------

def check_folder(folder: Path) -> None:
    """Make sure files can be written in ``folder`` (created if missing): a file is made there and removed.
    An ``OSError`` (``FileExistsError``: a file stands there) or a ``ValueError`` says why not."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".dst-probe-")
    os.close(fd)
    os.unlink(probe)


@contextmanager
def staged(folder: Path, data: bytes, *, prefix: str) -> Iterator[Path]:
    """``data`` in a new temporary file in ``folder``, whole and on the disk, readable by the group that
    collects CI artifacts; it is gone after the block, so the block gives it its name by a link or a rename."""
    fd, temp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, 0o644)
        yield Path(temp)
    finally:
        try:
            os.unlink(temp)
        except OSError:  # renamed into place (or left behind: never at the cost of the error that got here)
            pass


def replace(path: Path, data: bytes, *, prefix: str) -> None:
    """Write ``data`` at ``path`` whole or not at all, over a regular file that is there but never over a
    folder, a FIFO or a device; an ``OSError`` (or a ``ValueError``) says why not."""
    what = not_regular(path)
    if what is not None:
        raise _refused(what)
    with staged(path.parent, data, prefix=prefix) as temp:
        os.replace(temp, path)
