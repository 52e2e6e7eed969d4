"""Cause and consequences: after its first violation a run goes on for a bounded window, notes the first violation
of each other invariant, and reports the cause among them (the declared ranking); the rest are its consequences."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import cause_models  # noqa: F401  # the models the scenarios below name
from conftest import scenario
from dst.cli import main
from dst.explore.record import minimize
from dst.explore.selftest import bug_scenario
from dst.findings import Consequence, FindingError, read, replay, save_finding
from dst.findings.format import render
from dst.invariants import BY_ID, CAUSE, INVARIANTS, SYMPTOM, Invariant, cause_of, invariant
from dst.invariants.base import INVARIANTS as REGISTRY
from dst.reference.bugs import CATALOGUE
from dst.runner import MODEL_ERROR, Simulation, run
from dst.runner.swarm import swarm
from dst.sim.trace import digest

ROOT = Path(__file__).resolve().parent.parent

# c1 holds L1 and releases it at 1s: the row stays until its expiry (60s). c2 takes the slot at 2s. c3 asks at 62s,
# after L1 ran out and before the reaper (every 15s) removes it: L1's slot counts free twice, so c3 gets in.
ROW_LEFT = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s", "writes": 0},
            {"at": "2s", "actor": "c2", "action": "acquire", "work": "100s", "writes": 0},
            {"at": "62s", "actor": "c3", "action": "acquire", "work": "1s", "writes": 0}]


def _row_left(model: str = "cause_models:leaves_the_row"):
    return scenario({"model": {"impl": model}}, ROW_LEFT)


# --- the ranking --------------------------------------------------------------------------------------------

def test_every_invariant_says_whether_it_names_a_cause_or_a_symptom_and_why():
    for unit in INVARIANTS:
        assert unit.names in (CAUSE, SYMPTOM) and unit.because, unit.id
    named = {unit.id: unit.names for unit in INVARIANTS}
    assert {i for i, n in named.items() if n == CAUSE} >= {"no-foreign-release", "slot-accounting", "unique-tokens",
                                                           "owner-only-update", "expiry-only-forward"}
    assert {i for i, n in named.items() if n == SYMPTOM} >= {"capacity", "exclusive-seats", "single-executor",
                                                             "stranded-slot"}


def test_docs_findings_lists_the_ranking_as_the_units_declare_it():
    text = (ROOT / "docs" / "findings.md").read_text()
    row = text.split("| names a cause | names a symptom |\n|---|---|\n", 1)[1].split("\n", 1)[0]
    causes, symptoms = (set(re.findall(r"`([a-z-]+)`", cell)) for cell in row.strip("|").split("|"))
    assert causes == {unit.id for unit in INVARIANTS if unit.names == CAUSE}
    assert symptoms == {unit.id for unit in INVARIANTS if unit.names == SYMPTOM}


def test_an_invariant_that_does_not_say_what_it_names_is_refused_at_registration():
    class Unsaid(Invariant):
        id = "unsaid"
        title = "unsaid"
        statement = "nothing"
        parts = frozenset({"leases"})

    with pytest.raises(AssertionError, match="names = CAUSE or SYMPTOM"):
        invariant(Unsaid)
    assert Unsaid not in REGISTRY


def test_a_later_cause_replaces_a_first_symptom_and_nothing_else_replaces_anything():
    assert cause_of(["capacity", "single-executor", "no-foreign-release", "slot-accounting"]) == 2
    assert cause_of(["no-foreign-release", "capacity", "slot-accounting"]) == 0  # a first cause stands
    assert cause_of(["capacity", "single-executor", "stranded-slot"]) == 0  # symptoms only: the first
    assert cause_of(["capacity", MODEL_ERROR]) == 0  # the model's error is no invariant's cause
    assert cause_of(["single-executor", "owner-only-update"]) == 1


@pytest.mark.parametrize("bug", CATALOGUE, ids=lambda bug: bug.slug)
def test_no_catalogue_bug_is_misnamed_by_the_cause_its_runs_report(bug):
    # Each bug's scenario as dst selftest runs it (swarm), its first seeds: whatever the window adds, the run is
    # named by an invariant the bug lists (a later cause replaces a first symptom only if the bug lists it too).
    for seed in range(1, 11):
        result = run(swarm(bug_scenario(bug.slug), seed), seed)
        if result.violation is not None:
            assert result.violation.invariant in bug.breaks, (bug.slug, seed, result.violation, result.consequences)


# --- the run ------------------------------------------------------------------------------------------------

def test_a_release_that_leaves_the_row_is_named_by_the_foreign_release_with_capacity_as_a_consequence():
    sim = Simulation(_row_left(), 1)
    result = sim.run()
    v = result.violation
    assert v is not None and v.invariant == "no-foreign-release"
    assert "a release naming L1 gave back 1 slot(s)" in v.message
    # Capacity broke first (c3 got in at 62s), and was what a run used to report; the reap at 75s names the slip.
    first = min(result.consequences, key=lambda c: c.time)
    assert (first.invariant, first.time) == ("capacity", sim.found[0].time) and first.time < v.time
    assert [c.invariant for c in result.consequences] == ["capacity", "single-executor", "slot-accounting"]
    assert all(c.time <= d.time for c, d in zip(result.consequences, result.consequences[1:]))
    # The window: the model's reclaim bound (TTL + reaper interval) plus the worst delays, from the first violation.
    assert sim.window == 75_000 + 20_000 + 10 + 20  # + the delay_by bound, the latency and four store round trips
    assert result.virtual_time == first.time + sim.window
    # The digest covers the trace up to the cause; what followed is in the trace but not in the digest.
    assert result.decided == v.step < len(result.raw_trace)
    assert result.digest == digest(result.raw_trace[:v.step])
    # Consequences met their cases, as the cause did.
    assert all(result.cases[c.invariant] >= 1 for c in (v, *result.consequences))
    assert "its consequences" in result.explain() and "capacity at t=62.015s" in result.explain()
    summary = result.summary()
    assert summary["violation"]["invariant"] == "no-foreign-release"
    assert [c["invariant"] for c in summary["consequences"]] == ["capacity", "single-executor", "slot-accounting"]


def test_a_run_whose_first_violation_is_a_cause_keeps_it_and_its_digest():
    finding = read(ROOT / "findings" / "001-release-frees-another-holders-slot.toml")
    result = run(finding.scenario, finding.seed)
    assert result.violation is not None and result.violation.invariant == "no-foreign-release"
    assert [c.invariant for c in result.consequences] == ["slot-accounting"]
    assert result.digest == finding.digest  # recorded when the run stopped at its first violation
    assert len(result.raw_trace) > result.decided == result.violation.step


def test_the_same_seed_gives_the_same_cause_consequences_and_whole_trace():
    one, two = run(_row_left(), 1), run(_row_left(), 1)
    assert (one.violation, one.consequences, one.digest, one.decided) == \
        (two.violation, two.consequences, two.digest, two.decided)
    assert digest(one.raw_trace) == digest(two.raw_trace)


def test_the_models_error_in_the_window_ends_the_run_at_once_as_a_consequence():
    result = run(_row_left("cause_models:leaves_the_row_and_raises"), 1)
    assert result.violation is not None and result.violation.invariant == "no-foreign-release"
    assert result.outcome == "violation"
    (*_, error) = result.consequences
    assert error.invariant == MODEL_ERROR and "the reaper gave back" in error.message
    assert result.virtual_time == error.time == result.violation.time  # it ended the run there
    assert result.raw_trace[-1][2] == "error"


def test_a_model_error_before_any_violation_is_the_outcome_with_nothing_after():
    # c1 dies holding L1: the reaper reclaims it rightly at 75s, and raises.
    crashed = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "100s", "writes": 0},
               {"at": "5s", "actor": "c1", "action": "crash"}]
    result = run(scenario({"model": {"impl": "cause_models:leaves_the_row_and_raises"}}, crashed), 1)
    assert result.outcome == MODEL_ERROR and result.consequences == ()
    assert result.decided == len(result.raw_trace)


def test_a_run_without_a_violation_has_no_consequences_and_its_digest_covers_it_all():
    result = run(scenario(steps=ROW_LEFT[:1]), 1)
    assert result.ok and result.consequences == () and result.decided == len(result.raw_trace)
    assert result.digest == digest(result.raw_trace)


# --- the minimizer, findings and the commands ------------------------------------------------------------------

def test_the_minimizer_keeps_the_cause_not_the_first_violation():
    shrunk = minimize(_row_left(), 1, use_swarm=False)
    assert shrunk is not None
    v = shrunk.result.violation
    assert v is not None and v.invariant == "no-foreign-release"
    # Capacity needed c2 and c3; the foreign release needs only c1's release and the reaper.
    assert shrunk.steps_after < len(ROW_LEFT)


def test_a_finding_records_its_consequences_and_reads_them_back(tmp_path):
    result = run(_row_left(), 1)
    path = save_finding(result, tmp_path)
    text = path.read_text()
    assert "# its consequences: capacity at t=62.015s, single-executor at t=62.025s, slot-accounting at t=75.005s" \
        in text
    finding = read(path)
    assert finding.invariant == "no-foreign-release"
    assert finding.consequences == tuple(Consequence(c.invariant, c.time, c.message) for c in result.consequences)
    again = replay(finding)
    assert again.status == "reproduces"
    assert again.explain().endswith("; its consequences: capacity at t=62.015s, single-executor at t=62.025s, "
                                    "slot-accounting at t=75.005s")
    # A finding whose run had none says so: an empty list (a slot never reclaimed is judged at the run's end).
    stranded = read(ROOT / "findings" / "008-slot-never-reclaimed-after-a-crash.toml")
    lone = run(stranded.scenario, stranded.seed)
    assert lone.violation is not None and lone.consequences == ()
    written = read(save_finding(lone, tmp_path / "lone"))
    assert written.consequences == () and "consequences = []\n" in render(written, 1)


def test_an_old_finding_without_consequences_still_reads_and_replays():
    path = ROOT / "findings" / "001-release-frees-another-holders-slot.toml"
    assert "consequences" not in path.read_text()
    finding = read(path)
    assert finding.consequences is None
    again = replay(finding)
    assert again.status == "reproduces"
    assert again.explain() == ("reproduces: no-foreign-release at the same step, same trace digest; its "
                               "consequences: slot-accounting at t=20.065s")


@pytest.mark.parametrize("value, said", [
    ('"capacity"', "finding.consequences: expected a list of tables"),
    ('[ 3 ]', "finding.consequences[0]: expected a table"),
    ('[ { invariant = "nope", time = "1s", message = "m" } ]', "finding.consequences[0].invariant: expected one of"),
    ('[ { invariant = "capacity", time = 5, message = "m" } ]',
     "finding.consequences[0].time: expected a time such as '44.637s', got 5"),
    ('[ { invariant = "capacity", time = "soon", message = "m" } ]', "finding.consequences[0].time: "),
    ('[ { invariant = "capacity", time = "1s" } ]', "finding.consequences[0].message: expected the violation's"),
])
def test_a_bad_consequences_key_is_one_line_naming_the_file_and_key_and_exit_2(tmp_path, capsys, value, said):
    text = (ROOT / "findings" / "001-release-frees-another-holders-slot.toml").read_text()
    bad = tmp_path / "001-bad.toml"
    bad.write_text(text.replace("fingerprints = [", f"consequences = {value}\nfingerprints = [", 1))
    with pytest.raises(FindingError) as info:
        read(bad)
    line = str(info.value)
    assert "\n" not in line and line.startswith(str(bad.name)) or str(bad) in line
    assert said in line
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1


def test_dst_run_prints_the_consequences_and_json_lists_them(tmp_path, capsys):
    path = save_finding(run(_row_left(), 1), tmp_path)
    assert main(["run", "--scenario", str(path), "--seed", "1"]) == 1
    out = capsys.readouterr().out
    assert "no-foreign-release: a release naming L1" in out
    assert "its consequences (what else the run violated, each the first time):" in out
    assert "capacity at t=62.015s: leases the authority recognises hold 2 slot(s)" in out
    assert main(["run", "--scenario", str(path), "--seed", "1", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["violation"]["invariant"] == "no-foreign-release"
    assert [c["invariant"] for c in summary["consequences"]] == ["capacity", "single-executor", "slot-accounting"]
    assert main(["replay", str(path), "--json"]) == 0
    (verdict,) = json.loads(capsys.readouterr().out)
    assert [c["invariant"] for c in verdict["consequences"]] == ["capacity", "single-executor", "slot-accounting"]


def test_a_campaign_signs_by_the_cause_and_reports_its_consequences(capsys):
    from dst.explore.fuzz import fuzz

    result = fuzz(_row_left(), range(1, 3), swarm=False)
    (group,) = result.signatures
    assert group.key.startswith("no-foreign-release: ")
    assert [c[0] for c in group.first.consequences] == ["capacity", "single-executor", "slot-accounting"]
    assert "its consequences: capacity at t=62.015s" in result.explain()


def test_a_campaigns_report_lists_the_consequences_and_counts_them_as_violated():
    from dst.explore.coverage import violated
    from dst.explore.fuzz import fuzz
    from dst.explore.report import ReportError, build, check, dumps, parse
    from dst.present.junit import junit_xml

    scenario = _row_left()
    report = build(fuzz(scenario, range(1, 2), swarm=False), [scenario], first=1, stop=2, shard=None,
                   interrupted=False, findings=[])
    (sig,) = report["signatures"]
    assert [c["invariant"] for c in sig["consequences"]] == ["capacity", "single-executor", "slot-accounting"]
    assert parse(dumps(report), "r.json") == report
    assert violated(report) == {"no-foreign-release", "capacity", "single-executor", "slot-accounting"}
    held = junit_xml(report).decode()
    assert 'classname="capacity" name="capacity"' not in held  # violated as a consequence: not a test that held
    assert "its consequences: capacity at t=62015ms" in held
    del sig["consequences"]  # a report older than consequences still reads
    assert check(report, "old.json") == report
    sig["consequences"] = [{"invariant": "capacity", "time_ms": -1, "message": "m"}]
    with pytest.raises(ReportError, match=r"signatures\[0\]\.consequences\[0\]\.time_ms: expected a non-negative"):
        check(report, "bad.json")


GUEST = '''
import threading
from dst import sut
from dst.reference import model as reference
from dst.reference.protocol import Acquire


def build(env):
    system = reference.build(env)
    handlers = system.service.handlers()

    async def acquire(req):
        threading.Thread(target=print).start()  # refused, and not caught: the run ends with it
        return await handlers[Acquire](req)

    system.service.handlers = lambda: {**handlers, Acquire: acquire}
    return system


model = sut.Model(build, options=reference.options)
'''


def test_a_refusal_that_ends_the_run_is_its_outcome_once_and_no_consequence_of_itself(tmp_path, monkeypatch):
    (tmp_path / "refused_guest.py").write_text(GUEST)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run(scenario({"model": {"impl": "refused_guest:model"}}, ROW_LEFT[:1]), 1)
    v = result.violation
    assert result.outcome == MODEL_ERROR and "threading.Thread.start() called at" in v.message
    assert result.consequences == ()
    assert v.step == result.decided == len(result.raw_trace) and result.raw_trace[-1][2] == "error"
