"""Hostile input, generated: whatever a scenario file, a finding file or a command line holds, dst
answers with a clean outcome or with exit 2 and one line per bad input, never a traceback, and
never runs past a bound.

The documents start from valid ones (scenarios drawn from the whole key space, the shipped
findings) and are broken one or a few keys at a time, or byte by byte, so most examples reach
deep into the checks instead of failing on the first line. Everything runs in process, through
``dst.cli.main``: an exception that escapes it fails the example, and Hypothesis shrinks it.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import signal
import tempfile
import tomllib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dst.cli import main
from dst.explore.space import scenario_doc

REPO = Path(__file__).resolve().parents[1]
FINDINGS = sorted((REPO / "findings").glob("[0-9][0-9][0-9]-*.toml"))
EXAMPLE_SECONDS = 60  # far past any example here: reaching it is a hang, not a slow machine
EVENTS = 50_000  # each run's budget, so a broken key that asks for a huge run ends quickly (over budget)

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])  # capsys: read clean per example

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="bounds each example with SIGALRM")


class Hang(Exception):
    pass


@contextmanager
def bounded(seconds: int = EXAMPLE_SECONDS) -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise Hang(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(capsys: pytest.CaptureFixture[str], argv: list[str], bad_inputs: int = 1) -> int:
    """Run ``dst argv``: a clean outcome (0 or 1, something on stdout) or exit 2 with one ``dst`` line
    per bad input on stderr. Returns the exit code."""
    capsys.readouterr()
    with bounded():
        code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        lines = err.splitlines()
        assert 1 <= len(lines) <= bad_inputs, f"expected one line per bad input, got {err!r}"
        assert all(line.startswith("dst") for line in lines), err
        assert "\x1b" not in err
    else:
        assert (out + err).strip(), f"exit {code} with nothing said"
    event(f"exit {code}")
    return code


# --- TOML text from a document (any document: a value TOML cannot hold comes out as invalid TOML) ---

def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {toml_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def toml_text(doc: dict[str, Any]) -> str:
    top = [f"{json.dumps(k, ensure_ascii=False)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    tables = [f"[{json.dumps(k, ensure_ascii=False)}]\n" + "".join(f"{json.dumps(str(key), ensure_ascii=False)} = "
                                                                      f"{toml_value(x)}\n" for key, x in v.items())
              for k, v in doc.items() if isinstance(v, dict)]
    return "\n".join(top) + "\n\n" + "\n".join(tables)


# --- hostile values and the ways to break a document ----------------------------------------------

SPECIAL = ["0s", "-1s", "1e11h", "99999999999999999h", "1.5.5s", "10ms", "1h", "10 s", "0x10s", "1_000s", "s",
           "[/]", "[bold]x", "\x1b[2J", "\r", "\u202e", "😀", "", " ", "db", "nope", "token", "pct", "inf", "nan",
           "dst.reference:model", "os:path", "no.such.module:x"]
NUMBERS = [0, -1, 1, 2, 10**6 + 1, 10**9, 10**12, 2**63, -(2**63) - 1, 10**100]

leaves = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from(NUMBERS), st.floats(), st.booleans(),
    st.text(max_size=12), st.sampled_from(SPECIAL),
)
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(["rate", "targeted", "db", "at", "actor", "x"]) | st.text(max_size=6),
                                        inner, max_size=3), max_leaves=6)


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key of a document, as a path of dict keys and list indexes (the document itself first)."""
    found = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += paths(v, (*prefix, i))
    return found


def at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def broken(draw: st.DrawFn, base: dict[str, Any], rounds: int = 3) -> tuple[dict[str, Any], set[tuple[Any, ...]]]:
    """``base`` with 1 to ``rounds`` keys set to a hostile value, deleted, or added; and the paths touched."""
    doc, touched = copy.deepcopy(base), set()
    for _ in range(draw(st.integers(1, rounds))):
        path = draw(st.sampled_from(paths(doc)[1:]))
        parent, key = at(doc, path[:-1]), path[-1]
        how = draw(st.sampled_from(["set", "set", "delete", "add"]))
        if how == "set":
            parent[key] = draw(values)
        elif how == "delete" and isinstance(parent, dict):
            del parent[key]
        elif how == "add" and isinstance(at(doc, path), dict):
            at(doc, path)[draw(st.sampled_from(["rate", "extra", "max_events", "impl"]) | st.text(max_size=8))] = \
                draw(values)
            parent = at(doc, path)
        touched.add(path)
    return doc, touched


@st.composite
def corrupted(draw: st.DrawFn, text: str) -> bytes:
    """A file's bytes cut short, with bytes inserted or overwritten, or a line repeated."""
    data = text.encode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["cut", "insert", "overwrite", "repeat"]))
        junk = draw(st.binary(max_size=8) | st.sampled_from([b"[", b"]", b"=", b'"', b"\n[run]\n", b"\x00", b"\xff",
                                                            b"{", b"'''", b"\n\n[[steps]]\n"]))
        if how == "cut":
            data = data[:i]
        elif how == "insert":
            data = data[:i] + junk + data[i:]
        elif how == "overwrite":
            data = data[:i] + junk + data[i + len(junk):]
        else:
            start = data.rfind(b"\n", 0, i) + 1
            end = data.find(b"\n", i)
            line = data[start:end if end >= 0 else len(data)]
            data = data[:start] + line + b"\n" + data[start:]
    return data


def bound_events(doc: dict[str, Any], touched: set[tuple[Any, ...]]) -> dict[str, Any]:
    """Keep each run small, unless the event budget is itself what the example breaks."""
    if isinstance(doc.get("run"), dict) and not any(p[:2] == ("run", "max_events") for p in touched):
        doc["run"]["max_events"] = EVENTS
    return doc


drawn_scenarios = st.randoms(use_true_random=False).map(lambda rnd: scenario_doc(rnd))


# --- scenario files ---------------------------------------------------------------------------------

@pytest.mark.slow
@SETTINGS
@given(data=st.data(), base=drawn_scenarios, as_json=st.booleans())
def test_broken_scenario_keys(capsys: pytest.CaptureFixture[str], data: st.DataObject, base: dict[str, Any],
                              as_json: bool) -> None:
    doc = bound_events(*data.draw(broken(base)))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.toml"
        path.write_text(toml_text(doc), encoding="utf-8")
        argv = ["run", "--scenario", str(path), "--seed", "1"] + (["--json"] if as_json else [])
        code = outcome(capsys, argv)
    if code == 2:
        return
    assert code == 0  # the correct model: broken keys may be refused, never turn into an accusation


@SETTINGS
@given(data=st.data(), base=drawn_scenarios)
def test_corrupted_scenario_bytes(capsys: pytest.CaptureFixture[str], data: st.DataObject,
                                  base: dict[str, Any]) -> None:
    text = toml_text(bound_events(base, set()))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.toml"
        path.write_bytes(data.draw(corrupted(text)))
        code = outcome(capsys, ["run", "--scenario", str(path), "--seed", "2"])
    assert code in (0, 2)


# --- finding files ---------------------------------------------------------------------------------

def finding_doc(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


@SETTINGS
@given(data=st.data(), source=st.sampled_from(FINDINGS))
def test_broken_finding_keys(capsys: pytest.CaptureFixture[str], data: st.DataObject, source: Path) -> None:
    doc, touched = data.draw(broken(finding_doc(source)))
    doc = bound_events(doc, touched)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / source.name
        path.write_text(toml_text(doc), encoding="utf-8")
        outcome(capsys, ["replay", "--quiet", str(path)])  # 1 is fine: an edited finding may no longer reproduce


@SETTINGS
@given(data=st.data(), source=st.sampled_from(FINDINGS))
def test_corrupted_finding_bytes(capsys: pytest.CaptureFixture[str], data: st.DataObject, source: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / source.name
        path.write_bytes(data.draw(corrupted(source.read_text(encoding="utf-8"))))
        outcome(capsys, ["replay", "--quiet", str(path)])


def test_the_emitter_round_trips_the_shipped_findings() -> None:
    # The generated files are only as hostile as intended if an unbroken document comes out unchanged.
    for path in FINDINGS:
        assert tomllib.loads(toml_text(finding_doc(path))) == finding_doc(path)
    doc = scenario_doc(random.Random(7))
    assert tomllib.loads(toml_text(doc)) == doc


# --- command lines ---------------------------------------------------------------------------------

def flag_values(folder: Path) -> dict[str, st.SearchStrategy[str]]:
    """What each kind of flag is given: sometimes sensible, mostly not."""
    numbers = st.sampled_from(["0", "1", "-1", "3", "1.5", "1e3", "9" * 5000, "0x10", " 2", "２", "", "[/]",
                               "\x1b[2J"]) | st.integers(-5, 10**20).map(str) | st.text(max_size=6)
    fifo = folder / "fifo.toml"
    if not fifo.exists():
        os.mkfifo(fifo)
    files = st.sampled_from([str(folder), str(fifo), str(folder / "missing.toml"), "/dev/null", "", "default",
                             "runs", "double-release", "no-such-slug", str(FINDINGS[0]), "\x1b[31m.toml",
                             "d/" * 2000 + "x.toml", "a\x00b"]) | st.text(max_size=8).map(lambda t: str(folder / t))
    return {
        "seed": numbers, "count": numbers, "workers": numbers, "shrink-candidates": numbers, "max-runs": numbers,
        "max-seeds": numbers, "clean-seeds": numbers,
        "seeds": st.sampled_from(["1:3", "3:1", "0:0", ":", "1:", "1:" + "9" * 5000, "a:b", "1:2:3"]) | numbers,
        "shard": st.sampled_from(["1/2", "2/1", "0/1", "1/0", "/", "1/" + "9" * 5000, "a/b"]) | numbers,
        "time-budget": st.sampled_from(["1s", "0s", "-1s", "1e400s", "nan", "1h", "10", "s", "0.1s"]) | numbers,
        "scenario": files, "findings": files,
        "model": st.sampled_from(["dst.reference:model", "dst.reference", "dst.reference:nothing", "no.such:x",
                                  "os:path", ":", "", "[/]", "a..b:c", "\x1b", "dst.reference:model:x"]),
        "bug": st.sampled_from(["double-release", "no-such-bug", "", "[/]", "\x1b[2J"]),
    }


COMMANDS = {
    "run": (["seed", "scenario", "model", "bug"], ["swarm", "json", "trace"]),
    "fuzz": (["seeds", "count", "shard", "scenario", "model", "bug", "findings", "shrink-candidates", "time-budget",
              "workers"], ["no-swarm", "stop-on-first", "no-findings", "json"]),
    "shrink": (["seed", "scenario", "model", "bug", "findings", "max-runs", "time-budget"], ["swarm", "json"]),
    "replay": (["model"], ["quiet", "json"]),
    "bugs": (["model"], ["json"]),
    "selftest": (["model", "bug", "max-seeds", "clean-seeds", "findings", "time-budget", "workers"],
                 ["no-swarm", "json"]),
}
# Appended last (argparse keeps the last value): whatever else the line asks for, it ends soon.
BOUNDS = {
    "fuzz": ["--workers", "1", "--time-budget", "2s", "--shrink-candidates", "1"],
    "shrink": ["--max-runs", "30", "--time-budget", "2s"],
    "selftest": ["--workers", "1", "--max-seeds", "2", "--clean-seeds", "1", "--time-budget", "1s"],
}


@st.composite
def command_lines(draw: st.DrawFn, folder: Path) -> list[str]:
    kinds = flag_values(folder)
    command = draw(st.sampled_from(sorted(COMMANDS)))
    valued, switches = COMMANDS[command]
    argv = [command]
    for _ in range(draw(st.integers(0, 4))):
        pick = draw(st.sampled_from(valued + switches + ["unknown"]))
        if pick in switches:
            argv.append(f"--{pick}")
        elif pick == "unknown":
            argv.append(draw(st.sampled_from(["--nope", "-x", "--", "-", "--seed=", "--json=1", "extra"])))
        elif draw(st.booleans()):
            argv += [f"--{pick}", draw(kinds[pick])]
        else:
            argv.append(f"--{pick}={draw(kinds[pick])}")
    if command == "replay":
        argv += draw(st.lists(kinds["scenario"], min_size=0, max_size=2))
    return argv + BOUNDS.get(command, [])


@pytest.mark.slow
@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_hostile_command_lines(capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        cwd = os.getcwd()
        os.chdir(folder)  # whatever a line writes (findings/) stays in the example's own folder
        try:
            argv = data.draw(command_lines(Path(folder)))
            code = outcome(capsys, argv, bad_inputs=3)
        finally:
            os.chdir(cwd)
    if argv[0] in ("run", "fuzz") and code != 2 and not any(a.startswith(("--bug", "--scenario")) for a in argv):
        assert code == 0  # the embedded default with no bug switched on: nothing to accuse


# --- cases found by hand ---------------------------------------------------------------------------

def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_replay_of_an_actor_the_run_does_not_have_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(FINDINGS[0]), "--actor", "nosuch"]) == 2
    assert _one_error_line(capsys) == "dst replay: --actor nosuch: expected one of the run's actors (c1, c2, server)"


def test_a_finding_whose_format_is_true_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "f.toml"
    bad.write_text(FINDINGS[0].read_text().replace("\nformat = 1\n", "\nformat = true\n", 1))
    assert "format = true" in bad.read_text()
    assert main(["replay", str(bad)]) == 2
    assert "finding.format: expected 1" in _one_error_line(capsys)


def test_check_determinism_runs_a_scenario_whose_path_has_a_space(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "a space"
    folder.mkdir()
    (folder / "s.toml").write_text((REPO / "src/dst/scenarios/default.toml").read_text())
    assert main(["run", "--scenario", str(folder / "s.toml"), "--seed", "1", "--check-determinism"]) == 0
    assert "gave the same trace" in capsys.readouterr().out


def test_a_client_name_of_thousands_of_digits_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "s.toml"
    bad.write_text(f'[[steps]]\nat = "1s"\nactor = "c{"9" * 5000}"\naction = "acquire"\n')
    assert main(["run", "--scenario", str(bad), "--seed", "1"]) == 2
    assert "steps[0].actor: expected a client name such as 'c1', got 'c9999" in _one_error_line(capsys)


def test_a_report_with_a_lone_surrogate_is_refused_as_the_report_s_fault(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--count", "2", "--no-findings", "--json", "--workers", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps({**report, "scenario": "bad\ud800name"}))  # json.dumps writes it as an escape
    for argv in (["show", str(bad), "-o", str(tmp_path / "page.html")], ["merge", str(bad)]):
        assert main(argv) == 2
        assert f"{bad}: not valid JSON for dst: a string holds a lone surrogate" in _one_error_line(capsys)
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("step, missing", [
    ('at = "1s"\nactor = "net"\naction = "lose"\n', "message: missing: a lose step needs message"),
    ('at = "1s"\nactor = "server"\naction = "slow"\nmessage = "1.2.0"\nround_trip = 1\n',
     "by: missing: a slow step needs message, round_trip and by"),
])
def test_a_pinned_fault_missing_what_it_names_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          step: str, missing: str) -> None:
    bad = tmp_path / "s.toml"
    bad.write_text(f'[[steps]]\nat = "0s"\nactor = "c1"\naction = "acquire"\n\n[[steps]]\n{step}')
    assert main(["run", "--scenario", str(bad), "--seed", "1"]) == 2
    assert _one_error_line(capsys).endswith(f"s.toml: steps[1].{missing}")
