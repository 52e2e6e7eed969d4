"""The library API a test suite calls: fuzz() as dst fuzz runs a campaign, results that explain themselves and
say how to run them again, and save themselves as findings."""

from __future__ import annotations

import itertools
import json

import attrs
import pytest

import dst
from dst.cli import main
from dst.runner.swarm import swarm

BUGGY = "double-release"


@pytest.fixture(scope="module")
def buggy() -> dst.Scenario:
    return dst.load_scenario(BUGGY)


def test_fuzz_reports_what_dst_fuzz_reports(buggy, capsys):
    result = dst.fuzz(buggy, range(1, 41))
    assert main(["fuzz", "--scenario", BUGGY, "--seeds", "1:41", "--workers", "1", "--json", "--no-findings"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert result.seeds_run == report["seeds_run"] == 40 and result.violations == report["violations"] > 0
    assert [(g.key, list(g.seeds[:20]), g.reproduce) for g in result.signatures] == \
        [(s["signature"], s["seeds"], s["reproduce"]) for s in report["signatures"]]
    assert result.coverage == report["coverage"] and list(result.invariants) == report["invariants"]
    assert sum(g.count for g in result.signatures) == result.violations and not result.ok


def test_fuzz_gives_the_same_result_on_any_number_of_workers(buggy):
    one, two = (dst.fuzz(buggy, range(1, 33), workers=w, swarm=False) for w in (1, 2))
    assert (one.signatures, one.unjudged, one.coverage, one.events) == (two.signatures, two.unjudged, two.coverage,
                                                                         two.events)


def test_on_result_sees_every_seed_in_order_and_ends_the_campaign(buggy):
    seen: list[int] = []

    def each(outcome: dst.Outcome) -> bool:
        seen.append(outcome.seed)
        return not outcome.ok

    result = dst.fuzz(buggy, itertools.count(5), workers=2, on_result=each)
    assert seen == list(range(5, seen[-1] + 1)) and result.last_seed == seen[-1]
    assert result.stopped == "on_result" and result.violations == 1 and result.seeds_run == len(seen)
    assert "on_result ended it" in result.explain()


def test_a_time_budget_ends_an_endless_campaign():
    result = dst.fuzz(dst.load_scenario(), itertools.count(1), time_budget=0.5)
    assert result.stopped == "time budget" and result.seeds_run >= 1 and result.ok
    assert dst.fuzz(dst.load_scenario(), range(1, 3)).stopped == "seeds"


def test_fuzz_refuses_what_cannot_run():
    with pytest.raises(ValueError, match="workers"):
        dst.fuzz(dst.load_scenario(), workers=0)
    with pytest.raises(ValueError, match="no scenario"):
        dst.fuzz([])


def test_a_groups_run_is_the_run_the_campaign_saw(buggy):
    result = dst.fuzz(buggy, range(1, 21))
    for group in result.signatures:
        again = group.run()
        assert again.violation is not None and again.violation.message == group.first.message
        assert again.reproduce == group.reproduce and group.reproduce is not None and "--swarm" in group.reproduce


@pytest.mark.parametrize("how", ["shipped", "with a bug added", "swarm", "a file", "another model's name"])
def test_the_reproduce_command_runs_the_same_trace(how, buggy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if how == "shipped":
        scenario = buggy
    elif how == "with a bug added":
        scenario = attrs.evolve(dst.load_scenario("runs"), bugs=("unconditional-ack",))
    elif how == "swarm":
        scenario = swarm(buggy, 7)
    elif how == "a file":
        (tmp_path / "mine.toml").write_text('name = "mine"\n[workload]\nclients = 3\n')
        scenario = dst.load_scenario("mine.toml")
    else:
        scenario = dst.load_scenario(model="dst.reference:model")
    result = dst.run(scenario, 7)
    command = result.reproduce
    assert command is not None and command.startswith("dst run --seed 7")
    assert main([*command.split()[1:], "--json"]) == (0 if result.ok else 1)
    assert json.loads(capsys.readouterr().out)["trace_digest"] == result.digest


def test_a_bug_the_file_turns_on_turned_off_is_run_again_with_no_bugs(buggy, capsys):
    result = dst.run(attrs.evolve(buggy, bugs=()), 1)
    assert result.reproduce == "dst run --seed 1 --scenario double-release --no-bugs"
    assert main([*result.reproduce.split()[1:], "--json"]) == (0 if result.ok else 1)
    assert json.loads(capsys.readouterr().out)["trace_digest"] == result.digest


def test_no_command_is_claimed_for_what_no_command_line_runs(buggy, tmp_path):
    assert dst.run(attrs.evolve(buggy, name="renamed"), 1).reproduce is None  # changed in code
    assert dst.run(buggy, 1, plan=dst.run(buggy, 1).plan[:1]).reproduce is None  # a plan passed in
    file = tmp_path / "gone.toml"
    file.write_text("[workload]\nclients = 2\n")
    scenario = dst.load_scenario(file)
    file.write_text("[workload]\nclients = 3\n")  # changed on disk since it was loaded
    assert dst.run(scenario, 1).reproduce is None


def test_a_failing_result_explains_itself_and_saves_a_finding_that_replays(buggy, tmp_path):
    result = dst.run(buggy, 0, plan=dst.run(buggy, 0).plan)
    text = str(result)
    assert text == result.explain()
    assert text.startswith(f"{BUGGY}, seed 0: VIOLATION of no-foreign-release")
    for event in result.causal():
        assert any(line.endswith(event[3]) for line in text.splitlines() if event[3])
    assert "dst.save_finding(result, folder)" in text  # no command line runs a plan passed in
    path = dst.save_finding(result, tmp_path)
    replayed = dst.replay(dst.read_finding(path))
    assert replayed.status == "reproduces" and replayed.result.violation is not None
    assert replayed.result.violation.message == result.violation.message  # type: ignore[union-attr]
    assert dst.save_finding(result, tmp_path) == path  # the same signature again: kept
    assert [p.name for p in tmp_path.glob("*.toml")] == [path.name]


def test_a_passing_result_says_so_and_has_nothing_to_save(tmp_path):
    result = dst.run(dst.load_scenario(), 1)
    assert str(result).startswith("default, seed 1: no violation (")
    with pytest.raises(ValueError, match="violates nothing"):
        dst.save_finding(result, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_fuzz_saves_a_minimized_finding_per_signature(buggy, tmp_path):
    result = dst.fuzz(buggy, range(1, 11))
    paths = result.save(tmp_path, max_runs=300)
    assert len(paths) == len(result.signatures) >= 1
    for path, group in zip(paths, result.signatures):
        finding = dst.read_finding(path)
        assert finding.invariant == group.first.invariant
        assert len(finding.scenario.steps or ()) <= len(group.run().plan)
        assert dst.replay(finding).status == "reproduces"


def test_shrink_takes_the_seeds_own_plan_and_violation_by_default(buggy):
    small = dst.shrink(buggy, 0, max_runs=300)
    assert small.result.violation is not None and small.result.violation.invariant == "no-foreign-release"
    assert small.steps_after < small.steps_before == len(dst.run(buggy, 0).plan)
    with pytest.raises(ValueError, match="violates nothing"):
        dst.shrink(dst.load_scenario(), 1)


def test_fuzz_and_dst_fuzz_write_each_signature_once_into_one_folder(buggy, tmp_path, capsys):
    assert main(["fuzz", "--scenario", BUGGY, "--seeds", "1:11", "--workers", "1", "--findings", str(tmp_path),
                 "--json"]) == 1
    written = json.loads(capsys.readouterr().out)["findings"]
    result = dst.fuzz(buggy, range(1, 11))
    assert sorted(map(str, result.save(tmp_path, max_runs=300))) == sorted(f["path"] for f in written)
    assert len(list(tmp_path.glob("*.toml"))) == len(written) == len(result.signatures)


def test_fuzz_runs_another_model_given_by_object_or_name_on_workers(buggy):
    from dst.reference import model as reference

    by_object = dst.fuzz(buggy, range(1, 17), workers=2, model=reference)
    by_name = dst.fuzz(buggy, range(1, 17), model="dst.reference:model")
    assert by_object.signatures == by_name.signatures and by_object.violations > 0
    with pytest.raises(dst.ModelError):
        dst.fuzz(buggy, range(1, 3), model="no_such_module:model")
