"""dst fuzz --cluster: a campaign on a Dask cluster reports exactly what one local worker reports; a cluster
that cannot be used is one line and exit 2, quickly; a signal stops it as it stops a local campaign, with the
seeds already done kept in order. A real cluster on loopback: a scheduler and two worker processes, started
here and torn down however the tests end."""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from dst.cli import main
from dst.explore import cluster as cluster_module
from dst.explore import record as record_module

CAMPAIGN = ["fuzz", "--scenario", "double-release", "--json", "--no-findings"]
CLEAN = ["fuzz", "--scenario", "default", "--json", "--no-findings"]  # the correct model: stopped, it exits 130/143
WALL_CLOCK = ("wall_seconds", "seeds_per_second")  # the only fields that may differ between two runs


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """A local cluster's address; its worker processes are checked to be gone after it is closed."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as local:
        with Client(local, set_as_default=False) as client:
            workers = list(client.run(os.getpid).values())
        yield local.scheduler_address
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in workers), "the cluster's workers outlived it"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def fuzz(argv: list[str], capsys: pytest.CaptureFixture[str],
         campaign: list[str] = CAMPAIGN) -> tuple[int, dict[str, Any]]:
    code = main(campaign + argv)
    report = json.loads(capsys.readouterr().out)
    for field in WALL_CLOCK:
        report.pop(field)
    return code, report


@pytest.mark.slow
def test_a_cluster_campaign_reports_exactly_what_one_local_worker_does(scheduler, capsys):
    on_cluster = fuzz(["--seeds", "1:200", "--cluster", scheduler], capsys)
    local = fuzz(["--seeds", "1:200", "--workers", "1"], capsys)
    assert on_cluster == local
    code, report = on_cluster
    assert code == 1 and report["violations"] > 0 and report["seeds_run"] == 199


def test_a_time_budget_on_a_cluster_runs_a_prefix_of_the_seeds(scheduler, capsys):
    # The deadline crosses to the workers' clocks: in the past there, no seed would run; never, none would stop.
    began = time.monotonic()
    code, report = fuzz(["--time-budget", "1s", "--cluster", scheduler], capsys)
    assert time.monotonic() - began < 10
    assert report["seeds_run"] > 0 and report["seeds"]["last_run"] == report["seeds_run"]


def one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(CAMPAIGN + ["--seeds", "1:10"] + argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_address_nothing_listens_on_is_one_line_and_exit_2_within_the_connect_timeout(capsys, monkeypatch):
    assert cluster_module.CONNECT_TIMEOUT <= 10  # a few seconds, then the user is told
    monkeypatch.setattr(cluster_module, "CONNECT_TIMEOUT", 1.0)
    address = f"tcp://127.0.0.1:{free_port()}"
    began = time.monotonic()
    err = one_line_exit_2(["--cluster", address], capsys)
    assert time.monotonic() - began < 6
    assert err.startswith(f"dst: --cluster {address}: cannot connect")


def test_a_port_that_accepts_but_is_no_scheduler_is_one_line_and_exit_2_too(capsys, monkeypatch):
    monkeypatch.setattr(cluster_module, "CONNECT_TIMEOUT", 1.0)
    with socket.socket() as silent:  # accepts connections (the backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        began = time.monotonic()
        err = one_line_exit_2(["--cluster", address], capsys)
    assert time.monotonic() - began < 6
    assert err == f"dst: --cluster {address}: no Dask scheduler answered within 2 s\n"


@pytest.mark.parametrize("address, said", [
    ("scheduler", "--cluster: expected a scheduler's address such as tcp://HOST:8786, got 'scheduler'"),
    ("http://127.0.0.1:8786", "--cluster: expected a scheduler's address such as tcp://HOST:8786"),
    ("", "--cluster: expected a scheduler's address such as tcp://HOST:8786, got ''"),
    ("tls://127.0.0.1:8786", "--cluster tls://127.0.0.1:8786: cannot connect: TypeError: TLS expects"),  # no TLS set up
], ids=["a-name", "http", "empty", "tls"])
def test_an_address_dask_cannot_use_is_one_line_and_exit_2_at_once(address, said, capsys):
    began = time.monotonic()
    err = one_line_exit_2(["--cluster", address], capsys)
    assert time.monotonic() - began < 3
    assert err.startswith(f"dst: {said}")


def test_without_the_extra_cluster_says_how_to_install_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now fails, as when it is not installed
    err = one_line_exit_2(["--cluster", "tcp://127.0.0.1:8786"], capsys)
    assert err == 'dst: --cluster needs the cluster extra: pip install "dst-harness[cluster]"\n'


def test_cluster_and_workers_together_are_a_usage_error(capsys):
    err = one_line_exit_2(["--cluster", "tcp://127.0.0.1:8786", "--workers", "2"], capsys)
    assert "--cluster and --workers" in err


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals as a terminal and a CI job send them")
@pytest.mark.parametrize("how, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_a_cluster_campaign_keeping_the_seeds_done_in_order(scheduler, how, code, capsys):
    proc = subprocess.Popen([sys.executable, "-m", "dst", *CLEAN, "--count", "100000", "--cluster", scheduler],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_results(scheduler, proc)  # its first seeds taken (however busy the machine is)
        began = time.monotonic()
        os.killpg(proc.pid, how)  # SIGINT to the whole group, as Ctrl-C in a terminal sends it
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert time.monotonic() - began < 5
    assert out, err  # the summary of the seeds done, printed as it stopped
    stopped = json.loads(out)
    assert stopped["interrupted"] and stopped["seeds_run"] > 0
    assert stopped["seeds"]["last_run"] == stopped["seeds_run"]  # seeds 1..n: nothing skipped, nothing out of order
    n = stopped["seeds_run"]
    _, local = fuzz(["--seeds", f"1:{n + 1}", "--workers", "1"], capsys, CLEAN)
    assert (stopped["events"], stopped["unjudged"]) == (local["events"], local["unjudged"])


def _wait_for_results(address: str, proc: subprocess.Popen[str]) -> None:
    """Until the campaign has taken the outcomes of its first chunk (or 60 s pass). It keeps ``2 * workers``
    chunks in flight and hands a new one out only once the oldest one's outcomes are taken, in seed order: a
    chunk more than that window on the scheduler says the first one is in. (Chunks merely finished on the
    cluster say nothing: the first may still be running while later ones are done.)"""
    from distributed import Client

    with Client(address, set_as_default=False) as client:
        window = 2 * sum(client.nthreads().values())

        def keys() -> set[str]:  # the tasks the scheduler has been given lately (its log is bounded)
            return set(client.run_on_scheduler(lambda dask_scheduler: [
                str(entry[0]) for entry in dask_scheduler.transition_log]))

        earlier, deadline = keys(), time.monotonic() + 60
        while len(keys() - earlier) <= window and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)


class _FailingCluster:
    """A cluster that runs chunks here until it loses its scheduler after ``good`` of them, as a real one
    whose scheduler dies mid-campaign does (its futures fail with ClusterError)."""

    workers = 1
    address = "tcp://127.0.0.1:1"

    def __init__(self, good: int) -> None:
        self.good = good
        self.closed = False

    def submit(self, fn, /, *args, **kwargs):
        from concurrent.futures import Future

        future: Future = Future()
        if self.good > 0:
            self.good -= 1
            future.set_result(fn(*args, **kwargs))
        else:
            future.set_exception(cluster_module.ClusterError(f"--cluster {self.address}: lost the scheduler"))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_a_cluster_lost_mid_campaign_still_reports_what_ran_and_writes_its_findings(tmp_path, capsys, monkeypatch):
    failing = _FailingCluster(good=3)
    monkeypatch.setattr("dst.cli.campaigns._cluster", lambda args: failing)
    # The findings are written, minimized or not: what is under test is the report, not the minimizer (a small budget)
    monkeypatch.setattr("dst.explore.recorder.minimize", functools.partial(record_module.minimize, max_runs=20))
    code = main(["fuzz", "--scenario", "double-release", "--json", "--count", "1000", "--cluster", failing.address,
                 "--findings", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and failing.closed
    assert err.strip().splitlines()[-1] == f"dst: --cluster {failing.address}: lost the scheduler (the report above " \
                                           "is of the seeds it ran before)"
    report = json.loads(out)
    assert report["interrupted"] and report["seeds_run"] == report["seeds"]["last_run"] == 24  # 3 chunks of 8
    assert report["violations"] > 0 and report["findings"]
    assert all(Path(f["path"]).exists() for f in report["findings"])
