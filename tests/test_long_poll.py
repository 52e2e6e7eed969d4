"""A long poll: the server holds a denied acquire open until slots are given back or a lease runs out, so a
waiting client sends one request where a polling one sends one every retry_after."""

from __future__ import annotations

from conftest import events, script

from dst.reference.protocol import Acquire


def _acquire(at: str, client: str, work: str = "5s") -> dict:
    return {"at": at, "actor": client, "action": "acquire", "work": work, "writes": 0}


def _acquires(result, client: str) -> list[tuple[int, str]]:
    return [(e[0], e[3]) for e in events(result, client, "send") if e[3].startswith("acquire")]


def test_a_waiting_acquire_is_granted_when_the_holder_releases_without_asking_again() -> None:
    steps = [_acquire("0s", "c1"), _acquire("1s", "c2")]
    polled = script(steps, model={"acquire_wait": "0s"})
    waited = script(steps, model={"acquire_wait": "30s"})  # the reference model's default
    assert len(_acquires(polled, "c2")) > 3  # denied, and asked again every second
    assert _acquires(waited, "c2") == [(1_000, "acquire db slots=1 wait=30s to server (2.1.0)")]
    released = next(e[0] for e in events(waited, "server", "store") if e[3].startswith("L1 removed"))
    granted = next(e for e in events(waited, "server", "reply") if e[3].startswith("granted L2"))
    assert granted[0] == released + 5  # woken by the release, one store round trip (5 ms) later
    assert waited.ok and polled.ok and waited.events < polled.events


def test_a_waiting_acquire_wakes_when_a_holders_lease_runs_out() -> None:
    # c1 dies holding L1 (expiry 60.015 s): c2 is admitted at the expiry, before the reaper's tick removes L1.
    r = script([_acquire("0s", "c1", work="100s"), {"at": "5s", "actor": "c1", "action": "crash"},
                _acquire("10s", "c2")], model={"acquire_wait": "100s"}, workload={"acquire_patience": "200s"})
    granted = next(e for e in events(r, "server", "reply") if e[3].startswith("granted L2"))
    assert granted[0] == 60_015 + 5 and len(_acquires(r, "c2")) == 1
    assert r.ok


def test_a_wait_that_runs_out_is_denied_and_the_client_asks_again_at_once() -> None:
    r = script([_acquire("0s", "c1", work="50s"), _acquire("1s", "c2", work="1s")], model={"acquire_wait": "20s"})
    asked = [t for t, _ in _acquires(r, "c2")]
    assert asked[:2] == [1_000, 1_000 + 10 + 5 + 20_000 + 10]  # held 20 s, denied, asked again on its answer
    assert r.ok


def test_a_restart_drops_the_held_acquires_and_the_client_asks_again_after_its_timeout() -> None:
    r = script([_acquire("0s", "c1", work="10s"), _acquire("1s", "c2"),
                {"at": "2s", "actor": "server", "action": "restart", "down": "1s"}], model={"acquire_wait": "30s"})
    asked = [t for t, _ in _acquires(r, "c2")]
    assert asked[:2] == [1_000, 1_000 + 30_000 + 2_000]  # the wait plus the request timeout, then a retry
    assert r.ok


def test_an_acquire_that_does_not_wait_reads_as_before() -> None:
    assert Acquire("db", 1, "c1").describe() == "acquire db slots=1" and Acquire("db", 1, "c1").wait == 0
