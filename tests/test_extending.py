"""What docs/extending.md promises, proven by doing it: each worked example is added to a copy of dst and run.

The doc marks each example's blocks ``<!-- NAME: PATH -->``. A diff is applied to that file of the copy (its
context must be found exactly once), other code goes at the end of the file it names or into a new file (paths
outside ``src/dst`` are the contributor's own files), and a ``console`` block's commands run in the copy's root
(``dst`` as ``python -m dst``, the copy first on the path) and must print the lines it shows, in order, ``...``
standing for what varies. Then the copy must differ from dst in exactly the files the doc's table counts. Nothing
here imports a module of dst beyond its registries: the examples run through the command line.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import dst
from dst.faults import FAULTS
from dst.invariants import INVARIANTS, SITUATIONS
from dst.reference.bugs import KNOWN_BUGS

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(dst.__file__).resolve().parent
DOC = ROOT / "docs" / "extending.md"
YOUR_SERVICE = ROOT / "docs" / "your-service.md"
MARKED = re.compile(r"<!-- ([\w-]+): (\S+) -->\n```(\w*)\n(.*?)```", re.S)
UNCACHED = shutil.ignore_patterns("__pycache__")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The repository's root as a contributor has it: the package, its scenarios, the asyncio example."""
    shutil.copytree(SRC, tmp_path / "src" / "dst", ignore=UNCACHED)
    (tmp_path / "scenarios").symlink_to(Path("src", "dst", "scenarios"))
    shutil.copytree(ROOT / "examples" / "aio_leases", tmp_path / "examples" / "aio_leases",
                    ignore=shutil.ignore_patterns("__pycache__", "findings"))
    return tmp_path


def add_example(root: Path, name: str, *docs: Path) -> str:
    """Add the example's code to ``root`` as the docs show it; its console session, to run."""
    session = []
    for doc in docs or (DOC,):
        for example, target, lang, body in MARKED.findall(doc.read_text(encoding="utf-8")):
            if example != name:
                continue
            path = root / target
            if target == "console":
                session.append(body)
            elif lang == "diff":
                text = path.read_text(encoding="utf-8")
                for hunk in filter(str.strip, re.split(r"^@@.*\n", body, flags=re.M)):
                    lines = hunk.splitlines()
                    old = "".join(line[1:] + "\n" for line in lines if not line.startswith("+"))
                    new = "".join(line[1:] + "\n" for line in lines if not line.startswith("-"))
                    assert text.count(old) == 1, f"{doc.name}: {name}'s diff of {target} does not fit it:\n{old}"
                    text = text.replace(old, new)
                path.write_text(text, encoding="utf-8")
            elif path.exists():
                path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\n\n\n" + body, encoding="utf-8")
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(body, encoding="utf-8")
    assert session, f"no worked example {name!r} with a console session"
    return "".join(session)


def run_session(root: Path, session: str) -> list[subprocess.CompletedProcess[str]]:
    """Run each ``$ `` command of a console session; each must print the lines shown under it, in order."""
    done = []
    for entry in re.split(r"^\$ ", session, flags=re.M)[1:]:
        command, *shown = entry.splitlines()
        words = shlex.split(command)
        env = {key: value for key, value in os.environ.items() if key != "FORCE_COLOR"}
        env["PYTHONPATH"] = str(root / "src")
        while "=" in words[0]:  # PYTHONPATH=. dst ...: the contributor's folder, before the copy of dst
            key, _, value = words.pop(0).partition("=")
            env[key] = os.pathsep.join([str(root / value), env[key]]) if key == "PYTHONPATH" else value
        assert words[0] == "dst", command
        result = run_dst(root, words[1:], env)
        printed, at = result.stdout + result.stderr, 0
        for line in shown:
            if line.strip(". ") == "":  # "..." alone: lines left out
                continue
            pattern = r"[^\n]*?".join(r"\s+".join(map(re.escape, part.split())) for part in line.split("..."))
            found = re.compile(pattern).search(printed, at)
            assert found, f"`{command}` did not print, after what came before, {line!r}:\n{printed}"
            at = found.end()
        done.append(result)
    return done


def run_dst(root: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``dst ARGS`` in ``root``, with the dst that ``env``'s PYTHONPATH puts first."""
    return subprocess.run([sys.executable, "-m", "dst", *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)


def changed_files(root: Path) -> list[str]:
    """The files of dst the copy in ``root`` adds, removes or changes."""
    def files(top: Path) -> dict[str, bytes]:
        return {path.relative_to(top).as_posix(): path.read_bytes() for path in top.rglob("*")
                if path.is_file() and "__pycache__" not in path.parts}

    copy, original = files(root / "src" / "dst"), files(SRC)
    return sorted(name for name in copy.keys() | original.keys() if copy.get(name) != original.get(name))


def promised(what: str) -> int:
    """The number of dst files docs/extending.md's table says adding ``what`` takes."""
    row = re.search(rf"^\| {what} \| (\d+) \|", DOC.read_text(encoding="utf-8"), re.M)
    assert row, f"docs/extending.md's table has no row for {what!r}"
    return int(row[1])


def finding(root: Path, printed: str) -> dict:
    """The finding file a command's output names."""
    path = re.search(r"\b(\w+/\d{3}-[\w-]+\.toml)", printed)
    assert path, printed
    return tomllib.loads((root / path[1]).read_text(encoding="utf-8"))


@pytest.mark.slow
def test_a_fault_kind_is_one_record_accepted_generated_applied_and_counted_in_both_modes(checkout):
    session = add_example(checkout, "fault-kind")
    changed = changed_files(checkout)
    assert changed == ["faults.py"] and len(changed) == promised("a fault kind")
    coroutine, aio, fuzz = run_session(checkout, session)
    assert (coroutine.returncode, aio.returncode, fuzz.returncode) == (0, 0, 1)  # the fuzzing found the bug
    second = fuzz.stdout[fuzz.stdout.index("wrote found/002-"):]  # the holder that worked on past its expiry
    steps = finding(checkout, second)["steps"]
    assert sorted(step["action"] for step in steps) == ["acquire", "isolate"]


@pytest.mark.slow
def test_an_invariant_is_one_unit_listed_checked_and_broken_by_the_bug_it_exists_for(checkout):
    session = add_example(checkout, "invariant")
    changed = changed_files(checkout)
    assert changed == ["invariants/leases.py"] and len(changed) == promised("an invariant")
    clean, violated, selftest = run_session(checkout, session)
    # selftest fails as the doc says it must: the bug's record does not list the invariant that now catches it.
    assert (clean.returncode, violated.returncode, selftest.returncode) == (0, 1, 1)
    before = run_dst(checkout, violated.args[3:], dict(os.environ, PYTHONPATH=str(SRC.parent)))
    assert before.returncode == 0 and "no violation" in before.stdout  # the run no other invariant objects to


@pytest.mark.slow
def test_a_catalogue_bug_is_three_files_found_by_selftest_and_its_correct_form_never_accused(checkout):
    session = add_example(checkout, "bug")
    changed = changed_files(checkout)
    assert changed == ["reference/bugs.py", "reference/client.py", "scenarios/deadline-from-receipt.toml"]
    assert len(changed) == promised("a catalogue bug")
    (selftest,) = run_session(checkout, session)
    assert selftest.returncode == 0, selftest.stdout
    found = finding(checkout, selftest.stdout)
    assert found["bugs"] == ["deadline-from-receipt"] and found["finding"]["invariant"] == "single-executor"


@pytest.mark.slow
def test_your_own_service_runs_with_no_file_of_dst_changed(checkout):
    session = add_example(checkout, "adapter", YOUR_SERVICE, DOC)  # your-service.md's adapter, this doc's commands
    assert (checkout / "my_limiter.py").is_file()
    run, fuzz = run_session(checkout, session)
    assert (run.returncode, fuzz.returncode) == (0, 1)
    assert changed_files(checkout) == [] and promised("your own service") == 0  # the adapter is outside dst


# Declared once: every entry the registries have now keeps the promise the examples above keep for a new one.

def _files_naming(pattern: str) -> set[str]:
    return {str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if re.search(pattern, p.read_text())}


def test_a_fault_kind_is_named_only_by_its_record_and_the_hosts_that_carry_it_out():
    for kind in FAULTS:
        for word in {kind.name, kind.action}:
            assert _files_naming(rf"[\"']{word}[\"']") <= {"faults.py", "sim/hosts.py", "sim/network.py",
                                                             "sim/store.py", "sim/process.py", "aio/host.py"}, word


def test_an_invariant_id_is_named_only_by_its_unit_the_bugs_that_break_it_and_the_cases_that_test_it():
    for unit in INVARIANTS:
        assert _files_naming(rf"[\"']{unit.id}[\"']") <= {"invariants/leases.py", "invariants/runs.py",
                                                           "invariants/fencing.py", "reference/bugs.py",
                                                           "invariants/situations.py", "reference/service.py"}, unit.id


def test_a_situation_id_is_named_only_by_its_unit():
    for unit in SITUATIONS:
        assert _files_naming(rf"[\"']{unit.id}[\"']") == {"invariants/situations.py"}, unit.id


def test_a_bug_is_its_record_one_model_file_with_its_wrong_line_and_its_scenario():
    for slug in KNOWN_BUGS:
        flag = slug.replace("-", "_")
        readers = _files_naming(rf"\.{flag}\b") - {"reference/bugs.py"}
        assert len(readers) == 1, (slug, readers)
        text = (SRC / readers.pop()).read_text()
        assert re.search(rf"# wrong|wrong \({slug}\)", text), slug
        assert (SRC / "scenarios" / f"{slug}.toml").is_file()
