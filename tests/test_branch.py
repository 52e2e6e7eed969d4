"""Branching from a risky moment: a branch is a run of its own that gives the same bytes forked or run from the
start, the seed's own run is unchanged by its branches, and a campaign counts, reports and reproduces them."""

from __future__ import annotations

import json
import os

import attrs
import pytest

import dst
from dst.cli import main
from dst.explore.branch import MOST, Branching, Folder
from dst.explore.seed import explore_seed
from dst.explore.isolate import CAN_FORK
from dst.explore.snapshot import Snapshots, diverges
from dst.explore.steer import BRANCH_BLOCK, Steering, one_scenario
from dst.invariants.situations import catalogue
from dst.plan import Branch
from dst.runner import Simulation
from dst.runner.reproduce import reproduce
from dst.runner.swarm import swarm, world
from dst.scenario import scripted

AIO = "examples/aio_leases/scenarios/default.toml"


def _small_aio() -> dst.Scenario:
    return world(dst.load_scenario(AIO), "small")


def _every(scenario: dst.Scenario, branches: int) -> dict[str, int]:
    return {s.id: branches for s in catalogue(scenario.model.resolve().situations)}


def test_a_branch_is_the_seeds_own_run_up_to_its_moment_and_its_own_after():
    scenario = dst.load_scenario("default")
    own = dst.run(scenario, 3)
    assert own.violation is None  # its digest covers the whole trace
    at = own.raw_trace[len(own.raw_trace) // 2][0] + 1
    branched = dst.run(attrs.evolve(scenario, branch=Branch(at, 1)), 3)
    before = [e for e in own.trace if e[0] < at]
    assert [e for e in branched.trace if e[0] < at] == before
    mark = branched.trace[len(before)]
    assert mark[:3] == (at, "world", "branch") and "draw 1" in mark[3]
    assert branched.trace[len(before) + 1:] != own.trace[len(before):]  # new draws: another future
    again = dst.run(attrs.evolve(scenario, branch=Branch(at, 1)), 3)
    other = dst.run(attrs.evolve(scenario, branch=Branch(at, 2)), 3)
    assert branched.violation is None and other.violation is None
    assert again.digest == branched.digest != other.digest
    assert branched.plan == tuple(sorted((*own.plan, Branch(at, 1).step()), key=lambda s: (s.at, s.id)))


@pytest.mark.skipif(not CAN_FORK, reason="forks only on Linux")
def test_a_forked_branch_gives_the_bytes_of_the_branch_run_from_the_start_and_the_seed_its_own():
    scenario = _small_aio()
    explorer = Branching(_every(scenario, 2), lambda result: result.digest, lambda branch, why: why)
    explored = Simulation(scenario, 4, explorer=explorer).run()
    plain = dst.run(scenario, 4)
    assert (explored.digest, explored.events) == (plain.digest, plain.events)  # its SQLite file put back each time
    assert explorer.cold == () and len(explorer.answers) == 2, "forked at its first moment"
    at = min(plain.moments.values()) + 1
    assert explorer.answers == [dst.run(attrs.evolve(scenario, branch=Branch(at, d)), 4).digest for d in (1, 2)]


@pytest.mark.skipif(not CAN_FORK, reason="forks only on Linux")
def test_the_seeds_outcomes_and_its_branches_are_the_same_forked_or_not():
    scenario = _small_aio()
    budget = tuple(_every(scenario, 2).items())
    forked = explore_seed(scenario, 11, False, budget=budget, fork=True)
    cold = explore_seed(scenario, 11, False, budget=budget, fork=False)
    assert forked == cold
    assert [o.branch is not None for o in forked] == [False, True, True]
    assert forked[1].branch == (forked[2].branch[0], 1) and forked[2].branch[1] == 2


def test_a_moment_after_the_seed_violated_is_not_branched():
    scenario = dst.load_scenario("double-release")
    result = dst.run(scenario, 3)
    assert result.violation is not None
    late = {s: 2 for s, t in result.moments.items() if t >= result.violation.time}
    assert late  # moments the run reached after its violation: each declined
    outcomes = explore_seed(scenario, 3, False, budget=tuple(late.items()), fork=False)
    assert len(outcomes) == 1


def test_the_coroutine_seam_branches_from_the_start_and_the_most_a_moment_gets_wins(monkeypatch):
    scenario = dst.load_scenario("default")
    seed = next(s for s in range(1, 50) if dst.run(scenario, s).moments)
    moments = dst.run(scenario, seed).moments
    first = min(moments.values())
    budget = {s: (3 if t == first else 1) for s, t in moments.items()}
    explorer = Branching(budget, lambda result: result.digest, lambda branch, why: why)
    Simulation(scenario, seed, explorer=explorer).run()
    assert explorer.answers == [] and explorer.cold == tuple(Branch(first + 1, d) for d in (1, 2, 3))


def test_a_campaign_counts_and_reproduces_its_branches_the_same_on_any_number_of_workers():
    default = dst.load_scenario("default")
    scenario = attrs.evolve(default, faults=attrs.evolve(  # faults an eighth as often: the situations are rare
        default.faults, **{kind: attrs.evolve(rate, rate=rate.rate / 8) for kind, rate in default.faults.kinds()}))
    branches: list[dst.Outcome] = []
    one = dst.fuzz(scenario, range(1, 97), branches=2,
                   on_result=lambda outcome: branches.append(outcome) if outcome.branch else None)
    two = dst.fuzz(scenario, range(1, 97), branches=2, workers=2)
    assert one.seeds_run == 96 and one.branches_run == len(branches) > 0
    assert (one.branches_run, one.events, one.coverage) == (two.branches_run, two.events, two.coverage)
    assert one_scenario(scenario).branches == 0 and one_scenario(_small_aio()).branches == MOST  # the seam's: asked
    outcome = branches[0]
    assert outcome.seed <= 96 and outcome.branch[1] in (1, 2)
    ran = attrs.evolve(swarm(scenario, outcome.seed), branch=Branch(*outcome.branch))
    again = dst.run(ran, outcome.seed)
    assert (again.events, again.situations) == (outcome.events, dict(outcome.reached))


def test_dst_run_branch_on_the_command_line(capsys):
    def run(*flags: str) -> tuple[int, str, str]:
        code = main(["run", "--seed", "3", "--scenario", "double-release", *flags])
        out, err = capsys.readouterr()
        return code, out, err

    digest = [json.loads(run(*flags, "--json")[1])["trace_digest"] for flags in (("--branch", "4s/2"),) * 2 + ((),)]
    assert digest[0] == digest[1] != digest[2]
    branched = attrs.evolve(swarm(dst.load_scenario("double-release"), 3), branch=Branch(4000, 2))
    command = reproduce(branched, 3)
    assert command == "dst run --seed 3 --scenario double-release --swarm --branch 4s/2"
    assert main([*command.split()[1:], "--json"]) == 1  # it violates, as the seed does
    assert json.loads(capsys.readouterr().out)["trace_digest"] == dst.run(branched, 3).digest
    for bad in ("4s", "4s/0", "never/1", "0s/1"):
        code, _, err = run("--branch", bad)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "--branch" in err and "expected AT/DRAW" in err


def test_a_branch_step_in_a_script_is_read_and_written_back(tmp_path):
    path = tmp_path / "script.toml"
    path.write_text('steps = [\n'
                    '  { at = "0s", actor = "c1", action = "acquire", work = "30s", writes = 1 },\n'
                    '  { id = 0, at = "2s", actor = "world", action = "branch", draw = 3 },\n]\n')
    scenario = dst.load_scenario(str(path))
    assert scenario.steps is not None and scenario.steps[1] == Branch(2000, 3).step()
    assert any(e[1:3] == ("world", "branch") for e in dst.run(scenario, 1).trace)
    path.write_text('steps = [{ at = "2s", actor = "c1", action = "branch", draw = 3 }]\n')
    with pytest.raises(dst.ScenarioError, match=r"steps\[0\]\.actor: expected 'world'"):
        dst.load_scenario(str(path))


def test_the_steering_gives_a_rare_situation_the_most_branches_and_decides_on_the_blocks_before():
    situations = catalogue()
    steering = Steering(1, situations, branches=MOST)
    assert steering.branches(0) == () and steering.branches(2 * BRANCH_BLOCK - 1) == ()  # nothing learned yet
    for position in range(2 * BRANCH_BLOCK):
        assert steering.ready(position)
        reached = (("died-holding-leases", 1),) + ((("stale-write", 1),) if position % 10 == 0 else ())
        steering.learn(0, (), (), reached, ())
    assert not steering.ready(4 * BRANCH_BLOCK)  # its block is weighed on the one before the last: not learned
    assert steering.ready(3 * BRANCH_BLOCK)
    later = dict(steering.branches(3 * BRANCH_BLOCK))
    assert "died-holding-leases" not in later  # every seed reached it: the next seed is as near a future of it
    assert later["stale-write"] == MOST // 2  # one seed in ten
    assert later["paused-past-expiry"] == MOST  # none yet
    assert Steering(1, situations).branches(3 * BRANCH_BLOCK) == ()  # a campaign that does not branch


def test_a_folder_is_put_back_in_place_after_a_branch(tmp_path):
    (tmp_path / "db").write_bytes(b"before")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "kept").write_bytes(b"1")
    kept = Folder(str(tmp_path))
    inode = os.stat(tmp_path / "db").st_ino
    with open(tmp_path / "db", "r+b") as file:
        file.write(b"after, and longer")
    (tmp_path / "sub" / "kept").unlink()
    (tmp_path / "made").write_bytes(b"x")
    (tmp_path / "new").mkdir()
    kept.put_back()
    assert (tmp_path / "db").read_bytes() == b"before" and os.stat(tmp_path / "db").st_ino == inode
    assert (tmp_path / "sub" / "kept").read_bytes() == b"1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "sub"]


@pytest.mark.skipif(not CAN_FORK, reason="forks only on Linux")
def test_a_candidate_run_from_a_snapshot_of_the_best_run_is_the_run_from_the_start():
    scenario = _small_aio()
    best = scripted(scenario, dst.run(scenario, 4).plan)
    result = dst.run(best, 4)
    steps = best.steps or ()
    snapshots = Snapshots(4)
    try:
        for i in range(len(steps)):
            candidate = attrs.evolve(best, steps=steps[:i] + steps[i + 1:])
            cold = dst.run(candidate, 4)
            warm = snapshots.run(best, result, candidate, seconds=1.0)
            if warm is not None:
                assert (warm.digest, warm.events, warm.faults, warm.plan) == (cold.digest, cold.events, cold.faults,
                                                                          cold.plan), i
        shorter = attrs.evolve(best, steps=tuple(attrs.evolve(s, at=s.at - 1) if s is steps[-2] else s for s in steps))
        assert diverges(best, shorter) == steps[-2].at - 1
        assert diverges(best, attrs.evolve(best, steps=steps[:-1])) == steps[-1].at  # within the scenario's duration
        late = attrs.evolve(steps[-1], at=best.run.duration + 5000)  # a step that holds the active phase open
        longer = attrs.evolve(best, steps=(*steps[:-1], late))
        assert diverges(longer, attrs.evolve(longer, steps=steps[:-1])) == 0  # without it, the phase ends sooner
        assert diverges(best, attrs.evolve(best, steps=tuple(s for s in steps if s.actor != "c2"))) == min(
            s.at for s in steps if s.actor == "c2")  # its clients are the scenario's either way
        assert diverges(best, attrs.evolve(best, model=attrs.evolve(best.model, limits=(("db", 1),)))) == 0
    finally:
        snapshots.close()
    assert snapshots.runs >= len(steps) - 1  # every candidate but the first step's


@pytest.mark.slow
@pytest.mark.skipif(not CAN_FORK, reason="forks only on Linux")
def test_the_minimizer_finds_the_same_with_snapshots_as_without(monkeypatch):
    from dst.explore import shrink as shrinking, snapshot

    monkeypatch.setattr(snapshot, "WORTH_SECONDS", 0.0)  # its runs are short: snapshots for every one all the same
    scenario = dst.load_scenario("examples/aio_leases/scenarios/check-then-act.toml")
    with_them = shrinking.shrink(scenario, 1, max_runs=200, seconds=300)
    monkeypatch.setattr(shrinking, "Snapshots", lambda seed, enabled: Snapshots(seed, enabled=False))
    without = shrinking.shrink(scenario, 1, max_runs=200, seconds=300)
    assert (with_them.scenario.steps, with_them.result.digest, with_them.runs) == \
           (without.scenario.steps, without.result.digest, without.runs)
    assert sum(p.snapshots for p in with_them.passes) > 0 and sum(p.snapshots for p in without.passes) == 0
