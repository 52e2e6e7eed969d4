"""A seed run in a fork of a warm process (the model built once, the heap frozen for the collector) gives the bytes
the same seed gives run cold, in this process: the same trace digest, for each example."""

from __future__ import annotations

import pytest

from dst.explore.isolate import CAN_FORK, forked, warm
from dst.runner import Simulation, run
from dst.scenario import load_scenario
from prefect_targets import from_the_root, needs_prefect

__all__ = ["from_the_root"]  # the fixture: each test runs from the repository's root (the examples' scenarios)

pytestmark = pytest.mark.skipif(not CAN_FORK, reason="seeds are forked on Linux only")

EXAMPLES = [
    pytest.param("examples/aio_leases/scenarios/default.toml", None, id="aio_leases"),
    pytest.param("examples/aio_leases/scenarios/check-then-act.toml", None, id="aio_leases-check-then-act"),
    pytest.param(None, "examples.sqlite_leases:model", id="sqlite_leases"),
    pytest.param("examples/prefect_limits/scenarios/default.toml", None, id="prefect_limits", marks=needs_prefect),
    pytest.param("examples/prefect_deployments/scenarios/default.toml", None, id="prefect_deployments",
                 marks=needs_prefect),
]


@pytest.fixture
def thawed_after(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    import gc

    import dst.explore.isolate as isolate

    monkeypatch.setattr(isolate, "_frozen", False)
    yield
    gc.unfreeze()  # this test process goes on: what was frozen for the forks is the collector's again


@pytest.mark.slow
@pytest.mark.parametrize("scenario, model", EXAMPLES)
def test_a_forked_seed_gives_the_bytes_of_a_cold_one(scenario, model, thawed_after):
    loaded = load_scenario(scenario, model=model)
    cold = [run(loaded, seed).digest for seed in (1, 2)]
    Simulation(loaded, 0, ()).close()  # warm: the model imported and built once
    warm()
    assert [forked(lambda seed=seed: run(loaded, seed).digest) for seed in (1, 2)] == cold
