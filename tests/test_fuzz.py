"""Fuzz campaigns: every catalogue bug is found, the correct model never is, and the
seed bookkeeping (shards, workers, budgets) is exact."""

from __future__ import annotations

import json
import os

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dst.cli import main
from dst.explore.fuzz import Shard, Tally, campaign, seeds
from dst.invariants import shape
from dst.explore.selftest import bug_scenario, find_bug
from dst.runner import run
from dst.runner.swarm import swarm
from dst.reference.bugs import CATALOGUE, KNOWN_BUGS

BREAKS = {bug.slug: bug.breaks for bug in CATALOGUE}


@pytest.mark.slow
@pytest.mark.parametrize("slug", KNOWN_BUGS)
def test_the_fuzzer_finds_each_bug_within_a_small_budget(slug):
    row = find_bug(slug, max_seeds=150, seconds=60, use_swarm=True, workers=1)
    assert row.hit is not None, f"{slug}: no violation in {row.seeds} seeds"
    assert row.hit in BREAKS[slug], f"{slug}: hit {row.hit}: {row.message}"


@pytest.mark.parametrize("slug", KNOWN_BUGS)
def test_each_bug_scenario_with_its_bug_off_finds_nothing(slug):
    # 25 swarm seeds each: the suite stays short; CI runs a longer false-alarm campaign (dst selftest --clean-seeds
    # 300), and bench/alarms.py one over scenarios drawn from the whole key space
    scenario = attrs.evolve(bug_scenario(slug), bugs=())
    outcomes = list(campaign(scenario, seeds(1, 26, None), use_swarm=True, workers=1))
    assert len(outcomes) == 25
    assert [(o.seed, o.invariant, o.message) for o in outcomes if o.invariant] == []


def test_every_slug_has_its_scenario_and_the_scenario_switches_it_on():
    for slug in KNOWN_BUGS:
        assert bug_scenario(slug).bugs == (slug,)


@given(st.integers(0, 500), st.integers(1, 400), st.integers(1, 9))
@settings(deadline=None)  # pure arithmetic: a slow example is a busy machine, not a bug
def test_shards_cover_a_range_exactly_once(first, length, count):
    stop = first + length
    covered = [s for k in range(1, count + 1) for s in seeds(first, stop, Shard(k, count))]
    assert sorted(covered) == list(range(first, stop))


def test_one_and_two_workers_give_the_same_outcomes():
    scenario = bug_scenario("double-release")
    one = list(campaign(scenario, seeds(1, 41, None), use_swarm=True, workers=1))
    two = list(campaign(scenario, seeds(1, 41, None), use_swarm=True, workers=2))
    assert one == two
    assert any(o.invariant for o in one)


def test_a_time_budget_runs_a_prefix_of_the_seeds():
    ticks = iter(range(1000))
    outcomes = list(campaign(bug_scenario("anonymous-release"), seeds(1, None, None), use_swarm=False, workers=1,
                             deadline=5, clock=lambda: next(ticks)))
    assert [o.seed for o in outcomes] == [1, 2, 3, 4, 5]


def test_swarm_is_a_pure_function_of_the_seed_and_keeps_disabled_faults_off(default_scenario):
    calm = attrs.evolve(default_scenario, faults=attrs.evolve(default_scenario.faults, crash=attrs.evolve(
        default_scenario.faults.crash, rate=0.0)))
    picks = [swarm(calm, seed) for seed in range(50)]
    assert picks == [swarm(calm, seed) for seed in range(50)]
    assert all(p.faults.crash.rate == 0 for p in picks)
    assert len({p.faults for p in picks}) > 40  # seeds really differ in what they switch on
    assert {p.run.scheduler for p in picks} == {"uniform", "pct"}


def test_signatures_group_violations_by_invariant_and_shape():
    assert shape("a release naming L12 gave back 1 slot(s) of 'db', but L12 owned 0") == \
        shape("a release naming L7 gave back 1 slot(s) of 'db', but L7 owned 0")
    tally = Tally()
    scenario = bug_scenario("fallback-release")
    for outcome in campaign(scenario, seeds(1, 21, None), use_swarm=False, workers=1):
        tally.add(outcome)
    assert tally.seeds_run == 20 and tally.violations == sum(len(g.seeds) for g in tally.groups.values())
    assert all(g.first.seed == g.seeds[0] for g in tally.groups.values())


# --- the command line ------------------------------------------------------------------------------

def test_dst_fuzz_reports_signatures_with_a_command_that_reproduces_them(capsys):
    code = main(["fuzz", "--scenario", "scenarios/fallback-release.toml", "--count", "20", "--workers", "1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["violations"] > 0 and report["seeds_run"] == 20
    sig = report["signatures"][0]
    assert sig["invariant"] == "no-foreign-release"
    argv = sig["reproduce"].split()[1:]
    assert main(argv + ["--json"]) == 1
    replay = json.loads(capsys.readouterr().out)
    assert replay["violation"]["invariant"] == sig["invariant"] and replay["violation"]["message"] == sig["message"]


def test_dst_fuzz_on_the_correct_model_exits_0(capsys):
    assert main(["fuzz", "--count", "10", "--workers", "2"]) == 0
    assert "0 violation(s)" in capsys.readouterr().out


def test_dst_fuzz_stop_on_first_and_shards(capsys):
    code = main(["fuzz", "--scenario", "scenarios/anonymous-release.toml", "--seeds", "10:30", "--shard", "2/3",
                 "--stop-on-first", "--json", "--workers", "1"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["seeds_run"] == 1 and report["seeds"]["last_run"] == 10  # 10 % 3 == 1


@pytest.mark.parametrize("argv", [
    ["fuzz"],
    ["fuzz", "--seeds", "5:5"],
    ["fuzz", "--seeds", "x"],
    ["fuzz", "--count", "0"],
    ["fuzz", "--count", "5", "--shard", "4/3"],
    ["fuzz", "--count", "5", "--time-budget", "soon"],
    ["fuzz", "--count", "5", "--bug", "no-such-bug"],
    ["fuzz", "--count", "5", "--seeds", "1:4"],
    ["selftest", "--bug", "no-such-bug"],
])
def test_bad_fuzz_and_selftest_flags_exit_2_with_one_line(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.slow
def test_dst_selftest_on_a_subset(capsys):
    code = main(["selftest", "--bug", "anonymous-release", "--bug", "stale-check-increment", "--clean-seeds", "20",
                 "--workers", "1", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"]
    assert [b["slug"] for b in report["bugs"]] == ["anonymous-release", "stale-check-increment"]
    assert all(b["hit"] in b["expected"] for b in report["bugs"])
    assert [c["seeds"] for c in report["clean"]] == [20, 20]


@pytest.mark.slow
def test_ctrl_c_stops_a_campaign_cleanly_and_prints_the_summary_so_far(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "dst", "fuzz", "--time-budget", "60s", "--workers", "2", "--json",
                             "--no-findings"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True)
    time.sleep(4)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C does: the whole process group
    out, err = proc.communicate(timeout=60)
    report = json.loads(out)
    assert proc.returncode == 130 and report["interrupted"] and report["seeds_run"] > 0
    assert "Traceback" not in err


def test_a_report_whose_scenario_file_changed_says_so_where_the_command_goes_and_still_merges(tmp_path, capsys,
                                                                                              monkeypatch):
    monkeypatch.setattr("dst.explore.fuzz.reproduce", lambda scenario, seed: None)  # as if the file had changed
    report = tmp_path / "report.json"
    assert main(["fuzz", "--scenario", "double-release", "--seeds", "1:9", "--workers", "1", "--no-findings",
                 "--json"]) == 1
    report.write_text(capsys.readouterr().out)
    said = [s["reproduce"] for s in json.loads(report.read_text())["signatures"]]
    assert said and all(r.startswith("none: the scenario file changed") for r in said)
    assert main(["merge", str(report), "--json"]) == 1  # a report like this still merges
    assert main(["fuzz", "--scenario", "double-release", "--seeds", "1:9", "--workers", "1", "--no-findings"]) == 1
    assert "none: the scenario file changed" in capsys.readouterr().out


@pytest.mark.parametrize("seed", [170, 173])
def test_a_buggy_renewal_whose_lease_went_meanwhile_is_refused_not_a_crash_of_the_model(seed):
    # renew-stale-stamp writes a round trip after its read: a release or a reap in between left nothing to update
    # (the SortedList of expiries raised ValueError: a model error, where the bug's story has none).
    result = run(swarm(bug_scenario("renew-stale-stamp"), seed), seed)
    assert result.violation is None or result.violation.invariant != "model-error"


def test_a_list_of_like_items_is_one_shape_however_long_it_is():
    # Two holders over the limit or three are one bug: one signature, not one per number of owners.
    two = "leases the authority recognises hold 2 slot(s) of 'db', capacity 1; owners: L7(c2)=1, L8(c3)=1"
    three = "leases the authority recognises hold 3 slot(s) of 'db', capacity 2; owners: L1(c1)=1, L2(c4)=1, L3(c3)=1"
    assert shape(two) == shape(three)
    assert shape("c1 and c2 both work") != shape("c1 works")


def test_a_campaign_says_in_one_line_that_it_wrote_no_finding_for_a_seed_that_ran_two_ways(tmp_path, monkeypatch):
    from dst.explore import recorder as record
    from dst.explore.fuzz import Outcome
    from dst.explore.shrink import NotDeterministic
    from dst.scenario import load_scenario

    def two_ways(scenario, seed, **options):
        raise NotDeterministic(f"seed {seed}: the same run went two ways")

    monkeypatch.setattr(record, "minimize", two_ways)
    said: list[str] = []
    recorder = record.Recorder(tmp_path, (load_scenario("double-release"),), candidates=2, use_swarm=True,
                               stop_on_first=False, stopped=lambda: False, on_error=said.append)
    recorder.consider(Outcome(3, 100, "no-foreign-release", "a release naming L1 gave back 1 slot(s) of 'db'"))
    assert said == ["dst: seed 3: the same run went two ways; no finding written for seed 3"]
    assert recorder.findings() == [] and list(tmp_path.iterdir()) == []


@given(st.uuids(), st.uuids())
def test_a_services_own_uuid_lease_ids_are_one_shape(first, second):
    said = "c1 starts work under {}, which the authority no longer recognises (expired at t=-2000)"
    assert shape(said.format(first)) == shape(said.format(second)) == shape(said.format(str(first).upper()))
