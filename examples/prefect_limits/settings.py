"""Prefect's settings for a simulated server: what every run shares, set before ``import prefect``, and what each
run has of its own (its database file and ``PREFECT_HOME``), set as the run is built.

Prefect reads its settings at import into a process-global settings context, and its server code asks that
context at every call (``get_current_settings()``: the database URL, ``PREFECT_HOME``, which lease storage). So
what is the same for every run is set in the environment before Prefect is imported, and each run puts in place a
settings context of its own (:func:`use`) naming its own folder: runs in any process, forked from one that already
imported Prefect or not, never share a file.

The schema is built by Prefect's own migrations (alembic, as ``prefect server start`` does), outside any simulated
run, and each run copies it: the SQLite file, built once per machine and kept in dst's cache folder; on PostgreSQL, a
database made from the template the migrations built (once per machine too: dst keeps a dump of it, restored in every
process after the first). No run pays for migrations.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
from typing import Callable

from dst import aio

if "prefect" in sys.modules:
    raise RuntimeError("examples.prefect_limits must be imported before prefect: Prefect freezes its settings at "
                       "import")

REDIS_URL = "redis://redis:6379/0"  # dst's network routes the host name "redis" to the run's Redis server
FOLDER = tempfile.mkdtemp(prefix="dst-prefect-")  # the process's scratch; each run has a folder inside it
atexit.register(shutil.rmtree, FOLDER, True)
os.environ.update({
    "PREFECT_HOME": os.path.join(FOLDER, "home"),  # no run writes here: each has its own home
    "PREFECT_API_URL": "http://server/api",  # dst's network routes the host name "server"
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_API_DATABASE_MIGRATE_ON_START": "false",
    "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
    "PREFECT_CLIENT_CSRF_SUPPORT_ENABLED": "false",  # else every client first asks GET /csrf-token
    "PREFECT_SERVER_CSRF_PROTECTION_ENABLED": "false",
    "PREFECT_LOGGING_TO_API_ENABLED": "false",
    "PREFECT_UI_ENABLED": "false",
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_CLIENT_METRICS_ENABLED": "false",
    "PREFECT_API_ENABLE_METRICS": "false",
    "PREFECT_REDIS_MESSAGING_URL": REDIS_URL,  # prefect-redis's lease storage (storage = "redis")
})

# Prefect's lease storages: its own two (in memory, in files under PREFECT_HOME), and prefect-redis's, the one Prefect
# recommends for several servers (on a Redis server under dst, named by REDIS_URL)
STORAGE_MODULES = {
    "memory": "prefect.server.concurrency.lease_storage.memory",
    "filesystem": "prefect.server.concurrency.lease_storage.filesystem",
    "redis": "prefect_redis.lease_storage",
}
STORAGES = tuple(STORAGE_MODULES)


DATABASES = ("sqlite", "postgres")  # Prefect's two: SQLite through aiosqlite, PostgreSQL through asyncpg


_SERIALIZED: dict[tuple[int, bool, bool, bool], tuple[object, dict[str, str]]] = {}


def _serialize_once() -> None:
    """Prefect serializes its whole settings object (about 0.06 CPU s) twice each time it creates an app: for the app
    cache's key (``Settings.hash_key``) and to fill its logging template; a third of a warm seed went there. A
    settings object is never changed once made (:func:`use`, like Prefect's own ``temporary_settings``, makes a new
    one), so what it serializes to is kept with it: a server booting again in the run asks what is known. The same
    values Prefect computes, from its own code."""
    from prefect.settings.models.root import Settings

    serialize = Settings.to_environment_variables
    if getattr(serialize, "once", False):
        return

    def to_environment_variables(self: Settings, exclude_unset: bool = False, include_secrets: bool = True,
                                 include_aliases: bool = False) -> dict[str, str]:
        key = (id(self), exclude_unset, include_secrets, include_aliases)
        known = _SERIALIZED.get(key)
        if known is None or known[0] is not self:  # the object is kept with its entry: its id is not reused meanwhile
            if len(_SERIALIZED) >= 64:
                _SERIALIZED.clear()
            known = _SERIALIZED[key] = (self, serialize(self, exclude_unset=exclude_unset,
                                                        include_secrets=include_secrets,
                                                        include_aliases=include_aliases))
        return dict(known[1])  # the caller's own copy, as Prefect returns a new dict

    to_environment_variables.once = True  # type: ignore[attr-defined]
    Settings.to_environment_variables = to_environment_variables  # type: ignore[method-assign]


def use(folder: str, storage: str, url: str | None = None) -> Callable[[], None]:
    """Prefect's settings for one run: its home in ``folder``, its database ``url`` (None: SQLite, a file in
    ``folder``), the lease storage named. Returns what puts the settings back."""
    import prefect.context
    from prefect.settings import (PREFECT_API_DATABASE_CONNECTION_URL, PREFECT_HOME,
                                  PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE)

    _serialize_once()
    before = prefect.context.GLOBAL_SETTINGS_CONTEXT
    settings = before.settings.copy_with_update(updates={
        PREFECT_HOME: os.path.join(folder, "home"),
        PREFECT_API_DATABASE_CONNECTION_URL: url or f"sqlite+aiosqlite:///{database(folder)}",
        PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE: STORAGE_MODULES[storage],
    })
    os.makedirs(settings.home, exist_ok=True)
    prefect.context.GLOBAL_SETTINGS_CONTEXT = prefect.context.SettingsContext(profile=before.profile, settings=settings)

    def restore() -> None:
        prefect.context.GLOBAL_SETTINGS_CONTEXT = before

    return restore


def database(folder: str) -> str:
    return os.path.join(folder, "prefect.db")


def postgres(dsn: str) -> str:
    """Prefect's database URL for a PostgreSQL DSN (``postgresql://...``): through asyncpg, as Prefect's docs say."""
    return dsn.replace("postgresql://", "postgresql+asyncpg://", 1)


def migrate(folder: str, url: str | None = None) -> None:
    """Prefect's own migrations (alembic upgrade head, as ``prefect server start`` runs them) on the database of
    ``url`` (None: the SQLite file in ``folder``), outside any simulated run."""
    import asyncio

    from prefect.server.database import provide_database_interface

    from .server import reset

    async def upgrade() -> None:
        db = provide_database_interface()
        await db.create_db()  # in a worker thread: this runs outside any simulated run
        await (await db.engine()).dispose()

    restore = use(folder, "memory", url)
    try:
        reset()  # a database configuration cached for another run's database
        asyncio.run(upgrade())
        reset()
    finally:
        restore()


def migrate_postgres(dsn: str) -> None:
    """The PostgreSQL template's schema: Prefect's migrations on the template database dst gives."""
    folder = tempfile.mkdtemp(dir=FOLDER)
    try:
        migrate(folder, postgres(dsn))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def template() -> str:
    """The SQLite database with Prefect's schema, built by its own migrations once per machine (per Prefect version
    and set of migrations) and kept in dst's cache folder (``dst.aio.cached_file``): a campaign's workers, the seeds
    they fork, ``dst run`` and ``dst shrink`` copy it, and only the first process ever pays for the migrations."""
    return aio.cached_file("prefect-template.db", schema_key("sqlite"), _migrate_into)


@functools.cache  # asked at every run's build
def schema_key(dialect: str) -> str:
    """What the schema Prefect's migrations build on ``dialect`` (``sqlite``, ``postgresql``) depends on: its
    migrations (Prefect's version, and the revisions it ships, for an install from a checkout) and the libraries
    that run them."""
    import sqlite3
    from importlib.metadata import PackageNotFoundError, version

    import prefect

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "none"

    revisions = os.path.join(os.path.dirname(prefect.__file__), "server", "database", "_migrations", "versions",
                             dialect)
    libraries = " ".join(f"{name} {installed(name)}" for name in ("prefect", "sqlalchemy", "alembic", "aiosqlite",
                                                                  "asyncpg"))
    return f"{libraries}; sqlite {sqlite3.sqlite_version}; revisions {' '.join(sorted(os.listdir(revisions)))}"


def _migrate_into(path: str) -> None:
    import sqlite3

    folder = tempfile.mkdtemp(dir=FOLDER)
    try:
        migrate(folder)
        conn = sqlite3.connect(database(folder))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the one file the runs copy
        conn.close()
        os.replace(database(folder), path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
