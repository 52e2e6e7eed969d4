"""The minimizer, finding files, replay, and the pytest plugin."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import attrs
import pytest

from dst.cli import main
from dst.explore.record import minimize, record, to_finding
from dst.explore.selftest import bug_scenario, hunt
from dst.explore.shrink import StopReason, shrink, size
from dst.findings import DIVERGED, NO_LONGER, REPRODUCES, FindingError, read, replay
from dst.models import resolve
from dst.reference.bugs import CATALOGUE, KNOWN_BUGS

SKETCHES = {bug.slug: bug.sketch_steps for bug in CATALOGUE}
from dst.runner import run

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "findings").glob("*.toml"))


@pytest.fixture(scope="module")
def shrunk():
    """Seed 3 of the double-release scenario, as dst fuzz runs it (swarm), minimized."""
    return minimize(bug_scenario("double-release"), 3, use_swarm=True)


# --- the minimizer -----------------------------------------------------------------------------------

def test_the_minimized_run_still_violates_the_same_invariant_and_is_smaller(shrunk):
    assert shrunk is not None and shrunk.stop is StopReason.CONVERGED
    again = run(shrunk.scenario, shrunk.seed)
    assert again.violation is not None and again.violation.invariant == "no-foreign-release"
    assert again.digest == shrunk.result.digest
    assert shrunk.steps_after < shrunk.steps_before


def test_the_minimizer_is_deterministic(shrunk):
    twice = minimize(bug_scenario("double-release"), 3, use_swarm=True)
    assert twice.scenario == shrunk.scenario and twice.runs == shrunk.runs and twice.result.digest == shrunk.result.digest


def test_the_minimizer_stops_at_its_run_budget_and_says_so():
    scenario = bug_scenario("unconditional-ack")
    found, _, _ = hunt(scenario, start=1, max_seeds=200, seconds=60, use_swarm=False, workers=1)
    first = run(scenario, found.seed)
    small = shrink(scenario, found.seed, first.plan, first.violation.invariant, max_runs=5)
    assert small.stop is StopReason.RUN_BUDGET and small.runs <= 5 + 3  # + the first run, its pinned twin, the last
    assert run(small.scenario, found.seed).violation.invariant == first.violation.invariant  # type: ignore[union-attr]


def test_the_minimizer_refuses_a_run_that_does_not_violate(default_scenario):
    passing = run(default_scenario, 1)
    with pytest.raises(ValueError):
        shrink(default_scenario, 1, passing.plan, "capacity")


def test_deleting_steps_never_grows_the_size_order(shrunk):
    start = run(bug_scenario("double-release"), 3)
    assert size(shrunk.scenario) < size(attrs.evolve(shrunk.scenario, steps=start.plan))


# --- finding files -----------------------------------------------------------------------------------

def test_a_finding_written_and_read_back_is_the_same_run(shrunk, tmp_path):
    recorded = record(shrunk, tmp_path, {"scenario": "scenarios/double-release.toml", "seed": 3, "swarm": True})
    assert recorded.written and recorded.path.name.startswith("001-")
    finding = read(recorded.path)
    assert finding.scenario.steps == shrunk.scenario.steps and finding.seed == shrunk.seed
    assert attrs.evolve(finding.scenario, source="x") == attrs.evolve(shrunk.scenario, source="x")
    outcome = replay(finding)
    assert outcome.status == REPRODUCES and outcome.result.digest == shrunk.result.digest
    # A finding is a scenario file too: dst run replays it.
    assert main(["run", "--scenario", str(recorded.path), "--seed", str(finding.seed), "--json"]) == 1


def test_findings_are_numbered_never_overwritten_and_deduplicated(shrunk, tmp_path):
    (tmp_path / "007-someone-elses.toml").write_text("keep me\n")
    first = record(shrunk, tmp_path, {"seed": 3})
    assert first.path.name.startswith("008-") and (tmp_path / "007-someone-elses.toml").read_text() == "keep me\n"
    again = record(shrunk, tmp_path, {"seed": 3})
    assert not again.written and again.path == first.path
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["007-someone-elses.toml", first.path.name]


def test_a_finding_keeps_its_number_when_another_writer_took_it(shrunk, tmp_path, monkeypatch):
    real_link = os.link
    taken = tmp_path / "001-taken.toml"

    def racing_link(src, dst):  # another process creates 001 between our scan and our link
        if Path(dst).name.startswith("001-") and not taken.exists():
            taken.write_text("theirs\n")
            shutil.copy(src, dst)
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", racing_link)
    path = record(shrunk, tmp_path, {}).path
    assert path.name.startswith("002-") and taken.read_text() == "theirs\n"
    assert "# dst finding 002:" in path.read_text()
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


@pytest.mark.parametrize("edit, key", [
    (lambda t: t.replace("format = 1", "format = 99"), "finding.format"),
    (lambda t: t.replace("seed = ", "seed = -", 1) if "\nseed = " in t else t.replace("[finding]\n", "[finding]\nseed = -1\n"), "finding.seed"),
    (lambda t: t.replace("[finding]", "[findingz]"), "finding"),
    (lambda t: t.replace('invariant = "', 'invariant = "no-such-', 1), "finding.invariant"),
    (lambda t: t.replace("steps = [", "steps = [\n  { at = \"0s\", actor = \"c1\", action = \"fly\" },", 1), "steps[0].action"),
    (lambda t: t.replace('time = "', 'time = "soon', 1), "finding.time"),
    (lambda t: t[: len(t) // 2] + '\n= "', "not valid TOML"),  # cut short (where a clean cut may still parse)
])
def test_a_broken_finding_file_gives_one_clear_line_and_exit_2(shrunk, tmp_path, capsys, edit, key):
    path = record(shrunk, tmp_path, {}).path
    path.write_text(edit(path.read_text()))
    with pytest.raises(FindingError) as info:
        read(path)
    assert str(info.value).startswith(str(path)) and key in str(info.value) and "\n" not in str(info.value)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_replay_says_no_longer_reproduces_or_diverged(shrunk, tmp_path, capsys):
    path = record(shrunk, tmp_path, {}).path
    text = path.read_text()
    # The bug switched off: the same plan no longer violates anything.
    fixed = tmp_path / "fixed.toml"
    fixed.write_text(text.replace('bugs = ["double-release"]', "bugs = []"))
    assert replay(read(fixed)).status == NO_LONGER
    # A recorded fingerprint that does not match: the run diverged, and the event is named.
    diverged = tmp_path / "diverged.toml"
    diverged.write_text(text.replace('trace_digest = "', 'trace_digest = "0', 1)
                        .replace('fingerprints = [\n  "', 'fingerprints = [\n  "ff', 1))
    outcome = replay(read(diverged))
    assert outcome.status == DIVERGED and outcome.first_difference == 0 and outcome.differing_event is not None
    assert main(["replay", str(path), str(diverged), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in report] == [REPRODUCES, DIVERGED] and "differing_event" in report[1]


def test_dst_shrink_writes_a_finding(tmp_path, capsys):
    code = main(["shrink", "--seed", "3", "--scenario", "scenarios/double-release.toml", "--swarm",
                 "--findings", str(tmp_path), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 1 and summary["new"] and summary["steps_after"] <= summary["steps_before"]
    assert main(["replay", summary["path"], "--quiet"]) == 0


@pytest.mark.slow
def test_dst_fuzz_writes_one_finding_per_new_signature(tmp_path, capsys):
    argv = ["fuzz", "--scenario", "scenarios/fallback-release.toml", "--count", "12", "--workers", "1",
            "--findings", str(tmp_path), "--json"]
    assert main(argv) == 1
    report = json.loads(capsys.readouterr().out)
    assert len(report["findings"]) == len(report["signatures"]) and all(f["new"] for f in report["findings"])
    assert main(argv) == 1  # a second campaign finds the same bugs: nothing new is written
    assert not any(f["new"] for f in json.loads(capsys.readouterr().out)["findings"])
    assert len(list(tmp_path.glob("*.toml"))) == len(report["findings"])


# --- the shipped findings ----------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["dst.reference:model", "examples.sqlite_leases:model"])
def test_every_bug_of_a_shipped_model_has_a_finding_within_its_sketch_plus_one(impl):
    bugs = {bug.slug: bug for bug in resolve(impl).bugs}
    by_slug: dict[str, list[int]] = {}
    for path in SHIPPED:
        finding = read(path)
        if finding.scenario.model.impl == impl:
            (slug,) = finding.scenario.bugs
            by_slug.setdefault(slug, []).append(len(finding.scenario.steps or ()))
    assert sorted(by_slug) == sorted(bugs)
    too_long = {slug: n for slug, lengths in by_slug.items() for n in lengths if n > bugs[slug].sketch_steps + 1}
    assert too_long == {}


# --- the pytest plugin -------------------------------------------------------------------------------

pytest_plugins = ["pytester"]


def test_the_plugin_runs_findings_as_tests(pytester, shrunk):
    findings = pytester.mkdir("findings")
    known = record(shrunk, findings, {}).path  # a known bug of a model variant, still reproducing: passes
    text = known.read_text()
    # A bug of the model as it is (no bug flag), since fixed: it no longer reproduces, so it passes.
    (findings / "002-fixed.toml").write_text(text.replace('bugs = ["double-release"]', "bugs = []"))
    # A known bug that no longer reproduces exactly: fails.
    (findings / "003-drifted.toml").write_text(text.replace('trace_digest = "', 'trace_digest = "0', 1))
    (findings / "004-broken.toml").write_text("format = ")
    (findings / "settings.toml").write_text("not = 'a finding'\n")  # not named like one: not collected
    result = pytester.runpytest("findings", "-q")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 2 and outcomes.get("failed") == 2
    result.stdout.fnmatch_lines(["*004-broken.toml: not valid TOML*"])


def test_the_plugin_reports_the_replay_command_and_the_timeline(pytester, shrunk):
    findings = pytester.mkdir("findings")
    path = record(shrunk, findings, {}).path
    path.write_text(path.read_text().replace('trace_digest = "', 'trace_digest = "0', 1))  # no longer exact
    result = pytester.runpytest("findings")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*expected to reproduce exactly, but it diverged*",
                                 f"*replay it with:  dst replay findings/{path.name}", "*no-foreign-release*"])


def test_a_findings_replay_command_names_the_file_as_it_is_reached_from_the_working_folder(tmp_path, shrunk,
                                                                                            monkeypatch):
    import tomllib

    monkeypatch.chdir(tmp_path)
    nested = record(shrunk, tmp_path / "out" / "found", {}).path  # a folder of its own, below the working one
    assert f"# replay:  dst replay out/found/{nested.name}\n" in nested.read_text()
    assert tomllib.loads(nested.read_text())["finding"]["replay"] == f"dst replay out/found/{nested.name}"
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # outside it: the whole path
    outside = record(shrunk, tmp_path / "kept", {}).path
    assert f"# replay:  dst replay {outside}\n" in outside.read_text()


def test_the_minimizer_writes_one_partition_for_a_run_of_lost_messages():
    from dst.explore.shrink import Shrinker
    from dst.scenario import parse_scenario

    lose = [{"id": i, "at": f"{45 + 2 * n}s", "actor": "net", "action": "lose", "message": f"1.2.{n}"}
            for n, i in enumerate((2, 3, 4))]  # the holder's three renewal tries, all lost
    s = parse_scenario({"bugs": ["continue-after-lost-renewal"], "model": {"limits": {"db": 1}},
                        "network": {"loss": 0.0, "duplicate": 0.0, "delay": 0.0}, "workload": {"jobs": 0},
                        "steps": [{"id": 1, "at": "0s", "actor": "c1", "action": "acquire", "work": "200s", "writes": 0},
                                  *lose,
                                  {"id": 5, "at": "80s", "actor": "c2", "action": "acquire", "work": "10s"}]}, "<t>")
    first = run(s, 1)
    shrinker = Shrinker(s, 1, first.violation.invariant)  # type: ignore[union-attr]
    shrinker.merge_faults()
    assert [st.action for st in shrinker.best.steps or ()] == ["acquire", "partition", "acquire"]


def test_every_shipped_finding_names_its_faults_as_steps_and_leaves_no_probability_to_make_more():
    for path in SHIPPED:
        scenario = read(path).scenario
        net = scenario.network
        assert (net.loss, net.duplicate, net.delay, scenario.model.store_slow) == (0.0, 0.0, 0.0, 0.0), path.name
        assert all(rate.rate == 0 for _, rate in scenario.faults.kinds()), path.name  # a script: its steps are all


# --- findings are never lost or doubled -----------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",))))
def test_every_string_round_trips_through_a_finding_file(text):
    import tomllib

    from dst.text import toml_string

    assert tomllib.loads(f"x = {toml_string(text)}")["x"] == text


def test_a_finding_with_an_emoji_in_every_string_replays_and_is_written_once(tmp_path, shrunk):
    emoji = 'lease 😀 "quoted" \x7f'
    scenario = attrs.evolve(shrunk.scenario, name=f"name {emoji}", description=f"why {emoji}")
    again = attrs.evolve(shrunk, scenario=scenario, result=attrs.evolve(shrunk.result, ran=scenario))
    origin = {"scenario": f"file {emoji}.toml", "seed": 3, "swarm": True}
    first, second = record(again, tmp_path, origin), record(again, tmp_path, origin)
    assert first.written and not second.written and first.path == second.path
    finding = read(first.path)
    assert finding.scenario.name == f"name {emoji}" and replay(finding).status == REPRODUCES
    assert oct(first.path.stat().st_mode & 0o777) == "0o644"


@pytest.mark.slow
def test_two_campaigns_writing_one_folder_at_once_write_each_signature_once(tmp_path):
    import subprocess
    import sys

    command = [sys.executable, "-m", "dst", "fuzz", "--scenario", "double-release", "--seeds", "1:12",
               "--workers", "1", "--findings", str(tmp_path), "--json"]
    procs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [1, 1, 1]
    signatures = [read(path).signature for path in sorted(tmp_path.glob("*.toml"))]
    assert signatures and len(signatures) == len(set(signatures))


def test_only_regular_finding_files_are_read_and_a_stray_signature_does_not_hide_a_finding(tmp_path, shrunk):
    import os

    from dst.findings.folder import existing

    (tmp_path / "notes.toml").write_text(f'[finding]\nsignature = "{to_finding(shrunk, {}).signature}"\n')
    os.symlink("/dev/zero", tmp_path / "002-a-link.toml")
    os.mkfifo(tmp_path / "003-a-fifo.toml")
    assert existing(tmp_path) == {}  # not read: no hang on the FIFO or the endless file, no stray signature
    assert record(shrunk, tmp_path, {}).written


@pytest.mark.parametrize("setup, expected", [
    (lambda d: (d / "taken").write_text("a file"), "expected a folder for findings, but it is a file"),
    (lambda d: (d / "file").write_text("x"), "cannot write findings there (Not a directory)"),
])
def test_a_findings_folder_that_cannot_take_a_finding_is_one_line_before_the_campaign(tmp_path, capsys, setup,
                                                                                        expected):
    setup(tmp_path)
    folder = tmp_path / "taken" if "a file" in expected else tmp_path / "file" / "findings"  # under a file
    code = main(["fuzz", "--scenario", "double-release", "--count", "3", "--findings", str(folder)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expected in err
