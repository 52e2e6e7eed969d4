"""A model built for a run, and held to its bounds: keys of a scenario that are fine alone but together would
make a correct model fail, the slack the worst delays add, and the consequence window after a first violation."""

from __future__ import annotations

import threading
from typing import Any

from ..errors import BUILD_RAISED, UserError
from ..frames import described, raised_in, short
from ..invariants import BY_ID, INVARIANTS
from ..scenario import Scenario, ScenarioError
from ..sut import Bounds, Env, Model
from ..text import format_duration

_SAID = {"reclaim_within": "the model's reclaim bound (TTL + reaper interval)",
         "transition_within": "the model's CANCELLING bound (cancelling timeout + sweep interval)",
         "redeliver_within": "the model's redelivery bound (redelivery timeout + poll interval)"}


def built(model: Model[Any], env: Env[Any]) -> tuple[Any, str | None]:
    """The system ``model`` builds for one run, or None and what its build raised, or the thread it started: the run
    is then a model error at once. A scenario the build itself refuses (an option it cannot take, a
    :class:`~dst.errors.UserError`) raises."""
    before = threading.enumerate()
    try:
        system = model.build(env)
    except UserError:
        raise  # one line, exit 2
    except Exception as e:  # a raise before the build's first line (a wrong signature) is named by the build
        code = getattr(model.build, "__code__", None)
        at = "" if raised_in(e) is not None or code is None else (
            f" (the build: {short(code.co_filename)}:{code.co_firstlineno} {code.co_qualname})")
        return None, f"{BUILD_RAISED}{described(e)}{at}"
    started = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    if started:  # it runs outside virtual time, beside every run that follows: no seed could decide what it does
        close = getattr(system, "close", None)
        if callable(close):
            close()
        return None, (f"the build started {len(started)} thread(s) ({', '.join(started[:3])}): a simulated run has "
                      f"one thread, in virtual time (an asyncio service can run its thread-pool work inline: "
                      f"dst.aio.System(inline_threads=True))")
    return system, None


# What a reset store connection adds to a handler: its client's retry, after a backoff (redis-py 8's first is at most
# 20 ms, its cap 1 s), on a new connection (its handshake, then the command again: four round trips with redis-py 8).
_RESET_RETRY = 1_000


def slack_of(scenario: Scenario) -> int:
    """The worst a message and its handler's store round trips can add to the model's bounds (a slow round trip
    counted, and a reset store connection's retry), so a liveness window never closes on a message in flight."""
    m, net = scenario.model, scenario.network
    store = m.store_latency[1] + (m.store_slow_by[1] if m.store_slow > 0 else 0)
    proxy = net.proxy_timeout[1] + net.latency[1] if net.proxy_retry > 0 else 0  # a retrying proxy's second copy
    reset = _RESET_RETRY + 4 * store if m.store_reset > 0 else 0
    return net.latency[1] + net.delay_by[1] + 4 * store + proxy + reset


def window_of(bounds: Bounds, parts: set[str], slack: int) -> int:
    """The consequence window: the longest the model's bounds give a case of a system with these parts to settle
    (a dead holder's slot reclaimed: TTL + reaper interval; a CANCELLING run ended; a run redelivered), plus the
    worst delays. A slip whose first violation is a symptom shows its cause within it (a slot given back twice
    shows when the reaper reclaims the lease its release left behind)."""
    settling = {unit.settles_within for unit in INVARIANTS if unit.parts & parts} - {""}
    return max((int(getattr(bounds, field)) for field in settling), default=0) + slack


def check_bounds(scenario: Scenario, bounds: Bounds, slack: int, has_runs: bool, invariants: tuple[str, ...]) -> None:
    """Keys that are fine alone but together would make a correct model fail: one line each, as a load error.
    The quiet period is held to the bounds of the ``invariants`` checked after it, and to none without them."""
    s, net, store = scenario, scenario.network.latency, scenario.model.store_latency
    settling = sorted({BY_ID[i].settles_within for i in invariants} - {""})
    quiet = {_SAID.get(field, field): getattr(bounds, field) for field in settling}
    what, needed = max(quiet.items(), key=lambda item: item[1], default=("", 0))
    if quiet and s.run.quiet < needed + slack:
        raise ScenarioError(f"{s.source}: run.quiet: expected at least {format_duration(needed + slack)} "
                            f"({what}, {format_duration(needed)}, plus the worst message and store delays, "
                            f"{format_duration(slack)}), got {format_duration(s.run.quiet)}")
    round_trip = 2 * net[1] + 4 * store[1]
    every = {"renewal interval": bounds.renew_every, "heartbeat interval": bounds.heartbeat_every if has_runs else 0}
    for what, interval in every.items():
        if interval and round_trip >= interval:
            raise ScenarioError(f"{s.source}: network.latency: expected a round trip (2 x {format_duration(net[1])} "
                                f"latency + 4 x {format_duration(store[1])} store latency = "
                                f"{format_duration(round_trip)}) shorter than the model's {what} "
                                f"({format_duration(interval)}), or it is due again before its reply and the "
                                f"work never goes on")
    beat, lapse = bounds.heartbeat_every, bounds.claim_timeout
    if has_runs and beat and lapse and beat + round_trip >= lapse:
        raise ScenarioError(f"{s.source}: model: expected the model's heartbeat interval ({format_duration(beat)}) "
                            f"plus a round trip ({format_duration(round_trip)}) shorter than its claim timeout "
                            f"({format_duration(lapse)}), or every claim lapses before its heartbeat arrives and a "
                            f"run longer than the timeout is handed out again and again")
