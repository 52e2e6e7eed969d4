"""Modes are plug-ins of one runner: the first that accepts a built system runs it, and a run of one mode loads
nothing of another."""

from __future__ import annotations

import inspect
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

from dst import load_scenario
from dst.runner import Simulation
from dst.runner.modes import MODES, Mode, mode_for
from dst.runner.modes.coroutine import CoroutineMode

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("model", ["dst.reference:model", "examples.sqlite_leases:model"])
def test_a_coroutine_seam_run_imports_nothing_of_the_asyncio_mode(model: str) -> None:
    # dst's own model, and a guest model in the sandbox (the SQLite example): neither loads dst.aio.
    code = ("import sys; from dst import run, load_scenario; "
            f"r = run(load_scenario(), 1, model={model!r}); assert r.ok, r; "
            "print(sorted(m for m in sys.modules if m == 'dst.aio' or m.startswith(('dst.aio.', 'dst.runner.modes.aio'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_each_kind_of_system_finds_its_own_mode() -> None:
    import dst.aio

    sim = Simulation(load_scenario(), 1)
    assert mode_for(sim.system) is CoroutineMode and isinstance(sim.mode, CoroutineMode)
    sim.close()
    aio_system = dst.aio.System(server=_app, job=_job)
    assert mode_for(aio_system) is import_module("dst.runner.modes.aio").MODE
    assert mode_for(object()) is None


def test_every_registered_mode_keeps_the_mode_protocol() -> None:
    # A third mode is one module in dst/runner/modes and its name in MODES: it must offer all the protocol asks.
    asked = {name for name, _ in inspect.getmembers(Mode) if not name.startswith("_")} | {"kind", "refusal"}
    for name in MODES:
        mode = import_module(f"dst.runner.modes.{name}").MODE
        assert callable(getattr(mode, "accepts", None)), name
        missing = {attr for attr in asked if not hasattr(mode, attr)}
        assert missing == set(), f"{name} lacks {sorted(missing)}"


async def _app() -> dict[type, object]:
    return {}


async def _job(client: str, incarnation: int, order: object) -> str:
    return "done"



def test_dst_run_builds_the_model_once(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The run checks the scenario against the model's bounds as it assembles, so no build before it is needed.
    import dst.runner.simulation as simulation
    from dst.cli import main

    builds = []
    real = simulation.built

    def counted(model, env):  # type: ignore[no-untyped-def]
        builds.append(model)
        return real(model, env)

    monkeypatch.setattr(simulation, "built", counted)
    assert main(["run", "--seed", "1", "--json"]) == 0
    assert len(builds) == 1
