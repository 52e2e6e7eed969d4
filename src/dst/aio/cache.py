"""What an adapter's build makes once per machine, not once per process: a template database its migrations built.

A campaign's workers, ``dst run``, ``dst replay``, ``dst shrink`` and each test process start cold, and a schema a
migration tool builds (Prefect's: about 5 CPU s) comes out the same in each. :func:`cached_file` keeps such a file in
dst's cache folder under a key naming everything its content depends on, and hands every process after the first
its path; within a process (and its forks) it asks the disk nothing more than whether the file is still there.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

_made: dict[tuple[str, str], str] = {}  # (name, key) -> the path: forks inherit it
_scratch: str | None = None  # where files go when the cache folder cannot be written: this process's, removed at exit


def cache_folder() -> Path:
    """Where :func:`cached_file` keeps its files: ``$DST_CACHE``, else ``$XDG_CACHE_HOME/dst``, else ``~/.cache/dst``
    (delete it at will: what is missing is made again)."""
    explicit = os.environ.get("DST_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dst"


def cached_file(name: str, key: str, make: Callable[[str], None]) -> str:
    """The path of the file ``make(path)`` writes at ``path``, made the first time any process on the machine asks
    for ``name`` under ``key`` and kept in :func:`cache_folder` for every one after (``name`` gives the file's name
    and suffix: ``"prefect-template.db"``). ``key`` must name all its content depends on (the library's version,
    its migrations' revisions, the database library's version): a file made under another key is never handed out.
    Copy the file into the run's folder; never write to it. ``make`` runs outside any simulated run; what it
    raises is raised here, and nothing is kept. Two processes that make it at once each publish a whole file (an
    atomic rename), and either's is the other's. ``make`` may make a folder instead (dst's PostgreSQL cluster)."""
    memo = _made.get((name, key))
    if memo is not None and os.path.exists(memo):
        return memo
    stem, suffix = os.path.splitext(name)
    digest = hashlib.sha256(f"{name}\0{key}".encode()).hexdigest()[:16]
    kept = f"{stem}-{digest}{suffix}"
    path = _found(kept) or _folder() / kept
    if not path.exists():
        _publish(make, name, path)  # what make raises is raised here
    _made[name, key] = str(path)
    return str(path)


def _found(kept: str) -> Path | None:
    """``kept`` in :func:`cache_folder`, if it is there (a folder dst may not write to, a CI cache mounted read-only,
    still serves what it holds)."""
    try:
        path = cache_folder() / kept
    except RuntimeError:  # no home
        return None
    return path if path.exists() else None


def _folder() -> Path:
    """:func:`cache_folder`, made if missing; where it cannot be written (a read-only home, a path that is a file, no
    home at all), this process's own scratch folder."""
    try:
        folder = cache_folder()
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK | os.X_OK):
            return folder
    except (OSError, RuntimeError):
        pass
    return Path(_process_scratch())


def _publish(make: Callable[[str], None], name: str, path: Path) -> None:
    """``make`` it beside ``path`` and rename it there whole (a folder another process renamed there first wins)."""
    building = tempfile.mkdtemp(prefix=f".{path.stem}-", dir=path.parent)
    try:
        made = os.path.join(building, name)
        make(made)
        if not os.path.exists(made):
            raise FileNotFoundError(f"dst.aio.cached_file({name!r}): make() wrote nothing at {made}")
        try:
            os.replace(made, path)
        except OSError:
            if not path.is_dir():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _process_scratch() -> str:
    global _scratch
    if _scratch is None or not os.path.isdir(_scratch):
        _scratch = tempfile.mkdtemp(prefix="dst-cache-")
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch
