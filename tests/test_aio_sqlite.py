"""dst.aio.stores.sqlite: aiosqlite run in dst's loop, statement by statement, in virtual time."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

import dst.aio
import dst.aio.stores.sqlite as dsqlite
from dst.aio.stores.sqlite import install, installed, statements

aiosqlite = pytest.importorskip("aiosqlite")

EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def virtual_wall() -> int:
    loop: Any = asyncio.get_running_loop()
    return EPOCH_MS + int(loop.now_ms)


def now_ms() -> int:
    loop: Any = asyncio.get_running_loop()
    return int(loop.now_ms)


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the store round trips the drop-in takes, each 5 ms of virtual time (as a server's would be)."""
    taken: list[int] = []

    async def round_trip() -> None:
        taken.append(now_ms())
        await asyncio.sleep(0.005)

    monkeypatch.setattr(statements, "round_trip", round_trip)
    return taken


def test_the_aiosqlite_api_runs_a_statement_per_round_trip(tmp_path: Path, trips: list[int]) -> None:
    path = str(tmp_path / "api.db")

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with aiosqlite.connect(path) as db:
            out["type"] = type(db)
            await db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            n = len(trips)
            cursor = await db.execute("INSERT INTO t(v) VALUES (?)", ("a",))
            out["lastrowid"], out["rowcount"] = cursor.lastrowid, cursor.rowcount
            out["in_transaction"] = db.in_transaction
            await db.commit()
            await db.executemany("INSERT INTO t(v) VALUES (?)", ((v,) for v in "bcd"))  # an iterator
            await db.commit()
            out["insert_row"] = await db.execute_insert("INSERT INTO t(v) VALUES ('e')")
            await db.rollback()
            out["trips_for_6"] = len(trips) - n
            n = len(trips)
            async with db.execute("SELECT id, v FROM t ORDER BY id") as c:
                out["description"] = [d[0] for d in c.description]
                out["first"] = await c.fetchone()
                out["rest"] = [row async for row in c]
            c2 = await db.cursor()
            c2.arraysize = 2
            await c2.execute("SELECT v FROM t")
            out["many"] = await c2.fetchmany()
            await c2.close()
            out["trips_for_2"] = len(trips) - n
            c3 = await db.cursor()
            await c3.executemany("INSERT INTO t(v) VALUES (?)", [("x",), ("y",)])
            await c3.executescript("DELETE FROM t WHERE v IN ('x', 'y');")
            db.text_factory = bytes
            out["bytes"] = await (await c3.execute("SELECT v FROM t WHERE id = 1")).fetchall()
            db.text_factory = str
            db.row_factory = aiosqlite.Row
            out["rows"] = [dict(r) for r in await db.execute_fetchall("SELECT v FROM t")]
            db.row_factory = None
            await db.create_function("twice", 1, lambda x: x * 2, deterministic=True)
            out["udf"] = await db.execute_fetchall("SELECT twice(id) FROM t")
            await db.executescript("CREATE TABLE u(x); INSERT INTO u VALUES (1); INSERT INTO u VALUES (';');")
            out["script"] = await db.execute_fetchall("SELECT x FROM u")
            db.isolation_level = None
            out["isolation_level"] = db.isolation_level
            out["total_changes"] = db.total_changes
            out["dump"] = [line async for line in db.iterdump()][:2]
            copy = sqlite3.connect(":memory:")
            await db.backup(copy)
            out["backup"] = copy.execute("SELECT count(*) FROM t").fetchone()
        out["closed"] = db._connection is None
        other = aiosqlite.connect(path)
        other._thread.daemon = True  # what SQLAlchemy does to the connection it gets
        await other
        other.stop()  # SQLAlchemy's terminate
        out["stopped"] = other._connection is None
        return out

    with installed():
        out = dst.aio.run(main(), seed=1, folder=str(tmp_path))
    assert out["type"] is dsqlite.Connection
    assert (out["lastrowid"], out["rowcount"], out["in_transaction"]) == (1, 1, True)
    assert out["insert_row"] == (5,)
    assert out["trips_for_6"] == 6  # insert, commit, executemany, commit, execute_insert, rollback (of the last)
    assert out["description"] == ["id", "v"]
    assert out["first"] == (1, "a") and out["rest"] == [(2, "b"), (3, "c"), (4, "d")]
    assert out["many"] == [("a",), ("b",)]
    assert out["trips_for_2"] == 2  # fetching and cursors are free
    assert out["bytes"] == [(b"a",)]
    assert out["rows"] == [{"v": v} for v in "abcd"]
    assert out["udf"] == [(2,), (4,), (6,), (8,)]
    assert out["script"] == [(1,), (";",)]
    assert out["isolation_level"] is None and out["total_changes"] >= 6
    assert out["dump"] == ["BEGIN TRANSACTION;", "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"]
    assert out["backup"] == (4,)
    assert out["closed"] and out["stopped"]


def test_sqlalchemy_async_engine_and_orm_run_unmodified(tmp_path: Path) -> None:
    pytest.importorskip("greenlet")
    sa = pytest.importorskip("sqlalchemy")
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
    from sqlalchemy.orm import DeclarativeBase

    class Base(DeclarativeBase):
        pass

    class Item(Base):  # columns without Mapped[] annotations: this module's annotations are strings
        __tablename__ = "items"
        id = sa.Column(sa.Integer, primary_key=True)
        name = sa.Column(sa.String(20), unique=True, nullable=False)
        qty = sa.Column(sa.Integer, default=0, nullable=False)
        created = sa.Column(sa.String, server_default=sa.func.now())  # DEFAULT CURRENT_TIMESTAMP

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'orm.db'}")
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        sessions = async_sessionmaker(engine, expire_on_commit=False)
        async with sessions() as s:
            s.add_all([Item(name="a", qty=1), Item(name="b", qty=2)])
            await s.commit()
        await asyncio.sleep(90)
        async with sessions() as s, s.begin():
            item = (await s.execute(sa.select(Item).where(Item.name == "a").with_for_update())).scalar_one()
            item.qty += 10
            s.add(Item(name="c"))
        async with sessions() as s:
            s.add(Item(name="d"))
            await s.flush()
            await s.rollback()
        async with sessions() as s:
            s.add(Item(name="a"))
            try:
                await s.commit()
            except sa.exc.IntegrityError:
                await s.rollback()
                out["duplicate"] = "refused"

        async def bump(name: str, start: float, hold: float) -> None:
            await asyncio.sleep(start)
            async with sessions() as s, s.begin():
                item = (await s.execute(sa.select(Item).where(Item.name == name))).scalar_one()
                item.qty += 1
                await s.flush()  # the write lock, held until the commit
                out.setdefault("flushed", []).append((name, now_ms()))
                await asyncio.sleep(hold)

        await asyncio.gather(bump("a", 0, 1.0), bump("b", 0.1, 0))
        async with engine.connect() as conn:
            raw = await conn.get_raw_connection()
            out["driver"] = type(raw.driver_connection)
            autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")  # the _tx queue path
            out["one"] = (await autocommit.execute(sa.text("SELECT 1"))).scalar()
        async with engine.connect() as conn:
            result = await conn.stream(sa.text("SELECT name FROM items ORDER BY id"))  # server-side cursor
            out["streamed"] = [row[0] async for row in result]
        async with sessions() as s:
            out["items"] = [(i.name, i.qty, i.created) for i in (await s.execute(sa.select(Item).order_by(Item.id))).scalars()]
        await engine.dispose()
        return out

    with installed(wall_ms=virtual_wall):
        out = dst.aio.run(main(), seed=7, folder=str(tmp_path))
    assert out["driver"] is dsqlite.Connection
    assert out["duplicate"] == "refused"
    assert out["one"] == 1
    assert out["streamed"] == ["a", "b", "c"]
    assert out["items"] == [("a", 12, "2026-01-01 00:00:00"), ("b", 3, "2026-01-01 00:00:00"),
                            ("c", 0, "2026-01-01 00:01:30")]
    # The second session's write waited (in virtual time) for the first one's commit.
    (first, t1), (second, t2) = out["flushed"]
    assert (first, second) == ("a", "b") and 1000 <= t2 - t1 < 1020


def test_a_writer_waits_for_the_lock_in_virtual_time(tmp_path: Path, trips: list[int]) -> None:
    path = str(tmp_path / "locks.db")
    log: list[tuple[int, str]] = []

    async def writer(name: str, start: float, hold: float, timeout: float = 5.0) -> None:
        await asyncio.sleep(start)
        async with aiosqlite.connect(path, timeout=timeout) as db:
            try:
                await db.execute("INSERT INTO t VALUES (?)", (name,))  # Python's implicit BEGIN, then the write lock
            except sqlite3.OperationalError as e:
                log.append((now_ms(), f"{name}: {e}"))
                return
            log.append((now_ms(), f"{name} wrote"))
            await asyncio.sleep(hold)
            await db.commit()
            log.append((now_ms(), f"{name} committed"))

    async def main() -> None:
        async with aiosqlite.connect(path) as db:
            await db.execute("CREATE TABLE t(x)")
            await db.commit()
        log.clear()
        await asyncio.gather(writer("A", 0, 2.0), writer("B", 0.1, 0))
        await asyncio.gather(writer("C", 0, 3.0), writer("D", 0.1, 0, timeout=0.5))

    started = time.perf_counter()
    with installed():
        dst.aio.run(main(), seed=3, folder=str(tmp_path))
    assert time.perf_counter() - started < 2.0  # the waits were virtual
    (a_wrote, _), (a_done, _), (b_wrote, _), (b_done, _) = log[:4]
    assert [what for _, what in log[:4]] == ["A wrote", "A committed", "B wrote", "B committed"]
    assert a_done >= 2000 and b_wrote - a_done < 20  # B went on a round trip or two after A's commit
    (c_wrote, c_what), (d_failed, d_what), (c_done, _) = log[4:]
    assert c_what == "C wrote" and d_what == "D: database is locked"
    assert 500 <= d_failed - (c_wrote + 100) < 520  # D gave up after its 0.5 s timeout of virtual time
    assert c_done - c_wrote >= 3000


def test_a_reader_asking_to_write_fails_at_once_as_in_sqlite(tmp_path: Path) -> None:
    """SQLite does not wait when a connection in a read transaction asks for the write lock another holds
    (both would wait for each other); the holder's commit waits until the reader leaves."""
    path = str(tmp_path / "deadlock.db")

    async def main() -> list[tuple[str, int]]:
        log: list[tuple[str, int]] = []
        a = await aiosqlite.connect(path, isolation_level=None)
        b = await aiosqlite.connect(path, isolation_level=None)
        await a.execute("CREATE TABLE t(x)")
        await a.execute("BEGIN")
        await (await a.execute("SELECT * FROM t")).fetchall()  # a's read lock
        await b.execute("BEGIN")
        await b.execute("INSERT INTO t VALUES (1)")  # b's write lock
        start = now_ms()
        try:
            await a.execute("INSERT INTO t VALUES (2)")
        except sqlite3.OperationalError as e:
            log.append((str(e), now_ms() - start))

        async def give_up() -> None:
            await asyncio.sleep(0.3)
            await a.execute("ROLLBACK")

        await asyncio.gather(give_up(), b.commit())
        log.append(("b committed", now_ms() - start))
        log.append((repr(await b.execute_fetchall("SELECT x FROM t")), 0))
        await a.close()
        await b.close()
        return log

    with installed():
        log = dst.aio.run(main(), seed=2, folder=str(tmp_path))
    assert log[0] == ("database is locked", 0)
    assert log[1][0] == "b committed" and 300 <= log[1][1] < 320
    assert log[2][0] == "[(1,)]"


def test_a_script_waits_statement_by_statement(tmp_path: Path) -> None:
    """A script that meets a lock halfway waits there: its first statements do not run twice."""
    path = str(tmp_path / "script.db")

    async def main() -> tuple[Any, Any, int]:
        holder = await aiosqlite.connect(path)
        await holder.executescript("CREATE TABLE t(x); CREATE TABLE log(x);")
        await holder.execute("INSERT INTO t VALUES ('held')")  # the write lock, until the commit

        async def release() -> None:
            await asyncio.sleep(1)
            await holder.commit()

        script = aiosqlite.connect(path)
        await script
        start = now_ms()
        await asyncio.gather(release(), script.executescript(
            "CREATE TEMP TABLE seen(x); INSERT INTO seen VALUES (1); INSERT INTO log VALUES ('ran');"))
        took = now_ms() - start
        seen = await script.execute_fetchall("SELECT count(*) FROM seen")
        ran = await script.execute_fetchall("SELECT count(*) FROM log")
        await holder.close()
        await script.close()
        return seen, ran, took

    with installed():
        seen, ran, took = dst.aio.run(main(), seed=4, folder=str(tmp_path))
    assert seen == [(1,)] and ran == [(1,)] and took >= 1000


def test_sqlites_clock_is_the_virtual_wall_clock(tmp_path: Path) -> None:
    path = str(tmp_path / "clock.db")

    async def main() -> list[Any]:
        out: list[Any] = []
        async with aiosqlite.connect(path) as db:
            await db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, at TEXT DEFAULT CURRENT_TIMESTAMP)")
            query = ("SELECT datetime('now'), CURRENT_TIMESTAMP, CURRENT_DATE, CURRENT_TIME, date(), time('now'), "
                     "julianday('NOW'), unixepoch('now'), strftime('%s', 'now'), strftime('%Y-%m-%d %H:%M:%f'), "
                     "datetime('now', '+1 day', 'start of day')")
            out.append(await db.execute_fetchall(query))
            await asyncio.sleep(3723.25)  # 1 h 2 min 3.25 s
            out.append(await db.execute_fetchall(query))  # the same prepared statement, read again
            await db.execute("INSERT INTO t(id) VALUES (1)")
            out.append(await db.execute_fetchall("SELECT at FROM t"))
            # Without 'now', SQLite's own functions answer.
            out.append(await db.execute_fetchall(
                "SELECT datetime('2024-02-28 10:00', '+1 day'), julianday('2000-01-01'), unixepoch('1970-01-02'), "
                "strftime('%j', '2024-12-31'), date(0, 'unixepoch'), datetime(2451545.0), time('bad')"))
        return out

    with installed(wall_ms=virtual_wall):
        out = dst.aio.run(main(), seed=1, folder=str(tmp_path))
    assert out[0] == [("2026-01-01 00:00:00", "2026-01-01 00:00:00", "2026-01-01", "00:00:00", "2026-01-01",
                       "00:00:00", 2461041.5, 1767225600, "1767225600", "2026-01-01 00:00:00.000",
                       "2026-01-02 00:00:00")]
    assert out[1] == [("2026-01-01 01:02:03", "2026-01-01 01:02:03", "2026-01-01", "01:02:03", "2026-01-01",
                       "01:02:03", pytest.approx(2461041.5 + 3723.25 / 86400, abs=1e-9), 1767229323, "1767229323",
                       "2026-01-01 01:02:03.250", "2026-01-02 00:00:00")]
    assert out[2] == [("2026-01-01 01:02:03",)]
    reference = sqlite3.connect(":memory:").execute(
        "SELECT datetime('2024-02-28 10:00', '+1 day'), julianday('2000-01-01'), unixepoch('1970-01-02'), "
        "strftime('%j', '2024-12-31'), date(0, 'unixepoch'), datetime(2451545.0), time('bad')").fetchall()
    assert out[3] == reference


def workload(path: str) -> Any:
    async def main() -> list[tuple[int, str, Any]]:
        events: list[tuple[int, str, Any]] = []
        async with aiosqlite.connect(path) as db:
            await db.execute("CREATE TABLE IF NOT EXISTS c(k TEXT PRIMARY KEY, n INTEGER)")
            await db.execute("DELETE FROM c")
            await db.commit()

        async def request(i: int) -> None:
            async with aiosqlite.connect(path) as db:
                for k in ("x", "y"):
                    row = await (await db.execute("SELECT n FROM c WHERE k = ?", (k,))).fetchone()
                    n = (row[0] if row else 0) + i
                    await db.execute("INSERT OR REPLACE INTO c VALUES (?, ?)", (k, n))
                    events.append((now_ms(), f"r{i} set {k}", n))
                await db.commit()
                events.append((now_ms(), f"r{i} committed", None))

        await asyncio.gather(*(request(i) for i in range(1, 6)))
        async with aiosqlite.connect(path) as db:
            events.append((now_ms(), "final", await db.execute_fetchall("SELECT k, n FROM c ORDER BY k")))
        return events

    return main()


def test_the_same_seed_gives_the_same_results(tmp_path: Path, trips: list[int]) -> None:
    path = str(tmp_path / "seed.db")
    with installed():
        first = dst.aio.run(workload(path), seed=11, folder=str(tmp_path))
        again = dst.aio.run(workload(path), seed=11, folder=str(tmp_path))
        others = [dst.aio.run(workload(path), seed=s, folder=str(tmp_path)) for s in range(1, 6)]
    assert first == again
    assert any(o != first for o in others)  # the seed chooses the interleaving


def test_installed_patches_aiosqlite_and_puts_it_back(tmp_path: Path) -> None:
    import aiosqlite.core

    real = (aiosqlite.connect, aiosqlite.Connection, aiosqlite.Cursor, aiosqlite.core.connect)
    with installed():
        assert aiosqlite.connect is dsqlite.connect and aiosqlite.core.connect is dsqlite.connect
        assert aiosqlite.Connection is dsqlite.Connection and aiosqlite.Cursor is dsqlite.Cursor
    assert (aiosqlite.connect, aiosqlite.Connection, aiosqlite.Cursor, aiosqlite.core.connect) == real
    with pytest.raises(KeyError):
        with installed():
            raise KeyError("the body raised")
    assert (aiosqlite.connect, aiosqlite.Connection, aiosqlite.Cursor, aiosqlite.core.connect) == real
    with installed():
        with installed():
            pass
        assert aiosqlite.connect is dsqlite.connect
    assert aiosqlite.connect is real[0]

    n = 2000
    started = time.perf_counter()
    for _ in range(n):
        with installed():
            pass
    assert (time.perf_counter() - started) / n < 50e-6  # well under 0.1 ms a run


def test_without_aiosqlite_installed_patches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "_module", None)  # as if `import aiosqlite` had failed
    real = aiosqlite.connect
    with installed():
        assert aiosqlite.connect is real
    assert aiosqlite.connect is real


def test_outside_a_simulated_run_the_real_aiosqlite_runs(tmp_path: Path) -> None:
    path = str(tmp_path / "real.db")

    async def main() -> tuple[type, Any]:
        async with aiosqlite.connect(path) as db:
            await db.execute("CREATE TABLE t(x)")
            await db.execute("INSERT INTO t VALUES (1)")
            await db.commit()
            return type(db), await db.execute_fetchall("SELECT x FROM t")

    with installed():
        kind, rows = asyncio.run(main())
    assert kind is aiosqlite.core.Connection and rows == [(1,)]


def test_the_crash_hook_rolls_back_what_had_not_committed(tmp_path: Path) -> None:
    """What dst.aio.on_crash runs when the server dies (here called by hand, as Server.restart does)."""
    path = str(tmp_path / "crash.db")

    async def main() -> Any:
        loop: Any = asyncio.get_running_loop()
        db = await aiosqlite.connect(path)
        await db.execute("CREATE TABLE t(x)")
        await db.execute("INSERT INTO t VALUES ('committed')")
        await db.commit()
        await db.execute("INSERT INTO t VALUES ('lost')")
        cursor = await db.execute("SELECT * FROM t")  # a live statement: SQLite would keep the lock for it
        await cursor.fetchone()
        dying, loop.root.on_crash = loop.root.on_crash, []
        for die in dying:
            die()
        after = await aiosqlite.connect(path, timeout=0)
        await after.execute("INSERT INTO t VALUES ('after')")  # the lock went with the dead connection
        await after.commit()
        rows = await after.execute_fetchall("SELECT x FROM t")
        await after.close()
        return rows, len(dying)

    with installed():
        rows, hooks = dst.aio.run(main(), seed=1, folder=str(tmp_path))
    assert rows == [("committed",), ("after",)] and hooks == 1


def test_a_busy_timeout_pragma_waits_in_virtual_time_not_real_time(tmp_path: Any) -> None:
    # A pragma that sets SQLite's own busy handler (Prefect's setup sets 60 s) would sleep for real while another
    # connection holds the lock: the drop-in takes it as its virtual wait instead.
    path = str(tmp_path / "busy.db")

    async def main() -> tuple[float, str]:
        holder = await aiosqlite.connect(path, isolation_level=None)
        waiter = await aiosqlite.connect(path, isolation_level=None)
        await waiter.execute("PRAGMA busy_timeout = 3000")
        await holder.execute("CREATE TABLE t (x)")
        await holder.execute("BEGIN IMMEDIATE")
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            await waiter.execute("BEGIN IMMEDIATE")
            outcome = "got the lock"
        except sqlite3.OperationalError as e:
            outcome = str(e)
        waited = loop.time() - began
        await holder.close()
        await waiter.close()
        return waited, outcome

    wall = time.perf_counter()
    with installed():
        waited, outcome = dst.aio.run(main(), seed=1, folder=str(tmp_path))
    assert outcome == "database is locked" and 3.0 <= waited < 3.1  # 3 s of virtual time
    assert time.perf_counter() - wall < 1.0  # and no real wait
