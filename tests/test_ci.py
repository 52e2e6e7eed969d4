"""Running dst in CI: the shipped workflow and docs/ci.md agree and parse, --junit writes a report a CI
system reads, and a campaign off a terminal says how it is doing in its log."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from dst.cli import build_parser, main
from dst.explore.fuzz import Tally
from dst.present.terminal import FuzzProgress

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "dst-fuzz.yml"
CI_DOC = ROOT / "docs" / "ci.md"
SAMPLES = {"matrix.shard": "2", "github.run_number": "7"}


def workflow_commands() -> list[str]:
    """Every ``dst ...`` line of the workflow's run steps, as written."""
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    lines = [line.strip() for job in jobs.values() for step in job["steps"] for line in step.get("run", "").splitlines()]
    return [line for line in lines if line.startswith("dst ")]


def argv_of(line: str) -> list[str]:
    """The arguments dst gets from a command line: expressions given sample values, the shell's part cut off."""
    line = re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: SAMPLES[m.group(1)], line)
    command = re.split(r"\s(?:>|\|\||\||&&|;)\s", line)[0]
    return shlex.split(command)[1:]


def test_the_workflow_is_valid_yaml_with_shard_jobs_and_a_merge_that_follows_them():
    doc = yaml.safe_load(WORKFLOW.read_text())
    fuzz, merge = doc["jobs"]["fuzz"], doc["jobs"]["merge"]
    shards = fuzz["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1)) and len(shards) > 1
    assert merge["needs"] == "fuzz"
    uses = [step.get("uses", "") for job in (fuzz, merge) for step in job["steps"]]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    assert any(u.startswith("actions/download-artifact@") for u in uses)
    (fuzz_line,) = [c for c in workflow_commands() if c.startswith("dst fuzz ")]
    assert f"--shard ${{{{ matrix.shard }}}}/{len(shards)} " in fuzz_line  # N agrees with the matrix
    assert fuzz_line.endswith("|| test $? -eq 1")  # violations are the merge job's to report
    (merge_line,) = [c for c in workflow_commands() if c.startswith("dst merge ")]
    assert merge_line.startswith("dst merge shard-*.json ")  # what the shard jobs wrote, downloaded side by side
    assert "shard-${{ matrix.shard }}.json" in fuzz_line


def test_every_dst_command_of_the_workflow_is_in_the_docs_and_parses():
    commands = workflow_commands()
    assert len(commands) >= 2
    doc = CI_DOC.read_text()
    for line in commands:
        assert line in doc, f"docs/ci.md does not show: {line}"
        build_parser().parse_args(argv_of(line))  # an unknown flag or bad value exits with a UsageError


def test_every_dst_command_in_the_ci_docs_parses():
    lines = [line.strip() for block in re.findall(r"```sh\n(.*?)```", CI_DOC.read_text(), re.S)
             for line in block.splitlines() if line.strip().startswith("dst ")]
    assert len(lines) >= 3
    for line in lines:
        build_parser().parse_args(argv_of(line))


def test_the_error_line_in_the_ci_docs_is_what_dst_merge_prints(tmp_path, monkeypatch, capsys):
    (line,) = re.findall(r"`(dst: shard-2\.json: .*?)`", CI_DOC.read_text())
    monkeypatch.chdir(tmp_path)
    code = main(["fuzz", "--scenario", "double-release", "--seeds", "1:5", "--shard", "1/2", "--json",
                 "--no-findings", "--workers", "1"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    Path("shard-1.json").write_text(json.dumps(report))
    report["seeds"]["shard"] = "2/2"
    report["model"] = "my_limiter:model"
    Path("shard-2.json").write_text(json.dumps(report))
    assert main(["merge", "shard-1.json", "shard-2.json"]) == 2
    assert capsys.readouterr().err.strip() == line


# --- JUnit ----------------------------------------------------------------------------------------

def junit(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    return suite


def test_fuzz_and_merge_write_junit_with_a_failure_per_signature_and_a_pass_per_invariant_that_held(tmp_path,
                                                                                                     capsys):
    argv = ["--scenario", "immortal-lease", "--seeds", "1:21", "--no-findings", "--workers", "1"]
    assert main(["fuzz", *argv, "--json", "--junit", str(tmp_path / "whole.xml")]) == 1
    report = json.loads(capsys.readouterr().out)
    for k in (1, 2):
        assert main(["fuzz", *argv, "--shard", f"{k}/2", "--json"]) == 1
        (tmp_path / f"shard-{k}.json").write_text(capsys.readouterr().out)
    assert main(["merge", str(tmp_path / "shard-1.json"), str(tmp_path / "shard-2.json"),
                 "--junit", str(tmp_path / "merged.xml")]) == 1
    assert (tmp_path / "whole.xml").read_bytes() == (tmp_path / "merged.xml").read_bytes()  # no wall clock in it

    suite = junit(tmp_path / "merged.xml")
    failures = suite.findall("testcase/failure")
    assert len(failures) == len(report["signatures"]) >= 2 and suite.get("failures") == str(len(failures))
    for failure, sig in zip(failures, report["signatures"]):
        assert failure.get("message") == f"{sig['invariant']}: {sig['message']}"
        assert sig["reproduce"] in failure.text and ", ".join(map(str, sig["seeds"])) in failure.text
    passing = [case.get("name") for case in suite.findall("testcase") if not list(case)]
    assert passing == [i for i in report["invariants"] if i not in {s["invariant"] for s in report["signatures"]}]
    assert passing and int(suite.get("tests")) == len(failures) + len(passing)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merged.xml", "shard-1.json", "shard-2.json", "whole.xml"]


def test_a_clean_campaign_is_a_suite_of_passing_invariants(tmp_path, capsys):
    target = tmp_path / "report.xml"
    target.write_text("an older report")
    assert main(["fuzz", "--seeds", "1:3", "--workers", "1", "--junit", str(target)]) == 0
    suite = junit(target)
    cases = suite.findall("testcase")
    assert len(cases) >= 6 and suite.get("failures") == "0" and not suite.findall("testcase/failure")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


@pytest.mark.parametrize("where, expected", [
    ("folder", "--junit: expected a file to write, but it is a folder"),
    ("file.txt/report.xml", "--junit: cannot write the file there"),
])
def test_an_unwritable_junit_path_is_one_line_before_any_seed_runs(where, expected, tmp_path, capsys):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("mine")
    assert main(["fuzz", "--count", "100000", "--workers", "1", "--junit", str(tmp_path / where)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and expected in captured.err and len(captured.err.strip().splitlines()) == 1
    assert (tmp_path / "file.txt").read_text() == "mine" and list((tmp_path / "folder").iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_folder_for_junit_is_one_line_from_merge(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert main(["merge", "missing.json", "--junit", str(locked / "report.xml")]) == 2
    finally:
        locked.chmod(0o700)
    err = capsys.readouterr().err
    assert "--junit: cannot write the file there (Permission denied)" in err and "missing.json" not in err


# --- progress off a terminal ----------------------------------------------------------------------

def test_off_a_terminal_progress_is_a_plain_line_every_ten_seconds():
    out = io.StringIO()
    progress = FuzzProgress(Console(file=out, width=200), total=None, budget=120.0, quiet=True)
    tally = Tally()
    with progress:
        for elapsed, seeds, violations in [(0.5, 40, 0), (9.9, 800, 0), (10.0, 850, 1), (14.0, 1100, 1),
                                           (19.9, 1200, 2), (60.0, 5100, 2)]:
            tally.seeds_run, tally.violations = seeds, violations
            progress.update(tally, elapsed)  # the campaign's clock, given: no waiting here
    assert out.getvalue().splitlines() == [
        "dst fuzz: 850 seeds, 85/s, 1 violation, 110s left",
        "dst fuzz: 5,100 seeds, 85/s, 2 violations, 60s left",
    ]


def test_off_a_terminal_a_known_count_of_seeds_gives_the_time_left():
    out = io.StringIO()
    progress = FuzzProgress(Console(file=out, width=200), total=2000, budget=None, quiet=False)
    tally = Tally()
    tally.seeds_run = 500
    progress.update(tally, 10.0)
    assert out.getvalue() == "dst fuzz: 500 seeds, 50/s, 0 violations, 30s left\n"


# --- the recipe for a user's own repository -----------------------------------------------------------

RECIPE = ROOT / "docs" / "workflows" / "fuzz-your-service.yml"


def test_the_recipe_pins_this_dst_by_its_distribution_name_and_uses_current_action_majors():
    from dst import __version__

    doc = yaml.safe_load(RECIPE.read_text())
    assert doc["env"]["DST"] == f"dst-harness[aio]=={__version__}"
    # The first majors that run on Node 24 (the runners retired Node 20).
    first_on_node_24 = {"actions/checkout": 5, "actions/setup-python": 6, "actions/upload-artifact": 6,
                        "actions/download-artifact": 7}
    for workflow in (RECIPE, WORKFLOW):
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            for action, major in (step["uses"].split("@v") for step in job["steps"] if "uses" in step):
                assert int(major) >= first_on_node_24[action], (workflow.name, action, major)


@pytest.mark.slow
def test_the_recipe_runs_in_a_throwaway_repository_with_an_adapter_of_its_own(tmp_path):
    """The recipe's commands, run as its jobs would run them in a user's repository: the user's adapter and
    scenario, shards that write reports and findings, a merge, the findings replayed as tests. (The install
    steps are the one thing not run: this dst is installed already, and the project is put on the path.)"""
    import subprocess
    import sys

    from test_your_service import adapter_source

    repo = tmp_path / "their-repo"
    (repo / "my_service").mkdir(parents=True)
    (repo / "my_service" / "__init__.py").write_text("")
    (repo / "my_service" / "dst_adapter.py").write_text(adapter_source())
    (repo / "scenarios").mkdir()
    (repo / "scenarios" / "default.toml").write_text('name = "theirs"\n[run]\nduration = "60s"\n')
    (repo / "findings").mkdir()
    doc = yaml.safe_load(RECIPE.read_text())
    env = dict(os.environ, **{**doc["env"], "DST_BUDGET": "1s"}, PYTHONPATH=str(repo))
    env.pop("COLUMNS", None)
    bindir = Path(sys.executable).parent
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"  # this dst, and this Python as "python"

    def run_job(job: str, **samples: str) -> None:
        for step in doc["jobs"][job]["steps"]:
            script = step.get("run", "")
            if not script or step.get("name") == "Install":
                continue
            script = re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: samples[m.group(1)], script)
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=repo, env=env,
                                  capture_output=True, text=True)
            assert done.returncode == 0, (job, step.get("name"), done.stdout[-2000:], done.stderr[-2000:])

    shards = doc["jobs"]["fuzz"]["strategy"]["matrix"]["shard"]
    for shard in shards:
        run_job("fuzz", shard=str(shard))
    reports = [json.loads((repo / f"shard-{k}.json").read_text()) for k in shards]
    assert {r["model"] for r in reports} == {"my_service.dst_adapter:model"} and all(r["seeds_run"] for r in reports)
    run_job("merge")
    assert ET.parse(repo / "report.xml").getroot().tag == "testsuites"
    # A finding of theirs (a bug their adapter can switch on, minimized by dst) replays as a test.
    found = subprocess.run(["dst", "fuzz", "--model", "my_service.dst_adapter:model", "--bug", "split-release",
                            "--count", "30", "--workers", "1", "--findings", "findings"], cwd=repo, env=env,
                           capture_output=True, text=True)
    assert found.returncode == 1 and list((repo / "findings").glob("*.toml")), found.stdout[-2000:]
    run_job("findings")
