"""The findings folder: each finding written once, numbered after the highest number already there.

A finding takes its name by a hard link that fails rather than overwrite, after it has been read back
whole; one writer at a time holds the folder's lock, and a finding whose signature is already there is
not written again.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import UserError
from ..files import FileError, check_folder, read_toml, staged, where, why
from .format import FORMAT, Finding, read, render

_NAME = re.compile(r"^(\d{3,})-[a-z0-9-]+\.toml$")
_MAX_BYTES = 1 << 20  # a finding is a few kilobytes: a larger file in the folder is not one


def _finding_files(directory: Path) -> list[Path]:
    """The folder's finding files: regular files (not links, not FIFOs) named ``NNN-*.toml``, in order."""
    files = []
    for path in sorted(directory.iterdir()):
        try:
            info = path.lstat()
        except OSError:
            continue
        if _NAME.match(path.name) and stat.S_ISREG(info.st_mode) and info.st_size <= _MAX_BYTES:
            files.append(path)
    return files


def existing(directory: Path) -> dict[str, Path]:
    """Signatures of the findings already in ``directory`` (a file that is not a finding is skipped)."""
    found: dict[str, Path] = {}
    for path in _finding_files(directory):
        try:
            meta = read_toml(path).get("finding", {})
        except FileError:
            continue
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            continue
        if isinstance(meta.get("signature"), str):
            found.setdefault(meta["signature"], path)
        origin = meta.get("origin", {})
        if isinstance(origin, dict) and isinstance(origin.get("signature"), str):
            found.setdefault(origin["signature"], path)
    return found


class FolderError(UserError):
    """The findings folder cannot take a finding; ``str()`` is one line (exit 2, before a campaign starts)."""


def ready(directory: Path) -> Path:
    """Make sure findings can be written into ``directory`` (created if missing), or say why in one line."""
    try:
        check_folder(directory)
    except FileExistsError:
        raise FolderError(f"{where(directory)}: expected a folder for findings, but it is a file") from None
    except (OSError, ValueError) as e:
        raise FolderError(f"{where(directory)}: cannot write findings there ({why(e)})") from None
    return directory


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One writer at a time in a folder (two campaigns at once write each signature once)."""
    with open(directory / ".dst-findings.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write(finding: Finding, directory: Path) -> tuple[Path, bool]:
    """Write ``finding`` into ``directory`` as the next number; returns (path, written). When a finding
    with its signature is already there, returns that one's path and writes nothing. The file is read
    back before it is given its name, so a finding that would not read is never written."""
    ready(directory)
    with _locked(directory):
        known = existing(directory)
        for sig in (finding.signature, finding.origin.get("signature")):
            if sig in known:
                return known[sig], False
        numbers = [int(m.group(1)) for p in directory.iterdir() if (m := _NAME.match(p.name))]
        number = max(numbers, default=0) + 1
        while True:
            with staged(directory, render(finding, number, directory).encode(), prefix=".finding-") as temp:
                again = read(temp)
                assert (again.digest, again.invariant, again.scenario.steps, again.consequences) == \
                    (finding.digest, finding.invariant, finding.scenario.steps, finding.consequences), \
                    "a finding did not read back as written"
                target = directory / f"{number:03d}-{finding.title}.toml"
                try:
                    os.link(temp, target)  # fails rather than overwrite
                    return target, True
                except FileExistsError:
                    number += 1  # a name taken by hand meanwhile
