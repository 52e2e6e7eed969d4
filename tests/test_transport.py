"""Faults true to the transport: HTTP runs on connections, so the network never hands the server one request twice.

A request reaches the server again only when someone sends it again: the client's own retries (a request of its
own, keyed as the client's next) or a retrying proxy in front of the server (``proxy-retry``). RPC records stay
datagrams, which the network may duplicate.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dst.aio.wire import HttpRequest
from dst.runner import run
from dst.scenario import parse_scenario
from dst.sim.network import Broken
from dst.sim.trace import PROXY_COPY, RESPONSE, key_name, message_key

ROOT = Path(__file__).resolve().parents[1]
ACQUIRE = HttpRequest("POST", "/limits/db/leases", (), b"").kind
RELEASE = HttpRequest("POST", "/leases/1/release", (), b"").kind


@pytest.fixture(autouse=True)
def _from_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the example's model resolves from the repository's root


def _scenario(network: dict[str, Any], steps: list[dict[str, Any]] | None = None, **top: Any) -> Any:
    data: dict[str, Any] = {
        "run": {"duration": "120s", "quiet": "150s"},
        "model": {"impl": "examples.aio_leases:model", "limits": {"db": 2}, "store_latency": ["1ms", "20ms"]},
        "workload": {"clients": 3, "jobs": 4, "work": ["1s", "20s"], "think": ["0s", "5s"]},
        "network": network, **top,
    }
    if steps is not None:
        data["steps"] = steps
        data["workload"] = {"clients": 1, "jobs": 0}
    return parse_scenario(data, "<test>")


def _received(result: Any) -> Counter[int]:
    """How many times the server received each HTTP request, by its key."""
    return Counter(e[3][3] for e in result.raw_trace
                   if e[1] == "server" and e[2] == "recv" and isinstance(e[3][1], HttpRequest))


def test_no_setting_of_the_network_or_the_faults_hands_the_server_an_http_request_twice() -> None:
    scenario = _scenario({"latency": ["1ms", "50ms"], "loss": 0.2, "duplicate": 0.5, "delay": 0.2,
                          "delay_by": ["1s", "5s"], "reset": 0.2},
                         faults={"pause": {"rate": 2}, "partition": {"rate": 2}, "restart": {"rate": 1},
                                 "server_restart": {"rate": 1}, "server_pause": {"rate": 1}})
    seen: Counter[str] = Counter()
    for seed in range(1, 4):
        result = run(scenario, seed)
        received = _received(result)
        assert received and max(received.values()) == 1, [key_name(k) for k, n in received.items() if n > 1]
        actions = Counter(e[2] for e in result.raw_trace if e[1] == "net")
        assert actions["duplicated"] == 0 and actions["proxy-retried"] == 0
        seen.update(actions)
        # The client's own retries are requests of their own: the same kind of one step, under the next n.
        seen["retried"] += sum(1 for k in received if k & 0xFFF)
        seen["refused"] += sum(1 for e in result.raw_trace if e[2] == "recv" and e[3][1] == Broken("refused"))
    # Each fault the test means to exercise happened, or it holds nothing.
    assert seen["lost"] and seen["reset"] and seen["delayed"] and seen["cut"] and seen["retried"], seen
    assert seen["refused"], seen


def test_a_lost_request_is_refused_before_the_server_and_a_lost_response_comes_after_it_ran() -> None:
    acquire, release = key_name(message_key(1, ACQUIRE, 0)), key_name(message_key(1, RELEASE, 0))
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "0s", "actor": "net", "action": "lose", "message": acquire},
             {"at": "0s", "actor": "net", "action": "reset", "message": release + "r"}]
    result = run(_scenario({"latency": ["10ms", "10ms"], "loss": 0.0}, steps), 1)
    received = _received(result)
    assert message_key(1, ACQUIRE, 0) not in received  # lost before the server: it never ran
    assert received[message_key(1, RELEASE, 0)] == 1  # reset after the server ran it ...
    assert received[message_key(1, RELEASE, 1)] == 1  # ... and the client library sent it again
    heard = [(e[3][2], e[3][1]) for e in result.raw_trace if e[1] == "c1" and e[2] == "recv"]
    assert (message_key(1, ACQUIRE, 0) | RESPONSE, Broken("refused")) in heard
    assert (message_key(1, RELEASE, 0) | RESPONSE, Broken("reset")) in heard
    # The retry finds the lease gone (the first try ran): the uncertain outcome, which the correct service survives.
    assert result.ok and result.jobs == {"release not confirmed": 1}


def test_a_pinned_duplicate_of_an_http_request_is_not_made() -> None:
    acquire = key_name(message_key(1, ACQUIRE, 0))
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "0s", "actor": "net", "action": "duplicate", "message": acquire}]
    result = run(_scenario({"latency": ["10ms", "10ms"], "loss": 0.0}, steps), 1)
    assert _received(result)[message_key(1, ACQUIRE, 0)] == 1
    assert [e[3] for e in result.raw_trace if e[2] == "not duplicated"] == [
        f"{acquire}: a connection delivers a message once"]


def test_a_retrying_proxy_sends_a_slow_request_again_and_its_client_hears_the_second_attempt() -> None:
    acquire = message_key(1, ACQUIRE, 0)
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "0s", "actor": "server", "action": "slow", "message": key_name(acquire), "round_trip": 1,
              "by": "1500ms"},
             {"at": "0s", "actor": "net", "action": "proxy-retry", "message": key_name(acquire), "by": "1s"}]
    result = run(_scenario({"latency": ["10ms", "10ms"], "loss": 0.0}, steps, model={
        "impl": "examples.aio_leases:model", "limits": {"db": 2}, "store_latency": ["5ms", "5ms"],
        "call_timeout": "5s"}), 1)
    received = _received(result)
    assert received[acquire] == 1 and received[acquire | PROXY_COPY] == 1  # the proxy's copy, after 1 s
    net = [(e[2], e[3][3]) for e in result.raw_trace if e[1] == "net"]
    assert ("proxy-retried", acquire) in net and ("abandoned", acquire | RESPONSE) in net
    answers = [e[3][2] for e in result.raw_trace if e[1] == "c1" and e[2] == "recv"]
    assert answers.count(acquire | RESPONSE) == 1  # one answer: the second attempt's
    assert "proxy-retry" in [s.action for s in result.drawn]  # a finding's minimizer writes it as a step


def test_a_retrying_proxy_passes_on_a_response_that_comes_in_time() -> None:
    acquire = message_key(1, ACQUIRE, 0)
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "0s", "actor": "net", "action": "proxy-retry", "message": key_name(acquire), "by": "1s"}]
    result = run(_scenario({"latency": ["10ms", "10ms"], "loss": 0.0}, steps), 1)
    assert _received(result)[acquire] == 1 and not _received(result)[acquire | PROXY_COPY]
    assert result.ok and "proxy-retry" not in [s.action for s in result.drawn]
