"""The asyncio mode's sandbox: virtual clocks, seeded randomness, refusals, and everything put back on exit."""

from __future__ import annotations

import builtins
import concurrent.futures
import datetime as dt
import importlib.util
import io
import os
import pathlib
import random
import secrets
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
import uuid
from datetime import date, datetime, timezone
from os import urandom
from time import monotonic, perf_counter
from time import time as wall_time
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dst
from dst.sandbox import Refusal, Sandbox, real

# Bound before any sandbox, as libraries do at import.
NOW = datetime.now
UTCNOW = datetime.utcnow
ORIGINALS = {name: getattr(time, name) for name in ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter",
                                                   "perf_counter_ns", "localtime", "strftime")}
WALL_MS = 1_767_225_600_123  # 2026-01-01T00:00:00.123Z
MONO_MS = 5_250
DST_DIR = os.path.dirname(dst.__file__)


def box(seed: int = 7, wall: int = WALL_MS, mono: int = MONO_MS, **kwargs: Any) -> Sandbox:
    return Sandbox(wall_ms=lambda: wall, monotonic_ms=lambda: mono, seed=seed, **kwargs)


def test_clocks_read_virtual_time_inside_and_real_time_after():
    real_before = real(time.time)()
    with box():
        assert time.time() == WALL_MS / 1000
        assert time.time_ns() == WALL_MS * 1_000_000
        assert time.monotonic() == time.perf_counter() == MONO_MS / 1000
        assert time.monotonic_ns() == time.perf_counter_ns() == MONO_MS * 1_000_000
        assert time.clock_gettime(time.CLOCK_REALTIME) == WALL_MS / 1000
        assert time.clock_gettime_ns(time.CLOCK_MONOTONIC) == MONO_MS * 1_000_000
        assert datetime.now() == datetime(2026, 1, 1, 0, 0, 0, 123_000)  # local time is UTC inside
        assert datetime.now(timezone.utc) == datetime(2026, 1, 1, 0, 0, 0, 123_000, tzinfo=timezone.utc)
        assert datetime.now(tz=dt.timezone(dt.timedelta(hours=2))).hour == 2
        assert datetime.utcnow() == datetime(2026, 1, 1, 0, 0, 0, 123_000)
        assert date.today() == date(2026, 1, 1)
        assert datetime.today() == datetime(2026, 1, 1, 0, 0, 0, 123_000)
        assert time.strftime("%Y-%m-%d %H:%M:%S") == "2026-01-01 00:00:00"
        assert time.localtime()[:6] == time.gmtime()[:6] == (2026, 1, 1, 0, 0, 0)
        assert time.ctime() == time.asctime() == "Thu Jan  1 00:00:00 2026"
        assert time.strftime("%Y", time.gmtime(0)) == "1970"  # an explicit time is left alone
        assert abs(real(time.time)() - real_before) < 60  # the escape hatch reads the host's clock
    assert abs(time.time() - real_before) < 60
    assert time.monotonic() == pytest.approx(real(time.monotonic)(), abs=5)
    assert abs(datetime.now(timezone.utc).timestamp() - real_before) < 60
    assert date.today().year >= 2024


def test_what_was_imported_before_entry_reads_virtual_time_too():
    with box():
        assert monotonic() == perf_counter() == MONO_MS / 1000
        assert wall_time() == WALL_MS / 1000
        assert NOW() == datetime(2026, 1, 1, 0, 0, 0, 123_000)  # a bound method made at import
        assert UTCNOW() == datetime(2026, 1, 1, 0, 0, 0, 123_000)
        drawn = urandom(8)
    with box():
        assert os.urandom(8) == drawn  # the same object: seeded
    assert wall_time() == pytest.approx(real(time.time)(), abs=60)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 253_402_300_799_999), st.integers(0, 10**13))
def test_every_clock_is_the_callables_value_exactly(wall, mono):
    with box(wall=wall, mono=mono):
        assert time.time_ns() == wall * 1_000_000 and time.monotonic_ns() == mono * 1_000_000
        assert time.time() == wall / 1000 and time.perf_counter() == mono / 1000
        expected = datetime(1970, 1, 1, tzinfo=timezone.utc) + dt.timedelta(milliseconds=wall)
        assert datetime.now(timezone.utc) == expected
        assert datetime.utcnow() == datetime.now() == expected.replace(tzinfo=None)
        assert date.today() == expected.date()


def test_the_clocks_move_with_the_callables():
    clock = {"wall": 0, "mono": 0}
    with Sandbox(wall_ms=lambda: clock["wall"], monotonic_ms=lambda: clock["mono"], seed=1):
        start = time.monotonic()
        clock["mono"] += 1500
        clock["wall"] += 86_400_000
        assert time.monotonic() - start == 1.5
        assert date.today() == date(1970, 1, 2)


DRAWS = """
import os, random, secrets, sys, time, uuid
from datetime import datetime
from dst.sandbox import Sandbox
with Sandbox(wall_ms=lambda: 1_767_225_600_000, monotonic_ms=lambda: 0, seed=int(sys.argv[1])):
    first, items = random.random(), list(range(20))
    random.shuffle(items)
    print(first, random.randint(0, 10**9), random.choice("abcdef"), random.uniform(0, 1),
          random.getrandbits(64), random.randbytes(8).hex(), items)
    print(os.urandom(16).hex(), random._urandom(8).hex(), secrets.token_hex(), secrets.token_urlsafe(),
          random.SystemRandom().random(), random.Random().random(), uuid.uuid4(), uuid.uuid1(), time.time(),
          datetime.now())
"""


def test_draws_are_the_seeds_in_any_process():
    def draws(seed: int, hash_seed: str) -> str:
        done = subprocess.run([sys.executable, "-c", DRAWS, str(seed)], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": hash_seed})
        return done.stdout

    first = draws(5, "1")
    assert first == draws(5, "2")
    assert first != draws(6, "1")
    with box(seed=5):
        assert random.random() == float(first.split()[0])


def test_random_state_is_put_back_and_draws_do_not_depend_on_it():
    before = random.getstate()
    with box(seed=3):
        inside = [random.random(), os.urandom(4), uuid.uuid4(), secrets.token_hex(4), random.Random().random()]
    assert random.getstate() == before
    random.seed(12345)  # another outside state: the same draws inside
    with box(seed=3):
        assert [random.random(), os.urandom(4), uuid.uuid4(), secrets.token_hex(4), random.Random().random()] == inside
    with box(seed=4):
        assert random.random() != inside[0]
    random.setstate(before)


def test_local_time_is_utc_inside_whatever_the_hosts_zone(monkeypatch):
    monkeypatch.setenv("TZ", "EST+5")  # a POSIX zone: no tz database needed
    time.tzset()
    try:
        with box():
            assert datetime.now() == datetime(2026, 1, 1, 0, 0, 0, 123_000) and os.environ["TZ"] == "UTC"
        assert os.environ["TZ"] == "EST+5" and time.localtime(0).tm_hour == 19
        with box(tz=None):  # the host's zone
            assert datetime.now() == datetime(2025, 12, 31, 19, 0, 0, 123_000)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_uuid1_has_virtual_time_and_a_seeded_node():
    node = uuid.getnode()
    with box(seed=3):
        one = uuid.uuid1()
        assert one.node == uuid.getnode() and one.node & (1 << 40)  # a random node: multicast bit set
        assert dt.datetime(1582, 10, 15) + dt.timedelta(microseconds=one.time // 10) == datetime(2026, 1, 1, 0, 0, 0,
                                                                                                    123_000)
    assert uuid.getnode() == node


def trigger_fork() -> None:
    if os.fork() == 0:  # refused: never reached, but a child must not run the suite on
        os._exit(0)


REFUSED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    # name: (what the message names, a one-line call given paths in and out of the folder, a socket and a pool)
    "thread": ("threading.Thread.start()", lambda c: threading.Thread(target=print).start()),
    "thread pool": ("ThreadPoolExecutor.submit()", lambda c: concurrent.futures.ThreadPoolExecutor(1).submit(print)),
    "process pool": ("ProcessPoolExecutor.submit()", lambda c: c["pool"].submit(print)),
    "socket": ("socket.socket()", lambda c: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
    "connect": ("socket.socket.connect()", lambda c: c["socket"].connect(("127.0.0.1", 9))),
    "create_connection": ("socket.create_connection()", lambda c: socket.create_connection(("127.0.0.1", 9), 1)),
    "getaddrinfo": ("socket.getaddrinfo()", lambda c: socket.getaddrinfo("localhost", 80)),
    "gethostbyname": ("socket.gethostbyname()", lambda c: socket.gethostbyname("localhost")),
    "popen": ("subprocess.Popen()", lambda c: subprocess.run(["true"])),
    "system": ("os.system()", lambda c: os.system("true")),
    "fork": ("os.fork()", lambda c: trigger_fork()),
    "signal": ("signal.signal()", lambda c: signal.signal(signal.SIGUSR1, lambda *a: None)),
    "alarm": ("signal.alarm()", lambda c: signal.alarm(10)),
    "open": ("open(", lambda c: open(c["out"] / "a.txt", "w")),
    "io.open": ("open(", lambda c: io.open(str(c["out"] / "a.txt"), mode="ab")),
    "write_text": ("open(", lambda c: (c["out"] / "a.txt").write_text("x")),
    "os.open": ("os.open(", lambda c: os.open(c["out"] / "a.txt", os.O_WRONLY | os.O_CREAT)),
    "mkdir": ("os.mkdir(", lambda c: os.mkdir(c["out"] / "d")),
    "remove": ("os.remove(", lambda c: os.remove(c["out"] / "existing.txt")),
    "rename": ("os.rename(", lambda c: os.rename(c["out"] / "existing.txt", c["in"] / "moved.txt")),
    "sqlite3": ("sqlite3.connect(", lambda c: sqlite3.connect(c["out"] / "db.sqlite")),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_refusal_is_one_line_naming_the_call_and_the_users_line(name, tmp_path):
    names, call = REFUSED[name]
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "existing.txt").write_text("kept")
    context: dict[str, Any] = {"in": tmp_path / "in", "out": tmp_path / "out"}
    with socket.socket() as sock, concurrent.futures.ProcessPoolExecutor(1) as pool:  # made outside: allowed
        context.update(socket=sock, pool=pool)
        seen: list[Refusal] = []
        with box(folder=str(tmp_path / "in"), refused=seen.append):
            with pytest.raises(Refusal) as refused:
                call(context)
    message = str(refused.value)
    line = call.__code__.co_firstlineno if name != "fork" else trigger_fork.__code__.co_firstlineno + 1
    assert seen == [refused.value]  # told first: the run ends even if the service swallows it
    assert "\n" not in message and not message.startswith("dst: ") and names in message
    assert f" called at tests/test_sandbox.py:{line} cannot run in a simulated run: " in message
    assert message.split(": ")[-1].split(";")[1].strip()  # what to use instead
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["existing.txt"]  # nothing was written


def test_reading_anywhere_and_writing_in_the_folder_are_allowed(tmp_path):
    with box(folder=str(tmp_path), refused=pytest.fail):
        assert open(__file__).readline().startswith('"""')
        assert pathlib.Path(__file__).read_bytes()
        (tmp_path / "a.txt").write_text("x")
        os.mkdir(tmp_path / "d")
        os.rename(tmp_path / "a.txt", tmp_path / "d" / "b.txt")
        os.close(os.open(tmp_path / "c.txt", os.O_WRONLY | os.O_CREAT))
        sqlite3.connect(tmp_path / "db.sqlite").close()
        sqlite3.connect(":memory:").close()
        os.remove(tmp_path / "c.txt")
        with open(sys.stdout.fileno(), "w", closefd=False):  # a descriptor is already open: not a path
            pass
    assert (tmp_path / "d" / "b.txt").read_text() == "x"


def test_no_folder_means_no_file_may_be_written(tmp_path):
    with box(), pytest.raises(Refusal, match="keep the data in memory"):
        open(tmp_path / "a.txt", "w")


def test_the_import_machinery_may_write_its_bytecode_cache(tmp_path, monkeypatch):
    (tmp_path / "sandbox_fresh_module.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.delitem(sys.modules, "sandbox_fresh_module", raising=False)
    with box(refused=pytest.fail):
        import sandbox_fresh_module
    assert sandbox_fresh_module.VALUE == 42
    assert list((tmp_path / "__pycache__").iterdir())  # written, and not refused


def test_dst_itself_may_do_what_the_users_code_may_not(tmp_path):
    # Code compiled under dst's folder counts as dst's: it enters the sandbox and writes a file, which goes
    # through; a callback of the user's it calls inside is refused.
    source = "def run(box, path, callback):\n    with box:\n        open(path, 'w').close()\n        callback()\n"
    scope: dict[str, Any] = {}
    exec(compile(source, os.path.join(DST_DIR, "aio", "_harness_for_test.py"), "exec"), scope)
    with pytest.raises(Refusal, match=r"tests/test_sandbox.py:\d+"):
        scope["run"](box(), tmp_path / "dst.txt", lambda: open(tmp_path / "user.txt", "w"))
    assert (tmp_path / "dst.txt").exists() and not (tmp_path / "user.txt").exists()


def test_everything_is_put_back_when_the_body_raises():
    thread_start, seed = threading.Thread.__dict__["start"], random.Random.__dict__["seed"]
    tz = os.environ.get("TZ")
    with pytest.raises(ZeroDivisionError):
        with box():
            assert time.monotonic() == MONO_MS / 1000
            1 / 0
    assert {name: getattr(time, name) for name in ORIGINALS} == ORIGINALS
    assert all(getattr(time, name) is fn for name, fn in ORIGINALS.items())
    assert time.monotonic.__self__ is time and os.urandom.__self__ is sys.modules[os.name]
    assert time.monotonic() == pytest.approx(real(time.monotonic)(), abs=1)  # the C function again
    assert NOW().year == real(datetime.now)().year and len(os.urandom(3)) == 3
    assert builtins.open is io.open and threading.Thread.__dict__["start"] is thread_start
    assert random.Random.__dict__["seed"] is seed and "connect" not in socket.socket.__dict__
    assert os.environ.get("TZ") == tz


def test_sandboxes_do_not_nest_and_the_outer_one_still_restores():
    with box() as outer:
        with pytest.raises(RuntimeError, match="do not nest"):
            with box():
                pass
        assert time.monotonic() == MONO_MS / 1000
        assert outer.swallowed == []
    assert time.monotonic() != MONO_MS / 1000


def test_a_sandbox_may_be_entered_again_and_draws_the_same():
    sandbox = box(seed=11)
    with sandbox:
        first = (random.random(), os.urandom(8), datetime.now())
    with sandbox:
        assert (random.random(), os.urandom(8), datetime.now()) == first


def test_a_bad_argument_to_a_datetime_classmethod_is_kept():
    with box() as sandbox:
        with pytest.raises(SystemError):
            datetime.now(5)  # type: ignore[arg-type]
    assert [type(e) for e in sandbox.swallowed] == [TypeError]
    assert "tzinfo argument" in str(sandbox.swallowed[0])


def test_other_threads_keep_the_real_functions():
    go, seen = threading.Event(), []

    def other() -> None:
        go.wait()
        seen.extend([time.time(), datetime.now(timezone.utc).timestamp(), len(os.urandom(4))])

    thread = threading.Thread(target=other)
    thread.start()
    before = real(time.time)()
    with box():
        go.set()
        thread.join()
    assert abs(seen[0] - before) < 60 and abs(seen[1] - before) < 60 and seen[2] == 4


def test_an_entry_that_fails_half_way_puts_back_what_it_did(monkeypatch):
    import dst.sandbox.patches as patched

    class Failing:
        def install(self) -> None:
            raise OSError("no")

        def remove(self) -> None:
            pass

    patches = patched._patches()
    monkeypatch.setattr(patched, "_PATCHES", patches[:5] + [Failing()] + patches[5:])
    state = random.getstate()
    with pytest.raises(OSError):
        with box():
            pass
    assert all(getattr(time, name) is fn for name, fn in ORIGINALS.items())
    assert time.monotonic() == pytest.approx(real(time.monotonic)(), abs=1) and random.getstate() == state
    monkeypatch.setattr(patched, "_PATCHES", patches)
    with box():  # and it may be entered again
        assert time.monotonic() == MONO_MS / 1000


def test_entered_through_an_exit_stack_by_dst_as_the_loop_does(tmp_path):
    # dst's loop enters the sandbox in a helper that returns an ExitStack: the helper's frame is gone by the time
    # the run's code calls anything, and the walk must still stop at the frame that holds the with.
    source = ("import contextlib\n"
              "def running(box):\n    stack = contextlib.ExitStack()\n    stack.enter_context(box)\n    return stack\n"
              "def run(box, path, callback):\n    with running(box):\n        open(path, 'w').close()\n"
              "        callback()\n")
    scope: dict[str, Any] = {}
    exec(compile(source, os.path.join(DST_DIR, "aio", "_harness_for_test.py"), "exec"), scope)
    with pytest.raises(Refusal, match=r"tests/test_sandbox.py:\d+"):
        scope["run"](box(), tmp_path / "dst.txt", lambda: os.mkdir(tmp_path / "user"))
    assert (tmp_path / "dst.txt").exists() and not (tmp_path / "user").exists()


def test_a_files_name_in_a_message_does_not_depend_on_where_packages_are_installed_or_where_dst_runs(
        tmp_path, monkeypatch):
    # A trace names the line a server error was raised at: two installs of one package (one inside the working
    # folder, as a CI's venv is) must give the same name, or a finding replays with another digest.
    from dst.frames import short

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    inside = project / ".venv" / "lib" / "python3.11" / "site-packages"
    outside = elsewhere / "venv" / "lib" / "python3.11" / "site-packages"
    for here, packages in ((project, inside), (elsewhere, outside), (tmp_path, outside)):
        here.mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(here)
        monkeypatch.setattr("sys.path", [str(project), str(project / "tests"), str(packages)])
        assert short(str(packages / "sqlalchemy" / "engine" / "base.py")) == os.path.join("sqlalchemy", "engine", "base.py")
        assert short(str(project / "tests" / "models.py")) == os.path.join("tests", "models.py")  # the outermost entry


# --- what a simulated run does without ---------------------------------------------------------------------------

def test_a_run_flushes_nothing_to_disk_and_its_sqlite_commits_do_not_wait_for_one(tmp_path):
    path = tmp_path / "store.db"
    with box(folder=str(tmp_path)):
        assert os.fsync(10**6) is None and os.fdatasync(10**6) is None  # not even looked at: no flush in a run
        inside = sqlite3.connect(path)
        assert inside.execute("PRAGMA synchronous").fetchone() == (0,)  # OFF
        inside.execute("CREATE TABLE t (x)")
        inside.execute("INSERT INTO t VALUES (1)")
        inside.commit()
        inside.close()
    with pytest.raises(OSError):
        os.fsync(10**6)  # no such file descriptor
    outside = sqlite3.connect(path)
    assert outside.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL, SQLite's own default
    assert outside.execute("SELECT x FROM t").fetchall() == [(1,)]  # what committed is there for the next process
    outside.close()


def test_a_tls_context_loads_no_certificates_in_a_run(tmp_path):
    missing = str(tmp_path / "no-such-bundle.pem")
    with box():
        context = ssl.create_default_context(cafile=missing)  # no handshake can read them: sockets are refused
        context.load_verify_locations(cafile=missing)
    with pytest.raises(FileNotFoundError):
        ssl.create_default_context(cafile=missing)


def test_an_import_that_failed_fails_again_without_a_search_and_the_path_finder_is_put_back(monkeypatch):
    from importlib.machinery import PathFinder

    searched: list[str] = []
    real_find = PathFinder.find_spec

    def counting(name, path=None, target=None):  # type: ignore[no-untyped-def]
        searched.append(name)
        return real_find(name, path, target)

    monkeypatch.setattr(PathFinder, "find_spec", counting)
    before = list(sys.meta_path)
    with box():
        for _ in range(3):
            with pytest.raises(ModuleNotFoundError, match="No module named 'dst_no_such_module'"):
                import dst_no_such_module  # noqa: F401
        assert importlib.util.find_spec("dst_no_such_module") is None  # a probe still says None
        assert searched.count("dst_no_such_module") == 1
        monkeypatch.syspath_prepend("/nonexistent-dst-path")  # another path: asked afresh
        assert importlib.util.find_spec("dst_no_such_module") is None
        assert searched.count("dst_no_such_module") == 2
        import json.decoder  # noqa: F401  (what exists is found as ever)
    assert sys.meta_path == before


def test_package_metadata_is_found_in_a_sandbox_when_the_importlib_metadata_backport_came_first():
    # The backport deletes the stdlib path finder's find_distributions when it is imported (a cluster's dask
    # imports it before any run); redis asks for its own version at import, inside the sandbox's import finder.
    import subprocess
    import sys

    pytest.importorskip("importlib_metadata")
    code = ("import importlib_metadata, importlib.metadata\n"
            "from dst.sandbox.imports import forgetting, remembering\n"
            "saved = remembering()\n"
            "print(importlib_metadata.version('attrs') == importlib.metadata.version('attrs') != '')\n"
            "forgetting(saved)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr
