"""The correct model never trips an invariant, whatever the faults."""

from __future__ import annotations

import attrs
import pytest

from dst.runner import run


def _violations(scenario, seeds):
    return [(seed, r.violation.invariant, r.violation.message) for seed in seeds if not (r := run(scenario, seed)).ok]


@pytest.mark.slow
def test_no_violation_over_500_seeds_of_the_default_scenario(default_scenario):
    assert _violations(default_scenario, range(1, 501)) == []


def test_no_violation_with_one_slot_the_lease_contract_and_heavy_faults(default_scenario):
    s = default_scenario
    harsh = attrs.evolve(
        s,
        model=attrs.evolve(s.model, limits=(("db", 1),)).with_options(resource_contract="token-and-lease"),
        network=attrs.evolve(s.network, loss=0.05, duplicate=0.05),
        faults=attrs.evolve(s.faults, **{k: attrs.evolve(f, rate=f.rate * 4) for k, f in s.faults.kinds()}),
    )
    assert _violations(harsh, range(1, 151)) == []


def test_runs_exercise_every_fault_kind(default_scenario):
    seen = set()
    for seed in range(1, 41):
        seen |= set(run(default_scenario, seed).faults)
    assert seen == {"crash", "restart", "pause", "partition", "server_restart"}
