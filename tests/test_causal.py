"""The causal slice: a violation shows the events that led to it, not the whole run.

On every shipped finding the slice keeps every step of the finding and the conversation the
violation was detected in, and is far shorter than the run; what it leaves out is what does not
touch the leases, runs, seats and clients the violation names (polling that was denied, reads that
came back empty).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dst.causal import STEP_KINDS, causal_slice
from dst.cli import main
from dst.findings import read, replay

REPO = Path(__file__).resolve().parents[1]
FINDINGS = sorted((REPO / "findings").glob("[0-9][0-9][0-9]-*.toml"))


@pytest.fixture(scope="module")
def replayed() -> dict[str, object]:
    return {path.name: replay(read(path)).result for path in FINDINGS}


def test_every_finding_keeps_its_steps_and_its_conversation(replayed) -> None:
    for name, result in replayed.items():
        led = result.causal(every_step=True)
        upto = result.trace[:result.decided]  # the trace up to the violation (the run goes on for its consequences)
        assert led and set(led) <= set(upto), name
        assert [e for e in upto if e in set(led)] == list(led), f"{name}: not in trace order"
        steps = [e for e in upto if e[2] in STEP_KINDS]
        assert all(step in led for step in steps), f"{name}: a step of the finding is missing"
        v = result.violation
        if v.during is not None and v.during[0].isdigit():  # a request's (a background handler sends no message)
            assert any(f"({v.during})" in e[3] or f"({v.during}r)" in e[3] for e in led), name


def test_the_slices_of_the_shipped_findings_are_five_times_shorter(replayed) -> None:
    whole = sum(len(result.trace[:result.decided]) for result in replayed.values())  # up to the violation
    sliced = sum(len(result.causal(every_step=True)) for result in replayed.values())
    assert whole >= 5 * sliced, (whole, sliced)


def test_denied_polling_is_left_out_and_the_grant_kept(replayed) -> None:
    result = replayed["009-two-leases-on-one-seat-after-a-pause.toml"]
    led = result.causal(every_step=True)
    polls = [e for e in result.trace if e[1] == "c2" and e[2] == "send"]
    assert len(polls) > 20  # c2 asked again and again while c1 held the seat
    kept = [e for e in led if e[1] == "c2" and e[2] == "send"]
    assert len(kept) == 1 and "acquire" in kept[0][3]  # only the request that was granted L2
    assert any("granted L2" in e[3] for e in led) and any("granted L1" in e[3] for e in led)
    assert any(e[2] == "pause" and e[1] == "c1" for e in led)


def test_a_run_of_empty_reads_leaves_only_the_run_that_was_lost(replayed) -> None:
    result = replayed["017-run-never-acknowledged-after-a-client-restart.toml"]
    led = result.causal(every_step=True)
    assert len(result.trace) > 1000 and len(led) < 20
    assert not any("empty" in e[3] for e in led)
    assert any("delivered run 17" in e[3] for e in led) and any(e[2] == "restart" for e in led)


def test_without_names_the_slice_is_the_steps_alone() -> None:
    trace = [(0, "server", "boot", "epoch 0"), (1, "c1", "send", "acquire db slots=1 to server (1.1.0)"),
             (2, "c1", "job", "step 1")]
    assert causal_slice(trace, "count(db)=2 but live leases own 1 slot(s)") == [0]
    assert causal_slice(trace, "count(db)=2", every_step=True) == [0, 2]
    assert causal_slice(trace, "count(db)=2", during="1.1.0") == [0, 1, 2]  # c1 joins by its conversation


# --- what users see ------------------------------------------------------------------------------

def test_replay_shows_the_slice_by_default_and_everything_with_all(capsys) -> None:
    path = str(REPO / "findings" / "017-run-never-acknowledged-after-a-client-restart.toml")
    assert main(["replay", path]) == 0
    default = capsys.readouterr().out.splitlines()
    assert main(["replay", path, "--all"]) == 0
    everything = capsys.readouterr().out.splitlines()
    assert len(everything) > 5 * len(default)
    assert any("events" in line and "of the run's" in line for line in default)
    assert main(["replay", path, "--actor", "user"]) == 0
    user = [line for line in capsys.readouterr().out.splitlines() if " user " in line]
    assert user and all("user send" in line or "user recv" in line for line in user)
    assert main(["replay", path, "--all", "--actor", "c1", "--last", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(1 for line in lines if "c1 send" in line or "c1 recv" in line) == 3


def test_the_default_replay_of_all_findings_is_five_times_shorter(capsys) -> None:
    files = [str(p) for p in FINDINGS]
    assert main(["replay", *files]) == 0
    default = len(capsys.readouterr().out.splitlines())
    assert main(["replay", "--all", *files]) == 0
    assert len(capsys.readouterr().out.splitlines()) >= 5 * default


def test_run_prints_the_slice_and_json_carries_it(capsys) -> None:
    argv = ["run", "--seed", "3", "--scenario", "double-release", "--swarm"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "events that led to it" in out and "duplicated" in out
    assert main([*argv, "--json"]) == 1
    violation = json.loads(capsys.readouterr().out)["violation"]
    assert violation["during"] and violation["slice"]
    assert any("release L3" in e[3] for e in violation["slice"])
