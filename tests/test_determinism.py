"""Determinism is the product: one seed, one trace, in any process and any PYTHONHASHSEED."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dst.runner import run
from dst.scenario import load_scenario

SRC = Path(__file__).resolve().parents[1] / "src" / "dst"


def test_one_seed_gives_one_trace_across_repeated_runs(default_scenario):
    digests = {run(default_scenario, 11).digest for _ in range(5)}
    assert len(digests) == 1


def test_one_seed_gives_one_trace_in_other_processes_with_other_hash_seeds(default_scenario):
    here = run(default_scenario, 11)
    for hash_seed in ("0", "4242"):
        out = subprocess.run([sys.executable, "-m", "dst", "run", "--seed", "11", "--json"], capture_output=True,
                             text=True, env=dict(os.environ, PYTHONHASHSEED=hash_seed), check=False)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["trace_digest"] == here.digest


def test_the_determinism_check_finds_a_seed_of_a_shipped_scenario_identical_here_and_in_a_fresh_process():
    from dst.explore.determinism import check_determinism

    assert check_determinism(load_scenario("double-release"), 0) is None  # its own dst run command, a violation
    failed = check_determinism(load_scenario(), 1, command=["dst", "run", "--seed", "1", "--bug", "no-such-bug"])
    assert failed is not None and failed.index is None and "no-such-bug" in failed.line()
    assert failed.line().startswith("the second run failed: dst: ")


def test_different_seeds_give_different_runs(default_scenario):
    assert len({run(default_scenario, seed).digest for seed in range(1, 11)}) == 10


def _delays(result) -> dict[str, int]:
    """For each client->server message: the network delay it saw (send to server recv)."""
    sent, delays = {}, {}
    for time, actor, kind, detail in result.trace:
        key = re.search(r"\((\d+\.\d+\.\d+)\)$", detail)
        if key is None:
            continue
        if kind == "send" and "to server" in detail:
            sent[key.group(1)] = time
        elif actor == "server" and kind == "recv" and key.group(1) in sent:
            delays.setdefault(key.group(1), time - sent[key.group(1)])
    return delays


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.data())
def test_deleting_a_step_does_not_reshuffle_the_draws_of_the_others(seed, data):
    scenario = load_scenario()
    full = run(scenario, seed)
    victim = data.draw(st.sampled_from(full.plan))
    smaller = run(scenario, seed, tuple(s for s in full.plan if s is not victim))
    before, after = _delays(full), _delays(smaller)
    common = before.keys() & after.keys()
    assert common
    # The same message (same step id, same number within its job) sees the same network delay.
    assert {k: before[k] for k in common} == {k: after[k] for k in common}


def _forbidden_calls(tree: ast.AST) -> list[str]:
    """Calls that make a run depend on the wall clock, the global random state, or salted hashes."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("hash", "id"):
            found.append(f"{f.id}()")
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id == "time" and f.attr in ("time", "perf_counter", "monotonic", "time_ns"):
                found.append(f"time.{f.attr}()")
            elif f.value.id == "random" and f.attr != "Random":
                found.append(f"random.{f.attr}()")
            elif f.value.id in ("datetime", "date") and f.attr in ("now", "today", "utcnow"):
                found.append(f"{f.value.id}.{f.attr}()")
    return found


def test_the_simulator_core_reads_no_wall_clock_and_no_global_random():
    # Only the faces and the campaign drivers may read a clock (to time a run, to keep a budget, to carry a
    # budget's deadline to a cluster's worker), the watchdog's thread (to stop a run that stands still), and the
    # parents of processes that run a model (a forked seed's, dst's supervisor: to kill what will not stop).
    # The sandbox seeds and puts back the global random's state, and hands ctypes the addresses (id()) of the
    # functions it redirects; the aiosqlite drop-in's clock reads time.time(), which the sandbox makes virtual
    # during a run, for SQLite's 'now', and the Redis drop-in reads it as fakeredis does, in Redis's own process.
    timers = {"terminal.py", "fuzz.py", "pool.py", "selftest.py", "cluster.py", "watchdog.py", "isolate.py",
              "_supervise.py"}
    aio = {"sandbox/__init__.py", "sandbox/cfunctions.py", "sandbox/patches.py", "aio/stores/sqlite/clock.py",
           "aio/stores/redis/server.py", "aio/stores/redis/commands.py"}
    core = [p for p in sorted(SRC.rglob("*.py")) if p.name not in timers and SRC / "cli" not in p.parents
            and p.relative_to(SRC).as_posix() not in aio]
    assert len(core) > 10
    offenders = {p.name: calls for p in core if (calls := _forbidden_calls(ast.parse(p.read_text())))}
    assert offenders == {}


def test_the_forbidden_call_finder_finds_them():
    code = "import time, random\ntime.time()\nrandom.randint(1, 2)\nhash('x')\nrandom.Random(3)\n"
    assert _forbidden_calls(ast.parse(code)) == ["time.time()", "random.randint()", "hash()"]
