"""The PostgreSQL server the runs of one worker process share: found (of pgserver's binaries and the system's, the
install with the most extensions: contrib's, such as pg_trgm, come with a system's PostgreSQL, not with pgserver),
started once, lazily, on a unix socket in a folder of its own (a copy of the cluster initdb made once per machine,
kept in dst's cache folder), and stopped when the process exits; databases made for each run from a template that
holds a schema (made once per schema), and dropped after.

PostgreSQL will not run as root: as root, initdb and the server run as an unprivileged user (``nobody``), whose
folder it is. Settings: no TCP, autovacuum and the timers dst does not drive off (``deadlock_timeout`` a day: dst
finds deadlocks and breaks them itself, see :mod:`.server`), no fsync (dst kills processes, never the machine)."""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from ....sandbox import real
from ...cache import cached_file
from .clockwords import virtual_time
from .wire import Control, PgError, literal

_monotonic = real(time.monotonic)

# Server settings: no timer of the server's own may shape a run (its clock is real), nothing waits for a disk.
SETTINGS = {
    "listen_addresses": "", "autovacuum": "off", "fsync": "off", "synchronous_commit": "off",
    "full_page_writes": "off", "deadlock_timeout": "1d", "lock_timeout": "0", "statement_timeout": "0",
    "idle_in_transaction_session_timeout": "0", "idle_session_timeout": "0", "checkpoint_timeout": "1d",
    "max_wal_size": "4GB", "jit": "off", "max_connections": "200", "track_activities": "on", "timezone": "UTC",
    "log_timezone": "UTC", "datestyle": "ISO, YMD", "logging_collector": "off", "log_min_messages": "fatal",
    "shared_buffers": "32MB", "max_locks_per_transaction": "128", "max_pred_locks_per_transaction": "128",
}

# The virtual clock (see :mod:`.clock`): functions of pg_catalog's names in a schema ahead of it on the search path,
# reading the moments dst sets on the session before each statement; without them (a connection not dst's), the real.
# random() and gen_random_uuid() there draw from the run's seed (the session's dst.seed, set at connect) and the
# database's own count of draws, so the values are the seed's and in the order the statements ran.
CLOCK_SQL = """
CREATE SCHEMA dst_clock;
CREATE FUNCTION dst_clock.now() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS
  $$SELECT coalesce(nullif(current_setting('dst.xact', true), '')::timestamptz, pg_catalog.now())$$;
CREATE FUNCTION dst_clock.transaction_timestamp() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS
  $$SELECT coalesce(nullif(current_setting('dst.xact', true), '')::timestamptz, pg_catalog.transaction_timestamp())$$;
CREATE FUNCTION dst_clock.statement_timestamp() RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS
  $$SELECT coalesce(nullif(current_setting('dst.stmt', true), '')::timestamptz, pg_catalog.statement_timestamp())$$;
CREATE FUNCTION dst_clock.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE PARALLEL SAFE AS
  $$SELECT coalesce(nullif(current_setting('dst.stmt', true), '')::timestamptz, pg_catalog.clock_timestamp())$$;
CREATE FUNCTION dst_clock.timeofday() RETURNS text LANGUAGE sql VOLATILE PARALLEL SAFE AS
  $$SELECT to_char(dst_clock.clock_timestamp(), 'Dy Mon DD HH24:MI:SS.US YYYY TZ')$$;
CREATE FUNCTION dst_clock."current_timestamp"(p integer DEFAULT 6) RETURNS timestamptz LANGUAGE sql STABLE
  PARALLEL SAFE AS $$SELECT CASE WHEN p >= 6 THEN date_trunc('microseconds', dst_clock.now())
    ELSE to_timestamp(round(extract(epoch FROM dst_clock.now()), greatest(p, 0))) END$$;
CREATE FUNCTION dst_clock."localtimestamp"(p integer DEFAULT 6) RETURNS timestamp LANGUAGE sql STABLE
  PARALLEL SAFE AS $$SELECT dst_clock."current_timestamp"(p)::timestamp$$;
CREATE FUNCTION dst_clock."current_date"() RETURNS date LANGUAGE sql STABLE PARALLEL SAFE AS
  $$SELECT dst_clock.now()::date$$;
CREATE FUNCTION dst_clock."current_time"(p integer DEFAULT 6) RETURNS timetz LANGUAGE sql STABLE PARALLEL SAFE AS
  $$SELECT dst_clock."current_timestamp"(p)::timetz$$;
CREATE FUNCTION dst_clock."localtime"(p integer DEFAULT 6) RETURNS time LANGUAGE sql STABLE PARALLEL SAFE AS
  $$SELECT dst_clock."current_timestamp"(p)::time$$;
CREATE SEQUENCE dst_clock.draws;
CREATE FUNCTION dst_clock.draw() RETURNS text LANGUAGE sql VOLATILE PARALLEL UNSAFE AS
  $$SELECT md5(coalesce(current_setting('dst.seed', true), '') || ':' || nextval('dst_clock.draws'))$$;
CREATE FUNCTION dst_clock.random() RETURNS double precision LANGUAGE sql VOLATILE PARALLEL UNSAFE AS
  $$SELECT ('x' || substr(dst_clock.draw(), 1, 13))::bit(52)::bigint / 4503599627370496.0::double precision$$;
CREATE FUNCTION dst_clock.gen_random_uuid() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL UNSAFE AS
  $$SELECT (substr(h, 1, 12) || '4' || substr(h, 14, 3) || substr('89ab', ('x' || substr(h, 17, 1))::bit(4)::int % 4 + 1, 1)
            || substr(h, 18))::uuid FROM dst_clock.draw() AS h$$;
"""
SEARCH_PATH = "dst_clock, pg_catalog"  # put ahead of a path a session sets
# The database's own path: what it creates goes where it would ("$user", else public), and a function is found in
# dst's clock ahead of pg_catalog (unless public has one of the same name).
DATABASE_PATH = f'"$user", public, {SEARCH_PATH}'


INITDB = ("-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")


class _ToolFailed(Exception):
    """pg_dump or pg_restore failed: the template is made by its setup, as without a key."""


class Unavailable(RuntimeError):
    """No PostgreSQL server can start here: one line that says why."""


def _binaries() -> tuple[Path | None, str]:
    """The folder of initdb and postgres: of pgserver's and the system's installs, the one with the most extensions
    (pgserver's on a tie), or None and why not."""
    candidates = []
    spec = importlib.util.find_spec("pgserver")  # found, not imported: its import reads (and warns of) the user's dirs
    if spec is not None and spec.origin is not None:
        candidates.append(Path(spec.origin).parent / "pginstall" / "bin")
    config = shutil.which("pg_config")
    if config is not None:
        try:
            candidates.append(Path(subprocess.run([config, "--bindir"], capture_output=True, text=True,
                                                  check=True).stdout.strip()))
        except (OSError, subprocess.CalledProcessError):
            pass
    found = shutil.which("postgres")
    if found is not None:
        candidates.append(Path(os.path.realpath(found)).parent)
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        candidates.extend(sorted((p / "bin" for p in root.iterdir()), key=lambda p: p.parent.name, reverse=True))
    usable = [folder for folder in candidates if (folder / "postgres").exists() and (folder / "initdb").exists()]
    if not usable:
        return None, "no PostgreSQL server binaries (pip install -e '.[postgres]' for pgserver's, or a system postgresql)"
    return max(usable, key=lambda folder: len(extensions(folder))), ""  # max keeps the first of equals


def extensions(binaries: Path) -> list[str]:
    """The extensions an install's server can create (their control files, where the server looks for them: its
    share folder beside bin, or Debian's /usr/share/postgresql/<version>)."""
    for share in (binaries.parent / "share" / "postgresql", binaries.parent / "share",
                  Path("/usr/share/postgresql") / binaries.parent.name):
        folder = share / "extension"
        if folder.is_dir():
            return sorted(name[:-len(".control")] for name in os.listdir(folder) if name.endswith(".control"))
    return []


def _known_as(setup: Callable[[str], None] | None) -> object:
    """What a template's setup is known by: its function's name and code, so that the closure a ``build`` makes
    afresh for every run is one template, and two lambdas of one module are two (what a closure or a partial holds
    is taken to be the same at every run)."""
    while isinstance(setup, functools.partial):
        setup = setup.func
    if setup is None:
        return None
    return (getattr(setup, "__module__", None), getattr(setup, "__qualname__", type(setup).__qualname__),
            getattr(setup, "__code__", None))


def _reachable(path: Path) -> bool:
    """Whether every folder above ``path`` lets others through (an unprivileged user must reach the binaries)."""
    for parent in path.resolve().parents:
        if not os.stat(parent).st_mode & 0o001:
            return False
    return True


class Postmaster:
    """One PostgreSQL server: its folder, its socket, dst's control connection, the templates it holds."""

    def __init__(self) -> None:
        binaries, why = _binaries()
        if binaries is None:
            raise Unavailable(why)
        self.root = Path(tempfile.mkdtemp(prefix="dst-pg-"))
        self.owner = os.getpid()
        self.process: subprocess.Popen[bytes] | None = None
        self.templates: dict[tuple[str, object], str] = {}  # (schema, what setup is known as) -> its template
        self.made = 0
        self.user: dict[str, Any] = {}
        built = os.stat(binaries / "postgres")  # the cluster initdb makes depends on the install and the flags alone
        self.cluster = f"initdb {' '.join(INITDB)} of {binaries} ({built.st_size} bytes, {built.st_mtime_ns})"
        if os.geteuid() == 0:  # PostgreSQL refuses root: initdb and the server run as nobody, in nobody's folder
            who = pwd.getpwnam("nobody")
            self.user = {"user": who.pw_uid, "group": who.pw_gid, "extra_groups": []}
            os.chown(self.root, who.pw_uid, who.pw_gid)
            if not _reachable(binaries):  # a venv under /root: a copy nobody can read, per server
                # pgserver's binaries find their libraries three folders up (RPATH $ORIGIN/../../../pgserver.libs):
                # the copy keeps that layout, site-packages/pgserver/pginstall beside site-packages/pgserver.libs
                site = binaries.parent.parent.parent
                install = self.root / "pkg" / binaries.parent.parent.name / binaries.parent.name
                shutil.copytree(binaries.parent, install, symlinks=True)
                libs = site / f"{binaries.parent.parent.name}.libs"
                if libs.is_dir():
                    shutil.copytree(libs, self.root / "pkg" / libs.name, symlinks=True)
                shutil.chown(self.root / "pkg", who.pw_uid, who.pw_gid)
                binaries = install / "bin"
        self.bin = binaries
        self.data = self.root / "data"
        self.socket_dir = str(self.root)
        self.path = os.path.join(self.socket_dir, ".s.PGSQL.5432")
        try:
            self._start()
            self.control = Control(self.path)
        except BaseException:
            self.stop()
            raise
        atexit.register(self.stop)

    def _run(self, *args: str) -> None:
        done = subprocess.run([str(self.bin / args[0]), *args[1:]], capture_output=True, text=True, **self.user)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()
            raise Unavailable(f"{args[0]} failed: {last[-1] if last else f'exit {done.returncode}'}")

    def _initdb(self, path: str) -> None:
        made = self.root / "initdb"  # where the server's user may write (nobody, as root)
        self._run("initdb", "-D", str(made), *INITDB)
        shutil.move(made, path)

    def _start(self) -> None:
        # initdb (about 0.9 s) once per machine; each process's server runs on a copy of its cluster
        try:
            shutil.copytree(cached_file("postgres-cluster", self.cluster, self._initdb), self.data, symlinks=True)
        except OSError:  # a cache this user cannot read (another user's, shared): a cluster of this process's own
            shutil.rmtree(self.data, ignore_errors=True)
            self._initdb(str(self.data))
        if self.user:
            for folder, _, files in os.walk(self.data):
                for name in (folder, *(os.path.join(folder, file) for file in files)):
                    os.chown(name, self.user["user"], self.user["group"])
        options: list[str] = []
        for key, value in SETTINGS.items():
            options += ["-c", f"{key}={value}"]
        log = open(self.root / "log", "wb")
        try:
            self.process = subprocess.Popen(
                [str(self.bin / "postgres"), "-D", str(self.data), "-k", self.socket_dir, *options],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, **self.user)
        finally:
            log.close()
        deadline = _monotonic() + 60
        while True:
            if self.process.poll() is not None:
                lines = (self.root / "log").read_text(errors="replace").strip().splitlines()
                raise Unavailable(f"postgres exited at start: {lines[-1] if lines else self.process.returncode}")
            if os.path.exists(self.path):
                try:
                    Control(self.path).close()
                    return
                except (OSError, PgError):  # still starting up
                    pass
            if _monotonic() > deadline:
                raise Unavailable("postgres did not accept connections within 60 s")
            time.sleep(0.02)

    def template(self, schema: str, setup: Callable[[str], None] | None = None, setup_key: str | None = None) -> str:
        """The template database holding dst's clock, ``schema`` and what ``setup`` makes (given the template's DSN:
        a migration tool's run, say); both run once here, at the template's first use. With a ``setup_key``, once
        per machine: a process after the first restores what the first one dumped."""
        key = (schema, _known_as(setup))
        name = self.templates.get(key)
        if name is None:
            # this process's own (a forked worker makes those its parent had not), the schema's digest for a reader
            digest = hashlib.blake2b(schema.encode(), digest_size=6).hexdigest()
            name = f"dst_t_{os.getpid()}_{len(self.templates) + 1}_{digest}"
            self.control.query(f"DROP DATABASE IF EXISTS {name}")
            self.control.query(f"CREATE DATABASE {name}")
            self.control.query(f"ALTER DATABASE {name} SET search_path = {DATABASE_PATH}")
            try:
                if setup is None or setup_key is None or not (self.bin / "pg_restore").exists():
                    self._fill(name, schema, setup)
                else:
                    self._fill_or_restore(name, schema, setup, setup_key)
            except BaseException:
                self.control.query(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                raise
            self.templates[key] = name
        return name

    def _fill(self, name: str, schema: str, setup: Callable[[str], None] | None) -> None:
        made = Control(self.path, name)
        try:
            made.query(CLOCK_SQL)
            if schema.strip():
                made.query(f"SET search_path = {DATABASE_PATH}; {virtual_time(schema)}")
        except PgError as e:
            raise ValueError(f"dst.aio.stores.postgres: the schema failed: {e}") from None
        finally:
            made.close()
        if setup is not None:
            setup(f"postgresql://postgres@/{name}?host={self.socket_dir}")
            # what setup left connected would keep the template from being copied
            self.control.query(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                               f"{literal(name)} AND pid <> pg_backend_pid()")

    def _fill_or_restore(self, name: str, schema: str, setup: Callable[[str], None], setup_key: str) -> None:
        """The template from the dump the first process of the machine made of its own (running ``setup``)."""
        built = False

        def build(path: str) -> None:
            nonlocal built
            self._fill(name, schema, setup)
            built = True
            with open(path, "wb") as out:  # written here: the tool may run as nobody, who cannot reach the cache
                self._tool("pg_dump", "--format=custom", "--dbname", name, stdout=out)

        # all the dump holds: the install, dst's clock (a dst of another version may write another), the schema as
        # dst rewrote it, and what setup makes
        made_of = f"{self.cluster}\0{CLOCK_SQL}\0{virtual_time(schema)}\0{setup_key}"
        for _ in range(2):
            try:
                dump = cached_file("postgres-template.dump", made_of, build)
                if not built:
                    try:
                        data = open(dump, "rb")
                    except OSError:  # a dump this user cannot read (another user's cache): made here, as without a key
                        self._fill(name, schema, setup)
                        return
                    with data:
                        self._tool("pg_restore", "--single-transaction", "--dbname", name, stdin=data)
                return
            except _ToolFailed:
                if built:
                    return  # pg_dump failed: the template is this process's own, as without a key
                os.remove(dump)  # a dump that does not restore (in one transaction: nothing of it is left) is made again

    def _tool(self, tool: str, *args: str, **streams: Any) -> None:
        """One of the server's client tools on this server; raises :class:`_ToolFailed`."""
        done = subprocess.run([str(self.bin / tool), "--host", self.socket_dir, "--username", "postgres", *args],
                              stderr=subprocess.PIPE, **streams, **self.user)
        if done.returncode != 0:
            raise _ToolFailed(tool)

    def database(self, schema: str, isolation: str | None, setup: Callable[[str], None] | None = None,
                 setup_key: str | None = None) -> str:
        """A fresh database, a copy of the template of ``schema`` and ``setup``."""
        template = self.template(schema, setup, setup_key)
        self.made += 1
        name = f"dst_{os.getpid()}_{self.made}"
        settings = f"SET search_path = {DATABASE_PATH}"
        if isolation is not None:
            settings += f"; ALTER DATABASE {name} SET default_transaction_isolation = {literal(isolation)}"
        self.control.query(f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY file_copy")
        self.control.query(f"ALTER DATABASE {name} {settings}")
        return name

    def drop(self, name: str) -> None:
        self.control.query(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        if os.getpid() != self.owner:
            return  # a forked child's exit: the server is its parent's
        process, self.process = self.process, None
        if process is None:
            return  # never started, or stopped already
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGQUIT)  # immediate shutdown: nothing here is kept
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(self.root, ignore_errors=True)


_server: Postmaster | None = None
_failed: str | None = None


def postmaster() -> Postmaster:
    """This process's server, started at the first call; raises :class:`Unavailable` (the same line each time)."""
    global _server, _failed
    if _server is not None and _server.owner != os.getpid():
        # A forked child: the server is its parent's, and so is the control socket; a connection of its own.
        child = object.__new__(Postmaster)
        child.__dict__.update(_server.__dict__)
        child.owner, child.process = os.getpid(), None
        child.control = Control(_server.path)
        _server = child
    if _server is None:
        if _failed is not None:
            raise Unavailable(_failed)
        try:
            _server = Postmaster()
        except Unavailable as e:
            _failed = str(e)
            raise
    return _server


def unavailable() -> str | None:
    """Why no PostgreSQL server can start here (None: one runs)."""
    try:
        postmaster()
    except Unavailable as e:
        return str(e)
    return None
