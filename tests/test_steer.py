"""The default campaign: every shipped scenario, and coverage steering the seeds among them."""

from __future__ import annotations

import json
from collections import Counter

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dst.explore.fuzz import campaign, seeds
from dst.explore.steer import Steering, default_campaign
from dst.runner import run
from dst.runner.swarm import DENSER_AT_MOST, aimed, swarm, world
from dst.scenario import embedded_scenarios, load_scenario
from dst.sut import Situation

RARE = Situation("rare-thing", "a rare thing happened", tests=("single-executor",))


def _learn_block(steering: Steering, start: int, reaches: dict[int, tuple[str, ...]]) -> None:
    """One block's outcomes, in campaign order: the arm each position ran reached the situations given."""
    for position in range(start, start + steering.block):
        arm = steering.arm(position)
        steering.learn(arm, ("single-executor",) if arm != 2 else ("capacity",), (),
                       tuple((name, 1) for name in reaches.get(arm, ())), ())


def test_the_first_block_takes_turns_and_every_later_block_keeps_half_in_turns() -> None:
    steering = Steering(3)
    assert [steering.arm(p) for p in range(steering.block)] == [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]
    for block in range(3):
        _learn_block(steering, block * steering.block, {})
    later = [steering.arm(p) for p in range(3 * steering.block, 4 * steering.block)]
    assert Counter(later[0::4]) == Counter(later[1::4]) == {0: 1, 1: 1, 2: 1}


def test_the_broad_scenarios_have_half_the_opening_and_a_quarter_after_and_the_others_take_turns() -> None:
    steering = Steering(6, (RARE,), broad=2)
    first = [steering.arm(p) for p in range(steering.block)]
    assert first[:8] == [0, 2, 1, 3, 0, 4, 1, 5]  # the user's scenario first, a narrow one, the next broad one, ...
    assert Counter(first[0::2]) == {0: 6, 1: 6} and Counter(first[1::2]) == {2: 3, 3: 3, 4: 3, 5: 3}
    _learn_block(steering, 0, {4: ("rare-thing",)})
    second = [steering.arm(p) for p in range(steering.block, 2 * steering.block)]
    assert Counter(second[0::2]) == {0: 6, 1: 6}  # the opening's second block: half still to the broad ones
    for block in (1, 2):
        _learn_block(steering, block * steering.block, {4: ("rare-thing",)})
    later = [steering.arm(p) for p in range(3 * steering.block, 4 * steering.block)]
    assert Counter(later[0::4]) == {0: 3, 1: 3}
    assert set(later[1::4]) == {2, 3, 4, 5}  # in turns: every narrow one at least once a block
    weighed = Counter(later[2::4] + later[3::4])
    assert sum(weighed.values()) == 12 and weighed.most_common(1)[0][0] == 4  # to the one reaching the rare thing


def test_an_arm_that_reaches_what_others_do_not_gets_the_weighed_seeds() -> None:
    steering = Steering(3, (RARE,))
    for block in range(4):
        _learn_block(steering, block * steering.block, {1: ("rare-thing", "common"), 0: ("common",), 2: ("common",)})
    weighed = Counter(steering.arm(p) for p in range(4 * steering.block, 5 * steering.block) if p % 4 >= 2)
    assert weighed[1] > weighed[0] and weighed[1] > weighed[2]


def test_a_situation_never_reached_draws_seeds_to_the_arms_that_check_what_it_tests() -> None:
    steering = Steering(3, (RARE,))
    for block in range(3):
        _learn_block(steering, block * steering.block, {})
    weights = steering.weights()
    assert min(weights[0], weights[1]) > weights[2]  # arm 2 checks only capacity: the situation tests nothing it checks


def test_a_block_waits_for_the_block_before_the_last() -> None:
    steering = Steering(2)
    assert steering.ready(2 * steering.block - 1) and not steering.ready(2 * steering.block)
    _learn_block(steering, 0, {})
    assert steering.ready(3 * steering.block - 1) and not steering.ready(3 * steering.block)


@settings(max_examples=50, deadline=None)
@given(arms=st.integers(1, 6), broad=st.integers(0, 6),
       reached=st.lists(st.lists(st.sampled_from(["a", "b", "c"]), max_size=3), max_size=60))
def test_every_seed_has_an_arm_and_no_arm_is_starved(arms: int, broad: int, reached: list[list[str]]) -> None:
    steering = Steering(arms, (RARE,), broad)
    for position, names in enumerate(reached + [[]] * (3 * 4 * arms)):
        assert steering.ready(position)
        arm = steering.arm(position)
        assert 0 <= arm < arms
        steering.learn(arm, ("single-executor",), (), tuple((n, 1) for n in names), ())
    block = steering.block
    last = [steering.arm(p) for p in range(steering.learned // block * block, steering.learned // block * block + block)
            if steering.ready(p)]
    assert not last or set(last) == set(range(arms))


def test_the_default_campaign_is_the_default_then_every_shipped_scenario_with_its_bugs_off_then_each_aimed() -> None:
    first = attrs.evolve(load_scenario(None), bugs=("strict-fence",))
    made = default_campaign(first)
    roster = made.scenarios
    plain = [s for s in roster if not s.name.endswith(", aimed")]
    assert roster[0] == first and roster[:len(plain)] == tuple(plain)
    assert {s.name for s in plain} == set(embedded_scenarios())
    assert [s.name for s in roster[:made.broad]] == ["default", "runs"]  # the broad ones: they switch no bug on
    assert all(s.bugs == ("strict-fence",) for s in roster)
    for scenario in roster[len(plain):]:  # each aims half of every kind its plain form enables
        source = next(s for s in plain if f"{s.name}, aimed" == scenario.name)
        assert scenario == aimed(source) != source
        assert all(fault.targeted == 0.5 for _, fault in scenario.faults.kinds() if fault.rate > 0)


def test_an_aimed_seed_runs_again_from_its_command(capsys) -> None:
    from dst.cli import main

    scenario = aimed(attrs.evolve(load_scenario("unconditional-ack"), bugs=()))
    result = run(swarm(scenario, 5), 5)
    assert result.reproduce == "dst run --seed 5 --scenario unconditional-ack --no-bugs --aim --swarm"
    main([*result.reproduce.split()[1:], "--json"])
    assert json.loads(capsys.readouterr().out)["trace_digest"] == result.digest


@pytest.mark.slow
def test_a_steered_campaign_gives_the_same_outcomes_on_any_number_of_workers() -> None:
    # Four of the default campaign's scenarios: blocks of 16 seeds, so 112 seeds are seven blocks, five of them
    # weighed on what the blocks before them reached, while chunks of seeds are in flight in the pool.
    roster = default_campaign(attrs.evolve(load_scenario(None), bugs=("renew-stale-stamp",))).scenarios[:4]

    def outcomes(workers: int) -> list[tuple[int, int, str | None]]:
        return [(o.seed, o.arm, o.invariant) for o in campaign(roster, seeds(1, 113, None), use_swarm=True,
                                                               workers=workers, broad=2)]

    one = outcomes(1)
    assert one == outcomes(2)
    assert len({arm for _, arm, _ in one}) == len(roster)


def test_a_users_default_campaign_turns_on_every_fault_kind_and_finds_a_server_that_trusts_the_clients_clock(
        capsys, tmp_path) -> None:
    from dst.cli import main

    # The server computes a lease's expiry from the client's timestamp: only a clock skew shows it, and the embedded
    # default has none. The default campaign of a model of the user's runs the default with it turned on too.
    first = load_scenario(None, model="aio_models:client_clock")
    roster = default_campaign(first)
    assert [s.name for s in roster.scenarios[:roster.broad]] == [
        "default", "default, with clock_skew", "default, with server_pause", "default, with slow",
        "default, with store-reset", "default, with reset", "default, with proxy-retry"]
    slow = roster.scenarios[3]
    assert slow.model.store_slow > 0 and slow.run.quiet > first.run.quiet  # the slack a slow round trip adds
    # Seed 87 finds it: a roster of seven broad scenarios (the store's reset among them, which strikes only a service
    # on a connection store) gives the clock skew's one its turns less often than six did (seed 15).
    assert main(["fuzz", "--model", "aio_models:client_clock", "--count", "100", "--stop-on-first", "--no-findings",
                 "--json", "--workers", "1"]) == 1
    report = json.loads(capsys.readouterr().out)
    [group] = report["signatures"]
    assert group["invariant"] == "single-executor" and "--enable clock_skew" in group["reproduce"]
    assert report["coverage"]["enabled"]["clock_skew"] > 0
    command = group["reproduce"].split()
    assert main([*command[1:], "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["violation"]["invariant"] == "single-executor"


def test_a_campaign_names_the_fault_kinds_no_seed_turned_on(capsys, tmp_path) -> None:
    from dst.cli import main

    scenario = tmp_path / "crashes.toml"
    scenario.write_text('[model]\nimpl = "aio_models:client_clock"\n[network]\nloss = 0.0\nduplicate = 0.0\n'
                        'delay = 0.0\n[faults]\ncrash = { rate = 0.5 }\npause = { rate = 0.0 }\n'
                        'partition = { rate = 0.0 }\nrestart = { rate = 0.0 }\nserver_restart = { rate = 0.0 }\n'
                        '[run]\nduration = "60s"\n')
    assert main(["fuzz", "--scenario", str(scenario), "--count", "4", "--no-findings", "--json"]) == 0
    enabled = json.loads(capsys.readouterr().out)["coverage"]["enabled"]
    assert enabled == {"crash": enabled["crash"], **{kind: 0 for kind in enabled if kind != "crash"}}
    assert enabled["crash"] > 0 and set(enabled) >= {"clock_skew", "server_pause", "slow", "lose"}
    assert main(["fuzz", "--scenario", str(scenario), "--count", "4", "--no-findings"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("never enabled restart, pause, partition, clock_skew, server_restart, server_pause, slow, store-reset, "
            "duplicate, delay, lose, reset, proxy-retry: no seed turned them on") in out


# --- small worlds first, for a model of the user's -----------------------------------------------------------------

def test_a_small_world_cuts_clients_jobs_and_the_run_and_keeps_the_faults_its_run_would_meet() -> None:
    full = load_scenario(None, model="examples.aio_leases:model")  # a 600 s run
    small, medium = world(full, "small"), world(full, "medium")
    assert (small.workload.clients, small.workload.jobs, small.run.duration) == (2, 3, 150_000)
    assert (medium.workload.clients, medium.workload.jobs, medium.run.duration) == (3, 4, 300_000)
    rates = {kind: fault.rate for kind, fault in full.faults.kinds() if fault.rate}
    assert rates and {k: f.rate for k, f in small.faults.kinds() if f.rate} == {k: 4 * r for k, r in rates.items()}
    assert {k: f.rate for k, f in medium.faults.kinds() if f.rate} == {k: 2 * r for k, r in rates.items()}
    assert small.faults.pause.duration == full.faults.pause.duration  # as many pauses, each as long
    assert small.network == full.network and small.bugs == full.bugs
    assert small.name == f"{full.name}, small world"
    assert world(small, "small") == small  # no smaller than it is: as it is, named as it was


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 12), st.integers(0, 20), st.integers(1, 3_600_000), st.sampled_from(("small", "medium")))
def test_a_world_is_never_bigger_than_the_scenario_in_any_key(clients: int, jobs: int, duration: int,
                                                              size: str) -> None:
    full = load_scenario(None)
    full = attrs.evolve(full, workload=attrs.evolve(full.workload, clients=clients, jobs=jobs),
                        run=attrs.evolve(full.run, duration=duration))
    smaller = world(full, size)
    assert smaller.workload.clients <= clients and smaller.workload.jobs <= jobs
    assert 1 <= smaller.run.duration <= duration
    for (_, fault), (_, faster) in zip(full.faults.kinds(), smaller.faults.kinds()):
        # never more faults than the scenario's own run would meet, nor more than DENSER_AT_MOST times as dense
        assert fault.rate <= faster.rate <= DENSER_AT_MOST * fault.rate
        assert faster.rate * smaller.run.duration <= fault.rate * duration * (1 + 1e-9)


def test_a_scripted_scenario_keeps_its_world() -> None:
    finding = load_scenario("findings/001-release-frees-another-holders-slot.toml")
    assert finding.steps is not None and world(finding, "small") is finding


def test_worlds_start_small_grow_and_leave_the_choice_of_scenario_as_it_was() -> None:
    plain, tiered = Steering(4), Steering(12, worlds=3)
    block = plain.block
    arms = []
    for position in range(5 * block):  # in campaign order, learning each outcome (nothing reached)
        arms.append(tiered.arm(position))
        tiered.learn(arms[-1], (), (), (), ())
    worlds = [arm // 4 for arm in arms]  # 0: in full, 1: small, 2: medium
    assert set(worlds[:block]) == {1}
    assert set(worlds[block:2 * block]) == {1, 2} and set(worlds[2 * block:3 * block]) == {2, 0}
    later = Counter(worlds[3 * block:5 * block])
    assert later[0] == 2 * later[1] == 2 * later[2]  # from then on more than half the seeds run in full
    assert [arm % 4 for arm in arms[:2 * block]] == [plain.arm(p) for p in range(2 * block)]


def test_a_users_default_campaign_starts_small_and_the_reference_models_does_not() -> None:
    users = default_campaign(load_scenario(None, model="examples.aio_leases:model"))
    assert users.worlds == 3 and len(users.scenarios) % 3 == 0
    third = len(users.scenarios) // 3
    assert all(s.name.endswith(", small world") for s in users.scenarios[third:2 * third])
    assert default_campaign(load_scenario(None)).worlds == 1


def test_a_small_world_seed_runs_again_from_its_command(capsys) -> None:
    from dst.cli import main
    from dst.runner.reproduce import reproduce

    small = world(load_scenario("examples/aio_leases/scenarios/default.toml"), "small")
    command = reproduce(swarm(small, 2), 2)
    assert command == "dst run --seed 2 --scenario examples/aio_leases/scenarios/default.toml --world small --swarm"
    assert main([*command.split()[1:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace_digest"] == run(swarm(small, 2), 2).digest
