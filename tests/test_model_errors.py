"""A model whose own code fails is reported, not fatal: each such run is a model error with the exception and
the user's line, the campaign goes on and counts them apart from violations (exit code 3), the minimizer shrinks
one like a violation, and its finding replays. The models are docs/your-service.md's adapter, each with one slip
written in, in a temporary folder on sys.path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dst.cli import EXIT_MODEL_ERROR, EXIT_OK, EXIT_USAGE, EXIT_VIOLATION, main
from dst.errors import MODEL_ERROR
from dst.findings import REPRODUCES, read, replay
from dst.models import _cache
from dst.runner import run, watchdog
from dst.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def adapter() -> str:
    text = (ROOT / "docs" / "your-service.md").read_text()
    m = re.search(r"<!-- adapter: my_limiter\.py -->\n```python\n(.*?)```", text, re.S)
    assert m, "docs/your-service.md has no adapter block"
    return m.group(1)


RENEW_LINE = "        lease[3] = self.clock.now + TTL\n"
SLIPS = {
    # A renewal that raises at some moments only: some seeds meet it, most do not.
    "raises_sometimes": (RENEW_LINE, '        if self.clock.now % 97 == 13:\n            raise KeyError("boom")\n' + RENEW_LINE),
    # asyncio in a coroutine-seam handler: there is no running event loop there.
    "awaits_asyncio": ("    async def renew(self, req):\n        await sut.store_step()\n",
                       "    async def renew(self, req):\n        import asyncio\n        await asyncio.sleep(0.01)\n"),
    # A build function that takes no env.
    "bad_build": ("def build(env):", "def build():"),
    # A renewal that starts a thread, and swallows the refusal.
    "starts_thread": ("    async def renew(self, req):\n        await sut.store_step()\n",
                      "    async def renew(self, req):\n        import threading\n        try:\n"
                      "            threading.Thread(target=print).start()\n        except RuntimeError:\n"
                      "            pass\n        await sut.store_step()\n"),
    # A lease stamped by the process's clocks instead of env.clock: they read the run's virtual time.
    "reads_clock": ("        self.ids += 1\n", "        import time, uuid\n        self.stamps.append((time.time(), "
                    "time.monotonic(), uuid.uuid4().hex))\n        self.ids += 1\n"),
    # A renewal that never returns at some moments: a loop that waits for a change nothing else can make.
    "spins": (RENEW_LINE, "        while self.clock.now > 100_000:\n            pass\n" + RENEW_LINE),
    # The same, inside a try that catches every Exception (Stalled is not one, as KeyboardInterrupt is not).
    "spins_in_try": (RENEW_LINE, "        try:\n            while self.clock.now > 100_000:\n                pass\n"
                     "        except Exception:\n            pass\n" + RENEW_LINE),
    # The same, catching even BaseException, and going on.
    "spins_and_swallows": (RENEW_LINE, "        try:\n            while self.clock.now > 100_000:\n                pass\n"
                           "        except BaseException:\n            pass\n" + RENEW_LINE),
    # A build that leaves a thread running, which would keep the process alive.
    "leaves_thread": ("def build(env):\n", "def build(env):\n    import threading, time\n"
                      "    threading.Thread(target=time.sleep, args=(600,), name='left-behind').start()\n"),
    # A job that asks for a work slice of 0 ms: the seam's contract says positive.
    "zero_work": ("job=lease_job(env, ttl=TTL)", "job=lambda *a: (command for command in [(2, None, 0)])"),  # 2: WORK
}


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    source = adapter()
    for name, (old, new) in SLIPS.items():
        assert old in source, f"{name}: the adapter no longer has {old!r}"
        (tmp_path / f"{name}.py").write_text(source.replace(old, new, 1))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in SLIPS:
        sys.modules.pop(name, None)
        _cache.pop(f"{name}:model", None)


def fuzz_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["fuzz", "--json", "--workers", "1", *args])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_a_handler_that_raises_on_some_seeds_is_counted_the_campaign_goes_on_and_the_finding_replays(models, capsys):
    code, report = fuzz_json(capsys, "--model", "raises_sometimes:model", "--count", "60")
    assert code == EXIT_MODEL_ERROR
    assert report["seeds_run"] == 60  # every seed ran, before and after the ones that met the error
    [group] = [g for g in report["signatures"] if g["invariant"] == MODEL_ERROR]
    assert 0 < report["model_errors"] == group["count"] < 60
    assert re.fullmatch(r"server: KeyError: 'boom' at raises_sometimes\.py:\d+ in Limiter\.renew", group["message"])
    [entry] = report["findings"]
    finding = read(Path(entry["path"]))
    assert finding.invariant == MODEL_ERROR and "Limiter.renew" in finding.message
    assert entry["steps_after"] < entry["steps_before"]  # minimized like a violation
    assert replay(finding).status == REPRODUCES
    assert main(["replay", entry["path"], "--quiet"]) == EXIT_OK


def test_asyncio_awaited_in_a_coroutine_seam_handler_is_a_model_error_at_the_users_line(models, capsys):
    code = main(["run", "--seed", "1", "--model", "awaits_asyncio:model"])
    out = capsys.readouterr().out
    assert code == EXIT_MODEL_ERROR and "MODEL ERROR at t=" in out and "Traceback" not in out
    assert re.search(r"model-error: server: RuntimeError: no running event loop at awaits_asyncio\.py:\d+ in "
                     r"Limiter\.renew", out)


def test_a_build_with_the_wrong_signature_is_a_model_error_of_every_seed_naming_the_build(models, capsys):
    code, report = fuzz_json(capsys, "--model", "bad_build:model", "--count", "5")
    assert code == EXIT_MODEL_ERROR and report["model_errors"] == 5 and report["violations"] == 0
    [group] = report["signatures"]
    assert "the model's build raised TypeError: build() takes 0 positional arguments" in group["message"]
    assert re.search(r"\(the build: bad_build\.py:\d+ build\)$", group["message"])
    [entry] = report["findings"]
    assert Path(entry["path"]).name == "001-the-model-s-build-raised-typeerror.toml"
    assert entry["steps_after"] == 0 and replay(read(Path(entry["path"]))).status == REPRODUCES


def test_a_broken_contract_of_the_seam_is_a_model_error_naming_the_client(models, capsys):
    result = run(load_scenario(None, model="zero_work:model"), 1)
    assert result.outcome == MODEL_ERROR and not result.ok
    assert re.fullmatch(r"c\d+: c\d+: a work slice must be positive, got 0", result.violation.message)
    assert result.raw_trace[-1][2] == "error"  # the trace says it, as the last event


def test_a_thread_started_in_a_coroutine_seam_model_is_refused_even_when_the_model_swallows_the_refusal(models):
    result = run(load_scenario(None, model="starts_thread:model"), 2)
    assert result.outcome == MODEL_ERROR
    assert re.fullmatch(r"server: threading\.Thread\.start\(\) called at starts_thread\.py:\d+ cannot run in a "
                        r"simulated run: threads run outside virtual time; .*", result.violation.message)


def test_a_coroutine_seam_model_that_reads_the_process_clocks_and_uuid4_reads_the_runs_and_stays_deterministic(
        models, monkeypatch):
    from dst.aio import VIRTUAL_EPOCH_MS
    import reads_clock

    stamps: list[list[tuple[float, float, str]]] = []
    build = reads_clock.Limiter.__init__

    def keep(self, env):  # the service's stamps, kept for the test to read after the run
        build(self, env)
        self.stamps = []
        stamps.append(self.stamps)

    monkeypatch.setattr(reads_clock.Limiter, "__init__", keep)
    first, again = (run(load_scenario(None, model="reads_clock:model"), 3) for _ in range(2))
    assert first.digest == again.digest and stamps[0] == stamps[1] and stamps[0]
    for wall, monotonic, _ in stamps[0]:
        assert wall == pytest.approx(VIRTUAL_EPOCH_MS / 1000 + monotonic)  # the same virtual instant
        assert 0 <= monotonic <= first.virtual_time / 1000


@pytest.fixture
def short_stalls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchdog, "_stall_seconds", 0.5)  # the watchdog's limit, and its looks, short for the test
    monkeypatch.setattr(watchdog, "_LOOK_EVERY", 0.05)


@pytest.mark.parametrize("model", ["spins", "spins_in_try", "spins_and_swallows"])
def test_a_handler_that_never_returns_is_stopped_by_the_watchdog_and_named_even_if_it_catches_that(
        models, short_stalls, model):
    first, again = (run(load_scenario(None, model=f"{model}:model"), 1) for _ in range(2))
    for result in (first, again):
        assert result.outcome == MODEL_ERROR
        assert result.violation.message.startswith(
            f"server: Stalled: the code of Limiter.renew ({model}.py) did not return to dst within the watchdog's "
            f"limit, virtual time standing at t=")
    if model != "spins_and_swallows":  # code that swallows the stall runs on a moment: its trace may differ
        assert first.digest == again.digest  # named for the handler, not the line the interrupt fell on


def test_an_asyncio_handler_that_never_awaits_is_stopped_by_the_watchdog(short_stalls, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    [result] = [run(load_scenario(None, model="aio_models:spins"), 1)]
    assert result.outcome == MODEL_ERROR
    assert re.match(r"server: Stalled: the code of _misbehaving\.<locals>\.acquire \(.*aio_models\.py\)",
                    result.violation.message)


@pytest.mark.slow
def test_a_time_budget_ends_a_campaign_whose_handler_never_returns(models):
    # Past the deadline, the watchdog stops a run that stands still for STALL_PAST_DEADLINE, not STALL_SECONDS.
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dst", "fuzz", "--model", "spins:model", "--count", "50",
                           "--time-budget", "1s", "--no-findings", "--workers", "1", "--json"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                          timeout=120)
    assert done.returncode == EXIT_MODEL_ERROR, done.stderr
    assert time.monotonic() - began < watchdog.STALL_SECONDS  # it did not wait for the full limit
    assert json.loads(done.stdout)["model_errors"] >= 1


def test_a_thread_started_by_the_build_is_refused_and_dst_exits_without_waiting_for_it(models):
    done = subprocess.run([sys.executable, "-m", "dst", "run", "--seed", "1", "--model", "leaves_thread:model"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                          timeout=60)  # the thread sleeps 600 s: waiting for it would time out here
    # It runs outside virtual time, beside every run: the run is a model error at once, naming it.
    assert done.returncode == EXIT_MODEL_ERROR
    assert "the build started 1 thread(s) (left-behind): a simulated run has one thread" in done.stdout
    # One thread: dst run builds the model once (the run checks its bounds as it assembles).
    assert "dst: note: the model left 1 thread(s) running (left-behind); dst exits without them" in done.stderr


@pytest.mark.slow
def test_merge_tells_model_errors_apart_from_violations(models, capsys):
    for name, args, code in (("a.json", ["--model", "raises_sometimes:model", "--count", "40"], EXIT_MODEL_ERROR),
                             ("b.json", ["--scenario", "double-release", "--count", "3"], EXIT_VIOLATION)):
        assert main(["fuzz", "--no-findings", "--json", *args]) == code
        Path(name).write_text(capsys.readouterr().out)
    assert main(["merge", "a.json", "--json"]) == EXIT_MODEL_ERROR
    merged = json.loads(capsys.readouterr().out)
    assert merged["model_errors"] > 0
    assert main(["merge", "b.json", "--json"]) == EXIT_VIOLATION
    assert json.loads(capsys.readouterr().out)["model_errors"] == 0


def test_a_finding_may_expect_a_model_error_but_not_another_unknown_invariant(models, capsys):
    code, report = fuzz_json(capsys, "--model", "zero_work:model", "--count", "1")
    path = Path(report["findings"][0]["path"])
    assert replay(read(path)).status == REPRODUCES
    text = path.read_text()
    path.write_text(text.replace(f'invariant = "{MODEL_ERROR}"', 'invariant = "no-such-invariant"'))
    assert main(["replay", str(path)]) == EXIT_USAGE
    assert "finding.invariant: expected one of the scenario's invariants, 'model-error' or a user's assertion" in capsys.readouterr().err


def _guest_spins(seconds: float) -> None:
    """The user's code, standing still (a handler that caught Stalled and went on): Python bytecodes all along,
    where an exception raised into the thread lands."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_after_a_stall_the_watchdog_strikes_again_into_the_users_code_only(short_stalls):
    # Once a run has stalled, the watchdog strikes again at each look while the model's code goes on; dst's own code,
    # ending the run (closing tasks, collecting what they held), must not be struck: the exception would escape run().
    from types import SimpleNamespace

    from dst.errors import Stalled

    watch = watchdog.watching(SimpleNamespace(now=0), None, lambda frame: "c1")
    with watch:
        watch.stalled = ("c1", "Stalled: ...")  # as after the first strike
        end = time.monotonic() + 0.5
        while time.monotonic() < end:  # ten looks, only the simulation's side of the run on the stack: not struck
            pass
        began = time.monotonic()
        with pytest.raises(Stalled):
            _guest_spins(5.0)
        assert time.monotonic() - began < 2.0  # struck within a look or two


def test_a_watched_run_leaves_no_frame_of_the_simulation_alive():
    # The watchdog holds the frame that runs the simulation while it watches; kept after, that frame and the
    # simulation held each other, and only the cycle collector freed them: a campaign's memory grew, and it slowed.
    import gc
    import types

    from dst.runner import Simulation

    def frames() -> list[types.FrameType]:
        return [o for o in gc.get_objects() if isinstance(o, types.FrameType) and o.f_code is Simulation.run.__code__]

    gc.collect()
    gc.disable()
    try:
        before = frames()  # other tests' (a traceback pytest keeps holds the frames it went through)
        run(load_scenario(None), 1)
        new = [frame for frame in frames() if not any(frame is old for old in before)]
    finally:
        gc.enable()
    assert new == []
