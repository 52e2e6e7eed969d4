"""Hypothesis drives dst: ``dst.strategies`` draws plans and scenarios, Hypothesis shrinks a failing plan and
keeps it in its example database, and ``dst.save_finding`` turns it into a finding that replays."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import attrs
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

import dst
from dst.cli import main
from dst.explore.selftest import bug_of
from dst.faults import FAULTS, SCHEDULED, fault_of
from dst.findings import REPRODUCES
from dst.plan import is_client, make_step
from dst.scenario import embedded_scenarios, parse_scenario, scenario_to_doc
from dst.strategies import SETTINGS, plans, scenarios

QUICK = settings(SETTINGS, derandomize=True, database=None)  # the same search every time (and so no database)


@pytest.mark.slow
def test_the_readme_example_finds_a_catalogue_bug_shrinks_it_and_saves_a_finding_that_replays(tmp_path):
    scenario = dst.load_scenario("double-release")
    tried: list[tuple[dst.Step, ...]] = []

    @settings(QUICK, max_examples=100)
    @given(plan=plans(scenario))
    def test_my_leases(plan):
        tried.append(plan)
        assert dst.run(scenario, seed=0, plan=plan).ok

    with pytest.raises(AssertionError) as failure:
        test_my_leases()
    minimal = tried[-1]  # Hypothesis runs the minimal failing example last, to report it
    assert 1 <= len(minimal) <= bug_of("double-release").sketch_steps + 1
    assert not dst.run(scenario, seed=0, plan=minimal).ok
    report = "\n".join(getattr(failure.value, "__notes__", []))
    # Hypothesis's header wording changes between versions ("Falsifying example", "Failing test
    # case"); what users paste is the plan, printed as TOML lines.
    assert "test_my_leases(" in report and all(repr(step) in report for step in minimal)

    folder = tmp_path / "findings"
    path = dst.save_finding(dst.run(scenario, 0, minimal), folder)
    assert path.parent == folder and path.name.startswith("001-")
    assert dst.replay(dst.read_finding(path)).status == REPRODUCES
    assert main(["replay", "--quiet", str(path)]) == 0  # dst replay: 0 when it reproduces exactly
    plugin = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
                            cwd=tmp_path, capture_output=True, text=True)
    assert plugin.returncode == 0 and "1 passed" in plugin.stdout, plugin.stdout + plugin.stderr
    assert dst.save_finding(dst.run(scenario, 0, minimal), folder) == path  # its signature is there: kept, not doubled


def test_hypothesis_keeps_the_failing_plan_in_its_example_database_and_tries_it_first():
    scenario = dst.load_scenario("strict-fence")  # found in a few examples: the search is short, however it goes
    database = InMemoryExampleDatabase()  # fresh: nothing from other runs
    tried: list[tuple[dst.Step, ...]] = []

    # Not derandomized: Hypothesis keeps a database only for a test it may search afresh each time.
    @settings(SETTINGS, database=database, max_examples=100)
    @given(plan=plans(scenario))
    def test_fenced_writes(plan):
        tried.append(plan)
        assert dst.run(scenario, seed=0, plan=plan).ok

    with pytest.raises(AssertionError):
        test_fenced_writes()
    minimal = tried[-1]
    assert database.data
    tried.clear()
    replaying = settings(SETTINGS, database=database, phases=[Phase.reuse])  # only what the database holds
    with pytest.raises(AssertionError):
        replaying(given(plan=plans(scenario))(test_fenced_writes.hypothesis.inner_test))()
    assert tried[0] == minimal


def _loads_back(scenario: dst.Scenario, plan: tuple[dst.Step, ...]) -> tuple[dst.Step, ...] | None:
    """The plan as a scenario file's steps, read by the scenario loader (which checks limits, slots and ids)."""
    return parse_scenario(scenario_to_doc(attrs.evolve(scenario, steps=plan)), "<drawn plan>").steps


@pytest.mark.slow
@settings(QUICK, max_examples=100)
@given(data=st.data(), name=st.sampled_from(embedded_scenarios()))
def test_every_drawn_plan_is_valid_and_the_correct_model_passes_it(data, name):
    scenario = attrs.evolve(dst.load_scenario(name), bugs=())
    plan = data.draw(plans(scenario, max_steps=24))
    assert len(plan) <= 24 and plan == tuple(sorted(plan, key=lambda s: (s.at, s.id)))
    assert _loads_back(scenario, plan) == plan
    run, wl = scenario.run, scenario.workload
    clients = wl.clients + (scenario.runs.workers if scenario.runs.enabled else 0)
    enabled = {kind for kind, rate in scenario.faults.kinds() if rate.rate > 0}
    enabled |= {kind.name for kind in FAULTS if kind.pinned and _chance(scenario, kind) > 0}
    workload = {step.id: step for step in plan if fault_of(step) is None}
    for step in plan:
        assert 0 <= step.at < run.duration and step.at % run.granularity == 0
        assert not is_client(step.actor) or int(step.actor[1:]) <= clients
        kind = fault_of(step)
        if kind is not None and kind.pinned:  # aimed at a message of a workload step of this plan, at its time
            named = workload[int(step.arg("message").split(".")[0])]
            assert kind.name in enabled and step.at == named.at
        elif kind is not None:
            assert kind.name in enabled
        elif step.action == "acquire":
            assert wl.work[0] <= step.arg("work") <= wl.work[1] and wl.writes[0] <= step.arg("writes") <= wl.writes[1]
        else:
            assert scenario.runs.enabled and step.action in ("serve", "submit", "cancel")
    result = dst.run(scenario, seed=0, plan=plan)
    assert result.violation is None, (result.violation, plan)


def _chance(scenario, kind):
    section, key = kind.chance[0].split(".")
    return getattr(getattr(scenario, section), key)


def test_pinned_faults_are_drawn_for_the_kinds_a_scenario_gives_a_chance_and_strike_their_message():
    doc = {"network": {"loss": 0.0, "duplicate": 0.01, "delay": 0.0}, "model": {"store_slow": 0.0}}
    scenario = parse_scenario(doc, "<only duplicates>")
    struck = 0

    @settings(QUICK, max_examples=40)
    @given(plan=plans(scenario))
    def collect(plan):
        nonlocal struck
        pinned = [step for step in plan if (kind := fault_of(step)) is not None and kind.pinned]
        assert {step.action for step in pinned} <= {"duplicate"}
        result = dst.run(scenario, seed=0, plan=plan)
        sent = {line.rsplit("(", 1)[-1].rstrip(")") for _, _, what, line in result.trace if what in ("send", "reply")}
        for step in pinned:
            if step.arg("message") in sent:  # a message the run did send: the network delivered it twice
                assert any(what == "duplicated" and line.endswith(f" {step.arg('message')}")
                           for _, _, what, line in result.trace), step
                struck += 1

    collect()
    assert struck > 0
    quiet = parse_scenario({**doc, "network": {"loss": 0.0, "duplicate": 0.0, "delay": 0.0}}, "<no message faults>")

    @settings(QUICK, max_examples=20)
    @given(plan=plans(quiet))
    def none(plan):
        assert not any(fault_of(step) is not None for step in plan)

    none()


def test_fault_steps_cover_every_scheduled_kind_of_the_registry_that_a_scenario_enables():
    every = {kind.name: {"rate": 1.0, "targeted": 0.5} for kind in SCHEDULED} | {"partition": {"rate": 1.0}}
    scenario = parse_scenario({"faults": every, "workload": {"clients": 2}}, "<every fault>")
    drawn: set[str] = set()
    aimed: set[str] = set()

    @settings(QUICK, max_examples=40)
    @given(plan=plans(scenario))
    def collect(plan):
        for step in plan:
            kind = fault_of(step)
            if kind is not None and not kind.pinned:
                drawn.add(kind.name)
                if step.arg("moment") is not None:
                    aimed.add(kind.name)
                length = step.arg(kind.duration_arg) if kind.duration_arg else None
                low, high = getattr(scenario.faults, kind.name).duration
                assert length is None or low <= length <= high

    collect()
    assert drawn == {kind.name for kind in SCHEDULED}
    assert aimed and "partition" not in aimed  # aimed only where the scenario aims that kind


@settings(QUICK, max_examples=25)
@given(scenario=scenarios(clients=(1, 3), jobs=(0, 3), duration=("10s", "120s"), faults=["pause", "crash"],
                          rates=(0.0, 2.0)))
def test_drawn_scenarios_stay_in_their_bounds_load_and_run_clean(scenario):
    assert 1 <= scenario.workload.clients <= 3 and 0 <= scenario.workload.jobs <= 3
    assert 10_000 <= scenario.run.duration <= 120_000
    assert {kind for kind, rate in scenario.faults.kinds() if rate.rate > 0} <= {"pause", "crash"}
    assert parse_scenario(scenario_to_doc(scenario), scenario.source) == scenario
    assert dst.run(scenario, seed=1).violation is None


def test_a_fault_rate_too_small_to_strike_runs_without_that_fault():
    # Found by scenarios(): 5e-324 faults a minute is above zero, and per millisecond exactly zero.
    scenario = parse_scenario({"faults": {"pause": {"rate": 5e-324}}}, "<tiny rate>")
    assert dst.run(scenario, seed=1).faults.get("pause", 0) == 0


def test_bounds_a_scenario_cannot_hold_are_refused_at_once_in_one_line():
    for call in (lambda: plans(dst.load_scenario(), max_steps=0),
                 lambda: scenarios(clients=(0, 2)), lambda: scenarios(clients=(3, 1)),
                 lambda: scenarios(jobs=[1, 2, 3]),
                 lambda: scenarios(faults=["lose"]), lambda: scenarios(duration=("1x", "2s")),
                 lambda: scenarios(rates=(0.0, 2_000.0)), lambda: scenarios(bugs=["no-such-bug"])):
        with pytest.raises(ValueError) as refused:
            call()
        assert "\n" not in str(refused.value) and "expected" in str(refused.value)


def test_save_finding_refuses_a_run_that_violates_nothing(tmp_path):
    with pytest.raises(ValueError, match="violates nothing .* no finding to save"):
        dst.save_finding(dst.run(dst.load_scenario(), 1, ()), tmp_path / "findings")
    assert not (tmp_path / "findings").exists()


def test_a_step_prints_as_the_line_a_scenario_file_holds():
    step = make_step(3, 76_000, "c2", "acquire", limit='d"b', slots=1, work=30_000, writes=2)
    assert repr(step) == ('{ id = 3, at = "76s", actor = "c2", action = "acquire", limit = "d\\"b", slots = 1, '
                          'work = "30s", writes = 2 }')
    assert tomllib.loads(f"x = {step!r}")["x"] == step.to_dict()


def test_import_dst_stays_free_of_hypothesis_until_strategies_are_asked_for():
    code = ("import sys, dst; before = 'hypothesis' in sys.modules; strategies = dst.strategies; "
            "print(before, 'hypothesis' in sys.modules, strategies.plans.__module__, 'strategies' in dst.__all__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "dst.strategies", "True"]
