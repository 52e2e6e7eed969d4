"""Each fault shows its effect in the trace, on scripted runs of the correct model."""

from __future__ import annotations

import importlib.util

from conftest import events, script, simulation

from dst.sim.trace import format_event


def show(result) -> str:
    return "\n".join(format_event(e) for e in result.trace)


def job(at: str, client: str = "c1", work: str = "30s", writes: int = 2) -> dict:
    return {"at": at, "actor": client, "action": "acquire", "work": work, "writes": writes}


def test_a_paused_client_is_frozen_and_resumes_where_it_stopped():
    r = script([job("0s"), {"at": "10s", "actor": "c1", "action": "pause", "for": "20s"}])
    c1 = events(r, "c1")
    pause = next(e for e in c1 if e[2] == "pause")
    resume = next(e for e in c1 if e[2] == "resume")
    assert (pause[0], resume[0]) == (10_000, 30_000)
    # Frozen: c1 does nothing between the pause and the resume.
    assert not [e for e in c1 if 10_000 < e[0] < 30_000]
    # It continues the same job (no new acquire): granted at 25 ms, its first 15 s slice had 5.025 s left.
    assert [e for e in c1 if e[2] == "send" and "acquire" in e[3]] == [c1[1]]
    first_write = next(e for e in c1 if e[2] == "send" and "write" in e[3])
    assert first_write[0] == 30_000 + 5_025 + 1_000  # the rest of the slice, then producing the write
    assert r.jobs == {"done": 1} and r.ok, show(r)


def test_a_client_paused_past_its_lease_checks_it_on_waking_and_stops():
    r = script([job("0s", work="60s", writes=1), {"at": "10s", "actor": "c1", "action": "pause", "for": "90s"}])
    # On waking its renewal is due: the authority refuses it (the reaper took the lease), so c1 stops.
    assert r.jobs == {"renewal failed": 1}, show(r)
    assert r.ok
    assert not [e for e in events(r, "c1", "send") if "write" in e[3]]
    reaped = [e for e in events(r, "c1", "recv") if "refused no such lease" in e[3]]
    assert len(reaped) == 2  # the renewal and the release


def test_a_pause_between_check_and_write_sends_the_write_late_and_the_fence_refuses_it():
    # c1 checks its lease, starts producing its write (1 s), and is frozen for 90 s in that window.
    # Meanwhile c1's lease expires and c2 acquires and writes with a higher token.
    r = script([job("0s", "c1", work="10s", writes=1), {"at": "10.5s", "actor": "c1", "action": "pause", "for": "90s"},
                job("61s", "c2", work="20s", writes=2)])
    resource = events(r, "resource")
    late = [e for e in resource if "from c1" in e[3] and e[0] > 100_000]
    assert late and "refused stale token 1 < 2" in late[0][3], show(r)
    assert r.ok


def test_a_server_restart_loses_memory_keeps_the_store_and_restarts_the_reaper():
    sim = simulation([job("0s", work="100s", writes=1), {"at": "20s", "actor": "server", "action": "restart", "down": "2s"}])
    r = sim.run()
    server = events(r, "server")
    kinds = [(e[0], e[2]) for e in server if e[2] in ("boot", "restart")]
    assert kinds == [(0, "boot"), (20_000, "restart"), (22_000, "boot")]
    # The lease granted before the restart is still recognised after it: the renewal at ~45 s succeeds.
    renewals = [e for e in events(r, "server", "reply") if "renewed" in e[3]]
    assert renewals and renewals[0][0] > 22_000
    assert r.jobs == {"done": 1} and r.ok, show(r)


def test_requests_to_a_down_server_are_dropped_and_in_flight_handlers_die():
    r = script([job("0s", "c1", work="5s", writes=1), {"at": "10ms", "actor": "server", "action": "restart", "down": "3s"}],
               model={"store_latency": ["50ms", "50ms"]})
    # c1's acquire reached the server at 10 ms; the restart at 10 ms killed its handler before it replied.
    assert not [e for e in events(r, "server", "reply") if e[0] < 3_000]
    dropped = events(r, "server", "drop")
    assert dropped and all("server down" in e[3] for e in dropped), show(r)
    # c1 retries after its timeout and gets through once the server is back.
    assert r.jobs == {"done": 1} and r.ok


def test_a_duplicated_release_arrives_twice_and_only_one_gives_the_slot_back():
    r = script([job("0s", work="5s", writes=1)], network={"duplicate": 1.0})
    releases = [e for e in events(r, "server", "recv") if e[3].startswith("release")]
    assert len(releases) == 2 and releases[0][3] == releases[1][3], show(r)
    replies = [e[3] for e in events(r, "server", "reply") if "released" in e[3] or "refused" in e[3]]
    assert sorted(r.split(" to ")[0] for r in replies) == ["refused no such lease", "released"]
    assert r.ok


def test_a_retried_release_after_a_timeout_is_a_duplicate_release():
    # c1's release reaches the server at 5.035 s; a partition from 5.036 s cuts the reply, so c1
    # times out at 7.025 s and sends the release again: the server sees two releases of one lease.
    r = script([job("0s", work="5s", writes=0), {"at": "5.036s", "actor": "c1", "action": "partition", "for": "1s"}])
    releases = [e for e in events(r, "server", "recv") if e[3].startswith("release")]
    assert [e[0] for e in releases] == [5_035, 7_035], show(r)
    replies = [e[3].split(" to ")[0] for e in events(r, "server", "reply") if e[0] > 5_000]
    assert replies == ["released", "refused no such lease"]
    assert r.ok


def test_a_crashed_client_is_gone_for_good_and_its_lease_is_reaped():
    r = script([job("0s", "c1", work="100s"), {"at": "5s", "actor": "c1", "action": "crash"},
                job("10s", "c1"), {"at": "20s", "actor": "c1", "action": "restart"}, job("30s", "c2", work="5s")],
               workload={"acquire_patience": "200s"})
    c1 = events(r, "c1")
    assert [e[3] for e in c1 if e[2] == "skip"] == ["step 3: the client crashed for good",
                                                   "restart: the client crashed for good"], show(r)
    # c1's lease expired at ~60 s and the reaper returned its slot, so c2 got the limit.
    granted = [e for e in events(r, "c2", "recv") if "granted" in e[3]]
    assert granted and 60_000 < granted[0][0] <= 75_000 + 1_000
    assert r.ok


def test_a_restarted_client_forgets_its_lease_and_starts_a_new_incarnation():
    r = script([job("0s", "c1", work="100s"), {"at": "5s", "actor": "c1", "action": "restart"}, job("6s", "c1", work="5s")],
               workload={"acquire_patience": "200s"})
    restart = events(r, "c1", "restart")
    assert restart and restart[0][3] == "incarnation 1 -> 2"
    # The new incarnation's job waits for the old lease to be reaped (limit 1), then runs.
    grants = [e for e in events(r, "c1", "recv") if "granted" in e[3]]
    assert len(grants) == 2 and grants[1][0] > 60_000, show(r)
    assert r.ok


def test_a_partition_cuts_the_client_from_the_server_but_not_from_the_resource():
    r = script([job("0s", work="100s", writes=4), {"at": "40s", "actor": "c1", "action": "partition", "for": "30s"}])
    cut = events(r, "net", "cut")
    assert cut and all(40_000 <= e[0] < 70_000 for e in cut)
    assert all("server" in e[3] for e in cut)
    # Renewals at 45 s fail, so c1 stops before its local deadline: the correct client never overworks.
    assert r.jobs == {"renewal failed": 1}, show(r)
    assert r.ok


def test_message_loss_is_traced_and_recovered_by_retries():
    r = script([job("0s", work="5s", writes=1)], network={"loss": 0.3}, seed=3)
    assert events(r, "net", "lost"), show(r)
    assert r.ok


# --- the server paused; a store round trip slow; faults pinned to a message -----------------------------

def test_a_paused_server_runs_nothing_until_it_resumes_and_keeps_its_memory():
    r = script([job("0s", work="100s", writes=1), {"at": "20s", "actor": "server", "action": "pause", "for": "30s"}])
    server = events(r, "server")
    assert [(e[0], e[2]) for e in server if e[2] in ("pause", "resume", "boot")] == \
        [(0, "boot"), (20_000, "pause"), (50_000, "resume")], show(r)
    assert not [e for e in server if 20_000 < e[0] < 50_000]  # frozen: not a receive, not a reply
    # The renewal sent at ~45 s waited in the socket and is answered after the pause; the lease survived
    # (the reaper did not run in between either), so c1 renews and finishes.
    assert any(e[0] >= 50_000 and "renewed" in e[3] for e in events(r, "server", "reply")), show(r)
    assert r.jobs == {"done": 1} and r.ok, show(r)


def test_a_pinned_slow_round_trip_holds_a_handler_open_and_traces_it():
    release_key = "1.3.0"  # step 1's first release (kind 3)
    r = script([job("0s", work="5s", writes=0),
                {"at": "5s", "actor": "server", "action": "slow", "message": release_key, "round_trip": 1, "by": "3s"}])
    slow = events(r, "server", "slow")
    assert len(slow) == 1 and f"{release_key} round trip 1 slower by 3s" in slow[0][3], show(r)
    # The client's request timed out (2 s) and was retried: the correct model answers both, once each.
    assert len([e for e in events(r, "c1", "send") if "release" in e[3]]) == 2
    assert r.ok and r.faults == {"slow": 1}, show(r)


def test_a_pinned_store_reset_on_a_round_trip_of_no_store_connection_is_traced_as_not_made():
    """The coroutine seam's round trips are on no connection (Redis's are: tests/test_aio_redis.py)."""
    plain = script([job("0s", work="5s", writes=0)])
    pinned = script([job("0s", work="5s", writes=0), {"at": "5s", "actor": "server", "action": "store-reset",
                                                      "message": "1.3.0", "round_trip": 1, "when": "after"}])
    [note] = events(pinned, "server", "not reset")
    assert note[3] == "1.3.0 round trip 1: not on a connection dst resets", show(pinned)
    assert [e for e in pinned.trace if e != note] == list(plain.trace) and pinned.ok and pinned.drawn == ()


def test_pinned_network_faults_happen_whatever_the_draws_say():
    r = script([job("0s", work="5s", writes=0),
                {"at": "5s", "actor": "net", "action": "duplicate", "message": "1.3.0"},
                {"at": "0s", "actor": "net", "action": "lose", "message": "1.1.0"},
                {"at": "0s", "actor": "net", "action": "delay", "message": "1.1.1", "by": "10s"}])
    net = {e[2]: e[3] for e in events(r, "net")}
    assert "1.1.0" in net["lost"] and "1.3.0" in net["duplicated"] and "1.1.1 by 10.01s" in net["delayed"], show(r)
    assert r.ok


def test_the_faults_the_draws_made_pinned_as_steps_replay_the_same_run(default_scenario):
    from dst.explore.shrink import pin_draws
    from dst.scenario import scripted
    from dst.runner import run

    for seed in range(1, 6):
        first = run(default_scenario, seed)
        assert first.drawn, "the default scenario's network loses, duplicates and delays messages"
        base = scripted(default_scenario, first.plan)
        pinned = pin_draws(base, run(base, seed))
        assert pinned.network.loss == pinned.network.duplicate == pinned.network.delay == 0.0
        assert run(pinned, seed).digest == first.digest


def test_a_rare_slow_round_trip_finds_a_double_release_and_the_finding_says_so(tmp_path):
    """No loss, no duplicates, no long delays; well under one slow store round trip per run."""
    from dst.explore.fuzz import campaign, seeds
    from dst.explore.record import minimize
    from dst.scenario import parse_scenario

    scenario = parse_scenario({"bugs": ["double-release"], "model": {"limits": {"db": 2}, "store_slow": 0.0005},
                               "network": {"loss": 0.0, "duplicate": 0.0, "delay": 0.0}}, "<slow store>")
    found = next(o for o in campaign(scenario, seeds(1, 1000, None), use_swarm=True, workers=1) if o.invariant)
    assert found.invariant == "no-foreign-release" and found.seed < 1000
    shrunk = minimize(scenario, found.seed, use_swarm=True)
    steps = shrunk.scenario.steps or ()
    assert len(steps) <= 3 and [s.action for s in steps].count("slow") == 1, [s.describe() for s in steps]
    assert shrunk.scenario.model.store_slow == 0.0  # the slow round trip is a step now, not a probability


# --- targeted faults: aimed at a moment the model marks ------------------------------------------------

def test_a_pause_aimed_at_before_write_lands_between_the_check_and_the_write():
    r = script([job("0s", work="10s", writes=1),
                {"at": "1s", "actor": "c1", "action": "pause", "for": "90s", "moment": "before-write"},
                job("70s", "c2", work="5s", writes=1)])
    c1 = events(r, "c1")
    aim = next(e for e in c1 if e[2] == "aim")
    struck = next(e for e in c1 if e[2] == "moment")
    assert aim[0] == 1_000 and "pause for=90s at its next before-write" in aim[3], show(r)
    # It struck when the write was produced (10 s of work plus 1 s producing it), not at 1 s.
    assert struck[0] == 10_025 + 1_000 and struck[3] == "before-write: pause for=90s", show(r)
    late = [e for e in events(r, "resource") if "from c1" in e[3]]
    assert late and late[0][0] > 100_000 and "refused stale token" in late[0][3], show(r)
    assert r.ok


def test_a_fault_aimed_at_a_moment_never_reached_never_strikes():
    r = script([job("0s", work="10s", writes=0),
                {"at": "1s", "actor": "c1", "action": "crash", "moment": "before-write"}])  # no writes: no such moment
    assert not events(r, "c1", "crash") and r.jobs == {"done": 1}, show(r)


def test_a_restart_aimed_at_a_worker_serves_again_when_it_strikes():
    r = script([{"at": "0s", "actor": "c2", "action": "serve"},
                {"at": "0s", "actor": "user", "action": "submit", "run": 1, "work": "10s"},
                {"at": "0s", "actor": "c2", "action": "restart", "moment": "delivered", "then": "serve"}],
               runs={"workers": 1}, model={"redelivery_timeout": "30s", "heartbeat_interval": "10s",
                                           "cancelling_timeout": "60s"})
    c2 = [e[2] for e in events(r, "c2") if e[2] in ("moment", "restart", "job", "job-end")]
    assert c2[:4] == ["job", "moment", "restart", "job"], show(r)  # struck at delivery, then served again
    assert r.ok, show(r)


def _beat_late() -> object:
    """c1 works on run 1 and is paused at its next heartbeat, its deadline checked, past that deadline; c2 serves
    meanwhile and is handed the run again. c1's heartbeat goes out when it wakes."""
    return script([{"at": "0s", "actor": "c1", "action": "serve"},
                   {"at": "0s", "actor": "user", "action": "submit", "run": 1, "work": "100s"},
                   {"at": "1s", "actor": "c1", "action": "pause", "for": "60s", "moment": "before-beat"},
                   {"at": "20s", "actor": "c2", "action": "serve"}],
                  runs={"workers": 2}, model={"redelivery_timeout": "30s", "heartbeat_interval": "10s",
                                              "cancelling_timeout": "60s"})


def test_a_pause_aimed_at_before_beat_sends_the_heartbeat_after_the_deadline_and_the_server_refuses_it():
    r = _beat_late()
    struck = next(e for e in events(r, "c1") if e[2] == "moment")
    assert struck[3] == "before-beat: pause for=60s", show(r)
    redelivered = next(e for e in events(r, "server") if "redelivered run 1" in e[3])
    late = [e for e in events(r, "server") if "heartbeat run 1 claim 1 from c1" in e[3] and e[0] > redelivered[0]]
    assert late and late[0][0] > struck[0] + 60_000, show(r)  # sent on waking, the run handed to c2 meanwhile
    assert any(e[3] == "refused claim lost to c1 (1.11.0r)" for e in events(r, "server", "reply")), show(r)
    assert r.ok, show(r)


def test_a_server_that_takes_any_claims_heartbeat_is_caught_at_the_late_beat(monkeypatch):
    from dst.reference import runs

    def any_claim(self, run: int, token: int):  # a heartbeat matched to the run, not to its claim (a user's slip)
        return self.store.pending.get(run)

    monkeypatch.setattr(runs.RunService, "_current", any_claim)
    r = _beat_late()
    assert r.violation is not None and r.violation.invariant == "owner-only-update", show(r)
    assert "heartbeat under claim" in r.violation.message


def test_targeted_faults_are_generated_only_where_the_scenario_asks_and_aim_at_the_models_moments():
    from dst.runner.generate import generate_plan
    from dst.reference import model
    from dst.scenario import load_scenario, parse_scenario
    from dst.sim.rng import Streams

    untargeted = generate_plan(load_scenario(), Streams(4))
    assert not [s for s in untargeted if s.arg("moment")]
    aimed = parse_scenario({"faults": {"pause": {"rate": 2.0, "duration": ["1s", "9s"], "targeted": 1.0}}}, "<t>")
    moments = {s.arg("moment") for s in generate_plan(aimed, Streams(4)) if s.action == "pause"}
    assert moments and moments <= set(model.client_moments)


def test_past_is_drawn_only_for_aimed_faults_that_last_and_only_where_the_scenario_sets_it():
    from dst.plan import step_from_mapping
    from dst.runner.generate import generate_plan
    from dst.scenario import parse_scenario
    from dst.sim.rng import Streams

    def plan(pause: dict) -> list:
        return [s for s in generate_plan(parse_scenario({"faults": {"pause": pause}}, "<t>"), Streams(4))
                if s.action == "pause"]

    aimed = {"rate": 2.0, "duration": ["1s", "9s"], "targeted": 0.5}
    assert plan(aimed) and not [s for s in plan(aimed) if s.arg("past") is not None]
    drawn = plan({**aimed, "past": ["1s", "2s"]})
    assert [s.arg("moment") is not None for s in drawn] == [s.arg("past") is not None for s in drawn]
    assert {1_000 <= s.number("past") <= 2_000 for s in drawn if s.arg("moment")} == {True}
    # The same draws otherwise: a scenario that sets past moves no other step.
    assert [(s.at, s.actor, s.arg("for")) for s in drawn] == [(s.at, s.actor, s.arg("for")) for s in plan(aimed)]
    try:  # a fault that does not last (a clock set back by an amount) has no past
        step_from_mapping({"at": "1s", "actor": "c1", "action": "clock-skew", "by": "1s", "past": "1s"}, 1)
    except ValueError as e:
        assert str(e).startswith("past: ")
    else:
        raise AssertionError("clock-skew took a past")


def test_a_skewed_wall_clock_does_not_move_the_correct_client_which_times_its_lease_monotonically():
    skew = {"at": "10s", "actor": "c1", "action": "clock-skew", "by": "30s"}
    plain, skewed = script([job("0s", work="100s", writes=1)]), script([job("0s", work="100s", writes=1), skew])
    assert "wall clock set back to t=-20s" in events(skewed, "c1", "clock-skew")[0][3], show(skewed)
    same = lambda r: [e for e in r.trace if e[2] != "clock-skew"]  # noqa: E731
    assert same(skewed) == same(plain) and skewed.ok


def test_a_client_that_trusts_its_wall_clock_works_without_a_lease_once_it_is_set_back():
    skew = {"at": "10s", "actor": "c1", "action": "clock-skew", "by": "30s"}
    r = script([job("0s", work="100s", writes=1), skew], bugs=["trusts-client-clock"])
    assert r.violation is not None and r.violation.invariant == "single-executor", show(r)


def test_each_pinned_kind_is_drawn_by_the_chance_the_registry_names_and_by_no_other():
    """``FaultKind.chance`` is what dst.strategies reads to leave a kind out: it must be the key that draws it."""
    from dst.faults import FAULTS
    from dst.runner import run
    from dst.scenario import parse_scenario

    off = {"network": {"loss": 0.0, "duplicate": 0.0, "delay": 0.0}, "model": {"store_slow": 0.0}}
    for kind in (kind for kind in FAULTS if kind.pinned):
        section, key = kind.chance[0].split(".")
        doc: dict = {name: dict(values) for name, values in off.items()}
        doc[section][key] = 0.3
        if kind.connection_only:  # a reset, a retrying proxy: an HTTP service's (the reference model speaks RPC)
            doc["model"]["impl"] = "examples.aio_leases:model"
            doc["network"]["proxy_timeout"] = ["1ms", "5ms"]  # shorter than a handler: the proxy sends again
            doc["workload"], doc["run"] = {"clients": 2, "jobs": 3}, {"duration": "60s"}  # a small world: cheap
        if key == "store_reset":  # a connection store's (Redis): a service whose handlers write to one
            if importlib.util.find_spec("fakeredis") is None:
                continue  # the redis extra is not installed
            doc["model"] |= {"impl": "redis_models:counter", "limits": {"incr": 1}}
            doc["workload"], doc["run"] = {"clients": 2, "jobs": 3, "limit": "incr"}, {"duration": "60s"}
        if kind.chance[1]:
            assert kind.chance[1].startswith(f"{section}.")  # its duration's range is a key of the same section
        scenario = parse_scenario(doc, f"<only {kind.name}>")
        assert {step.action for seed in range(1, 4) for step in run(scenario, seed).drawn} == {kind.action}, kind.name
    quiet = parse_scenario(off, "<no draws>")
    assert not any(run(quiet, seed).drawn for seed in range(1, 4))
