"""The SQLite service as a dst model: its options, its bugs, and a fresh database file for every run."""

from __future__ import annotations

import os
import shutil
import tempfile

import attrs

from dst import sut
from dst.reference import lease_job

from .database import Database
from .service import FencedTable, LeaseService, LeaseView, create


@attrs.frozen
class Options:
    ttl: int = sut.option(60_000, "positive-duration", help="lease time-to-live, from the server's receipt")
    reaper_interval: int = sut.option(15_000, "positive-duration", help="how often the reaper deletes expired leases")
    retry_after: int = sut.option(1_000, "positive-duration", help="the wait a denied acquire is told to take")


BUGS = (
    sut.Bug("check-then-increment", ("capacity", "slot-accounting"), 2,
            "the capacity check is a read of its own; the increment follows, unconditionally",
            "Two acquires both SELECT a free slot, then both UPDATE active = active + 1: two holders on a limit "
            "of 1. The READ COMMITTED check-then-act race (Prefect discussion #20520)."),
    sut.Bug("read-then-delete-release", ("no-foreign-release", "capacity"), 3,
            "release reads the lease, then deletes and gives back in a second transaction",
            "A release is delivered twice; both copies SELECT the lease before either DELETEs it, and both "
            "decrement: another holder's slot is given back. TLA+ ReadPresentRelease."),
    sut.Bug("leases-in-memory", ("slot-accounting", "stranded-slot"), 2,
            "leases in process memory, slot counts in the database",
            "A acquires; the server restarts: the count in the database says 1, and no lease holds it. "
            "Prefect's in-memory lease storage (PR #20090)."),
    sut.Bug("reaper-without-recheck", ("removed-before-expiry", "single-executor", "capacity"), 4,
            "the reaper deletes what it read as expired without asking again",
            "The reaper reads A's lease as expired; A's late renewal commits; the reaper deletes the lease by id "
            "while A works under it. TLA+ StaleReap."),
    sut.Bug("autocommit", ("slot-accounting", "capacity"), 1,
            "no transactions: each statement commits on its own",
            "A acquires: the increment commits, and for one round trip no lease holds the slot it counts; a "
            "crash there keeps it for good. Prefect #18991."),
)


def build(env: sut.Env[Options]) -> sut.System:
    folder = tempfile.mkdtemp(prefix="dst-sqlite-")
    try:
        path = os.path.join(folder, "leases.db")
        create(path, dict(env.limits))
        # wrong (autocommit): the driver runs without transactions: each statement commits on its own (Prefect #18991:
        # the increment and the lease's creation were not one transaction)
        db = Database(path, env.clock, autocommit="autocommit" in env.bugs)
        o = env.options
        view, resource = LeaseView(path), FencedTable(os.path.join(folder, "resource.db"), env.facts)
    except BaseException:  # a build that fails leaves nothing behind either
        shutil.rmtree(folder, ignore_errors=True)
        raise

    def close() -> None:
        db.crash()
        view.conn.close()
        resource.conn.close()
        shutil.rmtree(folder, ignore_errors=True)

    return sut.System(
        service=LeaseService(db, env, ttl=o.ttl, reaper_interval=o.reaper_interval, retry_after=o.retry_after),
        job=lease_job(env, ttl=o.ttl), resource=resource, leases=view,
        bounds=sut.Bounds(reclaim_within=o.ttl + o.reaper_interval, renew_every=int(o.ttl * 0.75)),  # lease_job renews at 0.75
        close=close)


model = sut.Model(build, options=Options, bugs=BUGS, scenarios="examples.sqlite_leases:scenarios",
                  description="a lease/slot service on SQLite, in the style of Prefect's concurrency limits v2")
