"""dst.aio.stores.redis: redis-py's asyncio client, unmodified, over fakeredis's commands, in virtual time."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fakeredis", reason="the redis extra is not installed (pip install -e '.[redis]')")
pytest.importorskip("lupa", reason="the redis extra is not installed (pip install -e '.[redis]')")

import redis  # noqa: E402
import redis.asyncio as redis_async  # noqa: E402
from redis.asyncio.connection import Connection as TcpConnection, ConnectionPool  # noqa: E402

import dst.aio  # noqa: E402
import redis_models  # noqa: E402
from dst.aio import stores  # noqa: E402
from dst.aio.stores.redis import install  # noqa: E402
from dst.aio.stores.redis.connection import Connection  # noqa: E402
from dst.runner import run  # noqa: E402
from dst.scenario import load_scenario, parse_scenario  # noqa: E402

BASE: dict[str, Any] = {
    "run": {"duration": "20s", "quiet": "30s"},
    "model": {"store_latency": ["5ms", "5ms"]},
    "workload": {"clients": 3, "jobs": 0, "request_timeout": "30s", "retries": 0},
    "network": {"latency": ["10ms", "10ms"], "loss": 0.0, "duplicate": 0.0, "delay": 0.0},
}


def step(at: str, actor: str, what: str, **args: Any) -> dict[str, Any]:
    """A plan step: ``what`` rides in the step's limit (the jobs and the server's handlers read it)."""
    return {"at": at, "actor": actor, "action": "acquire", "limit": what, **args}


def scripted(model: str, steps: list[dict[str, Any]], **model_keys: Any) -> Any:
    doc = json.loads(json.dumps(BASE))
    doc["model"].update(impl=f"redis_models:{model}", limits={s["limit"]: 1 for s in steps if "limit" in s},
                        **model_keys)
    doc["steps"] = steps
    return parse_scenario(doc, "<test>")


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    redis_models.LOG.clear()
    redis_models.LAST.clear()


def logged(what: str) -> list[object]:
    return [when for name, when in redis_models.LOG if name == what]


def test_each_command_is_one_round_trip_and_a_transaction_one_for_all() -> None:
    result = run(scripted("commands", [step("1s", "c1", "commands")], store_latency=["7ms", "7ms"]), 1)
    # SET, GET, MULTI + 5 commands + EXEC in one write, a plain pipeline of 2: a store round trip each
    assert result.jobs == {"[7, 7, 7, 7] [1, 2, True, b'x', True] [b'v', b'2']": 1}
    [recv] = [e[0] for e in result.trace if e[1:3] == ("server", "recv")]
    [reply] = [e[0] for e in result.trace if e[1:3] == ("server", "reply")]
    assert (recv, reply) == (1010, 1010 + 4 * 7)


def test_a_write_whose_reply_timed_out_still_happens() -> None:
    result = run(scripted("commands", [step("1s", "c1", "timed-out")]), 1)
    assert result.jobs == {"timed out None b'1'": 1}  # redis-py gave up after 2 ms and closed; Redis ran it at 5


def test_a_blocking_read_is_answered_the_instant_another_client_writes_and_times_out_in_virtual_time() -> None:
    result = run(scripted("blocking", [step("100ms", "c1", "read", work="60s"),  # BLOCK 0
                                       step("100ms", "c3", "read", work="1500ms"),  # BLOCK 1500
                                       step("1s", "c2", "xadd")]), 1)
    assert result.ok and result.jobs == {"read": 2, "added": 1}
    [(added, entry)] = logged("added")
    assert added == 1010 + 5  # the request's arrival and the XADD's round trip
    # c1 blocked first: the entry is its, at that same millisecond; c3 reads on, and gives up at its own BLOCK
    assert logged("c1 read") == [(added, repr([[b"s", [(entry, {b"f": b"v"})]]]))]
    assert logged("c3 read") == [(1600, "[]")]
    assert logged("c1 blpop") == [(added + 1, "None")] and logged("c3 blpop") == [(3600, "None")]  # 1 ms, 2 s


def test_busy_is_a_command_on_its_way_not_a_parked_read() -> None:
    result = run(scripted("blocking", [step("1s", "c1", "busy")]), 1)
    assert result.jobs == {"[False, True, False, True, False] (b'queue', b'x')": 1}


def test_pub_sub_messages_reach_every_subscriber_at_the_publish_in_resp2_and_resp3() -> None:
    result = run(scripted("pubsub", [step("100ms", "c1", "listen"), step("100ms", "c3", "listen"),
                                     step("1s", "c2", "publish")]), 1)
    heard = "[('subscribe', 1), ('psubscribe', 2), ('message', b'hello')]"
    assert result.jobs == {heard: 2, "to 4": 1}  # c1 speaks RESP2, c3 RESP3; each by channel and by pattern
    assert logged("published") == [(1015, 4)]
    assert logged("c1 got message") == logged("c3 got message") == [(1015, "b'hello'")]


@pytest.mark.parametrize("model, outcome", [("restart_aof", "b'1' True [False]"), ("restart_none", "None False [False]")])
def test_a_redis_restart_keeps_what_aof_wrote_and_none_loses_it(model: str, outcome: str) -> None:
    result = run(scripted(model, [step("1s", "c2", "restart-check")]), 1)
    assert result.jobs == {outcome: 1}  # the key and the stream kept or lost; the script cache lost either way
    assert logged("restart") == [1025]
    # The pooled connection was reset. redis-py 8.0 and 8.1 hand it out all the same (with maintenance notifications
    # on, their pool skips the check of a connection's stream) and the command reads the end of it, as over TCP; 7
    # reconnects, and so does 8.2, whose pool reads what is pending on the stream and finds its end.
    version = tuple(int(part) for part in redis.__version__.split(".")[:2])
    assert logged("reset seen") == ([1025] if (8, 0) <= version < (8, 2) else [])


def test_a_redis_restart_resets_every_connection_at_once_and_at_its_next_use() -> None:
    result = run(scripted("restarts", [step("100ms", "c1", "park"), step("100ms", "c3", "hold"),
                                       step("1s", "c2", "restart")]), 1)
    assert result.ok and result.jobs == {"ping True": 2, "restarted": 1}
    closed = "Connection closed by server."
    assert logged("restart") == [1010]
    assert logged("c1 park reset") == [(1010, closed)]  # a BLPOP parked: at the restart
    # An idle connection: when next used (redis-py 8.2 says it found the stream's end before writing).
    assert logged("c3 hold reset") in ([(5100, closed)], [(5100, "Connection closed by the server before write")])


def test_a_client_crash_resets_its_connections_and_its_parked_read_never_answers() -> None:
    result = run(scripted("crash", [step("100ms", "c1", "read"), {"at": "500ms", "actor": "c1", "action": "crash"},
                                    step("1s", "c2", "xadd"), step("1500ms", "c2", "pending"),
                                    step("2s", "c3", "read")]), 1)
    assert logged("c1 reads") == [100] and logged("c1 read") == []
    pending = "{'pending': 0, 'min': None, 'max': None, 'consumers': []}"
    assert result.jobs == {"added": 1, pending: 1, "read": 1}  # the entry went to no dead consumer...
    [(_, entry)] = logged("added")
    assert logged("c3 read") == [(2000, repr([[b"s", [(entry, {b"f": b"v"})]]]))]  # ... but to the next reader
    server = redis_models.LAST["server"]
    [row] = server.pending("s", "g")
    assert (row.id, row.consumer, row.deliveries) == (entry, b"c3", 1)
    assert server.groups("s") == {b"g": entry} and not server.busy


def test_lua_scripts_run_with_eval_and_evalsha() -> None:
    result = run(scripted("lua", [step("1s", "c1", "lua")]), 1)
    assert result.jobs == {"[1, 10, 15, 16]": 1}  # EVAL; Script's EVALSHA (loaded on NOSCRIPT), again after a restart


def test_keys_expire_in_virtual_time_and_the_readers_see_them_go_without_deleting_them() -> None:
    run(scripted("ttl", [step("1s", "c1", "expiring"), step("2s", "c1", "expired"), step("5s", "c1", "expired")]), 1)
    [(_, (pttl, keys))] = logged("ttl")
    assert pttl == keys[b"short"] == 1500 - 15 and keys[b"h"] == 3000 - 5  # SET at 1015, EXPIRE at 1025, read at 1030
    first, second = logged("expired")
    assert first == (2020, ({b"short": 505, b"h": 2015}, [b"h", b"short"], b"1", 2005, {b"a": b"1", b"b": b"2"}))
    # Past 2515 and 4025: gone for the readers and the commands alike, though nothing had deleted them yet
    assert second == (5020, ({}, [b"h", b"short"], None, -2, {}))


def test_redis_keeps_its_own_clock_when_a_clients_is_skewed() -> None:
    from dst.aio import VIRTUAL_EPOCH_MS

    run(scripted("ttl", [{"at": "500ms", "actor": "c1", "action": "clock-skew", "by": "30s"},
                         step("1s", "c1", "skewed")]), 1)
    [(at, (wall, entry, pttl))] = logged("skewed")
    assert wall == VIRTUAL_EPOCH_MS + at - 30_000  # the client's clock
    assert entry == f"{VIRTUAL_EPOCH_MS + 1000}-0".encode() and pttl == 1500  # Redis's: the stream id, the TTL


def test_the_same_seed_gives_the_same_bytes_here_and_in_a_fresh_process_with_another_hash_seed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dst.explore.determinism import check_determinism

    # Two consumers blocked on a stream and subscribed to a channel; a producer's XADDs (ids from Redis's clock),
    # SPOP and SRANDMEMBER (the seeded random), a set's members (fakeredis orders them by string hash) and RANDOMKEY.
    path = tmp_path / "mixed.toml"
    path.write_text("""steps = [
  { at = "100ms", actor = "c1", action = "acquire", limit = "consume" },
  { at = "100ms", actor = "c3", action = "acquire", limit = "consume" },
  { at = "1s", actor = "c2", action = "acquire", limit = "produce" },
]
[run]
duration = "20s"
quiet = "30s"
[model]
impl = "redis_models:mixed"
limits = { consume = 1, produce = 1 }
store_latency = ["1ms", "9ms"]
[workload]
clients = 3
jobs = 0
request_timeout = "30s"
retries = 0
""")
    scenario = load_scenario(path)
    first = run(scenario, 3)
    assert first.ok and len(first.jobs) == 3
    tests = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    assert check_determinism(scenario, 3, first, command=["dst", "run", "--seed", "3", "--scenario", str(path)]) is None
    assert run(scenario, 4).digest != first.digest


async def _blocking_as_redis_answers() -> dict[str, Any]:
    server = redis_models.LAST["server"]
    r = redis_async.Redis.from_url(server.url)
    reader = redis_async.Redis.from_url(server.url)
    out: dict[str, Any] = {}
    await r.xadd("s", {"old": "1"}, id="1-0")
    since_now = asyncio.create_task(reader.xread({"s": "$"}, block=0))  # $: the last id when it blocked
    await asyncio.sleep(0.01)
    await r.xadd("s", {"new": "1"}, id="2-0")
    out["xread $"] = await since_now
    moving = asyncio.create_task(reader.blmove("missing", "dest", timeout=0))  # a source that does not exist yet
    await asyncio.sleep(0.01)
    await r.rpush("missing", "a", "b")
    out["blmove"] = await moving, server.elements("missing"), server.elements("dest")
    async with r.pipeline(transaction=True) as p:  # no wait inside MULTI, as in Redis
        out["multi"] = await p.blpop(["empty"], timeout=0).execute()
    async with reader.pipeline(transaction=False) as p:  # a command written after a parked one waits behind it
        waiting = asyncio.create_task(p.blpop(["later"], timeout=1).set("after", "1").execute())
        await asyncio.sleep(0.5)
        out["behind"] = server.string("after")
        out["pipeline"] = await waiting
    out["after"] = server.string("after")
    await r.aclose()
    await reader.aclose()
    return out


def test_blocking_commands_answer_as_redis_would() -> None:
    redis_models.LAST["server"] = stores.redis.Server(name="redis")
    with stores.installed():
        out = dst.aio.run(_blocking_as_redis_answers(), seed=1)
    assert out["xread $"] == [[b"s", [(b"2-0", {b"new": b"1"})]]]
    assert out["blmove"] == (b"a", [b"b"], [b"a"])
    assert out["multi"] == [None]
    assert (out["behind"], out["pipeline"], out["after"]) == (None, [None, True], b"1")


def test_installed_gives_dst_connections_only_in_a_run_and_only_for_a_registered_server() -> None:
    server = stores.redis.Server(name="cache", port=6380)
    real = ConnectionPool.make_connection

    def kinds() -> tuple[type, type]:
        ours = ConnectionPool.from_url(server.url).make_connection()
        other = ConnectionPool.from_url("redis://elsewhere:6379/0").make_connection()
        return type(ours), type(other)

    async def in_a_run() -> tuple[type, type]:
        return kinds()

    async def outside() -> tuple[type, type]:
        return kinds()

    with stores.installed():
        assert dst.aio.run(in_a_run(), seed=1) == (Connection, TcpConnection)
        assert asyncio.run(outside()) == (TcpConnection, TcpConnection)  # plain asyncio: redis-py's own
    assert ConnectionPool.make_connection is real
    with pytest.raises(KeyError):
        with stores.installed():
            raise KeyError("the body raised")
    assert ConnectionPool.make_connection is real


def test_without_redis_py_installed_patches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "_pool", None)  # as if `import redis` had failed
    real = ConnectionPool.make_connection
    with install.installed():
        assert ConnectionPool.make_connection is real


def test_a_redis_server_needs_a_known_persistence() -> None:
    with pytest.raises(ValueError, match="'aof' or 'none'"):
        stores.redis.Server(persistence="rdb")  # type: ignore[arg-type]


def test_a_pydocket_task_added_by_the_service_runs_in_a_worker_under_simulation() -> None:
    pytest.importorskip("docket", reason="pydocket is not installed (the smoke test of a Redis task queue)")
    result = run(scripted("docket", [step("100ms", "c2", "add"), step("1s", "c1", "work")]), 1)
    assert result.ok and result.jobs["worked"] == 1
    assert [name for _, name in logged("greeted")] == ["c2"]  # type: ignore[misc]


RAN: list[tuple[str, float]] = []


async def _slow_revoke(lease: str) -> None:
    RAN.append((lease, asyncio.get_running_loop().time()))
    await asyncio.sleep(20)


async def _add_while_running() -> list[tuple[str, float]]:
    from docket import Docket, Worker

    RAN.clear()
    async with Docket(name="revokes", url="redis://redis:6379/0") as docket:
        docket.register(_slow_revoke)
        async with Worker(docket, name="w1", minimum_check_interval=timedelta(milliseconds=100),
                          scheduling_resolution=timedelta(milliseconds=100)) as worker:
            serving = asyncio.create_task(worker.run_forever())
            await docket.add(_slow_revoke, key="revoke:L1")("L1")
            await asyncio.sleep(5)  # it runs now: a scan 5 s later adds it again, under the same key
            await docket.add(_slow_revoke, key="revoke:L1")("L1")
            await asyncio.sleep(30)  # it has ended: the next add runs it again
            await docket.add(_slow_revoke, key="revoke:L1")("L1")
            await asyncio.sleep(30)
            serving.cancel()
    return list(RAN)


def test_pydocket_adds_a_keyed_task_that_is_running_as_a_no_op_and_runs_it_again_once_it_ended() -> None:
    """The rule the Prefect examples' repossessor keeps for its keyed revokes (examples/prefect_limits/server.py):
    pydocket 0.27.2's schedule.lua answers EXISTS while the key's run is 'running', not only while it is queued."""
    pytest.importorskip("docket", reason="pydocket is not installed")
    redis_models.LAST["server"] = stores.redis.Server(name="redis")
    with stores.installed():
        ran = dst.aio.run(_add_while_running(), seed=1)
    assert [lease for lease, _ in ran] == ["L1", "L1"]  # the add while it ran made no second execution
    assert ran[1][1] - ran[0][1] >= 35  # the second is the add after it ended


# --- a reset store connection: redis-py's own retry sends the command again ------------------------------------

def _reset(when: str, round_trip: int = 1) -> dict[str, Any]:
    """A pinned reset of the connection of step 1's request's handler (``1.20.0``: its first Do), at a round trip."""
    return {"at": "1s", "actor": "server", "action": "store-reset", "message": "1.20.0", "round_trip": round_trip,
            "when": when}


def test_a_store_connection_reset_after_an_incr_ran_has_redis_pys_retry_run_it_twice() -> None:
    result = run(scripted("counter", [step("1s", "c1", "incr"), _reset("after")]), 1)
    # The INCR ran, its reply went with the connection; redis-py read the end of the stream (ConnectionError) and
    # its retry sent the INCR again on a new connection: Redis ran it twice.
    assert result.ok and result.jobs == {"2": 1} and redis_models.LAST["server"].string("n") == b"2"
    assert ("server", "store-reset", "1.20.0 round trip 1 after it ran") in [e[1:] for e in result.trace]
    assert result.faults == {"store-reset": 1} and [s.action for s in result.drawn] == ["store-reset"]


def test_a_store_connection_reset_before_an_incr_ran_leaves_only_the_retry_to_run_it() -> None:
    result = run(scripted("counter", [step("1s", "c1", "incr"), _reset("before")]), 1)
    assert result.ok and result.jobs == {"1": 1} and redis_models.LAST["server"].string("n") == b"1"
    assert ("server", "store-reset", "1.20.0 round trip 1 before it ran") in [e[1:] for e in result.trace]


def test_drawn_store_resets_are_the_seeds_and_replay_as_the_pinned_steps_befell_writes() -> None:
    from dst.explore.shrink import pin_draws

    scenario = scripted("counter", [step(f"{i}s", f"c{1 + i % 3}", "incr") for i in range(1, 7)], store_reset=0.3)
    first = run(scenario, 1)
    resets = first.befell[2]
    assert first.ok and {when for _, _, _, when in resets} == {"before", "after"}
    # One reset struck after an INCR had run (step 5's first round trip): six INCRs, and the counter at 7.
    assert redis_models.LAST["server"].string("n") == b"7" and sorted(first.jobs) == ["1", "2", "3", "4", "6", "7"]
    assert run(scenario, 1).digest == first.digest
    pinned = pin_draws(scenario, first)  # befell's steps in the plan, and no draw left to make more
    assert pinned.model.store_reset == 0.0
    assert [s.arg("when") for s in pinned.steps or () if s.action == "store-reset"] == [when for *_, when in resets]
    assert run(pinned, 1).digest == first.digest


def test_a_store_reset_step_is_before_or_after() -> None:
    from dst.scenario import ScenarioError

    with pytest.raises(ScenarioError) as refused:
        scripted("counter", [step("1s", "c1", "incr"), _reset("sometime")])
    assert str(refused.value) == "<test>: steps[1].when: expected 'before' or 'after', got 'sometime'"
