"""Prefect's settings for a simulated server, set before ``import prefect``, and the database template.

Prefect freezes its settings into a root context when it is imported, so they are set from the environment
first, once per OS process: one scratch folder (removed when the process ends) holds the database every run
copies anew and ``PREFECT_HOME`` (where the filesystem lease storage keeps its files). The lease storage is
Prefect's own setting, ``PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE`` (the in-memory one unless it is set).

The schema is built once per process by Prefect's own migrations (alembic, as ``prefect server start`` does),
outside any simulated run, and each run copies the file: no run pays for migrations.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

if "prefect" in sys.modules:
    raise RuntimeError("examples.prefect_limits must be imported before prefect: Prefect freezes its settings at "
                       "import")

FOLDER = tempfile.mkdtemp(prefix="dst-prefect-")
atexit.register(shutil.rmtree, FOLDER, True)
RUN = os.path.join(FOLDER, "run")  # what one run may write: its database and PREFECT_HOME
DB = os.path.join(RUN, "prefect.db")
HOME = os.path.join(RUN, "home")
TEMPLATE = os.path.join(FOLDER, "template.db")
os.makedirs(HOME)  # Prefect makes sure of its home as it is imported

os.environ.update({
    "PREFECT_HOME": HOME,
    "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{DB}",
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
})
os.environ.setdefault("PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE", "prefect.server.concurrency.lease_storage.memory")
STORAGE = os.environ["PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE"].rsplit(".", 1)[-1]


def template() -> str:
    """The database with Prefect's schema, built by its own migrations the first time it is asked for."""
    if not os.path.exists(TEMPLATE):
        import asyncio
        import sqlite3

        from prefect.server.database import provide_database_interface

        async def migrate() -> None:
            db = provide_database_interface()
            await db.create_db()  # alembic upgrade head (in a worker thread: this runs outside any simulated run)
            await (await db.engine()).dispose()

        asyncio.run(migrate())
        conn = sqlite3.connect(DB)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the one file the runs copy
        conn.close()
        shutil.copy(DB, TEMPLATE)
    return TEMPLATE
