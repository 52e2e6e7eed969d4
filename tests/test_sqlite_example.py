"""The SQLite service in examples/: a real database under simulation, through the public seam only."""

from __future__ import annotations

import ast
import glob
import json
import os
import sqlite3
import tempfile
from pathlib import Path
from types import SimpleNamespace

import attrs
import pytest

import dst
from dst import sut
from dst.cli import main
from dst.explore.selftest import find_bug
from dst.models import resolve
from dst.runner import run
from dst.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sqlite_leases"
IMPL = "examples.sqlite_leases:model"


@pytest.fixture(autouse=True)
def at_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the example's name resolves from the repository's root


def test_nothing_in_dst_knows_the_example_and_the_example_uses_only_the_public_seam():
    src = Path(dst.__file__).parent
    assert not [p for p in src.rglob("*") if p.is_file() and "sqlite_leases" in p.read_text(errors="ignore")]
    allowed = {"dst", "dst.sut", "dst.reference", "dst.reference.protocol"}
    for path in EXAMPLE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] == "dst":
                assert node.module in allowed, f"{path.name} imports {node.module}"


@pytest.mark.slow
def test_its_default_scenario_runs_clean_through_the_cli(capsys):
    scenario = str(EXAMPLE / "scenarios" / "default.toml")
    assert main(["run", "--scenario", scenario, "--seed", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == IMPL and data["result"] == "ok" and data["events"] > 0
    assert main(["fuzz", "--scenario", scenario, "--count", "60", "--workers", "2", "--json", "--no-findings"]) == 0
    assert json.loads(capsys.readouterr().out)["violations"] == 0


@pytest.mark.parametrize("bug", [bug.slug for bug in resolve(IMPL).bugs])
def test_each_of_its_bugs_is_found_with_an_invariant_it_breaks(bug):
    row = find_bug(bug, impl=IMPL, max_seeds=60, seconds=60, use_swarm=True, workers=1)
    assert row.ok, (bug, row.hit, row.message)


def test_a_violation_shrinks_to_a_finding_that_replays(tmp_path, capsys):
    scenario = str(EXAMPLE / "scenarios" / "check-then-increment.toml")
    argv = ["shrink", "--scenario", scenario, "--seed", "1", "--swarm", "--findings", str(tmp_path), "--json"]
    assert main(argv) == 1
    shrunk = json.loads(capsys.readouterr().out)
    assert shrunk["invariant"] == "capacity" and shrunk["steps_after"] <= 3
    assert main(["replay", shrunk["path"], "--quiet"]) == 0


def test_a_run_leaves_no_database_behind():
    pattern = os.path.join(tempfile.gettempdir(), "dst-sqlite-*")
    before = set(glob.glob(pattern))
    run(load_scenario(EXAMPLE / "scenarios" / "leases-in-memory.toml"), 3)
    assert set(glob.glob(pattern)) == before


def test_a_run_stopped_or_refused_after_its_build_leaves_no_database_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    scenario = load_scenario(EXAMPLE / "scenarios" / "default.toml")
    busy = attrs.evolve(scenario, workload=attrs.evolve(scenario.workload, clients=40))  # past 20,000 events

    def ctrl_c() -> float:  # as Ctrl-C would strike: in the middle of the run, in the harness's own code
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(busy, 1, deadline=1e9, clock=ctrl_c)  # the clock is read every 20,000 events
    assert not any(tmp_path.iterdir())
    # Refused after the build: a quiet period shorter than the model's reclaim bound.
    with pytest.raises(dst.ScenarioError):
        run(attrs.evolve(scenario, run=attrs.evolve(scenario.run, quiet=1)), 1)
    assert not any(tmp_path.iterdir())


# --- its database, on its own: what a crash keeps, when facts are told ---------------------------

def drive(coroutine):
    """Run a coroutine that awaits only store steps, to its end; its result."""
    try:
        while True:
            coroutine.send(None)
    except StopIteration as stop:
        return stop.value


def test_a_crash_rolls_back_the_open_transaction_and_keeps_the_committed(tmp_path):
    from examples.sqlite_leases.database import Database

    path = str(tmp_path / "t.db")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (v INTEGER)")
    db = Database(path, SimpleNamespace(now=0))
    told: list[int] = []

    async def insert(tx, value):
        await tx.execute("INSERT INTO t VALUES (?)", (value,))
        tx.report(told.append, value)
        await tx.execute("SELECT count(*) FROM t")

    drive(db.transaction(lambda tx: insert(tx, 1)))  # committed
    open_one = db.transaction(lambda tx: insert(tx, 2))
    for _ in range(3):
        open_one.send(None)  # BEGIN, the INSERT, and waiting on the SELECT: the row is written, not committed
    assert sqlite3.connect(path).execute("SELECT v FROM t").fetchall() == [(1,)]
    db.crash()  # the process dies with the transaction open
    open_one.close()
    rows = sqlite3.connect(path).execute("SELECT v FROM t").fetchall()
    assert rows == [(1,)] and told == [1]  # the facts of the lost transaction were never told
    drive(db.transaction(lambda tx: insert(tx, 3)))  # the restarted process opens the same file
    assert sqlite3.connect(path).execute("SELECT v FROM t ORDER BY v").fetchall() == [(1,), (3,)]


def test_transactions_queue_for_the_write_lock_the_reaper_first_and_autocommit_does_not_hold_facts(tmp_path):
    from examples.sqlite_leases.database import Busy, Database

    path = str(tmp_path / "t.db")
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (v INTEGER)")
    clock = SimpleNamespace(now=0)
    db = Database(path, clock)

    async def insert(tx, value):
        await tx.execute("INSERT INTO t VALUES (?)", (value,))

    holder = db.transaction(lambda tx: insert(tx, 1))
    holder.send(None)
    holder.send(None)  # BEGIN IMMEDIATE: it holds the lock, not committed
    second, reaper = db.transaction(lambda tx: insert(tx, 2)), db.transaction(lambda tx: insert(tx, 3), first=True)
    impatient = db.transaction(lambda tx: insert(tx, 4), lock_timeout=50)
    for waiting in (second, reaper, impatient):
        assert waiting.send(None)[0] == sut.WAIT  # parked in the queue: no round trip after round trip
    clock.now = 50
    with pytest.raises(Busy):  # its lock timeout passed in the queue: nothing of it ran
        impatient.send(None)
    assert second.send(None)[0] == sut.WAIT  # still behind the holder
    drive(holder)  # commits: the next in line, the reaper's, goes ahead of the one queued before it
    assert second.send(None)[0] == sut.WAIT
    drive(reaper)
    drive(second)
    assert sqlite3.connect(path).execute("SELECT v FROM t").fetchall() == [(1,), (3,), (2,)]

    statements = Database(path, clock, autocommit=True)
    told: list[int] = []

    async def report_each(tx):
        await tx.execute("INSERT INTO t VALUES (3)")
        tx.report(told.append, 3)
        assert told == [3]  # in autocommit each statement is committed, and told, at once
        await tx.execute("INSERT INTO t VALUES (4)")

    drive(statements.transaction(report_each))


def test_the_example_model_is_a_sut_model():
    model = resolve(IMPL)
    assert isinstance(model, sut.Model) and model.options is not None
    assert {bug.slug for bug in model.bugs} == {"check-then-increment", "read-then-delete-release", "leases-in-memory",
                                                  "reaper-without-recheck", "autocommit"}


def test_its_resource_shows_its_fence_and_what_the_writes_left_so_the_harness_checks_them(tmp_path):
    from dst.reference.protocol import Refused, Write
    from examples.sqlite_leases.service import FencedTable

    heard: list[tuple[str, int]] = []
    facts = type("Facts", (), {"write_accepted": lambda self, h, lease, token, target: heard.append(("ok", token)),
                               "write_refused": lambda self, h, lease, token, target: heard.append(("no", token))})()
    table = FencedTable(str(tmp_path / "resource.db"), facts)
    assert isinstance(table, sut.ResourceView) and table.fence("db/0") is None and table.contents("db/0") is None
    table.write(Write(token=5, lease=1, holder="c1#1", limit="db", seat=0))
    assert isinstance(table.write(Write(token=3, lease=2, holder="c2#1", limit="db", seat=0)), Refused)
    assert heard == [("ok", 5), ("no", 3)]
    assert table.fence("db/0") == 5 and table.contents("db/0") == "written by c1#1 with token 5"  # the refused left none
    table.write(Write(token=5, lease=1, holder="c1#1", limit="db", seat=1))
    assert table.fence("db/1") == 5 and table.fence("db/0") == 5


def test_renewals_commit_in_the_order_they_arrived_so_the_expiry_only_moves_forward(tmp_path):
    # Two renewals of one lease (a duplicated message): the one stamped first holds the write lock through a
    # round trip, and the later one queues behind it, so the expiry goes 1800 then 1900 (expiry-only-forward).
    from dst.reference.protocol import Renew, Renewed
    from examples.sqlite_leases.database import Database
    from examples.sqlite_leases.service import LeaseService, create

    path = str(tmp_path / "leases.db")
    create(path, {"db": 1})
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO leases VALUES (1, 'c1#1', 'db', 1, 1000, 0)")
    clock = SimpleNamespace(now=800)
    env = SimpleNamespace(clock=clock, facts=SimpleNamespace(lease_renewed=lambda lease, limit: None), bugs=())
    service = LeaseService(Database(path, clock), env, ttl=1000, reaper_interval=100, retry_after=10)
    stamped_first = service.renew(Renew(lease=1, holder="c1#1"))
    stamped_first.send(None)  # stamped at t=800, it waits for its first round trip ...
    clock.now = 900
    stamped_later = service.renew(Renew(lease=1, holder="c1#1"))  # ... and t=900, queued behind it
    assert stamped_later.send(None)[0] == sut.WAIT
    assert drive(stamped_first) == Renewed(1800)
    assert drive(stamped_later) == Renewed(1900)
    assert sqlite3.connect(path).execute("SELECT expiry FROM leases").fetchall() == [(1900,)]
