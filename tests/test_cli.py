"""The ``dst`` command: exit codes, the human summary, the JSON object, and one-line errors.

Most tests call ``dst.cli.main`` in-process (fast); a few run the real console script and
``python -m dst`` to prove the entry points work.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dst.cli import main
from dst.scenario import embedded_scenarios
from dst.sim.trace import format_event

REQUIRED_KEYS = {"scenario", "seed", "result", "virtual_time_ms", "events", "trace_digest", "faults", "invariants",
                 "violation"}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict[str, Any], str]:
    code, out, err = run_cli(capsys, "run", "--json", *argv)
    assert code == 0, err
    assert err == ""
    return json.loads(out), out


def dst_script() -> str:
    """The installed console script, next to this interpreter (the venv's bin/)."""
    beside = Path(sys.executable).with_name("dst")
    if beside.exists():
        return str(beside)
    found = shutil.which("dst")
    assert found, "the dst console script is not installed"
    return found


def all_keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [k for k, v in value.items() for k in (k, *all_keys(v))]
    if isinstance(value, list):
        return [k for v in value for k in all_keys(v)]
    return []


# --- dst run: human summary ------------------------------------------------------------------------

def test_run_prints_a_summary_with_seed_scenario_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", "--seed", "1")
    assert code == 0
    assert err == ""
    lines = [line.rstrip() for line in out.splitlines()]
    assert any(line.split() == ["seed", "1"] for line in lines), out
    assert any(line.startswith("scenario") and "default" in line for line in lines), out
    assert "no violation" in out
    assert "Traceback" not in out


def test_run_defaults_to_seed_1_and_the_embedded_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    default, _ = run_json(capsys)
    explicit, _ = run_json(capsys, "--seed", "1")
    assert default == explicit
    assert default["scenario"] == "default"


# --- dst run --json --------------------------------------------------------------------------------

def test_json_is_one_object_with_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    data, out = run_json(capsys, "--seed", "1")
    assert isinstance(data, dict)
    assert REQUIRED_KEYS <= data.keys(), REQUIRED_KEYS - data.keys()
    assert data["scenario"] == "default"
    assert data["model"] == "dst.reference:model"
    assert data["seed"] == 1
    assert data["result"] == "ok"
    assert data["violation"] is None
    assert isinstance(data["virtual_time_ms"], int) and data["virtual_time_ms"] > 0
    assert isinstance(data["events"], int) and data["events"] > 0
    assert isinstance(data["trace_digest"], str) and len(data["trace_digest"]) >= 16
    assert isinstance(data["faults"], dict)
    assert data["invariants"] == ["slot-accounting", "capacity", "no-foreign-release", "fenced-writes",
                                  "single-executor", "stranded-slot", "expiry-only-forward", "removed-before-expiry",
                                  "unique-tokens", "exclusive-seats",
                                  "write-progress", "fence-only-up", "refused-changes-nothing"]
    # exactly one JSON document on stdout, nothing else
    decoder = json.JSONDecoder()
    _, end = decoder.raw_decode(out)
    assert out[end:].strip() == ""


def test_json_is_byte_identical_across_invocations(capsys: pytest.CaptureFixture[str]) -> None:
    _, first = run_json(capsys, "--seed", "1")
    _, second = run_json(capsys, "--seed", "1")
    assert first == second


def test_different_seeds_give_different_digests(capsys: pytest.CaptureFixture[str]) -> None:
    digests = {seed: run_json(capsys, "--seed", str(seed))[0]["trace_digest"] for seed in (1, 2, 3)}
    assert len(set(digests.values())) == 3, digests


def test_json_has_no_wall_clock_figures(capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = run_json(capsys, "--seed", "1")
    for key in all_keys(data):
        lowered = key.lower()
        assert not any(word in lowered for word in ("wall", "elapsed", "seconds", "perf", "duration_s", "timestamp")), key
    # and nothing that is a float: every figure in the summary is a count or virtual milliseconds
    def floats(value: Any) -> list[float]:
        if isinstance(value, float):
            return [value]
        if isinstance(value, dict):
            return [f for v in value.values() for f in floats(v)]
        if isinstance(value, list):
            return [f for v in value for f in floats(v)]
        return []
    assert floats(data) == []


def test_json_with_a_scenario_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text('[run]\nduration = "30s"\n[workload]\nclients = 1\njobs = 1\n[faults]\n', encoding="utf-8")
    data, _ = run_json(capsys, "--seed", "4", "--scenario", str(path))
    assert data["scenario"] == "tiny"
    assert data["seed"] == 4


# --- --trace ---------------------------------------------------------------------------------------

def test_trace_in_json_adds_a_trace_list(capsys: pytest.CaptureFixture[str]) -> None:
    plain, _ = run_json(capsys, "--seed", "1")
    traced, _ = run_json(capsys, "--seed", "1", "--trace")
    assert "trace" not in plain
    trace = traced.pop("trace")
    assert traced == plain  # --trace only adds the list
    assert isinstance(trace, list) and trace
    assert all(isinstance(e, list) and len(e) == 4 and isinstance(e[0], int) for e in trace)
    times = [e[0] for e in trace]
    assert times == sorted(times)  # virtual time never goes backwards
    assert len(trace) == plain.get("trace_events", len(trace))


def test_trace_in_human_mode_prints_trace_lines(capsys: pytest.CaptureFixture[str]) -> None:
    traced, _ = run_json(capsys, "--seed", "1", "--trace")
    trace = [tuple(e) for e in traced["trace"]]
    code, out, err = run_cli(capsys, "run", "--seed", "1", "--trace")
    assert code == 0 and err == ""
    lines = [line.rstrip() for line in out.splitlines()]
    assert sum(line.startswith("t=") for line in lines) == len(trace)
    assert lines[0] == format_event(trace[0])  # type: ignore[arg-type]
    assert "no violation" in out  # the summary still follows the trace

    code, plain, _ = run_cli(capsys, "run", "--seed", "1")
    assert sum(line.startswith("t=") for line in plain.splitlines()) == 0


def test_human_trace_lines_are_not_wrapped_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    traced, _ = run_json(capsys, "--seed", "1", "--trace")
    expected = [format_event(tuple(e)) for e in traced["trace"]]  # type: ignore[arg-type]
    assert any(len(line) > 80 for line in expected), "precondition: some event is longer than 80 characters"
    _, out, _ = run_cli(capsys, "run", "--seed", "1", "--trace")
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[:len(expected)] == expected


# --- --check-determinism ---------------------------------------------------------------------------

def test_check_determinism_json_reports_identical(capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = run_json(capsys, "--seed", "3", "--check-determinism")
    assert data["determinism"] == "identical"
    assert data["result"] == "ok"


def test_check_determinism_human_reports_the_same_trace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", "--seed", "1", "--check-determinism")
    assert code == 0, err
    assert err == ""
    assert "determinism" in out and "same trace" in out


# --- bad flags: exit 2, one line, no traceback ------------------------------------------------------

BAD_ARGV = [
    pytest.param(["run", "--seed", "-1"], "--seed", id="negative-seed"),
    pytest.param(["run", "--seed", "abc"], "--seed", id="non-numeric-seed"),
    pytest.param(["run", "--seed", "1.5"], "--seed", id="fractional-seed"),
    pytest.param(["run", "--seed", ""], "--seed", id="empty-seed"),
    pytest.param(["run", "--seed"], "--seed", id="seed-without-value"),
    pytest.param(["frobnicate"], "frobnicate", id="unknown-subcommand"),
    pytest.param(["run", "--frobnicate"], "--frobnicate", id="unknown-flag"),
    pytest.param(["run", "extra"], "extra", id="stray-argument"),
    pytest.param([], "COMMAND", id="no-subcommand"),
    pytest.param(["run", "--scenario"], "--scenario", id="scenario-without-value"),
]


@pytest.mark.parametrize(("argv", "named"), BAD_ARGV)
def test_bad_flags_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], named: str) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.endswith("\n") and len(err.splitlines()) == 1, err
    assert err.startswith("dst"), err
    assert named in err  # names what was wrong
    assert "Traceback" not in err and "usage:" not in err


def test_seed_error_says_what_was_expected(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run_cli(capsys, "run", "--seed", "-1")
    assert "expected a non-negative integer seed" in err and "'-1'" in err


def test_missing_scenario_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.toml"
    code, out, err = run_cli(capsys, "run", "--scenario", str(missing))
    assert code == 2 and out == ""
    assert err == (f"dst: {missing}: no such file (nor the name of a scenario shipped with dst, such as 'default', "
                   f"'runs' or a bug's slug)\n")


def test_a_shipped_scenario_runs_by_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "run", "--scenario", "double-release", "--seed", "3", "--json")
    data = json.loads(out)
    assert code == 1 and data["scenario"] == "double-release" and data["bugs"] == ["double-release"]


@pytest.mark.slow
def test_fuzz_with_no_scenario_runs_the_default_campaign_over_every_shipped_scenario(capsys) -> None:
    code, out, _ = run_cli(capsys, "fuzz", "--count", "60", "--bug", "no-redelivery", "--no-findings", "--json",
                           "--workers", "1")
    report = json.loads(out)
    names = report["scenario"].split(" + ")
    shipped = set(embedded_scenarios())
    assert names[:2] == ["default", "runs"] and shipped <= set(names)  # the broad ones first
    assert all(name.removesuffix(", aimed") in shipped for name in names) and len(names) > len(shipped)
    ran = report["coverage"]["scenarios"]
    # Half to the broad ones in turns, half to the others in turns (the first block has nothing to weigh them on).
    assert ran == {"default": 15, "runs": 15} | {name: 1 for name in names[2:32]}
    assert code == 1
    [group] = report["signatures"]
    assert group["invariant"] == "at-least-once"
    # A shipped scenario runs with its own bugs off (if any) and the user's on; the command says so, and runs that seed.
    command = shlex.split(group["reproduce"])
    narrow = command[command.index("--scenario") + 1] not in ("default", "runs")
    assert ("--no-bugs" in command) == narrow and command[command.index("--bug") + 1] == "no-redelivery"
    code, out, _ = run_cli(capsys, *command[1:], "--json")
    assert code == 1 and json.loads(out)["violation"]["invariant"] == "at-least-once"
    assert json.loads(out)["bugs"] == ["no-redelivery"]


def test_no_bugs_switches_off_the_scenarios_own(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "run", "--scenario", "double-release", "--no-bugs", "--seed", "3", "--json")
    assert code == 0 and json.loads(out)["bugs"] == []


def test_large_seed_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = run_json(capsys, "--seed", str(2**64 + 7))
    assert data["seed"] == 2**64 + 7


# --- the real entry points ----------------------------------------------------------------------------

def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    return env


def test_console_script_json_matches_in_process_output(capsys: pytest.CaptureFixture[str]) -> None:
    _, in_process = run_json(capsys, "--seed", "1")
    done = subprocess.run([dst_script(), "run", "--seed", "1", "--json"], capture_output=True, text=True,
                          env=dict(_env(), PYTHONHASHSEED="123"), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout == in_process  # same bytes in another process with another hash seed


def test_console_script_bad_flag_exits_2_with_one_line() -> None:
    done = subprocess.run([dst_script(), "run", "--seed", "abc"], capture_output=True, text=True, env=_env(),
                          timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_python_dash_m_dst_works() -> None:
    done = subprocess.run([sys.executable, "-m", "dst", "run", "--seed", "2", "--json"], capture_output=True,
                          text=True, env=_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["seed"] == 2 and data["result"] == "ok"
    assert REQUIRED_KEYS <= data.keys()


def test_shrink_verbose_says_what_each_pass_of_the_minimizer_did(tmp_path, capsys):
    code = main(["shrink", "--seed", "3", "--scenario", "double-release", "--swarm", "--findings",
                 str(tmp_path / "findings"), "--verbose", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["steps_after"] < out["steps_before"]
    passes = {p["pass"]: p for p in out["passes"]}
    # In the order they first ran; re_aim (a candidate retried with its pinned faults re-aimed) runs within others.
    assert [name for name in passes if name != "re_aim"] == ["delete_chunks", "delete_clients", "fold_clients",
                                                             "merge_faults", "shorten", "lower_counts",
                                                             "fewer_seats", "plain_environment", "crash_sooner"]
    # Every candidate run is one pass's; the minimizer's own runs (the seed, its pinned form, the tidied one) are 3.
    assert sum(p["tried"] for p in passes.values()) == out["runs"] - 3
    assert all(0 <= p["kept"] <= p["tried"] for p in passes.values()) and passes["delete_chunks"]["kept"] > 0
