"""The user's own assertions (dst.always, sometimes, reachable, unreachable, eventually): checked where they are
called, in both modes, signed by their id, minimized, written and replayed as findings, and counted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings

import dst
from dst.cli import main
from dst.explore.determinism import check_determinism
from dst.findings.make import finding_of
from dst.invariants import INVARIANT_IDS
from dst.invariants.user import KINDS, catalogue
from dst.runner import run
from dst.scenario import load_scenario, parse_scenario
from dst.strategies import plans

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# An adapter of one's own, written to a folder of the test's: the reference model, whose jobs assert.
ADAPTER = '''"""An adapter of one's own whose jobs assert things."""
import attrs

import dst
from dst import sut
from dst.reference import model as reference

RUNS = [0]  # how many systems this process built: a module global no run resets


def build(env):
    system = reference.build(env)
    inner = system.job
    RUNS[0] += 1

    async def job(client, incarnation, order):
        dst.reachable("a-job-ran")
        if client == "c99":
            dst.reachable("c99-ran-a-job")  # never: no scenario here has a c99
        dst.sometimes("c9-ran-a-job", client == "c9")
        dst.sometimes("in-the-first-run", RUNS[0] == 1 or not FIRST_RUN_ONLY)
        outcome = await inner(client, incarnation, order)
        if order.action == "acquire":
            dst.always("jobs-finish-their-work", outcome == "done", {"client": client, "outcome": outcome})
        return outcome

    return attrs.evolve(system, job=job)


FIRST_RUN_ONLY = False
model = sut.Model(build, options=reference.options, bugs=reference.bugs, scenarios=reference.scenarios)
'''


def adapter(folder: Path, name: str, *, first_run_only: bool = False) -> str:
    """The adapter above as ``folder/name.py``, importable from the working folder; its model's name."""
    text = ADAPTER.replace("FIRST_RUN_ONLY = False", f"FIRST_RUN_ONLY = {first_run_only}")
    (folder / f"{name}.py").write_text(text)
    return f"{name}:model"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's folder as the working folder (a model's name resolves from it) and on the path of the dst a test
    starts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SRC), str(ROOT), str(tmp_path)]))
    return tmp_path


def on(model: str, scenario: dst.Scenario | None = None) -> dst.Scenario:
    base = scenario or load_scenario()
    return attrs.evolve(base, model=attrs.evolve(base.model, impl=model))


def aio_scripted(model: str, steps: list[dict[str, Any]]) -> dst.Scenario:
    return parse_scenario({
        "run": {"duration": "20s", "quiet": "30s"}, "model": {"impl": f"user_models:{model}", "limits": {"db": 1}},
        "workload": {"clients": 3, "jobs": 0, "request_timeout": "3s", "retries": 0},
        "network": {"latency": ["10ms", "10ms"], "loss": 0.0, "duplicate": 0.0}, "steps": steps}, "<test>")


ASKS = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
        {"at": "0s", "actor": "c2", "action": "acquire", "work": "1s"}]


# --- each function, in both modes ---------------------------------------------------------------------

def test_a_correct_run_counts_every_assertion_it_met_in_the_coroutine_seam():
    result = run(on("user_models:checked"), 1)
    assert result.ok
    counts = result.assertions
    jobs = counts["reachable:a-job-ran"][0]
    assert jobs > 5 and counts["reachable:a-job-ran"] == (jobs, jobs, 0)
    checked, true, false = counts["sometimes:c2-ran-a-job"]
    assert checked == jobs and 0 < true < jobs and true + false == checked
    assert counts["always:outcome-is-known"][2] == 0 and counts["always:outcome-is-known"][0] > 0
    asked, held, failed = counts["eventually:slots-free-after-a-job"]  # judged at the end of the quiet period
    assert asked == held == counts["always:outcome-is-known"][0] and failed == 0


def test_always_false_is_a_violation_named_by_its_id_and_blamed_on_the_process_that_ran():
    result = run(on("user_models:strict"), 1)
    v = result.violation
    assert v is not None and v.invariant == "always:jobs-finish-their-work"
    assert v.message.startswith("false in c3: client='c3', outcome=") and v.during is None
    assert result.assertions["always:jobs-finish-their-work"][2] >= 1
    assert result.causal() and any(e[1] == "c3" for e in result.causal())  # its slice follows the client


def test_an_eventually_still_false_at_its_deadline_is_a_violation():
    result = run(on("user_models:hasty"), 1)
    v = result.violation
    assert v is not None and v.invariant == "eventually:slots-free-after-a-job"
    assert " 5s after c" in v.message and " asked at t=" in v.message
    asked, held, failed = result.assertions["eventually:slots-free-after-a-job"]
    assert failed >= 1 and held + failed <= asked


def test_an_eventually_still_waiting_is_judged_at_the_end_of_the_quiet_period_both_ways():
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "5s"}]
    calm = parse_scenario({"run": {"duration": "30s", "quiet": "120s"}, "workload": {"clients": 1, "jobs": 0},
                           "steps": steps}, "<test>")
    held = run(on("user_models:checked", calm), 1)
    assert held.ok and held.assertions["eventually:slots-free-after-a-job"] == (1, 1, 0)
    never = run(on("user_models:never_settles", calm), 1)
    v = never.violation
    assert v is not None and v.invariant == "eventually:nothing-ever-settles"
    assert re.fullmatch(r"still false at the end of the quiet period, after c1 asked at t=\d+\.\d+s", v.message)
    assert v.time >= 30_000 + 120_000  # the active phase and the quiet period passed


def test_unreachable_reached_is_a_violation_in_the_coroutine_seam():
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "90s"},
             {"at": "10s", "actor": "c1", "action": "partition", "for": "80s"}]
    result = run(on("user_models:no_renewal_failures", parse_scenario(
        {"workload": {"clients": 1, "jobs": 0}, "steps": steps}, "<test>")), 1)
    v = result.violation
    assert v is not None and v.invariant == "unreachable:renewal-failed" and v.message == "reached in c1: client='c1'"


def test_every_function_works_in_the_asyncio_mode_and_a_handlers_violation_names_it():
    clean = run(aio_scripted("aio_checked", ASKS), 1)
    assert clean.ok, clean.explain()
    assert clean.assertions == {"always:holder-is-not-c2": (2, 2, 0), "eventually:served-them-all": (2, 2, 0),
                                "reachable:aio-job-ran": (2, 2, 0), "sometimes:c3-asked": (2, 0, 2)}
    assert "sometimes:c3-asked was never true (false all 2 times it was checked)" in clean.never_met()
    broken = run(aio_scripted("aio_fails", ASKS), 1)
    v = broken.violation
    assert v is not None and v.invariant == "always:holder-is-not-c2"
    assert v.message == "false in server: holder='c2'" and v.during is not None
    assert v.during.startswith("2.")  # c2's request (of its plan step, 2), as the server handles it
    assert any(v.during in e[3] for e in broken.causal())


def test_unreachable_and_a_late_eventually_in_the_asyncio_mode():
    cut = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
           {"at": "0s", "actor": "c1", "action": "partition", "for": "10s"}]
    result = run(aio_scripted("aio_checked", cut), 1)
    found = [result.violation, *result.consequences]
    assert [v.invariant for v in found if v is not None] == ["eventually:served-them-all", "unreachable:no-answer"]
    assert found[1] is not None and found[1].message == "reached in c1: client='c1'"
    assert found[0] is not None and found[0].message.startswith("still false 1s after c1 asked at t=")


def test_bad_ids_and_details_are_one_line_model_errors_even_when_swallowed():
    for model, said in [("empty_id", "dst.always(): the id must be a non-empty line"),
                        ("number_id", "dst.always(): the id must be a string, got 7"),
                        ("swallowed_id", "dst.always(): the id must be a non-empty line")]:
        result = run(on(f"user_models:{model}"), 1)
        v = result.violation
        assert v is not None and v.invariant == "model-error" and said in v.message, (model, v)
        assert "\n" not in v.message


def test_outside_a_run_nothing_is_checked_and_a_failure_is_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dst.always("holds", True)
        dst.sometimes("whatever", False)
        dst.reachable("here")
        dst.eventually("later", lambda: False, within_ms=5)
        assert not caught
        dst.always("broken", False, {"holders": 2})
        dst.unreachable("never-here")
    assert [str(w.message) for w in caught] == [
        "dst.always('broken') was false outside a dst run: nothing checks it there",
        "dst.unreachable('never-here') was reached outside a dst run: nothing checks it there"]
    assert all(w.category is RuntimeWarning and w.filename == __file__ for w in caught)
    for bad in ("", "  ", "two\nlines", 3, None):
        with pytest.raises(ValueError, match=r"^dst\.sometimes\(\): the id must be"):
            dst.sometimes(bad, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"details must be a mapping"):
        dst.always("x", True, ["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"within_ms a non-negative integer"):
        dst.eventually("x", lambda: True, within_ms=-1)


def test_a_users_assertion_can_never_collide_with_dsts_own_invariants():
    assert not any(":" in i for i in INVARIANT_IDS)
    assert not set(KINDS) & set(INVARIANT_IDS)


# --- findings: minimized, written, replayed, signed by the id ------------------------------------------

def test_a_violation_minimizes_to_the_same_id_and_replays_by_digest_in_both_modes(tmp_path: Path):
    for scenario, seed in [(on("user_models:strict"), 1), (aio_scripted("aio_fails", ASKS), 1)]:
        first = run(scenario, seed)
        assert first.violation is not None
        small = dst.shrink(scenario, seed, max_runs=300)
        assert small.result.violation is not None
        assert small.result.violation.invariant == first.violation.invariant  # never another assertion
        assert small.steps_after <= small.steps_before
        path = dst.save_finding(small.result, tmp_path / scenario.model.impl.replace(":", "-"))
        finding = dst.read_finding(path)
        assert finding.invariant == first.violation.invariant
        assert finding.signature.endswith(f"{first.violation.invariant}: was false")  # the id, never the details
        assert path.name.startswith(f"001-{first.violation.invariant.replace(':', '-')}-was-false")
        replayed = dst.replay(finding)
        assert replayed.status == "reproduces" and replayed.result.digest == finding.digest


def test_the_signature_and_the_replay_survive_an_edit_of_the_adapter_above_the_assertion(here: Path):
    model = adapter(here, "edited_adapter")
    shrunk = dst.shrink(on(model), 1, max_runs=400)
    assert shrunk.result.violation is not None
    assert shrunk.result.violation.invariant == "always:jobs-finish-their-work"
    path = dst.save_finding(shrunk.result, here / "findings")
    recorded = dst.read_finding(path)

    # Forty lines and a function above every assertion: no line number of the file stays as it was.
    source = (here / "edited_adapter.py").read_text()
    head, rest = source.split("import attrs\n", 1)
    padding = "".join(f"# a line added above the assertions ({i})\n" for i in range(40))
    (here / "edited_adapter.py").write_text(f"{head}{padding}\ndef helper():\n    return 1\n\n\nimport attrs\n{rest}")
    assert (here / "edited_adapter.py").read_text().count("\n") == source.count("\n") + 45

    again = subprocess.run([sys.executable, "-m", "dst", "replay", str(path), "--quiet"], cwd=here,
                           capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "same trace digest" in again.stdout
    check = ("import dst, sys; from dst.findings.make import finding_of; f = dst.read_finding(sys.argv[1]); "
             "r = dst.replay(f); print(r.status, finding_of(r.result, {}).signature)")
    signed = subprocess.run([sys.executable, "-c", check, str(path)], cwd=here, capture_output=True, text=True)
    assert signed.stdout.strip() == f"reproduces {recorded.signature}", signed.stderr


def test_a_finding_of_a_users_assertion_is_read_checked_and_its_consequences_too(tmp_path: Path):
    result = run(on("user_models:strict"), 1)
    path = dst.save_finding(result, tmp_path)
    text = path.read_text()
    assert 'invariant = "always:jobs-finish-their-work"' in text
    path.write_text(text.replace('invariant = "always:jobs-finish-their-work"', 'invariant = "always-x"'))
    with pytest.raises(dst.FindingError, match="or a user's assertion"):
        dst.read_finding(path)


# --- never met: in a run's summary and a campaign's report ---------------------------------------------

def test_a_sometimes_never_true_and_a_reachable_never_reached_are_named_by_dst_run(here: Path, capsys):
    model = adapter(here, "summary_adapter")
    assert catalogue(model) == ("always:jobs-finish-their-work", "reachable:a-job-ran", "reachable:c99-ran-a-job",
                                "sometimes:c9-ran-a-job", "sometimes:in-the-first-run")
    code = main(["run", "--seed", "2", "--model", model])
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert "reachable:c99-ran-a-job never reached" in out and "sometimes:c9-ran-a-job 0/" in out
    lines = [line.split(None, 2)[2] for line in out.splitlines() if line.startswith("never met")]
    assert lines == ["reachable:c99-ran-a-job was never reached",
                     lines[1] if lines[1].startswith("sometimes:c9-ran-a-job was never true (false all ") else "?"]
    assert main(["run", "--seed", "2", "--model", model, "--json"]) in (0, 1)
    said = json.loads(capsys.readouterr().out)["assertions"]
    assert said["reachable:c99-ran-a-job"] == {"checked": 0, "true": 0, "false": 0}
    assert said["sometimes:c9-ran-a-job"]["true"] == 0 < said["sometimes:c9-ran-a-job"]["checked"]


@pytest.mark.slow
def test_a_campaign_lists_each_assertion_and_names_what_it_never_met(here: Path, capsys):
    model = adapter(here, "campaign_adapter")
    campaign = dst.fuzz(on(model), range(1, 9))
    counts = campaign.coverage["assertions"]
    assert set(counts) == set(catalogue(model))
    assert counts["reachable:c99-ran-a-job"] == {"checked": 0, "true": 0, "false": 0, "runs": 0}
    reached = counts["reachable:a-job-ran"]
    assert reached["checked"] == reached["true"] > 0 and reached["runs"] == 8
    always = counts["always:jobs-finish-their-work"]
    assert always["true"] + always["false"] == always["checked"] and always["false"] > 0
    assert "reachable:c99-ran-a-job was never reached" in campaign.never_reached
    assert any(line.startswith("sometimes:c9-ran-a-job was never true") for line in campaign.never_reached)
    assert campaign.signatures and campaign.signatures[0].key == "always:jobs-finish-their-work: was false"
    assert len({g.key for g in campaign.signatures}) == len(campaign.signatures) == 1  # however the details go

    code = main(["fuzz", "--count", "8", "--model", model, "--findings", str(here / "found"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and set(report["coverage"]["assertions"]) == set(counts)  # every shipped scenario, steered
    main(["fuzz", "--count", "8", "--model", model, "--findings", str(here / "found")])
    out = capsys.readouterr().out
    assert "never reached  reachable:c99-ran-a-job was never reached" in out
    assert "reachable:a-job-ran reached" in out


# --- determinism -----------------------------------------------------------------------------------

def test_check_determinism_works_on_every_outcome_of_a_model_that_asserts(here: Path, capsys):
    model = adapter(here, "steady_adapter")
    (here / "calm.toml").write_text('name = "calm"\n[workload]\nclients = 1\njobs = 3\n')
    for seed, more, code in [(1, [], 1), (1, ["--scenario", "calm.toml"], 0)]:  # a violation of its always; none
        assert main(["run", "--seed", str(seed), "--model", model, *more, "--check-determinism"]) == code, more
        assert "gave the same trace" in capsys.readouterr().out
    strict = run(on("user_models:strict"), 1)
    assert check_determinism(on("user_models:strict"), 1, strict, fresh_process=False) is None


def test_check_determinism_finds_an_assertion_that_counts_otherwise_on_the_same_trace(here: Path, capsys):
    model = adapter(here, "kept_adapter", first_run_only=True)  # its sometimes reads a global no run resets
    assert main(["run", "--seed", "2", "--model", model, "--check-determinism"]) == 1
    out = capsys.readouterr().out
    assert "a second run in the same process gives the same trace, but the assertion sometimes:in-the-first-run " \
           "counted otherwise" in " ".join(out.split())


# --- a property -------------------------------------------------------------------------------------

@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(on("user_models:strict")))
def test_every_false_always_is_reported_and_every_reported_one_was_false(plan: tuple[dst.Step, ...]):
    result = run(on("user_models:strict"), 0, plan)
    name = "always:jobs-finish-their-work"
    found = {v.invariant: v for v in (result.violation, *result.consequences) if v is not None}
    checked, true, false = result.assertions.get(name, (0, 0, 0))
    assert true + false == checked
    assert (name in found) == (false > 0) or result.outcome == "model-error"
    jobs_not_done = sum(n for outcome, n in result.jobs.items() if outcome != "done")
    assert false <= jobs_not_done


# --- docs/invariants.md -------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_example_of_the_docs_runs_and_prints_what_the_page_shows(here: Path, capsys):
    page = (ROOT / "docs" / "invariants.md").read_text()
    block = re.search(r"<!-- adapter: my_checks.py -->\n```python\n(.*?)```", page, re.S)
    console = re.search(r"<!-- invariants: console -->\n```console\n(.*?)```", page, re.S)
    assert block is not None and console is not None
    (here / "my_checks.py").write_text(block.group(1))
    shown: dict[str, list[str]] = {}
    for line in console.group(1).splitlines():
        if line.startswith("$ "):
            shown[line] = []
        else:
            shown[list(shown)[-1]].append(line)
    for command, lines in shown.items():
        main(command.split()[3:])  # after "$ PYTHONPATH=. dst"
        out = " ".join(capsys.readouterr().out.split())
        for line in lines:
            said = " ".join(line.split(" ...")[0].split())
            assert said in out, (command, said)
