"""dst.aio.cached_file: what an adapter's build makes once per machine (a migrated template database), not per process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dst import aio
from dst.aio import cache


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_made", {})
    monkeypatch.setattr(cache, "_scratch", None)  # a process's own folder, for each test its own
    return tmp_path / "cache"


def maker(calls: list[str], content: bytes = b"schema") -> object:
    def make(path: str) -> None:
        calls.append(path)
        Path(path).write_bytes(content)
    return make


def test_made_once_and_kept_for_the_next_process(_own_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    path = aio.cached_file("app-template.db", "migrations 42", maker(calls))
    assert Path(path).read_bytes() == b"schema" and Path(path).parent == _own_cache
    assert Path(path).name.startswith("app-template-") and path.endswith(".db")
    assert aio.cached_file("app-template.db", "migrations 42", maker(calls)) == path
    monkeypatch.setattr(cache, "_made", {})  # another process: it knows only the folder
    assert aio.cached_file("app-template.db", "migrations 42", maker(calls)) == path
    assert len(calls) == 1
    assert sorted(os.listdir(_own_cache)) == [Path(path).name]  # no scratch left behind


def test_a_new_key_makes_a_new_file(_own_cache: Path) -> None:
    calls: list[str] = []
    old = aio.cached_file("app-template.db", "migrations 42", maker(calls, b"old"))
    new = aio.cached_file("app-template.db", "migrations 43", maker(calls, b"new"))
    assert old != new and Path(old).read_bytes() == b"old" and Path(new).read_bytes() == b"new"
    assert len(calls) == 2


def test_a_file_deleted_under_a_running_process_is_made_again(_own_cache: Path) -> None:
    calls: list[str] = []
    path = aio.cached_file("t.db", "k", maker(calls))
    os.remove(path)
    assert aio.cached_file("t.db", "k", maker(calls)) == path and Path(path).exists()
    assert len(calls) == 2


def test_a_failed_make_keeps_nothing_and_says_so(_own_cache: Path) -> None:
    def broken(path: str) -> None:
        Path(path).write_bytes(b"half")
        raise RuntimeError("migration 17 failed")

    with pytest.raises(RuntimeError, match="migration 17"):
        aio.cached_file("t.db", "k", broken)
    assert os.listdir(_own_cache) == []
    with pytest.raises(FileNotFoundError, match="wrote nothing"):
        aio.cached_file("t.db", "k", lambda path: None)
    assert os.listdir(_own_cache) == []


def test_an_unwritable_cache_folder_falls_back_to_the_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("DST_CACHE", str(blocker / "cache"))  # under a file: no folder can be made there
    calls: list[str] = []
    path = aio.cached_file("t.db", "k", maker(calls))
    assert Path(path).read_bytes() == b"schema" and not str(path).startswith(str(blocker))
    assert aio.cached_file("t.db", "k", maker(calls)) == path and len(calls) == 1


def test_the_folder_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DST_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert aio.cache_folder() == tmp_path / "xdg" / "dst"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert aio.cache_folder() == tmp_path / "home" / ".cache" / "dst"


@pytest.mark.parametrize("make", [
    "Path(path).write_bytes(b'x' * 100000)",
    "Path(path).mkdir(); (Path(path) / 'data').write_bytes(b'x' * 100000)",  # a folder (dst's PostgreSQL cluster)
], ids=["file", "folder"])
def test_two_processes_made_at_once_each_publish_a_whole_one(_own_cache: Path, make: str) -> None:
    # Both make it (neither sees the other's yet); each publishes a whole one by a rename, and both name the same path.
    code = ("import sys, time; from pathlib import Path; from dst.aio import cache\n"
            "def make(path):\n"
            f"    time.sleep(0.3); {make}\n"
            "print(cache.cached_file('t.db', 'k', make))")
    env = {**os.environ, "DST_CACHE": str(_own_cache)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    paths = {p.communicate()[0].strip() for p in procs}
    assert len(paths) == 1 and all(p.returncode == 0 for p in procs)
    made = Path(paths.pop())
    assert (made / "data" if made.is_dir() else made).read_bytes() == b"x" * 100000
    assert len(os.listdir(_own_cache)) == 1


def test_no_home_at_all_falls_back_to_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DST_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    calls: list[str] = []
    path = aio.cached_file("t.db", "k", maker(calls))
    assert Path(path).read_bytes() == b"schema" and aio.cached_file("t.db", "k", maker(calls)) == path
    assert len(calls) == 1
