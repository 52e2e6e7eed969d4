"""The variations of a scenario a campaign runs: swarm testing, aimed faults, fault kinds turned on, small worlds.

Swarm testing: each seed also picks which faults are on and how often.

TigerBeetle's VOPR (``options_swarm``) and FoundationDB's BUGGIFY: a campaign where every
run has every fault at one fixed rate explores a narrow band of behaviour; letting each
seed switch kinds off and scale the others explores rare combinations (a crash-free run
with many pauses, a lossless network with a slow store). Only what the scenario enables
(a rate or probability above zero) can be switched on, so a user's "no partitions" stays true.
The choice is a pure function of the seed, so ``dst run --seed N --swarm`` is the same run.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs

from ..faults import BY_NAME, FAULTS, SCHEDULED, FaultKind
from ..scenario import MAX_RATE, SCHEDULERS, Scenario
from ..sim.rng import Streams
from .bounds import slack_of


def swarm(scenario: Scenario, seed: int) -> Scenario:
    rnd = Streams(seed).sequence("swarm")
    faults = {}
    for kind, fault in scenario.faults.kinds():
        on = fault.rate > 0 and rnd.random() < 0.6
        faults[kind] = attrs.evolve(fault, rate=fault.rate * 2 ** rnd.uniform(-2, 2) if on else 0.0)
        if fault.targeted > 0:  # drawn only where it is set, so the draws of other scenarios stay as they were
            faults[kind] = attrs.evolve(faults[kind], targeted=rnd.choice((0.0, fault.targeted / 2, fault.targeted,
                                                                             min(1.0, fault.targeted * 2))))
    net = scenario.network

    def probability(p: float) -> float:
        return min(0.5, p * 2 ** rnd.uniform(-1, 2)) if p > 0 and rnd.random() < 0.6 else 0.0

    network = attrs.evolve(net, loss=probability(net.loss), duplicate=probability(net.duplicate),
                           delay=probability(net.delay))
    run = attrs.evolve(scenario.run, scheduler=SCHEDULERS[rnd.randrange(len(SCHEDULERS))])
    model = attrs.evolve(scenario.model, store_slow=probability(scenario.model.store_slow))  # drawn last: the
    # draws above are what they were before the store could be slow (and a connection be reset, a proxy retry, a
    # store connection be reset)
    network = attrs.evolve(network, reset=probability(net.reset), proxy_retry=probability(net.proxy_retry))
    model = attrs.evolve(model, store_reset=probability(scenario.model.store_reset))
    return attrs.evolve(scenario, faults=attrs.evolve(scenario.faults, **faults), network=network, run=run,
                        model=model)


AIM = 0.5  # the share of each fault kind an aimed scenario strikes at the model's sensitive moments


def aimed(scenario: Scenario) -> Scenario:
    """The scenario with half of each enabled fault kind that it leaves unaimed aimed at the model's sensitive
    moments (``targeted``: a pause just before a write, inside the reaper's step), named so (``dst run --aim``).
    Where a bug needs a fault at one moment, aiming finds it in fewer seeds; where it needs a fault anywhere
    (a partition), it takes faults away, so the default campaign runs each scenario both ways."""
    kinds = {name: attrs.evolve(fault, targeted=AIM) for name, fault in scenario.faults.kinds()
             if fault.rate > 0 and fault.targeted == 0}
    if not kinds:
        return scenario
    return attrs.evolve(scenario, name=f"{scenario.name}, aimed", faults=attrs.evolve(scenario.faults, **kinds))


# What a default campaign turns on where a model's scenarios leave it off (``dst run --enable KIND``): each
# scheduled fault kind, and the pinned kinds the embedded default leaves off (the slow store round trip, a reset
# store connection, a reset connection, a retrying proxy; the network's loss, duplicates and delays are on there
# already). A service's first campaign then meets the clock skew, the server pause and the slow store its own
# scenarios never asked for.
_DEFAULT: Any = Scenario()
ENABLE: tuple[str, ...] = (*(kind.name for kind in SCHEDULED),
                           *(kind.name for kind in FAULTS if kind.pinned
                             and functools.reduce(getattr, kind.chance[0].split("."), _DEFAULT) == 0))
ENABLE_RATE = 0.5  # a scheduled kind turned on: occurrences per virtual minute, over the registry's durations
ENABLE_CHANCE = 0.01  # a pinned kind turned on: the chance a round trip draws it, over the scenario's durations


def _chance(scenario: Scenario, kind: FaultKind) -> tuple[Any, str, float]:
    """A pinned kind's chance in ``scenario``: the section holding it, its key, its value."""
    section, _, key = kind.chance[0].partition(".")
    holder = getattr(scenario, section)
    return holder, key, getattr(holder, key)


def enabled_kinds(scenario: Scenario) -> tuple[str, ...]:
    """The fault kinds of the registry (:data:`dst.faults.FAULTS`) that ``scenario`` turns on: a scheduled kind
    with a rate above zero, a pinned one whose chance (``network.loss``, ``model.store_slow``) is above zero."""
    rates = dict(scenario.faults.kinds())
    return tuple(kind.name for kind in FAULTS
                 if (_chance(scenario, kind)[2] if kind.pinned else rates[kind.name].rate) > 0)


def enable(scenario: Scenario, kind: str) -> Scenario:
    """The scenario with fault kind ``kind`` (one of :data:`ENABLE`) turned on where it leaves it off, named so:
    a scheduled kind at :data:`ENABLE_RATE` over the registry's durations, a pinned one at :data:`ENABLE_CHANCE`
    with the quiet period longer by the slack it adds (the model's bounds ask for it: a slow round trip delays
    what settles). A kind the scenario turns on already is left as it is."""
    if kind not in ENABLE:
        raise ValueError(f"expected a fault kind to turn on ({', '.join(ENABLE)}), got {kind!r}")
    if kind in enabled_kinds(scenario):
        return scenario
    fault, name = BY_NAME[kind], f"{scenario.name}, with {kind}"
    if fault.pinned:
        holder, key, _ = _chance(scenario, fault)
        section = fault.chance[0].partition(".")[0]
        on = attrs.evolve(scenario, name=name, **{section: attrs.evolve(holder, **{key: ENABLE_CHANCE})})
        return attrs.evolve(on, run=attrs.evolve(scenario.run, quiet=scenario.run.quiet + slack_of(on)
                                                 - slack_of(scenario)))
    rate = attrs.evolve(dict(scenario.faults.kinds())[kind], rate=ENABLE_RATE, duration=fault.duration)
    return attrs.evolve(scenario, name=name, faults=attrs.evolve(scenario.faults, **{kind: rate}))


# A world smaller than the scenario's (``dst run --world SIZE``): at most so many clients and jobs, and an active
# phase at most so long. The findings of real services are told in 1-4 steps by one or two clients, and a small
# world's seed costs a tenth of a full one's: a campaign on a model of the user's starts with them.
WORLDS: dict[str, tuple[int, int, int]] = {"small": (2, 3, 150_000), "medium": (3, 4, 300_000)}  # clients, jobs, ms
# A shorter run keeps the faults the scenario's would meet: their rates go up by as much as the run was cut, up to
# this. At the same rates a small world of Prefect's example met the restart that strands a slot at 9 seeds of 30;
# as dense as the full run, at 18, for the same CPU (and the asyncio example's duplicated release at 50 of 150, not
# 36). Beyond it a world would be all faults: a pause lasts up to 90 s of a 150 s run.
DENSER_AT_MOST = 4


def world(scenario: Scenario, size: str) -> Scenario:
    """``scenario`` in a world of ``size`` (one of :data:`WORLDS`), named so (``default, small world``): its
    clients, jobs, run submissions and active phase cut down, its faults as many as its own run would meet (each
    kind's rate up by as much as the run was cut, at most :data:`DENSER_AT_MOST` times), every other key as it was.
    A scripted scenario, or one no smaller in that world, is returned as it is."""
    if size not in WORLDS:
        raise ValueError(f"expected a world size ({', '.join(WORLDS)}), got {size!r}")
    clients, jobs, longest = WORLDS[size]
    load, runs, run = scenario.workload, scenario.runs, scenario.run
    clients = min(clients, load.clients)
    step = run.granularity
    duration = max(step, longest // step * step)
    share = min(1.0, duration / run.duration)  # of the run submissions spread over the active phase
    denser = min(DENSER_AT_MOST, 1 / share)  # the faults the whole run would meet, in the part of it kept
    faults = attrs.evolve(scenario.faults, **{kind: attrs.evolve(fault, rate=min(MAX_RATE, fault.rate * denser))
                                              for kind, fault in scenario.faults.kinds() if fault.rate})
    smaller = attrs.evolve(
        scenario, name=f"{scenario.name}, {size} world", faults=faults,
        workload=attrs.evolve(load, clients=clients, jobs=min(jobs, load.jobs)),
        runs=attrs.evolve(runs, workers=min(runs.workers, clients),
                          submissions=min(runs.submissions, max(1, round(runs.submissions * share)))),
        run=attrs.evolve(run, duration=min(duration, run.duration)))
    same = (smaller.workload, smaller.runs, smaller.run) == (load, runs, run)
    return scenario if scenario.steps is not None or same else smaller
