"""Scenarios drawn from the whole key space of the reference model, to check the harness itself.

Every key of every section (and every option of the reference model) varies, over wide but
valid values: zero latencies, one slot, granularity of a second, jobs far longer than the
drain, bursts of every fault kind, the runs part on or off. The one rule a scenario must keep
that the draws cannot see alone, the quiet period that covers the model's own bounds, is drawn
on top of those bounds. The correct model must pass every scenario drawn here (a run may go
unjudged, never accused): the property tests and ``bench/alarms.py`` hold it to that.

:func:`scenario_doc` takes any ``random.Random``: Hypothesis's ``st.randoms()`` in the tests
(so a failure shrinks), a seeded one in the benchmark.
"""

from __future__ import annotations

import random
from typing import Any

from ..faults import SCHEDULED
from ..text import format_duration, parse_duration


def _ms(rnd: random.Random, low: int, high: int) -> int:
    """A duration in [low, high] ms, log-uniform above zero (short and long both come up), now and
    then exactly an end."""
    pick = rnd.random()
    if pick < 0.1:
        return low
    if pick < 0.2:
        return high
    start = max(low, 1)
    return int(min(high, max(low, round(start * (high / start) ** rnd.random()))))


def _range(rnd: random.Random, low: int, high: int) -> list[str]:
    a, b = sorted((_ms(rnd, low, high), _ms(rnd, low, high)))
    return [format_duration(a), format_duration(b)]


def _probability(rnd: random.Random, high: float) -> float:
    return rnd.choice((0.0, 0.0, round(rnd.uniform(0, high), 3), high))


def scenario_doc(rnd: random.Random) -> dict[str, Any]:
    """A scenario document for the reference model, every key drawn."""
    s = 1_000
    ttl = _ms(rnd, 3 * s, 120 * s)  # renewals at 0.3 TTL stay longer than a round trip (600ms)
    reaper = _ms(rnd, 100, 60 * s)
    redelivery = _ms(rnd, 5 * s, 300 * s)
    cancelling, sweep = redelivery + _ms(rnd, 0, 300 * s), _ms(rnd, 100, 60 * s)
    model: dict[str, Any] = {
        "limits": {name: rnd.randint(1, 4) for name in ("db", "cache")[:rnd.randint(1, 2)]},
        "store_latency": _range(rnd, 0, 50),
        "store_slow": _probability(rnd, 0.3),
        "store_slow_by": _range(rnd, 1, 10 * s),
        "ttl": format_duration(ttl),
        "reaper_interval": format_duration(reaper),
        "renew_fraction": round(rnd.uniform(0.3, 0.9), 2),
        "renew_attempts": rnd.randint(1, 5),
        "retry_after": format_duration(_ms(rnd, 1, 10 * s)),
        "resource_contract": rnd.choice(("token", "token-and-lease")),
        "cancelling_timeout": format_duration(cancelling),
        "sweep_interval": format_duration(sweep),
        "redelivery_timeout": format_duration(redelivery),
        # Longer than a round trip (up to 600ms), and shorter than the claim timeout by more than one.
        "heartbeat_interval": format_duration(_ms(rnd, 700, redelivery - 700)),
        "poll_interval": format_duration(_ms(rnd, 100, 30 * s)),
    }
    limit = rnd.choice(sorted(model["limits"]))
    duration = _ms(rnd, 10 * s, 900 * s)
    workload = {
        "clients": rnd.randint(1, 8),
        "jobs": rnd.randint(0, 10),
        "limit": limit,
        "slots": rnd.randint(1, model["limits"][limit]),
        "work": _range(rnd, 0, 1_000 * s),
        "think": _range(rnd, 0, 60 * s),
        "writes": sorted((rnd.randint(0, 5), rnd.randint(0, 5))),
        "write_time": format_duration(_ms(rnd, 0, 5 * s)),
        "request_timeout": format_duration(_ms(rnd, 1, 10 * s)),
        "retries": rnd.randint(0, 5),
        "acquire_patience": format_duration(_ms(rnd, 0, 300 * s)),
    }
    network = dict(latency=_range(rnd, 0, 200), loss=_probability(rnd, 0.3), duplicate=_probability(rnd, 0.3),
                   delay=_probability(rnd, 0.2), delay_by=_range(rnd, 1, 30 * s))
    faults = {}
    for kind in SCHEDULED:
        if rnd.random() < 0.6:
            fault: dict[str, Any] = {"rate": round(rnd.uniform(0, 2), 3), "targeted": _probability(rnd, 1.0)}
            if kind.duration != (0, 0) or rnd.random() < 0.5:
                fault["duration"] = _range(rnd, 0, 120 * s)
            faults[kind.name] = fault
    runs = {"submissions": rnd.choice((0, 0, rnd.randint(1, 15))), "workers": rnd.randint(1, 4),
            "work": _range(rnd, 0, 200 * s), "cancel": _probability(rnd, 1.0), "cancel_early": _probability(rnd, 1.0)}
    # The quiet period covers the model's bounds (TTL + reaper; with runs, CANCELLING's deadline + sweep and
    # redelivery + poll) and the worst
    # delays of a message and the store, or the scenario would be refused on load; the rest is drawn.
    worst_delays = 30 * s + 200 + 4 * (50 + 10 * s) + s  # the highest delay_by and latency, four slow store
    # round trips, a deadline tick
    poll = parse_duration(model["poll_interval"])
    bound = max(ttl + reaper, max(cancelling + sweep, redelivery + poll) if runs["submissions"] else 0)
    quiet = bound + worst_delays + _ms(rnd, 0, 300 * s)
    run = {
        "duration": format_duration(duration),
        "quiet": format_duration(quiet),
        # Mostly long enough to drain (those runs are judged in full), now and then far too short.
        "drain_limit": format_duration(_ms(rnd, 600 * s, 3_600 * s) if rnd.random() < 0.7 else _ms(rnd, 0, 600 * s)),
        "granularity": rnd.choice(("1ms", "1ms", "10ms", "1s")),
        "scheduler": rnd.choice(("uniform", "pct")),
    }
    return {"name": "drawn", "run": run, "model": model, "workload": workload, "network": network,
            "faults": faults, "runs": runs}
