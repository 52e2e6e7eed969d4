"""No model takes a campaign down: whatever its code does to the process it runs in (exits, swallows every
interrupt, blocks in C, runs out of memory), dst ends in bounded time with one line and the right exit code, and a
campaign reports the seeds it ran. Each model is docs/your-service.md's adapter with one slip written in, run by
``python -m dst`` as a user runs it."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_model_errors import RENEW_LINE, adapter

from dst.cli import EXIT_MODEL_ERROR, EXIT_INTERRUPTED, EXIT_TERMINATED

SLIPS = {
    # A renewal that ends the process at some moments: most seeds never meet it.
    "exits_sometimes": (RENEW_LINE, "        if self.clock.now % 97 == 13:\n            import os\n"
                                    "            os._exit(9)\n" + RENEW_LINE),
    # A module that ends the process as it is imported.
    "exits_at_import": ("from dst import sut\n", "import os\nos._exit(0)\nfrom dst import sut\n"),
    # A renewal that waits forever and swallows whatever would stop it, Ctrl-C and the watchdog alike.
    "swallows_everything": (RENEW_LINE, "        import time\n        while True:\n            try:\n"
                                        "                time.sleep(0.05)\n            except BaseException:\n"
                                        "                pass\n" + RENEW_LINE),
    # A renewal that blocks in C for good: a recv on a socket made at import, which no one ever writes.
    "blocks_in_c": (RENEW_LINE, "        _QUIET.recv(1)\n" + RENEW_LINE),
    # A renewal that allocates without bound.
    "allocates": (RENEW_LINE, "        hoard = []\n        while True:\n            hoard.append(bytearray(1 << 26))\n"
                              + RENEW_LINE),
}
_SOCKETS = "import socket\n_QUIET, _OTHER = socket.socketpair()\n"


@pytest.fixture
def models(tmp_path: Path) -> Path:
    source = adapter()
    for name, (old, new) in SLIPS.items():
        assert old in source, f"{name}: the adapter no longer has {old!r}"
        text = source.replace(old, new, 1)
        (tmp_path / f"{name}.py").write_text(_SOCKETS + text if name == "blocks_in_c" else text)
    return tmp_path


def dst(folder: Path, *args: str, timeout: float = 120, **options: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), *sys.path])}
    return subprocess.run([sys.executable, "-m", "dst", *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout, **options)  # type: ignore[call-overload]


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_model_that_ends_its_process_on_some_seeds_is_their_model_error_and_the_campaign_reports(models, workers):
    done = dst(models, "fuzz", "--model", "exits_sometimes:model", "--count", "24", "--no-findings", "--workers",
               workers, "--json")
    assert done.returncode == EXIT_MODEL_ERROR, done.stderr
    report = json.loads(done.stdout)
    assert report["seeds_run"] == 24 and report["model_errors"] >= 1, report
    assert "exit status 9" in done.stdout  # the seed's model error says what the model did


def test_a_model_that_ends_the_process_as_it_is_imported_gets_one_line(models):
    done = dst(models, "run", "--seed", "1", "--model", "exits_at_import:model")
    assert done.returncode == EXIT_MODEL_ERROR
    assert done.stderr.strip().splitlines() == ["dst: the model's code ended dst's process (exit status 0) before dst "
                                                "had finished: a model must not exit (os._exit, or a C library's exit)"]


@pytest.mark.slow
def test_ctrl_c_ends_dst_within_its_grace_even_if_the_model_swallows_every_interrupt(models):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(models), *sys.path])}
    process = subprocess.Popen([sys.executable, "-m", "dst", "run", "--seed", "1", "--model", "swallows_everything:model"],
                               cwd=models, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    time.sleep(3)  # well into the run: the first renewal is at about 45 s of virtual time, an instant of real time
    began = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)  # as the terminal sends it: to the whole process group
    _, err = process.communicate(timeout=30)
    assert time.monotonic() - began < 4  # the grace (2 s), and the time to say so
    assert process.returncode == EXIT_INTERRUPTED
    assert err.strip().splitlines()[-1] == "dst: interrupted; the model's code did not stop within 2 s, and its process was killed"


@pytest.mark.slow
def test_a_campaign_whose_model_blocks_in_c_ends_within_its_time_budget_and_reports(models):
    began = time.monotonic()
    done = dst(models, "fuzz", "--model", "blocks_in_c:model", "--time-budget", "3s", "--no-findings",
               "--workers", "1", "--json")
    assert time.monotonic() - began < 20  # the budget, the grace past it, and the interpreter's start
    report = json.loads(done.stdout)
    assert report["seeds_run"] >= 0 and done.returncode in (0, EXIT_MODEL_ERROR), done.stderr


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))  # 1.5 GiB: a MemoryError soon, not a swapping machine


@pytest.mark.slow
def test_a_model_that_runs_out_of_memory_is_a_model_error_and_the_campaign_reports(models):
    done = dst(models, "fuzz", "--model", "allocates:model", "--count", "4", "--no-findings", "--workers", "1",
               "--json", preexec_fn=_limited)
    assert done.returncode == EXIT_MODEL_ERROR, done.stderr
    report = json.loads(done.stdout)
    assert report["seeds_run"] == 4 and report["model_errors"] >= 1
    assert "MemoryError" in done.stdout


def _catches_sigterm(pid: int, within: float = 10.0) -> None:
    """Wait until process ``pid`` has a handler of SIGTERM (its SigCgt mask in /proc; elsewhere, a short sleep)."""
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        time.sleep(0.15)
        return
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        caught = next((line.split()[1] for line in status.read_text().splitlines() if line.startswith("SigCgt:")), "0")
        if int(caught, 16) & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.002)
    raise AssertionError(f"dst did not take SIGTERM within {within} s of starting")


def test_sigterm_as_dst_starts_ends_it_with_one_line(models):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(models), *sys.path])}
    process = subprocess.Popen([sys.executable, "-m", "dst", "fuzz", "--count", "5"], cwd=models, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _catches_sigterm(process.pid)  # the moment it can: before that, no program could (under load, Python's own
    process.send_signal(signal.SIGTERM)  # start-up can outlast a fixed sleep); it is still loading its modules
    _, err = process.communicate(timeout=30)
    assert process.returncode == EXIT_TERMINATED
    assert err.strip().splitlines()[-1] == "dst: terminated"


def test_replay_with_another_model_never_imports_the_one_the_finding_names(models):
    # A finding recorded on a model that ends the process as it is imported, replayed on the reference model:
    # its keys are read as the reference's, and its own model is never imported.
    shipped = (Path(__file__).resolve().parents[1] / "findings" / "001-release-frees-another-holders-slot.toml")
    text = shipped.read_text().replace('impl = "dst.reference:model"', 'impl = "exits_at_import:model"')
    assert 'impl = "exits_at_import:model"' in text
    (models / "mine.toml").write_text(text)
    done = dst(models, "replay", "mine.toml", "--model", "dst.reference:model", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "reproduces" in done.stdout
