"""Keys of a scenario that are fine alone but together would make a correct model fail."""

from __future__ import annotations

from ..invariants import BY_ID
from ..scenario import Scenario, ScenarioError
from ..sut import Bounds
from ..text import format_duration

_SAID = {"reclaim_within": "the model's reclaim bound (TTL + reaper interval)",
         "transition_within": "the model's CANCELLING bound (cancelling timeout + sweep interval)",
         "redeliver_within": "the model's redelivery bound (redelivery timeout + poll interval)"}


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
