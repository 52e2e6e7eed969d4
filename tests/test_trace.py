"""The trace tells the server's own story: a background handler goes by its loop's name, and every change the
store makes is in the trace, whoever made it (a request, the reaper, a sweep, a restart)."""

from __future__ import annotations

import pytest

from conftest import events, script

from dst.errors import UserError
from dst.sim.hosts import ServerHost
from dst.sim.kernel import Kernel
from dst.sim.trace import (BACKGROUND, BOOT, RESPONSE, background_key, check_loops, is_background, key_name, message_key,
                           parse_key, request_key, response_key, series, step_of)
from dst.sut import Service

_DRAWN = (1 << 64) - 1  # the bits of a key its draws see


# --- keys ---------------------------------------------------------------------------------------------------

def test_every_kind_of_key_reads_back_as_it_was_written() -> None:
    assert key_name(message_key(17, 3, 0)) == "17.3.0" and key_name(message_key(17, 3, 0) | RESPONSE) == "17.3.0r"
    assert key_name(background_key("reaper", 4, 0)) == "reaper.4.0"
    assert key_name(background_key(BOOT, 2, 1)) == "boot.2.1"  # the second boot's second recovery handler
    for key in (message_key(17, 3, 0), message_key(1 << 40, 255, 4095) | RESPONSE, background_key("reaper", 4, 0),
                background_key(BOOT, 2, 1), background_key("Sweep-2_b", 1 << 33, 70_000)):
        assert parse_key(key_name(key)) == key


def test_a_key_says_which_step_sent_it_and_what_it_answers() -> None:
    request = message_key(17, 3, 2)
    assert step_of(request) == step_of(response_key(request)) == 17 and step_of(message_key(1 << 40, 255, 4095)) == 1 << 40
    assert request_key(response_key(request)) == request_key(request) == request
    assert key_name(response_key(request)) == "17.3.2r"
    assert series(message_key(17, 3, 0)) == series(request) != series(response_key(request))
    assert series(message_key(17, 4, 2)) != series(request) != series(message_key(18, 3, 2))
    assert not is_background(request) and not is_background(response_key(request))
    for key in (background_key(BOOT, 1, 0), background_key("reaper", 4, 0)):  # no step sent these
        assert is_background(key) and step_of(key) is None


def test_a_background_keys_draws_depend_on_its_name_not_its_loops_place() -> None:
    # What the draws see (the low 64 bits): a message's key as it always was; a boot's recovery handler's as it
    # always was too (the boot, the index); a loop's handler's its tick and index under a tag from its name alone.
    assert message_key(17, 3, 0) == (17 << 20) | (3 << 12) and message_key(17, 3, 0) <= _DRAWN
    assert background_key(BOOT, 2, 1) & _DRAWN == BACKGROUND | (2 << 24) | 1
    tags = {loop: {(background_key(loop, tick, i) & _DRAWN) >> 56 for tick in (1, 9) for i in (0, 3)}
            for loop in ("reaper", "Reaper", "sweep", "deadlines")}
    assert all(len(tag) == 1 and 1 <= (next(iter(tag)) & 0x3F) <= 63 for tag in tags.values())
    assert len({next(iter(tag)) for tag in tags.values()}) == 4  # these four loops draw apart
    keys = {background_key(loop, tick, i) for loop in ("reaper", "Reaper", BOOT) for tick in (1, 2) for i in (0, 1)}
    assert len(keys) == 12 and not any(key & RESPONSE for key in keys)  # distinct, never mistaken for a response


@pytest.mark.parametrize("text", ["one", "17.3", "17.3.0.1", " 17.3.0", "17.256.0", "17.3.4096", "reaper.4",
                                  "reaper.4.0r", "4reaper.1.0", "my.loop.1.0", "reaper.-1.0", "", 17])
def test_text_that_is_not_a_key_is_one_line_saying_what_a_key_looks_like(text: object) -> None:
    with pytest.raises(ValueError) as e:
        parse_key(text)
    message = str(e.value)
    assert "\n" not in message and "'reaper.4.0'" in message and repr(text) in message


@pytest.mark.parametrize("names, fragment", [
    (["my.loop"], "loop name 'my.loop': expected letters, digits, '_' and '-', starting with a letter"),
    (["2nd"], "loop name '2nd': expected letters"),
    ([""], "loop name '': expected letters"),
    (["reaper", "Reaper"], "loop name 'Reaper': expected a name of its own, but 'reaper' is another loop's name "
                           "(names that differ only in case would read as one)"),
    (["reaper", "reaper"], "loop name 'reaper': expected a name of its own, but 'reaper' is another loop's name$"),
    (["boot"], "loop name 'boot': expected a name of its own, but 'boot' names a boot's recovery handlers$"),
    (["Boot"], "loop name 'Boot': expected a name of its own, but 'boot' names a boot's recovery handlers "),
])
def test_loop_names_whose_keys_would_not_read_back_are_refused_in_one_line(names: list[str], fragment: str) -> None:
    with pytest.raises(ValueError, match="^" + fragment.replace("(", r"\(").replace(")", r"\)")):
        check_loops(names)
    check_loops(["reaper", "sweep-2", "deadlines_1"])  # distinct, and each reads back


def test_a_service_with_such_a_loop_is_a_users_error_before_anything_runs() -> None:
    class Loops(Service):
        def handlers(self):  # type: ignore[no-untyped-def]
            return {}

        def loops(self):  # type: ignore[no-untyped-def]
            return [("reaper", 1_000), ("REAPER", 5_000)]

    with pytest.raises(UserError, match=r"^the service's loops\(\): loop name 'REAPER': expected a name of its own"):
        ServerHost(Kernel(), Loops(), None, [], None, None, None)  # type: ignore[arg-type]


# --- the server's own doing -----------------------------------------------------------------------------------

def _acquire(at: str = "0s", client: str = "c1", work: str = "100s") -> dict:
    return {"at": at, "actor": client, "action": "acquire", "work": work, "writes": 0}


def test_the_reapers_removal_is_in_the_trace_and_a_finding_can_pin_its_handler_by_name() -> None:
    # c1 dies holding L1 (stored at 15 ms for the 60 s TTL): the reaper's fifth tick (75 s) is the first after it.
    crashed = [_acquire(), {"at": "5s", "actor": "c1", "action": "crash"}]
    r = script(crashed)
    assert [e[3] for e in events(r, "server", "store")] == ["L1 stored for c1: 1 of db until t=60.015s",
                                                            "L1 removed (c1's, 1 of db)"]
    assert events(r, "server", "store")[1][0] == 75_005  # the handler's one store round trip after the tick
    slowed = script([*crashed, {"at": "75s", "actor": "server", "action": "slow", "message": "reaper.5.0",
                                "round_trip": 1, "by": "3s"}])
    (slow,) = events(slowed, "server", "slow")
    assert slow[3] == "reaper.5.0 round trip 1 slower by 3s"
    assert [e[0] for e in events(slowed, "server", "store") if "removed" in e[3]] == [78_005]


def test_a_restart_that_loses_the_leases_kept_in_memory_says_so_when_it_happens() -> None:
    r = script([_acquire(), {"at": "20s", "actor": "server", "action": "restart", "down": "2s"}],
               bugs=["volatile-leases"])
    removed = [(e[0], e[3]) for e in events(r, "server", "store") if "removed" in e[3]]
    assert removed == [(20_000, "L1 removed (c1's, 1 of db)")]
    assert r.violation is not None and r.violation.invariant == "slot-accounting"
    assert any(e[2] == "store" and "L1 removed" in e[3] for e in r.causal())  # the story of the violation


def test_renewals_are_in_the_trace_with_the_expiry_they_set() -> None:
    r = script([_acquire(work="50s")])
    renewed = [e for e in events(r, "server", "store") if "renewed" in e[3]]
    granted = next(e for e in events(r, "server", "reply") if e[3].startswith("renewed"))
    assert renewed and renewed[0][0] == granted[0] and renewed[0][3].split("t=")[1] in granted[3]


def test_a_sweep_that_cancels_a_run_is_in_the_trace() -> None:
    # The run's worker dies in CANCELLING; no request says CANCELLED: the server's own deadline does.
    r = script([{"at": "0s", "actor": "c1", "action": "serve"},
                {"at": "0s", "actor": "user", "action": "submit", "run": 1, "work": "200s"},
                {"at": "10s", "actor": "user", "action": "cancel", "run": 1},
                {"at": "11s", "actor": "c1", "action": "crash"}],
               runs={"workers": 1}, model={"redelivery_timeout": "30s", "heartbeat_interval": "10s",
                                           "cancelling_timeout": "60s"})
    states = [(e[0], e[3]) for e in events(r, "server", "store")]
    assert [s for _, s in states] == ["run 1 -> SCHEDULED", "run 1 -> RUNNING", "run 1 -> CANCELLING",
                                      "run 1 -> CANCELLED"]
    cancelled_at = states[-1][0]
    assert 70_000 <= cancelled_at <= 72_000  # its deadline (60 s after CANCELLING) on the next tick
    assert not [e for e in r.trace if e[0] == cancelled_at and e[2] in ("recv", "reply")]
    assert r.ok
