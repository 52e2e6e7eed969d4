"""A campaign stops at once on SIGINT or SIGTERM, keeps what it found, and leaves no process behind,
however it is stopped (SIGKILL included). Real signals, real worker processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SLOW = """
[workload]
clients = 60
jobs = 30
[run]
duration = "3000s"
[model]
limits = { db = 20 }
"""


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for kid in map(int, kids):
            found.add(kid)
            todo.append(kid)
    return found


def alive(pid: int) -> bool:
    try:
        state = [line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State:")]
    except OSError:
        return False
    return bool(state) and "Z" not in state[0].split()[1]  # a zombie is dead; only its parent's reaping is left


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def start(tmp_path: Path, workers: int = 2) -> tuple[subprocess.Popen[str], set[int]]:
    scenario = tmp_path / "slow.toml"
    scenario.write_text(SLOW)
    proc = subprocess.Popen([sys.executable, "-m", "dst", "fuzz", "--scenario", str(scenario), "--count", "1000",
                             "--workers", str(workers), "--no-findings", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert wait_for(lambda: len(descendants(proc.pid)) >= (workers if workers > 1 else 0), 30), "no workers"
    time.sleep(1.0)  # the workers are in the middle of their first seeds (each takes seconds)
    return proc, descendants(proc.pid)


@pytest.mark.parametrize("how, code, pool", [("SIGTERM", 143, 2), ("SIGINT", 130, 2), ("SIGTERM", 143, 1),
                                             ("SIGINT", 130, 1)])
def test_a_signal_stops_the_campaign_at_once_with_its_summary_and_no_process_left(tmp_path, how, code, pool):
    proc, workers = start(tmp_path, pool)
    began = time.monotonic()
    if how == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the whole process group
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert time.monotonic() - began < 10  # not after the chunks in flight (each seed takes seconds)
    report = json.loads(out)
    assert report["interrupted"] and "seeds_run" in report
    assert wait_for(lambda: not any(alive(pid) for pid in workers), 10), "workers outlived the campaign"


def test_sigkill_to_the_campaign_takes_its_workers_with_it(tmp_path):
    proc, workers = start(tmp_path)
    proc.kill()
    proc.wait(timeout=10)
    assert wait_for(lambda: not any(alive(pid) for pid in workers), 10), "workers outlived a killed campaign"


@pytest.mark.parametrize("pool", [1, 2])
def test_a_terminated_campaign_leaves_no_temp_file_of_a_model_behind(tmp_path, pool):
    temp = tmp_path / "tmp"
    temp.mkdir()
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-m", "dst", "fuzz", "--scenario",
                             str(root / "examples/sqlite_leases/scenarios/default.toml"), "--count", "100000",
                             "--workers", str(pool), "--no-findings", "--json"], cwd=root, env={**os.environ,
                            "TMPDIR": str(temp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert wait_for(lambda: any(temp.iterdir()), 30), "the model never opened its files"
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert json.loads(out)["interrupted"]
    assert wait_for(lambda: not any(temp.iterdir()), 10), sorted(p.name for p in temp.iterdir())


@pytest.mark.slow
def test_sigterm_to_the_process_group_while_findings_are_written_ends_cleanly(tmp_path):
    """A cancelled CI job sends SIGTERM to the whole group while the campaign minimizes what it found: the
    workers die first, the minimizing in hand ends with its smallest plan so far, and the campaign still
    prints its report, with the findings written whole."""
    findings = tmp_path / "findings"
    proc = subprocess.Popen([sys.executable, "-m", "dst", "fuzz", "--scenario", "double-release", "--count", "2000",
                             "--workers", "2", "--findings", str(findings), "--json"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert wait_for(lambda: any(findings.glob("*.toml")), 60), "no finding was written"
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "Traceback" not in err and proc.returncode in (1, 143), err
    report = json.loads(out)
    assert report["interrupted"] and report["seeds_run"] > 0
    written = sorted(findings.glob("*.toml"))
    assert [Path(f["path"]).name for f in report["findings"]] == [p.name for p in written]
    replayed = subprocess.run([sys.executable, "-m", "dst", "replay", "--quiet", *map(str, written)],
                              capture_output=True, text=True)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


SLEEPER = '''
"""The reference model, whose server sleeps in C (time.sleep) on its first acquire: a seed that never ends."""
import time
from pathlib import Path
from dst.reference import model as reference
from dst import sut
from dst.reference.protocol import Acquire


def build(env):
    system = reference.build(env)
    handlers = system.service.handlers()

    async def acquire(req):
        Path(__file__).with_suffix(".asleep").touch()  # the test's sign that the seed has begun its sleep
        time.sleep(600)
        return await handlers[Acquire](req)

    system.service.handlers = lambda: {**handlers, Acquire: acquire}
    return system


model = sut.Model(build, options=reference.options)  # the reference model's options, so its build runs
'''


def test_a_stopped_campaign_keeps_the_seeds_a_worker_finished_before_the_one_it_was_stopped_in(tmp_path, monkeypatch):
    import threading

    from dst.explore.fuzz import campaign
    from dst.explore.pool import StopRequest, Terminated
    from dst.scenario import load_scenario

    (tmp_path / "sleeper.py").write_text(SLEEPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    fast, slow = load_scenario(None), load_scenario(None, model="sleeper:model")
    stop = StopRequest()

    def terminate_once_asleep() -> None:  # as a SIGTERM to the campaign would, once seed 1 is stuck
        while not (tmp_path / "sleeper.asleep").exists():
            time.sleep(0.05)
        stop(signal.SIGTERM, None)

    threading.Thread(target=terminate_once_asleep, daemon=True).start()
    seeds: list[int] = []
    # The first seeds take the scenarios in turns, two seeds a turn: two run the reference model, the third the
    # sleeper. The first chunk (eight seeds, one worker's task) finishes 2 and 4, then sleeps in 1.
    with pytest.raises(Terminated):
        for outcome in campaign((fast, slow, fast), iter([2, 4, 1, 6, 8, 10, 12, 14, 16]), use_swarm=False,
                                workers=2, stop=stop):
            seeds.append(outcome.seed)
    assert seeds == [2, 4]


@pytest.mark.parametrize("how", ["blocked", "ignored"])
def test_a_campaign_started_with_ctrl_c_blocked_or_ignored_still_stops_on_it(tmp_path, how):
    # A process inherits its parent's blocked signals (a parent inside a run's build or close holds them) and an
    # ignored Ctrl-C (a shell starting a background command): dst takes Ctrl-C back, or the campaign would run on.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM}) if how == "blocked" else None
    was = signal.signal(signal.SIGINT, signal.SIG_IGN) if how == "ignored" else None
    try:
        proc, _ = start(tmp_path, 1)
    finally:
        if held is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        if was is not None:
            signal.signal(signal.SIGINT, was)
    os.killpg(proc.pid, signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130


@pytest.mark.parametrize("after", [0.1, 0.2, 0.4])
def test_ctrl_c_while_dst_is_still_loading_ends_it_quietly(after):
    # Loading dst's modules takes a moment; Ctrl-C in it printed a traceback from whichever import it landed in.
    proc = subprocess.Popen([sys.executable, "-m", "dst", "fuzz", "--count", "100000", "--no-findings"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(after)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    # 130 as after Ctrl-C anywhere else (or killed by it, if it landed before Python had started at all).
    assert "Traceback" not in err and proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)


def test_an_exception_raised_into_the_hold_as_it_begins_leaves_ctrl_c_unblocked(monkeypatch):
    # The watchdog raises Stalled into the running thread between any two bytecodes: here, after the signals were
    # blocked and before the old mask was noted. No __exit__ follows a failed __enter__, so the hold undoes itself.
    from dst.errors import Stalled
    from dst.runner import hold

    real = signal.pthread_sigmask

    def blocks_then_is_interrupted(how, mask):
        real(how, mask)
        if how == signal.SIG_BLOCK:
            raise Stalled("raised into the thread")
        return set()

    before = real(signal.SIG_BLOCK, [])
    monkeypatch.setattr(hold.signal, "pthread_sigmask", blocks_then_is_interrupted)
    with pytest.raises(Stalled):
        with hold.SignalsHeld():
            pass
    monkeypatch.undo()
    assert real(signal.SIG_BLOCK, []) == before and signal.SIGINT not in before


_EVERY_MOMENT = """
import signal, sys
from dst.explore import pool

class Hung(Exception):
    pass

def hung(signum, frame):
    raise Hung

told = []
pool.stopping = lambda: told.append("stop")
signal.signal(signal.SIGALRM, hung)
moment = 0
while True:
    stop, events = pool.StopRequest(), [0]

    def second_signal_here(frame, event, arg):
        events[0] += 1
        if events[0] == moment:
            sys.settrace(None)
            stop(signal.SIGINT, None)
        return second_signal_here

    told.clear()
    signal.setitimer(signal.ITIMER_REAL, 5)
    try:
        sys.settrace(second_signal_here)
        stop(signal.SIGTERM, None)
    except Hung:
        sys.exit(f"the second signal hung the handler at trace event {moment}")
    finally:
        sys.settrace(None)
        signal.setitimer(signal.ITIMER_REAL, 0)
    if not (stop.is_set() and told == ["stop"] and stop.signum in (signal.SIGTERM, signal.SIGINT)):
        sys.exit(f"at trace event {moment}: noted {stop.signum}, stopping called {len(told)} times")
    if moment > events[0]:
        break  # every moment of the first handler has had a second signal in it
    moment += 1
print(moment)
"""


def test_a_second_signal_arriving_anywhere_in_the_first_ones_handler_is_noted_once_and_hangs_nothing():
    # A SIGTERM reaches a campaign twice (its process group's, and the one the supervisor passes on), and Python
    # runs the second handler at whatever bytecode the first has reached. Every such moment is tried in turn:
    # a lock held there by the first would hang the second for good, and the supervisor would kill dst. Both
    # run in the main thread, as signal handlers do, and a timer's signal breaks a hang (a lock's wait gives
    # way to it). A fresh interpreter: Python 3.11's tracing can spin at a call after other tests ran threads.
    ran = subprocess.run([sys.executable, "-c", _EVERY_MOMENT], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert int(ran.stdout) > 2  # the handler ran a few traced steps, each tried
