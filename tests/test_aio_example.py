"""The asyncio example: a FastAPI + aiosqlite lease service with no dst in it, under every command."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import pytest

from dst.runner import run
from dst.scenario import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "aio_leases"


@pytest.fixture(autouse=True)
def _from_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the model's name resolves from the repository's root, as the docs run it


def scripted(steps: list[dict[str, Any]], bugs: list[str] | None = None, **model: Any) -> Any:
    return parse_scenario({
        "steps": steps, "bugs": bugs or [],
        "run": {"duration": "60s", "quiet": "150s"},
        "model": {"impl": "examples.aio_leases:model", "limits": {"db": 1}, "store_latency": ["5ms", "5ms"],
                  **model},
        "workload": {"clients": 2, "jobs": 0},
        "network": {"latency": ["10ms", "10ms"], "loss": 0.0, "duplicate": 0.0},
    }, "<test>")


def test_the_service_knows_nothing_of_dst():
    for path in (EXAMPLE / "service").glob("*.py"):
        assert not re.search(r"^\s*(import|from)\s+dst\b", path.read_text(), re.M), path


@pytest.mark.slow
def test_the_default_scenario_runs_clean_and_gives_the_same_bytes_twice():
    scenario = load_scenario(str(EXAMPLE / "scenarios" / "default.toml"))
    first, second = run(scenario, 1), run(scenario, 1)
    assert first.ok and first.jobs.get("done", 0) > 10
    assert first.digest == second.digest


def test_a_restarted_server_keeps_the_database_file_and_loses_its_memory():
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "40s"},
             {"at": "5s", "actor": "server", "action": "restart", "down": "2s"}]
    kept = run(scripted(steps), 1)
    assert kept.ok and kept.jobs == {"done": 1}  # the lease was in the file: renewed after the restart, released
    assert [e[3] for e in kept.trace if e[2] == "boot"] == ["epoch 0", "epoch 1"]
    lost = run(scripted(steps, bugs=["leases-in-memory"]), 1)  # the same story, the leases in process memory
    assert lost.violation is not None and lost.violation.invariant == "slot-accounting"


def test_two_acquires_at_once_find_the_check_then_act_race():
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "0s", "actor": "c2", "action": "acquire", "work": "1s"}]
    assert run(scripted(steps), 1).ok
    race = run(scripted(steps, bugs=["check-then-act"]), 1)
    assert race.violation is not None and race.violation.invariant == "capacity"


def test_the_reapers_work_is_in_the_story():
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "50s"},
             {"at": "1s", "actor": "c1", "action": "crash"}]
    result = run(scripted(steps, ttl="10s", reaper_interval="5s"), 1)
    assert result.ok
    removed = [e for e in result.trace if e[2] == "store" and "removed" in e[3]]
    assert removed and removed[0][0] >= 10_000  # the crashed holder's lease, reaped after its TTL


def test_dst_show_draws_the_leases_the_store_held():
    from dst.present.shapes import lease_bars

    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "20s"},
             {"at": "1s", "actor": "c2", "action": "acquire", "work": "1s"}]
    result = run(scripted(steps, ttl="10s", reaper_interval="5s"), 1)
    bars = lease_bars(result.raw_trace, result.virtual_time)
    first = bars[0]
    assert (first.lease, first.holder, first.limit) == ("L1", "c1", "db")
    assert len(first.renewals) >= 3 and first.ended == "removed"  # renewed every 5 s, then released
    assert bars[1].holder == "c2" and bars[1].start > first.end  # c2 waited for the slot


def test_a_server_crash_mid_transaction_rolls_it_back_and_frees_the_lock():
    # Statements 50 ms apart: the acquire's transaction has taken the write lock and incremented the count
    # when the server dies at 150 ms. SQLite rolls it back: no slot is counted without its lease, and the
    # restarted server's transactions get the lock (the client's retry is granted).
    steps = [{"at": "0s", "actor": "c1", "action": "acquire", "work": "1s"},
             {"at": "150ms", "actor": "server", "action": "restart", "down": "1s"}]
    result = run(scripted(steps, store_latency=["50ms", "50ms"]), 1)
    assert result.ok and result.jobs == {"done": 1}
    stored = [e for e in result.trace if e[2] == "store" and "stored" in e[3]]
    assert len(stored) == 1 and stored[0][0] > 1150  # the one lease: granted to the retry, after the restart


def test_a_holder_paused_after_its_renewal_was_answered_asks_again_before_working():
    # Found by dst's check of the correct form (selftest): c1 renews at 376 s and is paused until 406 s; the answer
    # (valid until 396 s) waits in its socket. It woke past that deadline and worked under a lease the reaper had
    # removed at 397 s. The client library now checks the deadline the answer set before it works on.
    import attrs

    from dst.runner.swarm import swarm

    scenario = attrs.evolve(load_scenario(str(EXAMPLE / "scenarios" / "reaper-no-recheck.toml")), bugs=())
    result = run(swarm(scenario, 17), 17)
    assert result.ok, result.violation


@pytest.mark.slow
def test_one_seed_gives_the_same_bytes_in_a_fresh_process_with_another_hash_seed():
    import json
    import os
    import subprocess
    import sys

    scenario = str(EXAMPLE / "scenarios" / "default.toml")
    digests = set()
    for hash_seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-m", "dst", "run", "--seed", "3", "--scenario", scenario, "--json"],
                              cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED=hash_seed))
        assert done.returncode == 0, done.stderr
        digests.add(json.loads(done.stdout)["trace_digest"])
    assert digests == {run(load_scenario(scenario), 3).digest}


@pytest.mark.slow
def test_a_reaper_that_deletes_a_just_renewed_lease_is_caught_at_the_delete_and_releases_are_not():
    from dst.runner.swarm import swarm

    scenario = load_scenario(str(EXAMPLE / "scenarios" / "reaper-no-recheck.toml"))
    result = run(swarm(scenario, 1), 1)
    assert result.violation is not None and result.violation.invariant == "removed-before-expiry"
    assert " by the server's own work (boot." in result.violation.message  # the reaper: a task of the boot's
    # The correct form, its holders releasing their own valid leases all along: never accused.
    for seed in (1, 2, 3):
        correct = run(attrs.evolve(scenario, bugs=()), seed)
        assert correct.ok, correct.violation
        assert "removed-before-expiry" in correct.invariants
        assert any(" removed (" in text for _, _, kind, text in correct.trace if kind == "store")


@pytest.mark.slow
def test_every_shipped_scenario_of_a_default_campaign_has_a_command_that_runs_its_seed_again(capsys):
    import json

    from dst.cli import main
    from dst.explore.steer import default_campaign
    from dst.runner.reproduce import reproduce
    from dst.runner.swarm import swarm

    roster = default_campaign(load_scenario(None, model="examples.aio_leases:model")).scenarios
    shipped = [s for s in roster if s.source.endswith(".toml")]
    assert len(shipped) >= 6
    commands = {s.name: reproduce(swarm(s, 3), 3) for s in shipped}
    assert all(commands.values()), commands  # none says "the scenario file changed"
    command = commands["reaper-no-recheck, aimed"]
    assert "--scenario examples/aio_leases/scenarios/reaper-no-recheck.toml" in command and "--no-bugs" in command
    scenario = next(s for s in shipped if s.name == "reaper-no-recheck, aimed")
    assert main([*command.split()[1:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace_digest"] == run(swarm(scenario, 3), 3).digest


def test_the_slips_benchmark_still_edits_the_service():
    """bench/aio_slips.py writes each slip into a copy of this example by replacing a piece of its code: each piece
    must still be there (every place it is: reap-ahead edits the reaper's read and its re-check), or the benchmark
    measures another program than it says."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("aio_slips", ROOT / "bench" / "aio_slips.py")
    assert spec is not None and spec.loader is not None
    slips = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(slips)
    for slip in slips.SLIPS:
        text = (EXAMPLE / "service" / slip.file).read_text()
        assert slip.old in text, slip.slug
        compile(text.replace(slip.old, slip.new), slip.file, "exec")
