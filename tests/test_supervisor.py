"""dst's supervisor gives a child that is stopping on its own more time than one whose model ignores the signal."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor runs on Linux only")

# A program under the supervisor: on SIGTERM it takes STOP_S seconds to stop (as a campaign closing a slow cluster
# does), says it is stopping first or not, then prints its report and exits 143 as dst does.
_PROGRAM = textwrap.dedent("""
    import os, signal, sys, time
    from dst import _supervise

    SAYS_SO = {says_so}

    def program():
        def stop(signum, frame):
            if SAYS_SO:
                _supervise.stopping()
            time.sleep({stop_s})
            print("report", flush=True)
            _supervise.done()
            os._exit(143)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        while True:
            time.sleep(0.05)

    _supervise.supervised(program)
""")


def _terminate(says_so: bool, stop_s: float) -> tuple[int, str, str, float]:
    code = _PROGRAM.format(says_so=says_so, stop_s=stop_s)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # to the supervisor, which passes it on
        out, err = proc.communicate(timeout=30)
        return proc.returncode, out, err, time.monotonic() - began
    finally:
        proc.kill()


@pytest.mark.slow
def test_a_child_that_says_it_is_stopping_gets_the_time_to_report():
    code, out, err, _ = _terminate(says_so=True, stop_s=3.0)  # longer than GRACE
    assert (code, out, err) == (143, "report\n", "")


def test_a_child_that_does_not_stop_within_the_grace_is_killed_with_one_line():
    code, out, err, took = _terminate(says_so=False, stop_s=10.0)
    assert code == 143 and out == ""
    assert err == "dst: terminated; the model's code did not stop within 2 s, and its process was killed\n"
    assert took < 8
